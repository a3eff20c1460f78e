package transport_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// forbidSecret refuses every topic under secret/, as an application's policy would.
type forbidSecret struct{ tt.Open }

func (p *forbidSecret) CanSubscribe(c transport.Client, topic string) (transport.Guard, error) {
	if strings.HasPrefix(topic, "secret/") {
		return nil, fmt.Errorf("%w: %s is not yours", transport.ErrForbidden, topic)
	}
	return nil, nil
}

func (p *forbidSecret) CanRead(c transport.Client, topic string) error {
	_, err := p.CanSubscribe(c, topic)
	return err
}

type multiAnswer struct {
	Topics []struct {
		tt.PollAnswer
		Error  string `json:"error"`
		Reason string `json:"reason"`
	} `json:"topics"`
	Disconnect *struct{ Code, Reason string } `json:"disconnect"`
}

// TestMultiPoll: one POST /api/poll carries many topics; a short poll answers what each has, a
// long poll answers as soon as any topic has news; a forbidden topic and one past --max-subs
// are refused alone while the others (and a bystander's poll) are served.
func TestMultiPoll(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxSubs: 3}})
	for i := 1; i <= 3; i++ {
		s.Publish(t, "a", fmt.Sprintf(`{"n":%d}`, i))
	}
	var ans multiAnswer
	if code := tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":1},{"topic":"b"}]}`, &ans); code != 200 || len(ans.Topics) != 2 {
		t.Fatalf("short poll: %d %+v", code, ans)
	}
	if a := ans.Topics[0]; a.Topic != "a" || len(a.Publications) != 2 || a.Publications[0].Offset != 2 || a.Offset != 3 {
		t.Fatalf("topic a: %+v", a)
	}
	if b := ans.Topics[1]; b.Topic != "b" || b.Offset != 0 || !b.Recovered || len(b.Publications) != 0 {
		t.Fatalf("topic b (from now): %+v", b)
	}
	// Nothing new: a short poll answers an empty list.
	if tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":3},{"topic":"b","since":0}]}`, &ans); len(ans.Topics) != 0 {
		t.Fatalf("nothing new: %+v", ans)
	}
	// A long poll answers as soon as one topic has news.
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.Publish(t, "b", `{"n":1}`)
	}()
	start := time.Now()
	tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":3},{"topic":"b","since":0}],"wait":"20s"}`, &ans)
	if time.Since(start) > 10*time.Second || len(ans.Topics) != 1 || ans.Topics[0].Topic != "b" || len(ans.Topics[0].Publications) != 1 {
		t.Fatalf("long poll after %s: %+v", time.Since(start), ans)
	}
	// A long poll with nothing to say answers an empty list when its wait passes.
	if tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":3}],"wait":0.2}`, &ans); len(ans.Topics) != 0 {
		t.Fatalf("wait passed: %+v", ans)
	}
	// Past --max-subs (3): the fourth topic is refused alone.
	tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":0},{"topic":"x"},{"topic":"y"},{"topic":"z"}]}`, &ans)
	if n := len(ans.Topics); n != 4 || ans.Topics[3].Error != "too_many_subscriptions" || len(ans.Topics[0].Publications) != 3 {
		t.Fatalf("over max-subs: %+v", ans)
	}
	for _, bad := range []string{``, `{}`, `{"topics":[]}`, `{"topics":[{"topic":"a"}],"wait":"1h"}`, `{"topics":[{"topic":"a"}],"limit":0.5}`, `[`} {
		var e struct{ Error string }
		if code := tt.Post(t, s.URL+"/api/poll", bad, &e); code != 400 || e.Error != "bad_request" {
			t.Errorf("body %q: %d %+v, want 400 bad_request", bad, code, e)
		}
	}
}

