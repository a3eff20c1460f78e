package memory_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
)

// nopHandler takes deliveries and drops them.
type nopHandler struct{}

func (nopHandler) HandlePublication(*hub.Publication) {}
func (nopHandler) HandleResubscribed()                {}

func start(t *testing.T, cfg memory.Config) *memory.Broker {
	t.Helper()
	b := memory.New(cfg)
	if err := b.Run(t.Context(), nopHandler{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Reading topics nobody published to answers "no history" and keeps nothing: a client
// looking up names must not be able to grow the server.
func TestLookupOfMissingTopicsKeepsNothing(t *testing.T) {
	b := start(t, memory.Config{})
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range 20_000 {
		hr, err := b.History(ctx, fmt.Sprintf("probe/t%d", i), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if hr.Top != (hub.Position{}) || hr.Publications != nil {
			t.Fatalf("missing topic answered %+v", hr)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 1<<20 {
		t.Errorf("20,000 lookups of missing topics kept %d bytes", grown)
	}
	// A topic that exists keeps answering with its epoch.
	p, err := b.Publish(ctx, hub.PublishRequest{Topic: "probe/real", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	hr, err := b.History(ctx, "probe/real", 0, 0)
	if err != nil || hr.Top != (hub.Position{Offset: 1, Epoch: p.Epoch}) {
		t.Fatalf("existing topic: %+v, %v", hr, err)
	}
}

// Publishing large payloads to ever new topics stays within MaxBytes: the least recently used
// topics lose their history, and a reader of such a topic is told its publications are gone
// (its offsets and epoch stay).
func TestHistoryBytesBounded(t *testing.T) {
	const max = 4 << 20
	b := start(t, memory.Config{MaxBytes: max})
	ctx := context.Background()
	data := []byte(`{"pad":"` + strings.Repeat("x", 60<<10) + `"}`)
	first, err := b.Publish(ctx, hub.PublishRequest{Topic: "flood/0", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 2000; i++ {
		if _, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("flood/%d", i), Data: data}); err != nil {
			t.Fatal(err)
		}
		if got := b.RetainedBytes(); got > max+int64(4*len(data)) {
			t.Fatalf("after %d publishes %d bytes retained, bound %d", i+1, got, max)
		}
	}
	if b.Trimmed() == 0 {
		t.Fatal("no topic was trimmed")
	}
	hr, err := b.History(ctx, "flood/0", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hr.Top != (hub.Position{Offset: 1, Epoch: first.Epoch}) || len(hr.Publications) != 0 {
		t.Fatalf("the oldest topic: %+v; want its position kept and its history gone", hr)
	}
	// The newest topic still has its publication.
	hr, err = b.History(ctx, "flood/1999", 0, 0)
	if err != nil || len(hr.Publications) != 1 {
		t.Fatalf("the newest topic: %+v, %v", hr, err)
	}
}

// A flood of large publications trims the flooder's own topics first: the idle topics a
// bystander published to keep their history while the flooder holds more than they do.
func TestTrimTakesFromTheLargestPublisher(t *testing.T) {
	const max = 4 << 20
	b := start(t, memory.Config{MaxBytes: max})
	ctx := context.Background()
	for i := range 200 {
		if _, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("own/%d", i), Sender: "bob", Data: []byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	data := []byte(`{"pad":"` + strings.Repeat("x", 60<<10) + `"}`)
	for i := range 2000 {
		if _, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("flood/%d", i), Sender: "eve", Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Trimmed() == 0 || b.RetainedBytes() > max+int64(4*len(data)) {
		t.Fatalf("trimmed %d topics, %d bytes retained", b.Trimmed(), b.RetainedBytes())
	}
	for i := range 200 {
		hr, err := b.History(ctx, fmt.Sprintf("own/%d", i), 0, 0)
		if err != nil || len(hr.Publications) != 1 {
			t.Fatalf("bob's own/%d lost its history to eve's flood: %+v, %v", i, hr, err)
		}
	}
}

// The number of topics is bounded: new topics make room by forgetting idle ones, never one
// with subscribers, and refuse when every topic has subscribers.
func TestTopicsBounded(t *testing.T) {
	b := start(t, memory.Config{MaxTopics: 100})
	ctx := context.Background()
	if err := b.Subscribe(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	kept, err := b.Publish(ctx, hub.PublishRequest{Topic: "kept", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if _, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("t/%d", i), Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if n := b.Topics(); n > 110 {
			t.Fatalf("%d topics held, bound 100", n)
		}
	}
	hr, err := b.History(ctx, "kept", 0, 0)
	if err != nil || hr.Top.Epoch != kept.Epoch || len(hr.Publications) != 1 {
		t.Fatalf("the subscribed topic was forgotten: %+v, %v", hr, err)
	}
	full := start(t, memory.Config{MaxTopics: 3})
	for i := range 3 {
		name := fmt.Sprintf("s/%d", i)
		_ = full.Subscribe(ctx, name)
		if _, err := full.Publish(ctx, hub.PublishRequest{Topic: name, Data: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := full.Publish(ctx, hub.PublishRequest{Topic: "s/new", Data: []byte(`{}`)}); !errors.Is(err, hub.ErrTooManyTopics) {
		t.Fatalf("a new topic with every topic subscribed: %v, want ErrTooManyTopics", err)
	}
}
