package amqp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestSequencerHandover closes the node that assigns offsets while another node publishes
// without pause: another node takes over, offsets stay contiguous, nothing is applied twice.
func TestSequencerHandover(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	ns := brokertest.Namespace()
	type node struct {
		b   *amqp.Broker
		rec *brokertest.Recorder
		reg *prometheus.Registry
	}
	var nodes []*node
	for range 3 {
		reg := prometheus.NewRegistry()
		b, err := amqp.New(context.Background(), srv.URL, amqp.Config{Name: ns, Registerer: reg, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		rec := brokertest.NewRecorder()
		if err := b.Run(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		nodes = append(nodes, &node{b: b, rec: rec, reg: reg})
	}
	gauge := func(n *node, name string) float64 {
		mfs, _ := n.reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.Gauge != nil {
					return m.Gauge.GetValue()
				}
				return m.Counter.GetValue()
			}
		}
		return -1
	}
	topic := "chat/handover"
	publisher := nodes[2]
	publish := func(i int) (*hub.Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return publisher.b.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if _, err := publish(0); err != nil {
		t.Fatal(err)
	}
	seq := -1
	for i, n := range nodes {
		if gauge(n, "rtlab_broker_sequencer_active") == 1 {
			seq = i
		}
	}
	if seq < 0 || seq == 2 {
		// The first node to consume the sequencer queue is active; make sure it is not the
		// publisher, so closing it leaves the publisher running.
		t.Fatalf("sequencer is node %d, want 0 or 1", seq)
	}

	var (
		mu   sync.Mutex
		acks []*hub.Publication
		errs int
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p, err := publish(i)
			mu.Lock()
			if err != nil {
				errs++
			} else {
				acks = append(acks, p)
			}
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := nodes[seq].b.Close(); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acks) < 200 {
			return fmt.Errorf("%d publications acknowledged", len(acks))
		}
		return nil
	})
	close(stop)
	<-done
	other := 1 - seq
	if gauge(nodes[other], "rtlab_broker_sequencer_active") != 1 && gauge(publisher, "rtlab_broker_sequencer_active") != 1 {
		t.Fatal("no node took over as sequencer")
	}
	t.Logf("%d acknowledged, %d failed during the handover", len(acks), errs)
	last := acks[len(acks)-1]
	for _, n := range []*node{nodes[other], publisher} {
		n.rec.WaitCount(t, topic, int(last.Offset), 10*time.Second)
		if err := n.rec.CheckOrder(topic); err != nil {
			t.Fatal(err)
		}
		got := n.rec.Get(topic)
		if got[0].Offset != 1 || got[len(got)-1].Epoch != got[0].Epoch {
			t.Fatalf("offsets do not run 1..%d in one epoch", last.Offset)
		}
		if r := gauge(n, "rtlab_broker_log_rejected_total"); r != 0 {
			t.Errorf("%v log entries rejected", r)
		}
	}
}