// TestRefusedAlone: a forbidden topic among others is refused alone on a multi-topic poll
// (its own error) and on an SSE stream (event: refused with the code); the others deliver. A
// stream of that topic alone is answered 403.
func TestRefusedAlone(t *testing.T) {
	p := &forbidSecret{}
	s := tt.NewServer(t, tt.ServerConfig{Policy: p})
	p.Hub = s.Hub
	s.Publish(t, "a", `{"n":1}`)
	var ans multiAnswer
	tt.Post(t, s.URL+"/api/poll", `{"topics":[{"topic":"a","since":0},{"topic":"secret/x","since":0}]}`, &ans)
	if len(ans.Topics) != 2 || len(ans.Topics[0].Publications) != 1 || ans.Topics[1].Error != "forbidden" {
		t.Fatalf("multi-topic poll: %+v", ans)
	}
	res, err := http.Get(s.URL + "/api/sse?topic=secret/x")
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("a stream of a forbidden topic alone: %v %v", res, err)
	}
	res.Body.Close()
	res, err = http.Post(s.URL+"/api/sse", "application/json", strings.NewReader(`{"topics":[{"topic":"a","since":0},{"topic":"secret/x"},{"topic":"b"}]}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("POST /api/sse: %v %v", res, err)
	}
	defer res.Body.Close()
	s.Publish(t, "b", `{"n":1}`)
	r := bufio.NewReader(res.Body)
	var refused, subscribed, data int
	deadline := time.AfterFunc(10*time.Second, func() { res.Body.Close() })
	defer deadline.Stop()
	for data < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v (refused %d, subscribed %d, data %d)", err, refused, subscribed, data)
		}
		switch {
		case line == "event: refused\n":
			l, _ := r.ReadString('\n')
			if !strings.Contains(l, `"code":"forbidden"`) || !strings.Contains(l, `"topic":"secret/x"`) {
				t.Fatalf("refused: %q", l)
			}
			refused++
		case line == "event: subscribed\n":
			subscribed++
		case strings.HasPrefix(line, "data: {\"topic\""):
			data++
		}
	}
	if refused != 1 || subscribed != 2 {
		t.Fatalf("refused %d, subscribed %d, want 1 and 2", refused, subscribed)
	}
}

// TestMultiPollDisconnect: the server API's disconnect ends a user's waiting long poll at once,
// with the reason; another user's poll waits on.
func TestMultiPollDisconnect(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	done := make(chan multiAnswer, 1)
	go func() {
		var ans multiAnswer
		tt.Dialer{}.JSON(t, "POST", s.URL+"/api/poll?access_token=ann", `{"topics":[{"topic":"a","since":0}],"wait":20}`, &ans)
		done <- ans
	}()
	deadline := time.Now().Add(5 * time.Second)
	for s.Transport.CloseWhere(transport.ByUser("ann"), transport.DisconnectReason("account suspended", false)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the poll never waited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case ans := <-done:
		if ans.Disconnect == nil || ans.Disconnect.Reason != "account suspended" {
			t.Fatalf("answer: %+v", ans)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting poll was not answered")
	}
}

// TestMultiPollBadBody: a body that does not decode is refused with a reason written for
// people, never a Go type.
func TestMultiPollBadBody(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	for body, want := range map[string]string{
		`{"topics":"x"}`:                         `"topics" must be an array of {"topic","since","epoch"}`,
		`{"topics":[{"topic":1}]}`:               `"topic" must be a string`,
		`{"topics":[{"topic":"a","since":-1}]}`:  `"since" must be an offset`,
		`{"topics":[{"topic":"a"}],"limit":"x"}`: `"limit" must be an integer`,
		`[1]`:                                    `the body must be a JSON object`,
		`{"topics":`:                             `the body is not JSON`,
	} {
		var e struct{ Error, Reason string }
		code := tt.Post(t, s.URL+"/api/poll", body, &e)
		if code != 400 || e.Error != "bad_request" || !strings.Contains(e.Reason, want) || strings.Contains(e.Reason, "struct") || strings.Contains(e.Reason, "Go ") {
			t.Errorf("body %s: %d %+v, want 400 with %q", body, code, e, want)
		}
	}
}

// TestMultiPollCapped: an answer holds at most --poll-answer-bytes of publications (at least
// one); a topic cut short answers up to its last publication kept, a topic left no room is
// left out, "more" says so, and a client polling on from the positions it got reads every
// publication once, in order.
func TestMultiPollCapped(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{PollAnswerBytes: 4096}})
	pad := strings.Repeat("x", 1000)
	for i := range 20 {
		for _, topic := range []string{"a", "b", "c"} {
			s.Publish(t, topic, fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
		}
	}
	since := map[string]uint64{"a": 0, "b": 0, "c": 0}
	got := map[string]int{}
	polls := 0
	for got["a"]+got["b"]+got["c"] < 60 {
		if polls++; polls > 100 {
			t.Fatalf("100 polls and only %v", got)
		}
		body := fmt.Sprintf(`{"topics":[{"topic":"a","since":%d},{"topic":"b","since":%d},{"topic":"c","since":%d}]}`, since["a"], since["b"], since["c"])
		var ans struct {
			Topics []tt.PollAnswer `json:"topics"`
			More   bool            `json:"more"`
		}
		if code := tt.Post(t, s.URL+"/api/poll", body, &ans); code != 200 {
			t.Fatalf("poll %d: %d", polls, code)
		}
		size := 0
		for _, a := range ans.Topics {
			for _, p := range a.Publications {
				if p.Offset != since[a.Topic]+1 {
					t.Fatalf("topic %s: offset %d after %d", a.Topic, p.Offset, since[a.Topic])
				}
				since[a.Topic] = p.Offset
				got[a.Topic]++
				size += len(p.Data) + 100
			}
			if len(a.Publications) > 0 && a.Offset != since[a.Topic] {
				t.Fatalf("topic %s: offset %d, last publication %d", a.Topic, a.Offset, since[a.Topic])
			}
		}
		if size > 4096+1200 {
			t.Fatalf("poll %d: about %d bytes of publications, cap 4096", polls, size)
		}
		if !ans.More && got["a"]+got["b"]+got["c"] < 60 {
			t.Fatalf("poll %d: not all read (%v) and no \"more\"", polls, got)
		}
	}
	if polls < 10 {
		t.Fatalf("60 publications of 1 KB in %d polls under a 4 KiB cap", polls)
	}
}
