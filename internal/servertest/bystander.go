package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// Bystander is a well-behaved user of a server under attack: it subscribes to a topic over the
// native WebSocket protocol and publishes to it over HTTP at a steady pace. Check then asserts
// that every publish was accepted and that every publication arrived once, in offset order.
type Bystander struct {
	t     testing.TB
	topic string

	cancel    context.CancelFunc // ends the subscriber
	stopPub   context.CancelFunc // ends the publisher
	reader    sync.WaitGroup
	publisher sync.WaitGroup
	conn      io.Closer

	mu       sync.Mutex
	acked    []uint64 // offsets the publisher was given, in order
	received []uint64 // offsets delivered to the subscriber, in order
	errs     []string // what went wrong, for the failure message
}

// StartBystander subscribes to topic on p and publishes to it every interval until Check.
// token, when set, is sent as Authorization: Bearer on both the socket and the publishes.
func StartBystander(t testing.TB, p *Proc, topic, token string, interval time.Duration) *Bystander {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pubCtx, stopPub := context.WithCancel(ctx)
	b := &Bystander{t: t, topic: topic, cancel: cancel, stopPub: stopPub}
	t.Cleanup(cancel)

	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	d := ws.Dialer{Timeout: 5 * time.Second, Header: ws.HandshakeHeaderHTTP(hdr)}
	conn, br, _, err := d.Dial(ctx, p.WS("/api/ws"))
	if err != nil {
		t.Fatalf("bystander: dial: %v", err)
	}
	// rd answers the server's pings through conn while it reads.
	rd := struct {
		io.Reader
		io.Writer
	}{conn, conn}
	if br != nil {
		rd.Reader = io.MultiReader(br, conn)
	}
	sub, _ := json.Marshal(map[string]any{"op": "subscribe", "topic": topic})
	if err := wsutil.WriteClientText(conn, sub); err != nil {
		t.Fatalf("bystander: subscribe: %v", err)
	}
	// Wait for "subscribed" before publishing, so the first publication is not missed.
	for {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		msg, err := wsutil.ReadServerText(rd)
		if err != nil {
			t.Fatalf("bystander: waiting for subscribed: %v", err)
		}
		var m struct{ Op, Code, Reason string }
		_ = json.Unmarshal(msg, &m)
		if m.Op == "subscribed" {
			break
		}
		if m.Op == "error" || m.Op == "disconnect" {
			t.Fatalf("bystander: subscribe refused: %s", msg)
		}
	}
	_ = conn.SetReadDeadline(time.Time{})
	b.conn = conn
	t.Cleanup(func() { conn.Close() })

	b.reader.Add(1)
	b.publisher.Add(1)
	go func() { // reader
		defer b.reader.Done()
		for {
			msg, err := wsutil.ReadServerText(rd)
			if err != nil {
				if ctx.Err() == nil {
					b.fail("subscriber: read: %v", err)
				}
				return
			}
			var m struct {
				Op     string
				Topic  string
				Offset uint64
				Reason string
			}
			if err := json.Unmarshal(msg, &m); err != nil {
				b.fail("subscriber: %q is not JSON: %v", msg, err)
				continue
			}
			switch m.Op {
			case "message":
				b.mu.Lock()
				b.received = append(b.received, m.Offset)
				b.mu.Unlock()
			case "error", "disconnect", "gap":
				b.fail("subscriber: %s", msg)
			}
		}
	}()
	go func() { // publisher
		defer b.publisher.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		client := &http.Client{Timeout: 10 * time.Second}
		for seq := 1; ; seq++ {
			select {
			case <-pubCtx.Done():
				return
			case <-tick.C:
			}
			body := fmt.Sprintf(`{"bystander":%d}`, seq)
			req, _ := http.NewRequest(http.MethodPost, p.URL()+"/api/publish/"+topic, bytes.NewBufferString(body))
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			res, err := client.Do(req.WithContext(pubCtx))
			if err != nil {
				if pubCtx.Err() == nil {
					b.fail("publish %d: %v", seq, err)
				}
				return
			}
			reply, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var ack struct{ Offset uint64 }
			if res.StatusCode != http.StatusOK || json.Unmarshal(reply, &ack) != nil {
				b.fail("publish %d: %s %s", seq, res.Status, reply)
				continue
			}
			b.mu.Lock()
			b.acked = append(b.acked, ack.Offset)
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *Bystander) fail(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) < 20 {
		b.errs = append(b.errs, fmt.Sprintf(format, args...))
	}
}

// Published is how many publishes have been acknowledged so far.
func (b *Bystander) Published() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.acked)
}

// Check stops publishing, waits up to 10 s for the last acknowledged publication to arrive,
// and fails the test unless at least min publishes were acknowledged, none was refused, and
// the subscriber received exactly the acknowledged offsets, once each, in order.
func (b *Bystander) Check(min int) {
	b.t.Helper()
	b.stopPub()
	b.publisher.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		caught := len(b.received) >= len(b.acked)
		b.mu.Unlock()
		if caught {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.cancel()
	b.conn.Close()
	b.reader.Wait()

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("bystander on %s: %s", b.topic, e)
	}
	if len(b.acked) < min {
		b.t.Errorf("bystander on %s: %d publishes acknowledged, want at least %d", b.topic, len(b.acked), min)
	}
	seen := make(map[uint64]bool, len(b.received))
	for i, off := range b.received {
		if seen[off] {
			b.t.Errorf("bystander on %s: offset %d delivered twice", b.topic, off)
		}
		seen[off] = true
		if i > 0 && off <= b.received[i-1] {
			b.t.Errorf("bystander on %s: offset %d after %d: out of order", b.topic, off, b.received[i-1])
		}
	}
	for _, off := range b.acked {
		if !seen[off] {
			b.t.Errorf("bystander on %s: acknowledged offset %d never delivered (%d acked, %d received)", b.topic, off, len(b.acked), len(b.received))
			break
		}
	}
}
