package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPublishAndShortPoll(t *testing.T) {
	s := startServer(t, nil)
	var first pollAnswer
	if code := s.get(t, "/api/poll/news/lobby", &first); code != 200 || first.Offset != 0 || len(first.Publications) != 0 {
		t.Fatalf("empty topic: %d %+v", code, first)
	}
	for i := 1; i <= 3; i++ {
		var ack struct {
			Offset uint64 `json:"offset"`
			Epoch  string `json:"epoch"`
		}
		if code := s.post(t, "/api/publish/news/lobby?type=TALK", fmt.Sprintf(`{"text":"m%d"}`, i), &ack); code != 200 || ack.Offset != uint64(i) || ack.Epoch == "" {
			t.Fatalf("publish %d: %d %+v", i, code, ack)
		}
	}
	var ans pollAnswer
	s.get(t, "/api/poll/news/lobby?since=1", &ans)
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
	s.get(t, "/api/poll/news/lobby?since=0&limit=1", &ans)
	if len(ans.Publications) != 1 || ans.Publications[0].Offset != 1 {
		t.Fatalf("limit=1: %+v", ans)
	}
	var hist pollAnswer
	s.get(t, "/api/topics/news/lobby/history?since=0&limit=2", &hist)
	if len(hist.Publications) != 2 || hist.Publications[1].Offset != 2 {
		t.Fatalf("history: %+v", hist)
	}
}

func TestResumeToldWhenHistoryGone(t *testing.T) {
	s := startServer(t, func(c *Config) { c.HistorySize = 5 })
	for i := 0; i < 12; i++ {
		s.post(t, "/api/publish/t1", `{"n":1}`, nil)
	}
	var ans pollAnswer
	s.get(t, "/api/poll/t1?since=2", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "fell out of history") || len(ans.Publications) != 5 || ans.Publications[0].Offset != 8 {
		t.Fatalf("since=2 with history 5: %+v", ans)
	}
	s.get(t, "/api/poll/t1?since=10&epoch=otherepoch", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "epoch changed") {
		t.Fatalf("epoch mismatch: %+v", ans)
	}
	s.get(t, "/api/poll/t1?since=50", &ans)
	if ans.Recovered || !strings.Contains(ans.Reason, "ahead") {
		t.Fatalf("since ahead: %+v", ans)
	}
	s.get(t, "/api/poll/t1?since=7", &ans)
	if !ans.Recovered || len(ans.Publications) != 5 {
		t.Fatalf("since=7 is covered: %+v", ans)
	}
}

func TestLongPoll(t *testing.T) {
	s := startServer(t, nil)
	done := make(chan pollAnswer, 1)
	start := time.Now()
	go func() {
		var ans pollAnswer
		s.get(t, "/api/poll/lp?since=0&wait=10s", &ans)
		done <- ans
	}()
	time.Sleep(200 * time.Millisecond)
	s.post(t, "/api/publish/lp", `{"x":1}`, nil)
	select {
	case ans := <-done:
		if len(ans.Publications) != 1 || ans.Publications[0].Offset != 1 {
			t.Fatalf("long poll answer: %+v", ans)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("long poll did not return as soon as a publication arrived")
		}
	case <-time.After(8 * time.Second):
		t.Fatal("long poll did not return")
	}
	// A wait that passes is a 200 with an empty list, not an error.
	var ans pollAnswer
	t0 := time.Now()
	if code := s.get(t, "/api/poll/lp?since=1&wait=300ms", &ans); code != 200 || len(ans.Publications) != 0 || ans.Offset != 1 {
		t.Fatalf("timed-out long poll: %d %+v", code, ans)
	}
	if d := time.Since(t0); d < 250*time.Millisecond {
		t.Fatalf("long poll returned after %s, before its wait", d)
	}
}

func TestBadInputHTTP(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Limits.MaxFrame = 1024 })
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
		{"GET", "/no/such/route", ``, 404, "not_found"},
		{"GET", "/api/topics/x/nothing", ``, 404, "not_found"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error, Reason string }
		if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != c.status || e.Error != c.code || e.Reason == "" {
			t.Errorf("%s %s: got %d %s, want %d %s with a reason", c.method, c.path, resp.StatusCode, b, c.status, c.code)
		}
	}
	// The server is still fine.
	if code := s.post(t, "/api/publish/ok", `{"fine":true}`, nil); code != 200 {
		t.Fatalf("publish after bad input: %d", code)
	}
}

