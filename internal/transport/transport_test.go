package transport_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// The behaviour every transport shares, run on each: delivery in order, resume from an offset,
// a plain notice when history is gone, refusals that leave other clients alone, slow clients
// cut off, shutdown. Each transport's own wire is tested beside it (ws_test.go, stomp_test.go,
// sse_test.go, poll_test.go).

// TestDeliveryInOrder: what a client publishes reaches a subscriber of the same transport once,
// in order, with the position the publisher was given.
func TestDeliveryInOrder(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{})
		sub := s.Client(t, k, "news/order", nil)
		pub := s.Client(t, k, "news/order", nil)
		const n = 20
		var acked []tt.Position
		for i := range n {
			p, err := pub.Publish(t.Context(), "news/order", fmt.Sprintf(`{"i":%d}`, i))
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			acked = append(acked, p)
		}
		got := tt.Messages(t, sub, n, 10*time.Second)
		for i, p := range got {
			if p.Pos() != acked[i] || p.Topic != "news/order" || string(p.Data) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Fatalf("publication %d: %+v, want %v with {\"i\":%d}", i, p, acked[i], i)
			}
			if acked[i].Offset != uint64(i+1) {
				t.Fatalf("publish %d acknowledged at %v", i, acked[i])
			}
		}
	})
}

// TestResumeFromOffset: a client that names an offset gets what followed it, then what comes;
// one that names none gets only what comes after it subscribed.
func TestResumeFromOffset(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{})
		var top tt.Position
		for i := range 5 {
			top = s.Publish(t, "t/resume", fmt.Sprintf(`{"i":%d}`, i))
		}
		resumed := s.Client(t, k, "t/resume", &tt.Position{Offset: 2, Epoch: top.Epoch})
		fresh := s.Client(t, k, "t/resume", nil)
		s.Publish(t, "t/resume", `{"i":5}`)
		for i, p := range tt.Messages(t, resumed, 4, 10*time.Second) {
			if p.Offset != uint64(i+3) {
				t.Fatalf("resumed after 2: publication %d is at %d", i, p.Offset)
			}
		}
		if p := tt.Messages(t, fresh, 1, 10*time.Second)[0]; p.Offset != 6 {
			t.Fatalf("from now: first publication at %d, want 6", p.Offset)
		}
	})
}

// TestToldWhenHistoryGone: a client resuming from an offset the topic no longer holds, or from
// another epoch, is told so plainly, then gets everything retained and what follows. On a
// stream the notice's offset is that of the first publication after it (docs/protocol.md), so
// a client going on from offset-1 keeps every retained publication, once.
func TestToldWhenHistoryGone(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{History: hub.HistoryPolicy{Size: 2}})
		var top tt.Position
		for i := range 6 {
			top = s.Publish(t, "t/gone", fmt.Sprintf(`{"i":%d}`, i))
		}
		for _, tc := range []struct {
			since tt.Position
			told  string
		}{
			{tt.Position{Offset: 1, Epoch: top.Epoch}, "publications 2 to 4 of epoch " + top.Epoch + " are no longer retained"},
			{tt.Position{Offset: 3, Epoch: "gone"}, "epoch changed from gone to " + top.Epoch},
		} {
			c := s.Client(t, k, "t/gone", &tc.since)
			g := tt.Await(t, c, 10*time.Second, "gap", func(e tt.Event) bool { return e.Kind == tt.Gap })
			if !strings.Contains(g.Reason, tc.told) {
				t.Fatalf("resuming after %v: told %q, want it to say %q", tc.since, g.Reason, tc.told)
			}
			if got := tt.Messages(t, c, 2, 10*time.Second); got[0].Offset != 5 || got[1].Offset != 6 {
				t.Fatalf("resuming after %v: got %v and %v after the notice, want 5 and 6", tc.since, got[0].Pos(), got[1].Pos())
			}
			if streaming(k) && (g.Offset != 5 || g.Epoch != top.Epoch) {
				t.Fatalf("resuming after %v: the notice is at %v, want the first publication after it, 5:%s", tc.since, g.Pos(), top.Epoch)
			}
			c.Close()
		}
	})
}

