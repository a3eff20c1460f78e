package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// restartable is a server whose process-level state (the App) can be replaced while clients
// keep their positions, like a restarted node on the same data directory.
type restartable struct {
	t   *testing.T
	cfg Config
	cur *testServer
}

func (r *restartable) start() *testServer {
	r.t.Helper()
	a, err := New(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	ts := &testServer{Server: srv, app: a}
	r.t.Cleanup(func() { r.stop(ts); cancel() })
	r.cur = ts
	return ts
}

func (r *restartable) stop(ts *testServer) {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ts.app.Shutdown(sctx)
	ts.Close()
}

// TestChatSurvivesRestart: a conversation goes on across a restart; every transport resumes
// from its offset with nothing lost or duplicated, in the same epoch.
func TestChatSurvivesRestart(t *testing.T) {
	r := &restartable{t: t, cfg: Config{
		Limits: transport.Limits{MsgRate: -1}, DataDir: t.TempDir(), Durable: []string{"chat/"},
	}}
	s := r.start()
	say := func(s *testServer, typ, text string) uint64 {
		var ack struct{ Offset uint64 }
		if code := s.post(t, "/api/publish/chat/r?type="+typ, `{"sender":"ann","message":"`+text+`"}`, &ack); code != 200 {
			t.Fatalf("%s %s: %d", typ, text, code)
		}
		return ack.Offset
	}
	say(s, "ENTER", "")
	for i := 0; i < 5; i++ {
		say(s, "TALK", fmt.Sprintf("before %d", i))
	}
	var before tt.PollAnswer
	s.get(t, "/api/poll/chat/r?since=0", &before)
	epoch := before.Epoch
	// Each transport's client saw up to offset 4 and then lost its connection.
	const seen = 4

	r.stop(s)
	s = r.start()
	for i := 0; i < 3; i++ {
		say(s, "TALK", fmt.Sprintf("after %d", i))
	}
	want := []uint64{5, 6, 7, 8, 9}

	// Long polling / short polling.
	var ans tt.PollAnswer
	s.get(t, fmt.Sprintf("/api/poll/chat/r?since=%d&epoch=%s", seen, epoch), &ans)
	if !ans.Recovered || ans.Epoch != epoch || fmt.Sprint(offsets(ans.Publications)) != fmt.Sprint(want) {
		t.Fatalf("poll after restart: %+v", ans)
	}
	// WebSocket.
	w := tt.DialWS(t, s.ws("/api/ws"))
	w.Op("connected")
	w.Send(fmt.Sprintf(`{"op":"subscribe","topic":"chat/r","since":%d,"epoch":"%s"}`, seen, epoch))
	if sub := w.Op("subscribed"); !*sub.Recovered {
		t.Fatalf("ws resume: %+v", sub)
	}
	var got []uint64
	for range want {
		got = append(got, w.Op("message").Offset)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ws after restart: %v", got)
	}
	// STOMP.
	st := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st.Send(fmt.Sprintf("CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:1\ndestination:/topic/chat/r\nsince:%d\nepoch:%s\n\n\x00", seen, epoch))
	st.Expect("CONNECTED")
	got = got[:0]
	for range want {
		m := st.Expect("MESSAGE")
		if g, _ := m.Get("gap"); g == "true" {
			t.Fatalf("stomp gap after restart: %s", m.Body)
		}
		v, _ := m.Get("offset")
		n, _ := strconv.ParseUint(v, 10, 64)
		got = append(got, n)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stomp after restart: %v", got)
	}
	// SSE with the resume token a browser would send.
	sse := tt.Dialer{}.SSE(t, s.URL+"/api/sse?topic=chat/r", fmt.Sprintf("chat/r=%d:%s", seen, epoch))
	got = got[:0]
	for range want {
		ev := sse.Next(5 * time.Second)
		var p tt.Msg
		if err := json.Unmarshal([]byte(ev.Data), &p); err != nil || ev.Event != "" {
			t.Fatalf("sse event %+v", ev)
		}
		got = append(got, p.Offset)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sse after restart: %v", got)
	}
	// History pages through everything, and membership survived: ann may still talk.
	var page tt.PollAnswer
	s.get(t, "/api/topics/chat/r/history?since=0&limit=4", &page)
	if fmt.Sprint(offsets(page.Publications)) != "[1 2 3 4]" {
		t.Fatalf("history page 1: %v", offsets(page.Publications))
	}
	s.get(t, "/api/topics/chat/r/history?since=4&limit=4", &page)
	if fmt.Sprint(offsets(page.Publications)) != "[5 6 7 8]" {
		t.Fatalf("history page 2: %v", offsets(page.Publications))
	}
}

func offsets(ps []tt.Publication) []uint64 {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = p.Offset
	}
	return out
}
