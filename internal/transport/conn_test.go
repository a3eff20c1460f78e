package transport_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// countingPolicy is the open policy that counts Policy.Disconnected calls by connection.
type countingPolicy struct {
	tt.Open
	mu   sync.Mutex
	gone map[string]int // guarded by mu
}

func (p *countingPolicy) Disconnected(c transport.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone[c.ID]++
}

func (p *countingPolicy) calls() (conns, calls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.gone {
		calls += n
	}
	return len(p.gone), calls
}

// TestDisconnectedOnce: every streaming connection that ends tells the Policy once, with its
// own id, whether the client left or the server closed it.
func TestDisconnectedOnce(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		p := &countingPolicy{gone: map[string]int{}}
		s := tt.NewServer(t, tt.ServerConfig{Policy: p})
		left := s.Client(t, k, "t/a", nil)
		s.Client(t, k, "t/a", nil)
		left.Close()
		eventually.True(t, 10*time.Second, "the connection that left to be told", func() bool {
			n, _ := p.calls()
			return n == 1
		})
		if n := s.Transport.CloseWhere(func(transport.Identity) bool { return true }, transport.ReasonShutdown); n != 1 {
			t.Fatalf("CloseWhere closed %d connections, want 1", n)
		}
		eventually.True(t, 10*time.Second, "the closed connection to be told", func() bool {
			n, _ := p.calls()
			return n == 2
		})
		time.Sleep(50 * time.Millisecond)
		if n, calls := p.calls(); n != 2 || calls != 2 {
			t.Fatalf("Disconnected called %d times for %d connections, want once each for 2", calls, n)
		}
	}, tt.Streaming...)
}

// TestCloseWhere: closing a user's connections reaches every one of them, streams and waiting
// long polls alike, each told why in its own way, and leaves another user's alone.
func TestCloseWhere(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	ann := tt.Dialer{}.Bearer("ann")
	ws := ann.WS(t, s.WS("/api/ws"))
	ws.Op("connected")
	ws.Send(`{"op":"subscribe","topic":"t/a"}`)
	ws.Op("subscribed")
	sse := ann.SSE(t, s.URL+"/api/sse?topic=t/a", "")
	stomp := tt.DialSTOMP(t, s.WS("/api/stomp"))
	stomp.Connect("passcode:ann\n")
	stomp.Send("SUBSCRIBE\nid:1\ndestination:/topic/t/a\nreceipt:r\n\n\x00")
	stomp.Expect("RECEIPT")
	poll := make(chan int, 1)
	go func() {
		status, _ := ann.Call(t, "GET", s.URL+"/api/poll/t/a?since=0&wait=20s", "")
		poll <- status
	}()
	multi := make(chan string, 1)
	go func() {
		_, body := ann.Call(t, "POST", s.URL+"/api/poll", `{"topics":[{"topic":"t/a","since":0}],"wait":20}`)
		multi <- string(body)
	}()
	bob := s.Client(t, tt.WS, "t/a", nil, tt.Options{Dialer: tt.Dialer{}.Bearer("bob")})
	s.AwaitSubscriptions(t, 6)

	n := s.Transport.CloseWhere(transport.ByUser("ann"), transport.DisconnectReason("account suspended", false))
	if n != 5 {
		t.Fatalf("CloseWhere closed %d of ann's connections, want 5 (WebSocket, SSE, STOMP, two long polls)", n)
	}
	if m := ws.Op("disconnect"); m.Code != "disconnected" || m.Reason != "account suspended" {
		t.Errorf("WebSocket told %+v", m)
	}
	if ev := sse.Next(5 * time.Second); ev.Event != "disconnect" || !strings.Contains(ev.Data, "account suspended") {
		t.Errorf("SSE told %v", ev)
	}
	if f := stomp.Expect("ERROR"); !strings.Contains(tt.Header(f, "message"), "account suspended") {
		t.Errorf("STOMP told %v", f)
	}
	select {
	case status := <-poll:
		if status != 403 {
			t.Errorf("the long poll was answered %d, want 403", status)
		}
	case <-time.After(5 * time.Second):
		t.Error("the long poll was not answered")
	}
	select {
	case body := <-multi:
		if !strings.Contains(body, `"disconnect"`) || !strings.Contains(body, "account suspended") {
			t.Errorf("the multi-topic long poll was answered %s", body)
		}
	case <-time.After(5 * time.Second):
		t.Error("the multi-topic long poll was not answered")
	}
	at := s.Publish(t, "t/a", `{"still":"here"}`)
	if got := tt.Messages(t, bob, 1, 5*time.Second); got[0].Pos() != at {
		t.Fatalf("bob got %v, want the publication at %v", got, at)
	}
}
