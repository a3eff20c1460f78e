package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/store"
)

type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) HandlePublication(*hub.Publication) { h.n.Add(1) }
func (h *countingHandler) HandleResubscribed()                {}

func openDurable(tb testing.TB, dir string) (*Broker, *store.Store, *countingHandler) {
	tb.Helper()
	st, err := store.Open(store.Config{Path: filepath.Join(dir, "rtlab.db")})
	if err != nil {
		tb.Fatal(err)
	}
	b := New(Config{Store: st, Durable: func(t string) bool { return strings.HasPrefix(t, "chat/") }})
	h := &countingHandler{}
	_ = b.Run(context.Background(), h)
	return b, st, h
}

func TestDurableTopicsContinueAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b, st, h := openDurable(t, dir)
	ctx := context.Background()
	var epoch string
	for i := 0; i < 20; i++ {
		p, err := b.Publish(ctx, hub.PublishRequest{Topic: "chat/a", Data: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		epoch = p.Epoch
		_, _ = b.Publish(ctx, hub.PublishRequest{Topic: "location/a", Data: json.RawMessage(`{}`)})
	}
	if h.n.Load() != 40 {
		t.Fatalf("delivered %d", h.n.Load())
	}
	locEpoch := func(b *Broker) string {
		r, _ := b.History(ctx, "location/a", 0, 0)
		return r.Top.Epoch
	}
	oldLoc := locEpoch(b)
	_ = st.Close()

	b2, st2, _ := openDurable(t, dir)
	defer st2.Close()
	r, err := b2.History(ctx, "chat/a", 15, 0)
	if err != nil || r.Top.Offset != 20 || r.Top.Epoch != epoch || len(r.Publications) != 5 || r.Publications[0].Offset != 16 {
		t.Fatalf("after restart: %+v %v", r, err)
	}
	p, _ := b2.Publish(ctx, hub.PublishRequest{Topic: "chat/a", Data: json.RawMessage(`{}`)})
	if p.Offset != 21 || p.Epoch != epoch {
		t.Fatalf("next publication %d/%s, want 21/%s", p.Offset, p.Epoch, epoch)
	}
	if locEpoch(b2) == oldLoc {
		t.Fatal("memory-only topic kept its epoch across a restart")
	}
}

// BenchmarkPublishDurable publishes from many goroutines to 100 durable rooms with real
// fsync; publications/s is the figure the durability target is about.
func BenchmarkPublishDurable(b *testing.B) {
	br, st, _ := openDurable(b, b.TempDir())
	defer st.Close()
	data := json.RawMessage(`{"type":"TALK","sender":"ann","message":"hello there"}`)
	var n atomic.Int64
	b.SetParallelism(benchParallelism) // many concurrent publishers, like many connections
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1)
		for pb.Next() {
			i++
			if _, err := br.Publish(context.Background(), hub.PublishRequest{Topic: fmt.Sprintf("chat/room%d", i%100), Data: data}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publications/s")
}

// benchParallelism × GOMAXPROCS publishers are in flight in BenchmarkPublishDurable.
var benchParallelism = 256

// Durable windows count toward DurableMaxBytes: over it, rooms leave memory and are read back
// from the store whole; reading rooms brings none into memory.
func TestDurableWindowsBounded(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(store.Config{Path: filepath.Join(dir, "rtlab.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const budget = 512 << 10
	b := New(Config{Store: st, Durable: func(t string) bool { return strings.HasPrefix(t, "chat/") }, DurableMaxBytes: budget})
	_ = b.Run(context.Background(), &countingHandler{})
	defer b.Close()
	ctx := context.Background()
	data := json.RawMessage(`{"text":"` + strings.Repeat("x", 4000) + `"}`)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() { // rooms in parallel, so the store commits them in batches
			defer wg.Done()
			for range 5 {
				if _, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("chat/r%d", i), Data: data}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for b.DurableBytes() > budget && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.DurableBytes(); got > budget {
		t.Fatalf("durable windows hold %d bytes, budget %d", got, budget)
	}
	if b.Forgotten() == 0 {
		t.Fatal("no room left memory")
	}
	// A trim that brought the bytes under budget may still be forgetting rooms down to its goal.
	held := b.Topics()
	for settled := time.Now().Add(5 * time.Second); time.Now().Before(settled); {
		time.Sleep(50 * time.Millisecond)
		if now := b.Topics(); now != held {
			held = now
			continue
		}
		break
	}
	for i := range 100 {
		r, err := b.History(ctx, fmt.Sprintf("chat/r%d", i), 0, 0)
		if err != nil || r.Top.Offset != 5 || len(r.Publications) != 5 {
			t.Fatalf("chat/r%d read back: top %d, %d publications, %v", i, r.Top.Offset, len(r.Publications), err)
		}
	}
	if b.Topics() != held {
		t.Fatalf("reading rooms brought them into memory: %d topics held, %d before", b.Topics(), held)
	}
}

// A retry that comes while the original's commit is still pending is answered with the
// original's position: publishes of one key race each other, and each key is stored once.
func TestDurableRetryWhileCommitPending(t *testing.T) {
	b, st, _ := openDurable(t, t.TempDir())
	defer st.Close()
	defer b.Close()
	ctx := context.Background()
	const keys, tries = 50, 4
	got := make([][tries]uint64, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := b.Publish(ctx, hub.PublishRequest{Topic: "chat/retry", Data: json.RawMessage(`{}`),
					Sender: "alice", Key: fmt.Sprintf("k-%d", k)})
				if err != nil {
					t.Error(err)
					return
				}
				got[k][i] = p.Offset
			}()
		}
	}
	wg.Wait()
	for k, offs := range got {
		for _, off := range offs {
			if off != offs[0] {
				t.Fatalf("key k-%d answered with offsets %v, want one", k, offs)
			}
		}
	}
	r, err := b.History(ctx, "chat/retry", 0, 0)
	if err != nil || r.Top.Offset != keys || len(r.Publications) != keys {
		t.Fatalf("history: top %d, %d publications, %v; want %d of each", r.Top.Offset, len(r.Publications), err, keys)
	}
}
