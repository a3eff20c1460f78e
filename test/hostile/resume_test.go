package hostile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// backlog is a topic filled before a client resumes it from its start.
type backlog struct {
	name  string
	topic string
	n     int // publications in it
}

// fillBig publishes n publications of size bytes to topic over HTTP.
func fillBig(t *testing.T, p *servertest.Proc, topic string, n, size int) backlog {
	t.Helper()
	hc := httpFrom(attacker)
	for i := range n {
		if code, _, body := post(t, hc, p.URL()+"/api/publish/"+topic, padded(size, fmt.Sprintf(`"n":%d`, i))); code != 200 {
			t.Fatalf("publish %d: %d %s", i, code, body)
		}
	}
	return backlog{name: fmt.Sprintf("%dx%dKB", n, size>>10), topic: topic, n: n}
}

// fillRoom has talkers enter the chat room and post messages of size bytes until it holds n,
// over WebSockets of their own (each within --msg-rate's burst), waiting for every ack. They
// stay connected: a LEAVE would add to the room.
func fillRoom(t *testing.T, p *servertest.Proc, room string, n, size, talkers int) backlog {
	t.Helper()
	topic := "chat/" + room
	for w := range talkers {
		c := dialWS(t, p.WS("/api/ws"), attacker, nil)
		c.Until(`"connected"`, 5*time.Second)
		sender := fmt.Sprintf(`"sender":"talker%d"`, w)
		c.Send(fmt.Sprintf(`{"op":"publish","topic":%q,"type":"ENTER","data":{%s},"id":0}`, topic, sender))
		c.Until(`"id":0`, 5*time.Second)
		k := (n - talkers) / talkers
		for i := range k {
			data := padded(size, fmt.Sprintf(`%s,"message":"m%d-%d"`, sender, w, i))
			c.Send(fmt.Sprintf(`{"op":"publish","topic":%q,"type":"TALK","data":%s,"id":%d}`, topic, data, i+1))
		}
		if got := c.Until(fmt.Sprintf(`"id":%d`, k), 20*time.Second); !strings.Contains(got, `"ack"`) {
			t.Fatalf("talker %d: %s", w, got)
		}
	}
	return backlog{name: fmt.Sprintf("room-%dx%.1fKB", n, float64(size)/1000), topic: topic, n: n}
}

// TestResumeAtBacklog: a client resuming a topic from its start receives the whole backlog
// exactly once and in order, on one session, over every streaming transport with default
// flags: 20 publications of 60 KB (1.2 MB, more than --queue-bytes) and a chat room of 1,000
// messages of 3.9 KB (3.9 MB). The replay used to be queued whole, and the connection was cut
// as a slow consumer before it sent anything (SSE without even its HTTP status line).
func TestResumeAtBacklog(t *testing.T) {
	p := servertest.Start(t, bin, "--user-msg-rate", "-1") // the room is filled at once, from one address
	b := servertest.StartBystander(t, p, "news/resume-bystander", "", 20*time.Millisecond)
	backlogs := []backlog{
		fillBig(t, p, "news/big", 20, 60<<10),
		fillRoom(t, p, "backlog", 1000, 3900, 5),
	}
	for _, bl := range backlogs {
		for _, k := range []tt.Kind{tt.WS, tt.STOMP, tt.SSE, tt.LongPoll} {
			t.Run(bl.name+"/"+string(k), func(t *testing.T) {
				start := time.Now()
				resumeAll(t, p, k, bl)
				t.Logf("%s over %s: %d publications in %v", bl.name, k, bl.n, time.Since(start).Round(time.Millisecond))
			})
		}
	}
	check(t, b, 5)
}

// resumeAll resumes bl's topic from its start over k and fails unless every publication comes
// once, in order, without a gap or a second session.
func resumeAll(t *testing.T, p *servertest.Proc, k tt.Kind, bl backlog) {
	t.Helper()
	c := tt.New(t, k, tt.Options{Nodes: []string{p.URL()}, Dialer: tt.Dialer{From: attacker2}})
	defer c.Close()
	c.Subscribe(bl.topic, &tt.Position{})
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	var next uint64 = 1
	sessions := 0
	for next <= uint64(bl.n) {
		select {
		case e := <-c.Events():
			switch {
			case e.Kind == tt.Gap:
				t.Fatalf("%v after %d of %d", e, next-1, bl.n)
			case e.Kind == tt.State && e.Up:
				if sessions++; sessions > 1 && k != tt.LongPoll {
					t.Fatalf("a second session after %d of %d publications", next-1, bl.n)
				}
			case e.Kind == tt.State:
				if k != tt.LongPoll {
					t.Fatalf("session ended after %d of %d publications: %s", next-1, bl.n, e.Reason)
				}
			case e.Offset != next:
				t.Fatalf("offset %d, want %d", e.Offset, next)
			default:
				next++
			}
		case <-timer.C:
			t.Fatalf("%d of %d publications within 30 s", next-1, bl.n)
		}
	}
}

// TestResumeWhilePublishing: publications that arrive while a client catches up follow the
// backlog in order, each once, on every streaming transport.
func TestResumeWhilePublishing(t *testing.T) {
	p := servertest.Start(t, bin)
	b := servertest.StartBystander(t, p, "news/live-bystander", "", 20*time.Millisecond)
	for _, k := range []tt.Kind{tt.WS, tt.STOMP, tt.SSE, tt.LongPoll} {
		t.Run(string(k), func(t *testing.T) {
			bl := fillBig(t, p, "news/live-"+string(k), 20, 60<<10)
			done := make(chan struct{})
			go func() {
				defer close(done)
				hc := httpFrom("127.0.0.4") // an address of its own: --http-pub-rate is per address
				for i := range 30 {
					res, err := hc.Post(p.URL()+"/api/publish/"+bl.topic, "application/json", strings.NewReader(string(padded(20<<10, fmt.Sprintf(`"live":%d`, i)))))
					if err != nil {
						t.Error(err)
						return
					}
					res.Body.Close()
					if res.StatusCode != 200 {
						t.Errorf("live publish %d: %d", i, res.StatusCode)
						return
					}
				}
			}()
			resumeAll(t, p, k, backlog{topic: bl.topic, n: bl.n + 30})
			<-done
		})
	}
	check(t, b, 5)
}
