package memory

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/store"
)

// Settings are a node's choices for the embedded broker (--data-dir, --history-max-bytes,
// --max-topics, --durable-max-bytes): Config's bounds and where its files go.
type Settings struct {
	// DataDir holds the durable topics' history (rtlab.db) and the state (state.db); empty
	// keeps both in memory.
	DataDir string
	// Durable selects the durable topics; nil means none.
	Durable         func(topic string) bool
	MaxBytes        int64
	MaxTopics       int
	DurableMaxBytes int64
}

// Open is the embedded broker with its files: the durable topics' store and the state under
// DataDir, or the state in memory without one. The url ("memory") names nothing more.
func (s Settings) Open(_ context.Context, _ string, o broker.Options) (broker.Opened, error) {
	c := Config{Policy: o.Policy, MaxBytes: s.MaxBytes, MaxTopics: s.MaxTopics, DurableMaxBytes: s.DurableMaxBytes}
	var out broker.Opened
	if s.DataDir != "" && s.Durable != nil {
		path := filepath.Join(s.DataDir, "rtlab.db")
		st, err := store.Open(store.Config{Path: path, Keep: func(string) int { return o.DurableSize }})
		if err != nil {
			return out, fmt.Errorf("--data-dir %s: %w", s.DataDir, err)
		}
		c.Store, c.Durable = st, s.Durable
		out.Files, out.DurableAt = []broker.File{st}, path
	}
	b := New(c)
	if o.Registerer != nil {
		registerStats(o.Registerer, b)
	}
	out.Broker = b
	if s.DataDir == "" {
		out.State = state.NewMemory()
		return out, nil
	}
	bs, err := state.OpenBolt(filepath.Join(s.DataDir, "state.db"))
	if err != nil {
		_ = b.Close()
		for _, f := range out.Files {
			_ = f.Close()
		}
		return broker.Opened{}, fmt.Errorf("--data-dir %s: %w", s.DataDir, err)
	}
	out.State = bs
	return out, nil
}

// registerStats exports what the broker holds against its bounds.
func registerStats(reg prometheus.Registerer, b *Broker) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtlab_history_bytes",
		Help: "Estimated memory held by the history of non-durable topics (memory broker), bounded by --history-max-bytes.",
	}, func() float64 { return float64(b.RetainedBytes()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rtlab_history_trimmed_topics_total",
		Help: "Topics whose history the memory broker dropped to stay within --history-max-bytes (least recently used first).",
	}, func() float64 { return float64(b.Trimmed()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtlab_topics_held",
		Help: "Topics the memory broker holds in memory, bounded by --max-topics.",
	}, func() float64 { return float64(b.Topics()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rtlab_durable_window_bytes",
		Help: "Estimated memory held by durable topics' windows (memory broker), bounded by --durable-max-bytes.",
	}, func() float64 { return float64(b.DurableBytes()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rtlab_topics_forgotten_total",
		Help: "Topics the memory broker took out of memory to make room (--max-topics, --durable-max-bytes); durable ones are read back from the store.",
	}, func() float64 { return float64(b.Forgotten()) }))
}
