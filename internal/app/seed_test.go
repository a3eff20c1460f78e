package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

func TestSeedShortPollCurrentState(t *testing.T) {
	s := startServer(t, nil)
	s.post(t, "/location/sse/share?group=3", `{"userId":"ann","x":1,"y":2}`, nil)
	s.post(t, "/location/long/3/notify", `{"userId":"bob","lat":52.5,"lng":13.4}`, nil)
	s.post(t, "/location/sse/share?group=3", `{"userId":"ann","x":5,"y":6}`, nil)
	for _, path := range []string{"/cur/3", "/location/cur/3", "/api/location/3"} {
		var st struct {
			Group   string `json:"group"`
			Offset  uint64 `json:"offset"`
			Members []struct {
				Member string          `json:"member"`
				Offset uint64          `json:"offset"`
				Data   json.RawMessage `json:"data"`
			} `json:"members"`
		}
		if code := s.get(t, path, &st); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		if st.Group != "3" || st.Offset != 3 || len(st.Members) != 2 || st.Members[0].Member != "ann" ||
			string(st.Members[0].Data) != `{"userId":"ann","x":5,"y":6}` || st.Members[1].Member != "bob" {
			t.Fatalf("%s: %+v", path, st)
		}
	}
	// Positions published after the first read keep the state current.
	s.post(t, "/location/long/3/notify", `{"userId":"bob","lat":1,"lng":1}`, nil)
	eventually.True(t, 2*time.Second, "state update", func() bool {
		var st struct{ Offset uint64 }
		s.get(t, "/cur/3", &st)
		return st.Offset == 4
	})
}

func TestSeedEmptyBodyPublishesGeneratedPosition(t *testing.T) {
	s := startServer(t, nil)
	for _, path := range []string{"/location/long/9/notify", "/location/sse/share?group=9", "/location/sse/share"} {
		resp, err := http.Post(s.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s with no body: %d", path, resp.StatusCode)
		}
	}
	var ans tt.PollAnswer
	s.get(t, "/api/poll/location/9?since=0", &ans)
	if len(ans.Publications) != 2 || !strings.Contains(string(ans.Publications[0].Data), `"x":`) {
		t.Fatalf("generated positions: %+v", ans)
	}
	s.get(t, "/api/poll/location/0?since=0", &ans) // share without group goes to group 0
	if len(ans.Publications) != 1 {
		t.Fatalf("default group 0: %+v", ans)
	}
	// Content such as the seed scripts' {"content": ...} passes through unchanged.
	s.post(t, "/location/sse/share?group=9", `{"content":"hello"}`, nil)
	s.get(t, "/api/poll/location/9?since=2", &ans)
	if string(ans.Publications[0].Data) != `{"content":"hello"}` {
		t.Fatalf("pass-through: %s", ans.Publications[0].Data)
	}
}

func TestSeedLongPoll(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Seed.LongTimeout = 400 * time.Millisecond })
	base := subscriptions(s)
	got := make(chan []json.RawMessage, 1)
	go func() {
		var list []json.RawMessage
		s.get(t, "/location/long/5", &list)
		got <- list
	}()
	subscriptionsReach(t, s, base+1) // the long poll is waiting
	s.post(t, "/location/long/5/notify", `{"x":7,"y":8}`, nil)
	select {
	case list := <-got:
		if len(list) != 1 || string(list[0]) != `{"x":7,"y":8}` {
			t.Fatalf("long poll list: %s", list)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("seed long poll did not return")
	}
	// After the timeout: 200 with an empty list.
	var list []json.RawMessage
	if code := s.get(t, "/location/long/5", &list); code != 200 || len(list) != 0 {
		t.Fatalf("timed out: %d %s", code, list)
	}
}

