package amqp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestSequencerFailover: the node that assigns offsets goes away while the other publishes.
// The other takes over: every publication it had asked for is published once, offsets go on
// in the same epoch without a gap, and a node started afterwards has the same history.
// With Direct, the second node's requests went straight to the first node until it closed.
func TestSequencerFailover(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	t.Run("Queue", func(t *testing.T) { testFailover(t, srv, amqp.Config{}) })
	t.Run("Direct", func(t *testing.T) { testFailover(t, srv, direct) })
}

func testFailover(t *testing.T, srv *brokertest.Server, cfg amqp.Config) {
	reg := prometheus.NewRegistry()
	h := harness(srv, cfg, reg)
	ns := brokertest.Namespace()
	policy := hub.HistoryPolicy{Size: 1000}
	const topic = "chat/failover"

	// Made and run by hand, so that the test closes it.
	first := h.NewNode(t, ns, policy)
	if err := first.Run(context.Background(), brokertest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second := brokertest.StartNode(t, h, ns, policy)
	second.Subscribe(t, topic)
	// The first node is the sequencer queue's first consumer, so it is the sequencer.
	first0 := second.Publish(t, topic, `{"i":0}`)
	sequencer := func(node string) float64 { return gauge(t, reg, "rtlab_broker_sequencer", node) }
	if sequencer("1") != 1 || sequencer("2") != 0 {
		t.Fatalf("sequencer gauges: first %v, second %v; want 1 and 0", sequencer("1"), sequencer("2"))
	}

	const n = 200
	acks := []*hub.Publication{first0}
	for i := 1; i < n; i++ {
		if i == n/2 {
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		p, err := second.Broker.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		cancel()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		acks = append(acks, p)
	}
	if sequencer("2") != 1 {
		t.Fatal("the second node did not become the sequencer")
	}
	if n := counter(t, reg, "rtlab_broker_direct_requests_total"); (n > 0) != (cfg.Direct != "") {
		t.Errorf("%v request messages went straight to the sequencer's node, with Direct %q", n, cfg.Direct)
	}
	for i, p := range acks {
		if p.Epoch != first0.Epoch || p.Offset != uint64(i+1) {
			t.Fatalf("publication %d acknowledged as %d/%s, want %d/%s", i, p.Offset, p.Epoch, i+1, first0.Epoch)
		}
	}
	second.Rec.WaitCount(t, topic, n, 10*time.Second)
	if err := second.Rec.CheckOrder(topic); err != nil {
		t.Fatal(err)
	}
	if got := len(second.Rec.Get(topic)); got != n {
		t.Fatalf("the second node's subscriber received %d publications, want %d", got, n)
	}

	third := brokertest.StartNode(t, h, ns, policy)
	want := second.History(t, topic, 0, 0)
	got := third.History(t, topic, 0, 0)
	if got.Top != want.Top || len(got.Publications) != n {
		t.Fatalf("a node started later: top %+v with %d publications, want %+v with %d", got.Top, len(got.Publications), want.Top, n)
	}
	for i, p := range got.Publications {
		if w := want.Publications[i]; p.Offset != w.Offset || string(p.Data) != string(w.Data) || !p.Time.Equal(w.Time) {
			t.Fatalf("a node started later has %d %s, the running node %d %s", p.Offset, p.Data, w.Offset, w.Data)
		}
	}
}

// gauge returns the value of gauge name labelled node="node" in reg.
func gauge(tb testing.TB, reg *prometheus.Registry, name, node string) float64 {
	tb.Helper()
	for _, m := range named(tb, reg, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "node" && l.GetValue() == node {
				return m.GetGauge().GetValue()
			}
		}
	}
	tb.Fatalf("%s not found for node %s", name, node)
	return 0
}
