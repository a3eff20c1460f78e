package archive_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/archive"
	"github.com/rtlab/rtlab/internal/hub"
)

// BenchmarkPage1M reads pages of 50 back from random offsets of a room with 1,000,000 archived
// publications (chat-sized: about 80 bytes of data), on bbolt and on PostgreSQL, and reports
// the latency percentiles of one page (p50-ms, p99-ms). Filling takes a while (PostgreSQL about
// a minute on the project machine), which is not timed.
//
//	go test -run '^$' -bench Page1M -benchtime 5000x ./internal/archive/
func BenchmarkPage1M(b *testing.B) {
	const total = 1_000_000
	for name, open := range benchStores() {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			t0 := time.Now().Add(-30 * 24 * time.Hour)
			batch := make([]*hub.Publication, 0, 10_000)
			for off := uint64(1); off <= total; off++ {
				batch = append(batch, pub("chat/big", "e", off, t0.Add(time.Duration(off)*time.Second)))
				if len(batch) == cap(batch) {
					if _, err := s.Write(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				before := 51 + rand.Uint64N(total-50)
				start := time.Now()
				page, err := s.Page(ctx, "chat/big", "e", before, 50)
				lat = append(lat, time.Since(start))
				if err != nil || len(page) != 50 || page[0].Offset != before-1 {
					b.Fatalf("page before %d: %d publications, %v", before, len(page), err)
				}
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}

func benchStores() map[string]func(b *testing.B) archive.Store {
	return map[string]func(b *testing.B) archive.Store{
		"bolt": func(b *testing.B) archive.Store {
			s, err := archive.OpenBolt(b.TempDir()+"/archive.db", archive.BoltOptions{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(b *testing.B) archive.Store {
			srv := startPostgres(b)
			s, err := archive.OpenPostgres(context.Background(), srv)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}