// TestSeedSSEDeliversGroupPositions: the seed stream carries each position alone in data:.
func TestSeedSSEDeliversGroupPositions(t *testing.T) {
	s := startServer(t, nil)
	c := tt.OpenSSE(t, s.URL+"/location/sse/connect?group=4")
	for i := 0; i < 3; i++ {
		s.post(t, "/location/sse/share?group=4", `{"x":1,"y":2}`, nil)
		ev := c.Next(5 * time.Second)
		if ev.Data != `{"x":1,"y":2}` {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	d := tt.OpenSSE(t, s.URL+"/location/sse/connect") // default group 0
	s.post(t, "/location/sse/share", `{"g":0}`, nil)
	if ev := d.Next(5 * time.Second); ev.Data != `{"g":0}` {
		t.Fatalf("group 0: %+v", ev)
	}
}

func TestSeedRawWebSocketGroup(t *testing.T) {
	s := startServer(t, nil)
	base := subscriptions(s)
	a := tt.DialWS(t, s.ws("/ws?group=2"))
	b := tt.DialWS(t, s.ws("/ws?group=2"))
	other := tt.DialWS(t, s.ws("/ws?group=3"))
	subscriptionsReach(t, s, base+3) // all joined
	a.Send(`{"x":3,"y":4}`)
	a.Send(`not json at all`)
	for _, c := range []*tt.WSConn{a, b} {
		m1, _ := c.Next(5 * time.Second)
		m2, _ := c.Next(5 * time.Second)
		if string(m1) != `{"x":3,"y":4}` || string(m2) != `"not json at all"` {
			t.Fatalf("group member got %q, %q", m1, m2)
		}
	}
	if m, err := other.Next(300 * time.Millisecond); err == nil {
		t.Fatalf("other group received %q", m)
	}
	// Default group 0.
	z := tt.DialWS(t, s.ws("/ws"))
	subscriptionsReach(t, s, base+4)
	s.post(t, "/location/sse/share", `{"zero":true}`, nil)
	if m, _ := z.Next(5 * time.Second); string(m) != `{"zero":true}` {
		t.Fatalf("group 0 socket got %q", m)
	}
}

func TestSeedRawChat(t *testing.T) {
	s := startServer(t, nil)
	a := tt.DialWS(t, s.ws("/chat"))
	b := tt.DialWS(t, s.ws("/chat"))
	a.Send(`{"type":"ENTER","sender":"ann","message":"","roomId":"r1","createdAt":"2024-01-01T00:00:00"}`)
	if m, _ := a.Next(5 * time.Second); !strings.Contains(string(m), `"sender":"ann"`) {
		t.Fatalf("ann's own ENTER: %q", m)
	}
	b.Send(`{"type":"ENTER","sender":"bob","message":"","roomId":"r1"}`)
	if m, _ := b.Next(5 * time.Second); !strings.Contains(string(m), `"sender":"bob"`) {
		t.Fatalf("bob's own ENTER: %q", m)
	}
	a.Send(`{"type":"TALK","sender":"ann","message":"hi bob","roomId":"r1"}`)
	if m, _ := b.Next(5 * time.Second); !strings.Contains(string(m), `"message":"hi bob"`) {
		t.Fatalf("bob got %q, want ann's TALK", m)
	}
	var ans tt.PollAnswer
	s.get(t, "/api/poll/chat/r1?since=0", &ans)
	if len(ans.Publications) != 3 || ans.Publications[2].Type != "TALK" || ans.Publications[2].Sender != "ann" {
		t.Fatalf("chat history: %+v", ans)
	}
	// A first message without roomId is refused with an error, the socket stays.
	c := tt.DialWS(t, s.ws("/chat"))
	c.Send(`{"type":"TALK","message":"where am I"}`)
	if m := c.Msg(); m.Op != "error" {
		t.Fatalf("no roomId: %+v", m)
	}
}

// TestSTOMPSeedLocation: the seed location script's STOMP destinations, /sub/location/{g} and
// /pub/share/{g}, on its endpoint /location; an empty SEND shares a generated position. (How
// leniently scripts' frames are read is tested beside the transport.)
func TestSTOMPSeedLocation(t *testing.T) {
	s := startServer(t, nil)
	sub := tt.DialSTOMP(t, s.ws("/location"))
	sub.Connect("")
	sub.Send("SUBSCRIBE\nid:sub-0\ndestination:/sub/location/7\nreceipt:r\n\n\x00")
	sub.Expect("RECEIPT")
	pub := tt.DialSTOMP(t, s.ws("/location"))
	pub.Connect("")
	pub.Send("SEND\ndestination:/pub/share/7\ncontent-type:application/json\n\n{\"x\":1,\"y\":2}\x00")
	pub.Send("SEND\ndestination:/pub/share/7\n\n\x00") // empty body: a generated position
	if m := sub.Expect("MESSAGE"); string(m.Body) != `{"x":1,"y":2}` || tt.Header(m, "destination") != "/sub/location/7" {
		t.Fatalf("MESSAGE %+v %q", m.Headers, m.Body)
	}
	if m := sub.Expect("MESSAGE"); !strings.Contains(string(m.Body), `"x":`) {
		t.Fatalf("generated position %q", m.Body)
	}
	var ans tt.PollAnswer
	s.get(t, "/api/poll/location/7?since=0", &ans)
	if len(ans.Publications) != 2 {
		t.Fatalf("location/7 holds %+v", ans)
	}
}

// TestSTOMPSeedChat: the seed chat script's STOMP destinations, /sub/chat/{room} and
// /pub/chat/message/{room}, on its endpoint /stomp/chat.
func TestSTOMPSeedChat(t *testing.T) {
	s := startServer(t, nil)
	c := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	c.Send("CONNECT\naccept-version:1.1,1.2\nhost:localhost\n\n\x00")
	c.Expect("CONNECTED")
	c.Send("SUBSCRIBE\nid:0\ndestination:/sub/chat/42\nreceipt:r1\n\n\x00")
	c.Expect("RECEIPT")
	c.Send("SEND\ndestination:/pub/chat/message/42\n\n{\"type\":\"ENTER\",\"sender\":\"ann\",\"roomId\":\"42\"}\x00")
	c.Send("SEND\ndestination:/pub/chat/message/42\n\n{\"type\":\"TALK\",\"sender\":\"ann\",\"message\":\"hi\",\"roomId\":\"42\"}\x00")
	if m := c.Expect("MESSAGE"); !strings.Contains(string(m.Body), `"ENTER"`) {
		t.Fatalf("ENTER MESSAGE %q", m.Body)
	}
	m := c.Expect("MESSAGE")
	if !strings.Contains(string(m.Body), `"message":"hi"`) {
		t.Fatalf("chat MESSAGE %q", m.Body)
	}
	var ans tt.PollAnswer
	s.get(t, "/api/poll/chat/42?since=0", &ans)
	if len(ans.Publications) != 2 || ans.Publications[1].Type != "TALK" || ans.Publications[1].Sender != "ann" {
		t.Fatalf("chat/42 history: %+v", ans)
	}
}

// TestSeedSSEStreamEnds: a seed stream ends cleanly after --seed-sse-timeout, as Spring's
// SseEmitter did, with a retry: line; Last-Event-ID resumes it. (How streams end and resume is
// tested beside the transport: internal/transport/sse_test.go.)
func TestSeedSSEStreamEnds(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Seed.SSETimeout = 200 * time.Millisecond })
	sse := tt.OpenSSE(t, s.URL+"/location/sse/connect?group=5")
	s.post(t, "/location/sse/share?group=5", `{"x":1}`, nil)
	events, last := sse.Rest(10 * time.Second)
	if len(events) != 1 || events[0].Data != `{"x":1}` || !strings.HasPrefix(last, "retry:") {
		t.Fatalf("seed stream: %v, ending with %q", events, last)
	}
	s.post(t, "/location/sse/share?group=5", `{"x":2}`, nil)
	again := tt.Dialer{}.SSE(t, s.URL+"/location/sse/connect?group=5", events[0].ID)
	if ev := again.Next(5 * time.Second); ev.Data != `{"x":2}` {
		t.Fatalf("resumed seed stream: %v", ev)
	}
}
