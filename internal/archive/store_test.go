package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/archive"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// stores returns every Store implementation, each fresh: bbolt in a temporary file, and
// PostgreSQL on a server of the test's own (skipped when not installed).
func stores(t *testing.T) map[string]func(t *testing.T) archive.Store {
	return map[string]func(t *testing.T) archive.Store{
		"bolt": func(t *testing.T) archive.Store {
			s, err := archive.OpenBolt(filepath.Join(t.TempDir(), "archive.db"), archive.BoltOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t *testing.T) archive.Store {
			s, err := archive.OpenPostgres(context.Background(), startPostgres(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// startPostgres starts a PostgreSQL of the test's own and returns its URL.
func startPostgres(tb testing.TB) string { return brokertest.StartPostgres(tb).URL }

func pub(topic, epoch string, off uint64, at time.Time) *hub.Publication {
	return &hub.Publication{Topic: topic, Epoch: epoch, Offset: off, Time: at.Truncate(time.Millisecond).UTC(),
		Sender: "ann", Type: "TALK", Data: json.RawMessage(fmt.Sprintf(`{"message": "m%d", "n":[1, 2]}`, off))}
}

func TestStores(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			t0 := time.Now().Add(-time.Hour)
			var pubs []*hub.Publication
			for i := uint64(1); i <= 300; i++ {
				pubs = append(pubs, pub("chat/a", "e1", i, t0.Add(time.Duration(i)*time.Second)))
			}
			// Written in two overlapping halves, out of order: each publication is stored once.
			n1, err := s.Write(ctx, pubs[100:])
			if err != nil || n1 != 200 {
				t.Fatalf("first write: %d, %v", n1, err)
			}
			n2, err := s.Write(ctx, pubs[:150])
			if err != nil || n2 != 100 {
				t.Fatalf("second write: %d new, want 100; %v", n2, err)
			}
			if n, err := s.Count(ctx, "chat/a", "e1", 1, 300); err != nil || n != 300 {
				t.Fatalf("Count = %d, %v", n, err)
			}
			if n, _ := s.Count(ctx, "chat/a", "e1", 290, 400); n != 11 {
				t.Fatalf("Count(290, 400) = %d, want 11", n)
			}
			// Page back from the end to offset 1, 70 at a time.
			before, seen := uint64(^uint64(0)), 0
			for {
				page, err := s.Page(ctx, "chat/a", "e1", before, 70)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, p := range page {
					want := pubs[300-seen-1]
					if p.Offset != want.Offset || !p.Time.Equal(want.Time) || p.Sender != "ann" || p.Type != "TALK" ||
						string(p.Data) != string(want.Data) || p.Topic != "chat/a" || p.Epoch != "e1" {
						t.Fatalf("page item %+v, want %+v (data %s)", p, want, want.Data)
					}
					seen++
				}
				before = page[len(page)-1].Offset
			}
			if seen != 300 {
				t.Fatalf("paged %d, want 300", seen)
			}
			if page, _ := s.Page(ctx, "chat/other", "e1", 10, 10); len(page) != 0 {
				t.Fatalf("another topic's page: %d", len(page))
			}
			// A second epoch, later: PrevEpoch leads back to the first.
			if _, err := s.Write(ctx, []*hub.Publication{pub("chat/a", "e2", 1, t0.Add(time.Hour)), pub("chat/a", "e2", 2, t0.Add(time.Hour))}); err != nil {
				t.Fatal(err)
			}
			prev, ok, err := s.PrevEpoch(ctx, "chat/a", "e2")
			if err != nil || !ok || prev != (hub.Position{Offset: 300, Epoch: "e1"}) {
				t.Fatalf("PrevEpoch(e2) = %+v %v %v", prev, ok, err)
			}
			if _, ok, _ := s.PrevEpoch(ctx, "chat/a", "e1"); ok {
				t.Fatal("PrevEpoch(e1) found one")
			}
			// Count retention: the newest epoch holds 2, so nothing of e1 goes with Count 100.
			if _, err := s.Prune(ctx, archive.Retention{Count: 100}, time.Now(), []string{"chat/a"}); err != nil {
				t.Fatal(err)
			}
			if n, _ := s.Count(ctx, "chat/a", "e1", 1, 300); n != 300 {
				t.Fatalf("after pruning to 100 with a 2-publication newest epoch: %d of e1 left", n)
			}
			// Age retention: publications before t0+200s go.
			n, err := s.Prune(ctx, archive.Retention{Age: time.Since(t0.Add(200 * time.Second))}, time.Now(), nil)
			if err != nil || n < 199 || n > 200 {
				t.Fatalf("age prune deleted %d, %v", n, err)
			}
			if page, _ := s.Page(ctx, "chat/a", "e1", 1000, 1000); len(page) < 100 || page[len(page)-1].Offset < 200 {
				t.Fatalf("after age prune: %d left, oldest %d", len(page), page[len(page)-1].Offset)
			}
		})
	}
}

// TestConcurrentWriters: two writers store overlapping batches at once (two nodes, or a node and
// another's sweep); each publication is stored once and no write fails.
func TestConcurrentWriters(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			var wg sync.WaitGroup
			total := make([]int, 2)
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b := 0; b < 20; b++ {
						var batch []*hub.Publication
						for r := 0; r < 5; r++ {
							topic := fmt.Sprintf("chat/r%d", (r+w)%5) // rooms in another order on each writer
							for i := 0; i < 10; i++ {
								batch = append(batch, pub(topic, "e", uint64(b*10+i+1), time.Now()))
							}
						}
						n, err := s.Write(ctx, batch)
						if err != nil {
							t.Error(err)
							return
						}
						total[w] += n
					}
				}()
			}
			wg.Wait()
			if total[0]+total[1] != 5*200 {
				t.Fatalf("stored %d + %d, want %d in all", total[0], total[1], 5*200)
			}
			for r := 0; r < 5; r++ {
				if n, _ := s.Count(ctx, fmt.Sprintf("chat/r%d", r), "e", 1, 1000); n != 200 {
					t.Fatalf("room %d holds %d", r, n)
				}
			}
		})
	}
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]archive.Retention{
		"": {}, "0": {}, "100000": {Count: 100000}, "720h": {Age: 720 * time.Hour}, "30d": {Age: 30 * 24 * time.Hour},
	} {
		got, err := archive.ParseRetention(in)
		if err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "x", "-5h", "0d"} {
		if _, err := archive.ParseRetention(bad); err == nil {
			t.Errorf("ParseRetention(%q) accepted", bad)
		}
	}
}
