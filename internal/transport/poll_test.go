package transport_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

func TestPublishAndShortPoll(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	var first tt.PollAnswer
	if code := tt.Get(t, s.URL+"/api/poll/news/lobby", &first); code != 200 || first.Offset != 0 || len(first.Publications) != 0 {
		t.Fatalf("empty topic: %d %+v", code, first)
	}
	for i := 1; i <= 3; i++ {
		var ack tt.Position
		if code := tt.Post(t, s.URL+"/api/publish/news/lobby?type=TALK", fmt.Sprintf(`{"text":"m%d"}`, i), &ack); code != 200 || ack.Offset != uint64(i) || ack.Epoch == "" {
			t.Fatalf("publish %d: %d %+v", i, code, ack)
		}
	}
	var ans tt.PollAnswer
	tt.Get(t, s.URL+"/api/poll/news/lobby?since=1", &ans)
	if len(ans.Publications) != 2 || ans.Publications[0].Offset != 2 || ans.Publications[1].Offset != 3 || !ans.Recovered || ans.Offset != 3 {
		t.Fatalf("poll since=1: %+v", ans)
	}
	p := ans.Publications[0]
	if p.Type != "TALK" || string(p.Data) != `{"text":"m2"}` || p.Topic != "news/lobby" {
		t.Fatalf("publication fields: %+v", p)
	}
	if _, err := time.Parse(time.RFC3339, p.Time); err != nil || !strings.Contains(p.Time, ".") {
		t.Fatalf("time %q is not RFC 3339 with ms", p.Time)
	}
	tt.Get(t, s.URL+"/api/poll/news/lobby?since=0&limit=1", &ans)
	if len(ans.Publications) != 1 || ans.Publications[0].Offset != 1 {
		t.Fatalf("limit=1: %+v", ans)
	}
	var hist tt.PollAnswer
	tt.Get(t, s.URL+"/api/topics/news/lobby/history?since=0&limit=2", &hist)
	if len(hist.Publications) != 2 || hist.Publications[1].Offset != 2 {
		t.Fatalf("history: %+v", hist)
	}
}

// TestPollToldWhyHistoryGone: each way a resume can fail is named in the answer's reason.
func TestPollToldWhyHistoryGone(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{History: hub.HistoryPolicy{Size: 5}})
	for range 12 {
		s.Publish(t, "t1", `{"n":1}`)
	}
	var ans tt.PollAnswer
	tt.Get(t, s.URL+"/api/poll/t1?since=2", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "fell out of history") || len(ans.Publications) != 5 || ans.Publications[0].Offset != 8 {
		t.Fatalf("since=2 with history 5: %+v", ans)
	}
	tt.Get(t, s.URL+"/api/poll/t1?since=10&epoch=otherepoch", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "epoch changed") {
		t.Fatalf("epoch mismatch: %+v", ans)
	}
	tt.Get(t, s.URL+"/api/poll/t1?since=50", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "ahead") {
		t.Fatalf("since ahead: %+v", ans)
	}
	tt.Get(t, s.URL+"/api/poll/t1?since=7", &ans)
	if !ans.Recovered || len(ans.Publications) != 5 {
		t.Fatalf("since=7 is covered: %+v", ans)
	}
}

// TestLongPollWaits: a long poll answers as soon as a publication comes, and with an empty list
// when its wait passes.
func TestLongPollWaits(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	base := s.Subscriptions()
	done := make(chan tt.PollAnswer, 1)
	go func() {
		var ans tt.PollAnswer
		tt.Dialer{}.JSON(t, "GET", s.URL+"/api/poll/lp?since=0&wait=10s", "", &ans)
		done <- ans
	}()
	s.AwaitSubscriptions(t, base+1) // the poll is waiting
	s.Publish(t, "lp", `{"x":1}`)
	select {
	case ans := <-done:
		if len(ans.Publications) != 1 || ans.Publications[0].Offset != 1 {
			t.Fatalf("long poll answer: %+v", ans)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the long poll did not answer when a publication came")
	}
	// A wait that passes is a 200 with an empty list, not an error.
	var ans tt.PollAnswer
	t0 := time.Now()
	if code := tt.Get(t, s.URL+"/api/poll/lp?since=1&wait=300ms", &ans); code != 200 || len(ans.Publications) != 0 || ans.Offset != 1 {
		t.Fatalf("timed-out long poll: %d %+v", code, ans)
	}
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Fatalf("long poll returned after %s, before its wait", d)
	}
}

// TestBadInputHTTP: every bad request gets a 4xx with {"error","reason"}, and the server goes on.
func TestBadInputHTTP(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxFrame: 1024}})
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "/api/publish/bad%20topic", `{}`, 400, "bad_topic"},
		{"POST", "/api/publish/" + strings.Repeat("a", 201), `{}`, 400, "bad_topic"},
		{"POST", "/api/publish/ok", `{not json`, 400, "bad_request"},
		{"POST", "/api/publish/ok", ``, 400, "bad_request"},
		{"POST", "/api/publish/ok", `{"a":"` + strings.Repeat("x", 2000) + `"}`, 413, "too_large"},
		{"GET", "/api/poll/ok?since=-1", ``, 400, "bad_request"},
		{"GET", "/api/poll/ok?since=0&wait=forever", ``, 400, "bad_request"},
		{"GET", "/api/poll/ok?limit=0", ``, 400, "bad_request"},
		{"GET", "/api/poll/bad$topic", ``, 400, "bad_topic"},
		{"GET", "/api/sse", ``, 400, "bad_request"},
		{"GET", "/api/sse?topic=a&topic=a", ``, 400, "bad_request"},
		{"GET", "/api/sse?topic=x&lastEventId=garbage", ``, 400, "bad_request"},
		{"GET", "/api/topics/x/nothing", ``, 404, "not_found"},
	}
	for _, c := range cases {
		code, b := tt.Dialer{}.Call(t, c.method, s.URL+c.path, c.body)
		var e struct{ Error, Reason string }
		if err := json.Unmarshal(b, &e); err != nil || code != c.status || e.Error != c.code || e.Reason == "" {
			t.Errorf("%s %s: got %d %s, want %d %s with a reason", c.method, c.path, code, b, c.status, c.code)
		}
	}
	if code := tt.Post(t, s.URL+"/api/publish/ok", `{"fine":true}`, nil); code != 200 {
		t.Fatalf("publish after bad input: %d", code)
	}
}
