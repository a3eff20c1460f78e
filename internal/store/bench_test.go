package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// benchData is a typical chat line.
var benchData = json.RawMessage(`{"type":"TALK","sender":"user1234","message":"hello from the load lab, a usual chat line","roomId":"42"}`)

// benchDir is where benchmark files go: TempDir, or a fresh directory under
// RTLAB_STORE_BENCH_DIR to measure another disk.
func benchDir(b *testing.B) string {
	if d := os.Getenv("RTLAB_STORE_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkAppendParallel measures sustained publications per second through the store with
// real files (fsync unless noted), default batching (1024 / 2ms) and default retention (1000):
//
//   - nosync, fsync: 16 publishers on 16 topics each (256 topics) append and move on, the
//     broker's pattern (fan-out happens in done). The time includes the last commit.
//   - fsync-4096topics: the same with 256 topics per publisher, so nearly every publication
//     in a batch dirties its own B-tree leaf (the worst page spread).
//   - fsync-wait256: 256 publishers (16 topics each) that wait for their done before the next
//     publish, as a publish API that answers only once durable would. A batch is then at most
//     256 and throughput is about 256 ÷ (linger + commit latency).
//   - fsync-wait256-nolinger: the same with MaxDelay -1.
//
// pubs/batch and µs/commit come from Stats. Files go to TempDir (same disk as the repository
// here) unless RTLAB_STORE_BENCH_DIR is set.
//
// Run: go test -run '^$' -bench AppendParallel -benchtime 200000x ./internal/store
func BenchmarkAppendParallel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		noSync bool
		wait   bool
		par    int           // goroutines per GOMAXPROCS
		delay  time.Duration // Config.MaxDelay
		topics int           // per goroutine
	}{
		{"nosync", true, false, 8, 0, 16},
		{"fsync", false, false, 8, 0, 16},
		{"fsync-4096topics", false, false, 8, 0, 256},
		{"fsync-wait256", false, true, 128, 0, 16},
		{"fsync-wait256-nolinger", false, true, 128, -1, 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(Config{Path: filepath.Join(benchDir(b), "bench.db"), NoSync: bc.noSync, MaxDelay: bc.delay})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var ids atomic.Int64
			b.SetParallelism(bc.par)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				id := ids.Add(1)
				offs := make([]uint64, bc.topics)
				var wg sync.WaitGroup
				done := func(err error) {
					if err != nil {
						b.Error(err)
					}
					if bc.wait {
						wg.Done()
					}
				}
				i := 0
				for pb.Next() {
					t := i % len(offs)
					i++
					offs[t]++
					p := &hub.Publication{
						Topic:  fmt.Sprintf("chat/%d-%d", id, t),
						Offset: offs[t],
						Epoch:  "bench",
						Time:   time.Now(),
						Sender: "user1234",
						Type:   "TALK",
						Data:   benchData,
					}
					if bc.wait {
						wg.Add(1)
					}
					s.Append(p, done)
					if bc.wait {
						wg.Wait()
					}
				}
			})
			if err := s.Flush(); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pubs/s")
			if st.Batches > 0 {
				b.ReportMetric(float64(st.Publications)/float64(st.Batches), "pubs/batch")
				b.ReportMetric(float64(st.CommitTime.Microseconds())/float64(st.Batches), "µs/commit")
			}
		})
	}
}

// BenchmarkForEach measures startup: reading back 100 topics of 1000 publications each.
func BenchmarkForEach(b *testing.B) {
	s, err := Open(Config{Path: filepath.Join(benchDir(b), "bench.db"), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for t := range 100 {
		for off := uint64(1); off <= 1000; off++ {
			s.Append(&hub.Publication{Topic: fmt.Sprintf("chat/%d", t), Offset: off, Epoch: "e",
				Time: time.Now(), Sender: "user1234", Type: "TALK", Data: benchData}, nil)
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		err := s.ForEach(func(_ string, st TopicState) error {
			n += len(st.Publications)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "pubs/s")
}
