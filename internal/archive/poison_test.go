package archive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/archive"
	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestPoisonRowSetAside: PostgreSQL refuses a publication whose sender holds a NUL (text columns
// cannot). The archive used to retry that batch forever, and nothing after it was archived; now
// the row is set aside and counted, and everything else, before and after it, is stored.
func TestPoisonRowSetAside(t *testing.T) {
	ctx := context.Background()
	s, err := archive.OpenPostgres(ctx, startPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	bad := pub("chat/a", "e1", 3, time.Now())
	bad.Sender = "eve\x00"
	if _, err := s.Write(ctx, []*hub.Publication{bad}); !errors.Is(err, archive.ErrRefused) {
		t.Fatalf("writing a NUL sender: %v, want ErrRefused", err)
	}
	reg := prometheus.NewRegistry()
	a := archive.New(archive.Config{Store: s, Source: memory.New(memory.Config{}), Durable: func(string) bool { return true },
		Registerer: reg, Sweep: time.Hour})
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.Run(actx)
	defer a.Close(5 * time.Second)
	for off := uint64(1); off <= 10; off++ {
		p := pub("chat/a", "e1", off, time.Now())
		if off == 3 {
			p = bad
		}
		a.Added(p)
	}
	eventually.True(t, 10*time.Second, "the other nine archived", func() bool {
		n, err := s.Count(ctx, "chat/a", "e1", 1, 10)
		return err == nil && n == 9
	})
	refused := 0.0
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "rtlab_archive_refused_total" {
			refused = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if refused != 1 {
		t.Fatalf("rtlab_archive_refused_total %v, want 1", refused)
	}
}
