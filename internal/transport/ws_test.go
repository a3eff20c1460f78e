package transport_test

import (
	"testing"

	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestWebSocketProtocol: the JSON protocol's ops and answers, its errors (after which the
// connection stays usable), and a resume with since.
func TestWebSocketProtocol(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	a := tt.DialWS(t, s.WS("/api/ws"))
	if m := a.Msg(); m.Op != "connected" {
		t.Fatalf("first message %+v", m)
	}
	a.Send(`{"op":"subscribe","topic":"room/1"}`)
	if m := a.Op("subscribed"); m.Topic != "room/1" || m.Recovered == nil || !*m.Recovered {
		t.Fatalf("subscribed: %+v", m)
	}
	a.Send(`{"op":"publish","topic":"room/1","data":{"hello":1},"id":"p1","type":"TALK"}`)
	// The ack and the message may come in either order.
	var ack, m tt.Msg
	for ack.Op == "" || m.Op == "" {
		switch x := a.Msg(); x.Op {
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
		a.Send(bad)
		if e := a.Op("error"); e.Code == "" || e.Reason == "" {
			t.Fatalf("error for %s: %+v", bad, e)
		}
	}
	a.Send(`{"op":"ping","id":7}`)
	if p := a.Op("pong"); string(p.ID) != "7" {
		t.Fatalf("pong: %+v", p)
	}
	// Resume: a new connection asking since=0 gets the history, then live messages.
	s.Publish(t, "room/1", `{"n":2}`)
	b := tt.DialWS(t, s.WS("/api/ws"))
	b.Op("connected")
	b.Send(`{"op":"subscribe","topic":"room/1","since":0}`)
	sub := b.Op("subscribed")
	if sub.Offset != 2 || !*sub.Recovered {
		t.Fatalf("subscribed since=0: %+v", sub)
	}
	for want := uint64(1); want <= 2; want++ {
		if m := b.Op("message"); m.Offset != want {
			t.Fatalf("replay: want %d got %+v", want, m)
		}
	}
	a.Send(`{"op":"unsubscribe","topic":"room/1"}`)
	a.Op("unsubscribed")
}
