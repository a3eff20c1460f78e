package servertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// Bystander is a well-behaved user of a server under attack: it subscribes to a topic over the
// native WebSocket protocol and publishes to it over HTTP at a steady pace. Check then asserts
// that every publish was accepted and that every publication arrived once, in offset order,
// on one session.
type Bystander struct {
	t     testing.TB
	topic string

	sub       tt.Client
	cancel    context.CancelFunc // ends the reader and the publisher
	stopPub   context.CancelFunc // ends the publisher
	reader    sync.WaitGroup
	publisher sync.WaitGroup

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
	d := tt.Dialer{}
	if token != "" {
		d = d.Bearer(token)
	}
	b.sub = tt.New(t, tt.WS, tt.Options{Nodes: []string{p.URL()}, Dialer: d})
	b.sub.Subscribe(topic, nil)
	// Subscribed before publishing, so the first publication is not missed.
	tt.AwaitUp(t, b.sub)

	b.reader.Add(1)
	b.publisher.Add(1)
	go func() { // reader
		defer b.reader.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-b.sub.Events():
				switch {
				case e.Kind == tt.Message:
					b.mu.Lock()
					b.received = append(b.received, e.Offset)
					b.mu.Unlock()
				case e.Kind == tt.Gap:
					b.fail("subscriber: %v", e)
				case !e.Up:
					b.fail("subscriber: the session ended: %s", e.Reason)
				}
			}
		}
	}()
	go func() { // publisher
		defer b.publisher.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		hc := &http.Client{Timeout: 10 * time.Second}
		for seq := 1; ; seq++ {
			select {
			case <-pubCtx.Done():
				return
			case <-tick.C:
			}
			pos, err := tt.PublishHTTP(pubCtx, hc, d, p.URL(), topic, fmt.Sprintf(`{"bystander":%d}`, seq))
			var refused *tt.Refusal
			switch {
			case errors.As(err, &refused):
				b.fail("publish %d: %v", seq, err)
				continue
			case err != nil:
				if pubCtx.Err() == nil {
					b.fail("publish %d: %v", seq, err)
				}
				return
			}
			b.mu.Lock()
			b.acked = append(b.acked, pos.Offset)
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
	eventually.Within(10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.received) >= len(b.acked)
	})
	b.cancel()
	b.reader.Wait()
	b.sub.Close()

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