func TestSSEStreamStaysOpenAndResumes(t *testing.T) {
	s := startServer(t, nil)
	c := dialSSE(t, s.URL+"/api/sse?topic=a&topic=b", nil)
	for i := 0; i < 5; i++ {
		s.post(t, "/api/publish/a", fmt.Sprintf(`{"i":%d}`, i), nil)
	}
	s.post(t, "/api/publish/b", `{"b":1}`, nil)
	var last sseEvent
	for i := 0; i < 6; i++ {
		last = c.next(5 * time.Second)
		var p pubMsg
		if err := json.Unmarshal([]byte(last.Data), &p); err != nil {
			t.Fatalf("event %d data %q: %v", i, last.Data, err)
		}
		if i < 5 && (p.Topic != "a" || p.Offset != uint64(i+1)) {
			t.Fatalf("event %d: %+v", i, p)
		}
	}
	if !strings.HasPrefix(last.ID, "a=5:") || !strings.Contains(last.ID, ",b=1:") {
		t.Fatalf("resume token %q", last.ID)
	}
	// Later publications arrive on the same stream: it did not close after the first event.
	s.post(t, "/api/publish/a", `{"i":5}`, nil)
	ev := c.next(5 * time.Second)
	c.resp.Body.Close()

	// Missed publications while disconnected are replayed on reconnect with Last-Event-ID.
	s.post(t, "/api/publish/a", `{"i":6}`, nil)
	s.post(t, "/api/publish/b", `{"b":2}`, nil)
	c2 := dialSSE(t, s.URL+"/api/sse?topic=a&topic=b", map[string]string{"Last-Event-ID": ev.ID})
	got := map[string]uint64{}
	for i := 0; i < 2; i++ {
		var p pubMsg
		_ = json.Unmarshal([]byte(c2.next(5*time.Second).Data), &p)
		got[p.Topic] = p.Offset
	}
	if got["a"] != 7 || got["b"] != 2 {
		t.Fatalf("resumed: %v", got)
	}
}

func TestSSEGapIsTold(t *testing.T) {
	s := startServer(t, func(c *Config) { c.HistorySize = 2 })
	for i := 0; i < 6; i++ {
		s.post(t, "/api/publish/g", `{}`, nil)
	}
	c := dialSSE(t, s.URL+"/api/sse?topic=g&since=1", nil)
	ev := c.next(5 * time.Second)
	if ev.Event != "gap" || !strings.Contains(ev.Data, "fell out of history") {
		t.Fatalf("want gap event first, got %+v", ev)
	}
	var p pubMsg
	_ = json.Unmarshal([]byte(c.next(5*time.Second).Data), &p)
	if p.Offset != 5 {
		t.Fatalf("after the gap the retained publications follow: %+v", p)
	}
}

func TestWebSocketProtocol(t *testing.T) {
	s := startServer(t, nil)
	a := dialWS(t, s.ws("/api/ws"))
	if m := a.readJSON(5 * time.Second); m.Op != "connected" {
		t.Fatalf("first message %+v", m)
	}
	a.send(`{"op":"subscribe","topic":"room/1"}`)
	if m := a.expectOp("subscribed"); m.Topic != "room/1" || m.Recovered == nil || !*m.Recovered {
		t.Fatalf("subscribed: %+v", m)
	}
	a.send(`{"op":"publish","topic":"room/1","data":{"hello":1},"id":"p1","type":"TALK"}`)
	// The ack and the message may come in either order.
	var ack, m pubMsg
	for ack.Op == "" || m.Op == "" {
		x := a.readJSON(5 * time.Second)
		switch x.Op {
		case "ack":
			ack = x
		case "message":
			m = x
		default:
			t.Fatalf("unexpected %+v", x)
		}
	}
	if string(ack.ID) != `"p1"` || ack.Offset != 1 {
		t.Fatalf("ack: %+v", ack)
	}
	if m.Offset != 1 || m.Type != "TALK" || string(m.Data) != `{"hello":1}` {
		t.Fatalf("message: %+v", m)
	}
	// Bad input gets an error message and the connection stays usable.
	for _, bad := range []string{`{nope`, `{"op":"fly"}`, `{"op":"subscribe","topic":"bad topic"}`, `{"op":"publish","topic":"room/1"}`, `{"op":"unsubscribe","topic":"zzz"}`, `[]`} {
		a.send(bad)
		if e := a.expectOp("error"); e.Code == "" || e.Reason == "" {
			t.Fatalf("error for %s: %+v", bad, e)
		}
	}
	a.send(`{"op":"ping","id":7}`)
	if p := a.expectOp("pong"); string(p.ID) != "7" {
		t.Fatalf("pong: %+v", p)
	}
	// Resume: a new connection asking since=0 gets the history, then live messages.
	s.post(t, "/api/publish/room/1", `{"n":2}`, nil)
	b := dialWS(t, s.ws("/api/ws"))
	b.expectOp("connected")
	b.send(`{"op":"subscribe","topic":"room/1","since":0}`)
	sub := b.expectOp("subscribed")
	if sub.Offset != 2 || !*sub.Recovered {
		t.Fatalf("subscribed since=0: %+v", sub)
	}
	for want := uint64(1); want <= 2; want++ {
		if m := b.expectOp("message"); m.Offset != want {
			t.Fatalf("replay: want %d got %+v", want, m)
		}
	}
	a.send(`{"op":"unsubscribe","topic":"room/1"}`)
	a.expectOp("unsubscribed")
}

func TestWebSocketFrameTooLargeClosesThatClientOnly(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Limits.MaxFrame = 1024 })
	other := dialWS(t, s.ws("/api/ws"))
	other.expectOp("connected")
	other.send(`{"op":"subscribe","topic":"x"}`)
	other.expectOp("subscribed")

	big := dialWS(t, s.ws("/api/ws"))
	big.expectOp("connected")
	big.send(`{"op":"publish","topic":"x","data":"` + strings.Repeat("a", 4000) + `"}`)
	d := big.expectOp("disconnect")
	if d.Code != "too_large" {
		t.Fatalf("disconnect: %+v", d)
	}
	s.post(t, "/api/publish/x", `{"still":"fine"}`, nil)
	if m := other.expectOp("message"); string(m.Data) != `{"still":"fine"}` {
		t.Fatalf("other client: %+v", m)
	}
}
