package reconnect

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// TestLoop runs three sessions: the first gets ready and fails, the second fails before it is
// ready, the third gets ready and lasts until the context ends.
func TestLoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		sessions     int
		resubscribed = make(chan struct{})
		downs        int
	)
	m := brokermetrics.New("test")
	reg := prometheus.NewRegistry()
	m.Register(reg)
	// value returns the value of the metric name: a gauge's, a counter's or a histogram's count.
	value := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				switch {
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	l := &Loop{
		Name: "test", Log: slog.New(slog.DiscardHandler), Metrics: m,
		Backoff: time.Millisecond,
		Session: func(ready func()) error {
			sessions++
			switch sessions {
			case 1:
				ready()
				return errors.New("lost")
			case 2:
				return errors.New("refused")
			}
			ready()
			<-ctx.Done()
			return ctx.Err()
		},
		Resubscribed: func() { close(resubscribed) },
		Down:         func() { downs++ },
	}
	up := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx, up) }()
	<-up
	select {
	case <-resubscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Resubscribed not called after the third session got ready")
	}
	if !l.Ready() || value("rtlab_broker_ready") != 1 {
		t.Fatal("not ready during the third session")
	}
	if n := value("rtlab_broker_reconnects_total"); n != 1 {
		t.Fatalf("%v reconnects, want 1", n)
	}
	if n := value("rtlab_broker_resubscribe_seconds"); n != 1 {
		t.Fatalf("%v outages observed, want 1", n)
	}
	cancel()
	<-done
	if l.Ready() || value("rtlab_broker_ready") != 0 || sessions != 3 || downs != 3 {
		t.Fatalf("after the end: ready %v, %d sessions, %d downs", l.Ready(), sessions, downs)
	}
}
