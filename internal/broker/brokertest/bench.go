package brokertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// Bench measures a broker with two nodes on one server.
//
// publish/parallel=P: node A publishes from P×GOMAXPROCS goroutines, each to its own topic among
// 64, and node B, subscribed to every topic, receives. ns/op is the publish throughput as seen
// from A; the reported metrics are publications per second and the publish→deliver latency on B
// (p50, p99, µs).
//
// history: node B reads the last 10 of 100 retained publications of a topic that node A
// published, as a short-polling client does; ns/op is per read, from 8×GOMAXPROCS goroutines.
//
// contended: nodes A and B both publish to one topic, from 2×GOMAXPROCS goroutines each, as
// chat members on two nodes do; ns/op is per publication, either node's. Only Shared brokers.
//
// For a broker that is not Shared, A and B are the same node.
func Bench(b *testing.B, h Harness) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("publish/parallel=%d", par), func(b *testing.B) { benchPublish(b, h, par) })
	}
	if h.Shared {
		b.Run("contended", func(b *testing.B) { benchContended(b, h) })
	}
	b.Run("history", func(b *testing.B) { benchHistory(b, h) })
}

func benchHistory(b *testing.B, h Harness) {
	ns := Namespace()
	a, r := startPair(b, h, ns, hub.HistoryPolicy{Size: 100})
	topic := "bench/history"
	var last *hub.Publication
	for range 100 {
		last = a.Publish(b, topic, `{"x":1,"y":2}`)
	}
	eventually.Nil(b, 10*time.Second, func() error {
		if hr := r.History(b, topic, 0, 0); hr.Top.Offset != last.Offset {
			return notYet("node B at %d", hr.Top.Offset)
		}
		return nil
	})
	ctx := context.Background()
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			hr, err := r.Broker.History(ctx, topic, last.Offset-10, 100)
			if err != nil || len(hr.Publications) != 10 {
				b.Errorf("History: %d publications, %v", len(hr.Publications), err)
				return
			}
		}
	})
}

func benchPublish(b *testing.B, h Harness, par int) {
	ns := Namespace()
	policy := hub.HistoryPolicy{Size: 100}
	a := h.NewNode(b, ns, policy)
	recv := h.NewNode(b, ns, policy)
	lat := &latencyHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !h.Shared {
		recv = a
	}
	if err := recv.Run(ctx, lat); err != nil {
		b.Fatal(err)
	}
	defer recv.Close()
	if h.Shared {
		if err := a.Run(ctx, NewRecorder()); err != nil {
			b.Fatal(err)
		}
		defer a.Close()
	}
	const topics = 64
	for i := range topics {
		if err := recv.Subscribe(ctx, benchTopic(i)); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up every topic (first publications create state).
	for i := range topics {
		if _, err := a.Publish(ctx, hub.PublishRequest{Topic: benchTopic(i), Data: json.RawMessage(`{"t":0}`)}); err != nil {
			b.Fatal(err)
		}
	}
	lat.reset()
	var next atomic.Int64
	b.SetParallelism(par)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		topic := benchTopic(int(next.Add(1)) % topics)
		var buf []byte
		for pb.Next() {
			buf = append(buf[:0], `{"t":`...)
			buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
			buf = append(buf, '}')
			if _, err := a.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(bytes.Clone(buf))}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	eventually.Within(30*time.Second, func() bool { return lat.count() >= b.N })
	if got := lat.count(); got < b.N {
		b.Fatalf("node B received %d of %d publications", got, b.N)
	}
	p50, p99 := lat.percentiles()
	b.ReportMetric(float64(p50.Microseconds()), "p50-deliver-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-deliver-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pub/s")
}

func benchContended(b *testing.B, h Harness) {
	a, r := startPair(b, h, Namespace(), hub.HistoryPolicy{Size: 100})
	const topic = "bench/contended"
	a.Publish(b, topic, `{"t":0}`)
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(4) // half of the goroutines on each node
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		n := a.Broker
		if next.Add(1)%2 == 0 {
			n = r.Broker
		}
		for pb.Next() {
			if _, err := n.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{"t":1}`)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pub/s")
}

func benchTopic(i int) string { return "bench/t" + strconv.Itoa(i) }

// latencyHandler records publish→deliver latency from a {"t": unix-nanos} payload.
type latencyHandler struct {
	mu   sync.Mutex
	lats []time.Duration
}

func (l *latencyHandler) HandlePublication(p *hub.Publication) {
	now := time.Now().UnixNano()
	d := bytes.TrimSuffix(bytes.TrimPrefix(p.Data, []byte(`{"t":`)), []byte(`}`))
	t, err := strconv.ParseInt(string(d), 10, 64)
	if err != nil || t == 0 {
		return
	}
	l.mu.Lock()
	l.lats = append(l.lats, time.Duration(now-t))
	l.mu.Unlock()
}

func (l *latencyHandler) HandleResubscribed() {}

func (l *latencyHandler) reset() {
	l.mu.Lock()
	l.lats = l.lats[:0]
	l.mu.Unlock()
}

func (l *latencyHandler) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lats)
}

func (l *latencyHandler) percentiles() (p50, p99 time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lats) == 0 {
		return 0, 0
	}
	s := slices.Clone(l.lats)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}
