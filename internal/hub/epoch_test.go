package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/rtlab/rtlab/internal/hub"
)

// scriptedBroker is a broker whose history the test sets, to play a broker that lost its data
// while this node's deliveries were interrupted.
type scriptedBroker struct {
	mu   sync.Mutex
	h    hub.Handler
	pubs []*hub.Publication // the current epoch's retained history
}

func (b *scriptedBroker) Run(_ context.Context, h hub.Handler) error { b.h = h; return nil }
func (b *scriptedBroker) Publish(context.Context, hub.PublishRequest) (*hub.Publication, error) {
	return nil, fmt.Errorf("not used")
}
func (b *scriptedBroker) Subscribe(context.Context, string) error   { return nil }
func (b *scriptedBroker) Unsubscribe(context.Context, string) error { return nil }
func (b *scriptedBroker) Ready() bool                               { return true }
func (b *scriptedBroker) Close() error                              { return nil }
func (b *scriptedBroker) History(_ context.Context, _ string, since uint64, _ int) (hub.HistoryResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var r hub.HistoryResult
	if n := len(b.pubs); n > 0 {
		last := b.pubs[n-1]
		r.Top, r.Oldest = hub.Position{Offset: last.Offset, Epoch: last.Epoch}, b.pubs[0].Offset
	}
	for _, p := range b.pubs {
		if p.Offset > since {
			r.Publications = append(r.Publications, p)
		}
	}
	return r, nil
}

func (b *scriptedBroker) add(epoch string, offset uint64) *hub.Publication {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pubs) > 0 && b.pubs[0].Epoch != epoch {
		b.pubs = nil // the old epoch's history is gone
	}
	p := &hub.Publication{Topic: "t", Offset: offset, Epoch: epoch, Data: json.RawMessage(`{}`)}
	b.pubs = append(b.pubs, p)
	return p
}

type gapRecorder struct {
	mu     sync.Mutex
	events []string
}

func (g *gapRecorder) Deliver(p *hub.Publication) {
	g.mu.Lock()
	g.events = append(g.events, fmt.Sprintf("%s/%d", p.Epoch, p.Offset))
	g.mu.Unlock()
}

func (g *gapRecorder) Gap(_ string, now hub.Position, _ string) {
	g.mu.Lock()
	g.events = append(g.events, fmt.Sprintf("gap->%s/%d", now.Epoch, now.Offset))
	g.mu.Unlock()
}

// subscribeRecorder runs a hub on b and subscribes a gapRecorder to topic "t" with opts.
func subscribeRecorder(t *testing.T, b *scriptedBroker, opts hub.ReadOptions) (*hub.Hub, *gapRecorder) {
	t.Helper()
	h := hub.New(hub.Config{Broker: b})
	_ = h.Run(context.Background())
	rec := &gapRecorder{}
	sub, _, err := h.Subscribe(context.Background(), "t", rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	sub.Start()
	return h, rec
}

// TestEpochChangeWhileInterrupted: the node saw epoch A up to 3, missed the broker losing its
// data and the first two publications of epoch B, then receives B/3. The subscriber must be
// told, then get B/1, B/2, B/3 — not B/3 alone.
func TestEpochChangeWhileInterrupted(t *testing.T) {
	b := &scriptedBroker{}
	_, rec := subscribeRecorder(t, b, hub.ReadOptions{Recover: true})
	for i := uint64(1); i <= 3; i++ {
		b.h.HandlePublication(b.add("A", i))
	}
	b.add("B", 1) // delivered to nobody here: this node was cut off
	b.add("B", 2)
	b.h.HandlePublication(b.add("B", 3))
	b.h.HandlePublication(b.add("B", 4))
	want := "[A/1 A/2 A/3 gap->B/1 B/1 B/2 B/3 B/4]"
	if got := fmt.Sprint(rec.events); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// After a reconnect the hub fetches what it missed, across an epoch change too.
	b.add("C", 1)
	b.add("C", 2)
	b.h.HandleResubscribed()
	want = "[A/1 A/2 A/3 gap->B/1 B/1 B/2 B/3 B/4 gap->C/1 C/1 C/2]"
	if got := fmt.Sprint(rec.events); got != want {
		t.Fatalf("after resubscribe got %s, want %s", got, want)
	}
}

// TestCutOffBeforeFirstDelivery: a client subscribed on this node, and the node was cut off from
// its broker before anything was delivered to it. What was published meanwhile must reach the
// subscriber, in order, whether the node learns of it from the broker's reconnect or from the
// next publication — not only what comes after.
func TestCutOffBeforeFirstDelivery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // publications retained when the client subscribes (all in epoch A)
		epoch  string
		resub  bool // the broker reports its reconnect before the next publication
		want   string
	}{
		{name: "new topic, reconnect", epoch: "A", resub: true, want: "[A/1 A/2 A/3]"},
		{name: "new topic, next publication", epoch: "A", want: "[A/1 A/2 A/3]"},
		{name: "same epoch, reconnect", before: 2, epoch: "A", resub: true, want: "[A/3 A/4 A/5]"},
		{name: "same epoch, next publication", before: 2, epoch: "A", want: "[A/3 A/4 A/5]"},
		{name: "data lost, reconnect", before: 2, epoch: "B", resub: true, want: "[gap->B/1 B/1 B/2 B/3]"},
		{name: "data lost, next publication", before: 2, epoch: "B", want: "[gap->B/1 B/1 B/2 B/3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &scriptedBroker{}
			for i := range tc.before {
				b.add("A", uint64(i+1))
			}
			_, rec := subscribeRecorder(t, b, hub.ReadOptions{})
			// Published while this node was cut off: nothing is delivered here.
			first := uint64(tc.before + 1)
			if tc.epoch != "A" {
				first = 1
			}
			b.add(tc.epoch, first)
			b.add(tc.epoch, first+1)
			if tc.resub {
				b.h.HandleResubscribed()
			}
			b.h.HandlePublication(b.add(tc.epoch, first+2))
			if got := fmt.Sprint(rec.events); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestMissedAndNoLongerRetained: this node missed publications 3 and 4 and history dropped them
// before it could fetch them. The subscriber is told before 5, not handed 5 after 2 silently.
func TestMissedAndNoLongerRetained(t *testing.T) {
	b := &scriptedBroker{}
	h, rec := subscribeRecorder(t, b, hub.ReadOptions{})
	b.h.HandlePublication(b.add("A", 1))
	b.h.HandlePublication(b.add("A", 2))
	b.add("A", 3)
	b.add("A", 4)
	p := b.add("A", 5)
	b.mu.Lock()
	b.pubs = b.pubs[len(b.pubs)-1:] // history now holds 5 only
	b.mu.Unlock()
	b.h.HandlePublication(p)
	b.h.HandlePublication(b.add("A", 6))
	want := "[A/1 A/2 gap->A/5 A/5 A/6]"
	if got := fmt.Sprint(rec.events); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if n := h.Stats().GapsReported.Load(); n != 1 {
		t.Fatalf("GapsReported = %d, want 1", n)
	}
}
