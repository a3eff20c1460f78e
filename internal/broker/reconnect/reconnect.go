// Package reconnect keeps a broker's connection up: it runs one session after another, waits
// between them with backoff, and keeps the broker's ready flag, its metrics and its logs of
// losses and recoveries. Redis and RabbitMQ use it; the NATS client reconnects by itself.
package reconnect

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// maxBackoff caps the wait between failed sessions.
const maxBackoff = 2 * time.Second

// Loop runs sessions until its context ends. Its fields are set before Run and not changed
// after.
type Loop struct {
	// Name starts the log lines, e.g. "redis pub/sub" gives "redis pub/sub connection lost".
	Name string
	// Log receives losses (Warn), recoveries (Info) and failed reconnects (Debug). Never nil.
	Log *slog.Logger
	// Metrics gets Ready, and Reconnects and Outage at each recovery. Never nil.
	Metrics *brokermetrics.Metrics
	// Backoff is the first wait after a session ends; it doubles up to 2 s, and starts again
	// from Backoff once a session is ready.
	Backoff time.Duration
	// Session runs one connection until it fails or ctx ends. It calls ready once the broker can
	// publish and deliver, at most once.
	Session func(ready func()) error
	// Resubscribed is called in a new goroutine when a session other than the first is ready,
	// so the hub can fill the gap from history.
	Resubscribed func()
	// Down, if not nil, is called after each session has ended, with the broker not ready.
	Down func()
	// Immediate, if not nil, reports session errors after which the next session starts at once.
	Immediate func(error) bool

	ready atomic.Bool
}

// Ready reports whether the current session is ready.
func (l *Loop) Ready() bool { return l.ready.Load() }

// Run runs sessions until ctx ends, and closes up when the first one is ready.
func (l *Loop) Run(ctx context.Context, up chan<- struct{}) {
	var (
		first     = true
		downSince time.Time
		backoff   = l.Backoff
	)
	for ctx.Err() == nil {
		connected := false
		err := l.Session(func() {
			connected = true
			backoff = l.Backoff
			l.ready.Store(true)
			l.Metrics.Ready.Set(1)
			if first {
				first = false
				close(up)
				return
			}
			l.Metrics.Reconnects.Inc()
			l.Metrics.Outage.Observe(time.Since(downSince).Seconds())
			l.Log.Info(l.Name+" connection restored", "down_for", time.Since(downSince).Round(time.Millisecond))
			go l.Resubscribed()
		})
		l.ready.Store(false)
		l.Metrics.Ready.Set(0)
		if l.Down != nil {
			l.Down()
		}
		if ctx.Err() != nil {
			return
		}
		if connected || downSince.IsZero() {
			downSince = time.Now()
			l.Log.Warn(l.Name+" connection lost", "err", err)
		} else {
			l.Log.Debug(l.Name+" reconnect failed", "err", err)
		}
		if l.Immediate != nil && l.Immediate(err) {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}