// TestRefusedPublish: a publish to a bad topic and one larger than --max-frame are refused with
// a reason; the client goes on publishing, and a subscriber on another connection receives
// everything that was accepted.
func TestRefusedPublish(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxFrame: 1024}})
		watcher := s.Client(t, tt.WS, "t/refused", nil)
		c := s.Client(t, k, "t/refused", nil)
		for _, bad := range []struct{ topic, data, code, says string }{
			{"bad topic", `{}`, "bad_topic", "bad topic"},
			{"t/refused", `{"a":"` + strings.Repeat("x", 4000) + `"}`, "too_large", "too large"}, // STOMP names no code
		} {
			_, err := c.Publish(t.Context(), bad.topic, bad.data)
			var r *tt.Refusal
			if !errors.As(err, &r) || r.Code != bad.code && !strings.Contains(r.Reason, bad.says) {
				t.Fatalf("publish of %.20s to %q: %v, want a refusal %s", bad.data, bad.topic, err, bad.code)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			p, err := c.Publish(ctx, "t/refused", `{"ok":1}`)
			cancel()
			if err != nil {
				t.Fatalf("publish after the refusal: %v", err)
			}
			if got := tt.Messages(t, watcher, 1, 10*time.Second)[0]; got.Pos() != p {
				t.Fatalf("the other client got %v, want %v", got.Pos(), p)
			}
		}
	})
}

// TestOrderUnderConcurrentPublishers: publishers on every transport at once; a subscriber on
// every transport receives offsets 1..N once each, in order.
func TestOrderUnderConcurrentPublishers(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{History: hub.HistoryPolicy{Size: 5000}})
	const topic, per = "t/concurrent", 60
	var subs []tt.Client
	for _, k := range tt.Kinds {
		subs = append(subs, s.Client(t, k, topic, nil))
	}
	var wg sync.WaitGroup
	for _, k := range tt.Kinds {
		pub := s.Client(t, k, topic+"/"+string(k), nil) // publishers follow a topic of their own
		wg.Go(func() {
			for j := range per {
				if _, err := pub.Publish(t.Context(), topic, fmt.Sprintf(`{"by":%q,"j":%d}`, k, j)); err != nil {
					t.Errorf("%s publisher: %v", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	const total = per * 5
	for _, c := range subs {
		wg.Go(func() {
			got, err := tt.Collect(c, total, 30*time.Second)
			if err != nil {
				t.Error(err)
			}
			for i, p := range got {
				if p.Offset != uint64(i+1) {
					t.Errorf("%s subscriber: publication %d at offset %d", c.Kind(), i, p.Offset)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestShutdownTellsClients: at shutdown every streaming client is told to reconnect, and a
// waiting long poll returns at once.
func TestShutdownTellsClients(t *testing.T) {
	tt.Run(t, func(t *testing.T, k tt.Kind) {
		s := tt.NewServer(t, tt.ServerConfig{})
		base := s.Subscriptions()
		c := s.Client(t, k, "t/bye", nil, tt.Options{Wait: 30 * time.Second})
		if k == tt.LongPoll {
			s.AwaitSubscriptions(t, base+1) // waiting
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := s.Transport.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if k == tt.LongPoll {
			s.AwaitSubscriptions(t, base)
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the long poll held shutdown for %v", d)
			}
			return
		}
		e := tt.Await(t, c, 5*time.Second, "the end of the session", func(e tt.Event) bool { return e.Kind == tt.State && !e.Up })
		if !strings.Contains(e.Reason, "shutdown") {
			t.Fatalf("told %q at shutdown, want the shutdown reason", e.Reason)
		}
	}, tt.SSE, tt.WS, tt.STOMP, tt.LongPoll)
}

// streaming says whether k holds a connection open (its gap notices carry an offset).
func streaming(k tt.Kind) bool { return slices.Contains(tt.Streaming, k) }
