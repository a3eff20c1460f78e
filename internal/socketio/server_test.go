package socketio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/socketio/socketiotest"
)

// The tests run test/socketio/server.js (socketiotest.Start).

// testTimeout bounds every wait: generous, for a shared and loaded machine.
const testTimeout = 60 * time.Second

func dial(t *testing.T, o Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatalf("dial %+v: %v", o, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// event is one Read's result.
type event struct {
	name string
	args []json.RawMessage
	err  error
}

// reader reads c into a channel until it fails.
func reader(c *Conn) <-chan event {
	ch := make(chan event, 16)
	go func() {
		defer close(ch)
		for {
			name, args, err := c.Read()
			ch <- event{name, args, err}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// waitEvent returns the next event named name from ch, failing on a read error or timeout.
func waitEvent(t *testing.T, ch <-chan event, name string) []json.RawMessage {
	t.Helper()
	timeout := time.After(testTimeout)
	for {
		select {
		case e, ok := <-ch:
			if !ok || e.err != nil {
				t.Fatalf("waiting for %q: read failed: %v", name, e.err)
			}
			if e.name == name {
				return e.args
			}
		case <-timeout:
			t.Fatalf("no %q event", name)
		}
	}
}

// TestTransports joins, emits and receives the broadcast on each transport, with a receiver
// on another transport; the payload arrives byte for byte (the server re-encodes it with
// JSON.stringify, so the test sends it in that form).
func TestTransports(t *testing.T) {
	base := socketiotest.Start(t)
	for _, tc := range []struct{ transport, want string }{
		{"polling", "polling"},
		{"websocket", "websocket"},
		{"", "websocket"},
	} {
		t.Run("transport="+tc.want+"/"+tc.transport, func(t *testing.T) {
			c := dial(t, Options{URL: base + "?group=7", Transport: tc.transport})
			if c.Transport() != tc.want || c.SID() == "" {
				t.Fatalf("transport %q sid %q, want %q and a sid", c.Transport(), c.SID(), tc.want)
			}
			other := dial(t, Options{URL: base + "?group=7", Transport: "websocket"})
			got, mine := reader(other), reader(c)
			payload := json.RawMessage(fmt.Sprintf(`{"user":"u-%s","lat":52.52,"lon":13.405,"t":"ü"}`, tc.transport))
			if err := c.Emit("location", payload); err != nil {
				t.Fatal(err)
			}
			args := waitEvent(t, got, "location")
			if len(args) != 1 || string(args[0]) != string(payload) {
				t.Fatalf("received %s, want [%s]", args, payload)
			}
			waitEvent(t, mine, "location") // the sender is in its room too
		})
	}
}

// TestJoinEvent joins a room with a `join` event, acknowledged, then receives that room's
// broadcasts and not another's.
func TestJoinEvent(t *testing.T) {
	base := socketiotest.Start(t)
	for _, tr := range []string{"polling", "websocket"} {
		t.Run(tr, func(t *testing.T) {
			c := dial(t, Options{URL: base, Transport: tr})
			events := reader(c)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ack, err := c.EmitAck(ctx, "join", json.RawMessage("3"))
			if err != nil || len(ack) != 1 || string(ack[0]) != `"joined"` {
				t.Fatalf("join ack %s, %v", ack, err)
			}
			g4 := dial(t, Options{URL: base + "?group=4", Transport: tr})
			g3 := dial(t, Options{URL: base + "?group=3", Transport: tr})
			if err := g4.Emit("location", json.RawMessage(`{"g":4}`)); err != nil {
				t.Fatal(err)
			}
			if err := g3.Emit("location", json.RawMessage(`{"g":3}`)); err != nil {
				t.Fatal(err)
			}
			if args := waitEvent(t, events, "location"); string(args[0]) != `{"g":3}` {
				t.Fatalf("received %s, want only group 3's", args[0])
			}
		})
	}
}

// TestPings keeps a connection over several of the server's short ping intervals: each ping
// is answered (or the server would close the session) and the connection still carries events.
func TestPings(t *testing.T) {
	base := socketiotest.Start(t, "--ping-interval", "200", "--ping-timeout", "20000")
	for _, tr := range []string{"polling", "websocket", ""} {
		t.Run("transport="+tr, func(t *testing.T) {
			c := dial(t, Options{URL: base + "?group=1", Transport: tr})
			if c.PingInterval() != 200*time.Millisecond {
				t.Fatalf("ping interval %s", c.PingInterval())
			}
			events := reader(c)
			eventually.True(t, testTimeout, "3 pings answered", func() bool { return c.Pings() >= 3 })
			if err := c.Emit("location", json.RawMessage(`{"alive":true}`)); err != nil {
				t.Fatal(err)
			}
			waitEvent(t, events, "location")
		})
	}
}

// TestAuthRefused connects to a namespace whose middleware refuses: Dial fails with the
// server's message; the right token is let in.
func TestAuthRefused(t *testing.T) {
	base := socketiotest.Start(t)
	for _, tr := range []string{"polling", "websocket", ""} {
		t.Run("transport="+tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			_, err := Dial(ctx, Options{URL: base, Namespace: "/secure", Transport: tr, Auth: json.RawMessage(`{"token":"bad"}`)})
			var ce *ConnectError
			if !errors.As(err, &ce) || ce.Message != "not authorized" || ce.Namespace != "/secure" {
				t.Fatalf("err %v, want the namespace's refusal", err)
			}
			c := dial(t, Options{URL: base + "/secure?group=2", Transport: tr, Auth: json.RawMessage(`{"token":"good"}`)})
			events := reader(c)
			if err := c.Emit("location", json.RawMessage(`[1,2]`)); err != nil {
				t.Fatal(err)
			}
			waitEvent(t, events, "location")
		})
	}
}

// TestConcurrentEmitClose emits from several goroutines while another reads (the race
// detector watches), then closes the connection under a pending Read.
func TestConcurrentEmitClose(t *testing.T) {
	base := socketiotest.Start(t)
	const senders, each = 4, 25
	for _, tr := range []string{"polling", "websocket"} {
		t.Run(tr, func(t *testing.T) {
			c := dial(t, Options{URL: base + "?group=9", Transport: tr})
			events := reader(c)
			errs := make(chan error, senders)
			for s := range senders {
				go func() {
					var err error
					for i := 0; i < each && err == nil; i++ {
						err = c.Emit("location", json.RawMessage(fmt.Sprintf(`{"s":%d,"i":%d}`, s, i)))
					}
					errs <- err
				}()
			}
			for range senders {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			for range senders * each {
				waitEvent(t, events, "location")
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for e := range events { // ends when Read fails
				if e.err != nil && !errors.Is(e.err, ErrClosed) {
					t.Fatalf("read after close: %v, want ErrClosed", e.err)
				}
			}
			if err := c.Emit("location", json.RawMessage("1")); !errors.Is(err, ErrClosed) {
				t.Fatalf("emit after close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestDialFunc: every connection goes through Options.Dial (the lab's, for source addresses).
func TestDialFunc(t *testing.T) {
	base := socketiotest.Start(t)
	for _, tc := range []struct {
		transport string
		min       int64
	}{{"polling", 1}, {"websocket", 1}, {"", 2}} {
		var dials atomic.Int64
		d := func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			return nd.DialContext(ctx, network, addr)
		}
		c := dial(t, Options{URL: base, Transport: tc.transport, Dial: d})
		if dials.Load() < tc.min {
			t.Errorf("transport %q: %d dials through Options.Dial, want %d or more", tc.transport, dials.Load(), tc.min)
		}
		_ = c.Close()
	}
}
