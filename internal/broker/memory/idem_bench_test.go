package memory_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
)

type discard struct{}

func (discard) HandlePublication(*hub.Publication) {}
func (discard) HandleResubscribed()                {}

// BenchmarkPublishFullHistory publishes on a topic holding a full 1,000-publication history
// (a durable room's window), every one keyed: what a keyed publish costs as history grows.
func BenchmarkPublishFullHistory(b *testing.B) {
	const size = 1000
	data := json.RawMessage(`{"text":"hello"}`)
	setup := func(b *testing.B) *memory.Broker {
		br := memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy {
			return hub.HistoryPolicy{Size: size, TTL: time.Hour}
		}})
		_ = br.Run(context.Background(), discard{})
		b.Cleanup(func() { _ = br.Close() })
		for i := range size {
			req := hub.PublishRequest{Topic: "room", Data: data, Sender: "alice", Key: "fill-" + strconv.Itoa(i)}
			if _, err := br.Publish(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
		return br
	}
	run := func(b *testing.B, key func(i int) string) {
		br := setup(b)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := br.Publish(ctx, hub.PublishRequest{Topic: "room", Data: data, Sender: "alice", Key: key(i)}); err != nil {
				b.Fatal(err)
			}
		}
	}
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "k-" + strconv.Itoa(i)
	}
	b.Run("keyed", func(b *testing.B) { run(b, func(i int) string { return keys[i%len(keys)] }) })
	b.Run("retry", func(b *testing.B) { run(b, func(int) string { return "fill-0" }) })
	b.Run("unkeyed", func(b *testing.B) { run(b, func(int) string { return "" }) })
}
