package amqp_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// harness makes nodes on srv with cfg; Name, Policy, MaxBytes and Logger are the suite's.
// Unless reg is nil, each node registers its metrics there under a label node="<n>".
func harness(srv *brokertest.Server, cfg amqp.Config, reg prometheus.Registerer) brokertest.Harness {
	var nodes atomic.Int32
	open := func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		c := cfg
		c.Name, c.Policy, c.MaxBytes, c.Logger = ns, policy, 64<<20, brokertest.Logger()
		if reg != nil {
			node := strconv.Itoa(int(nodes.Add(1)))
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, reg)
		}
		return amqp.New(context.Background(), url, c)
	}
	deleteLog := func(ns string) error {
		conn, err := amqp091.Dial(srv.URL)
		if err != nil {
			return err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		_, err = ch.QueueDelete(ns+".log", false, false, false)
		return err
	}
	h := brokertest.External(srv, open, deleteLog)
	h.FlushKeepsHistory = true
	return h
}

// named returns the series of metric name in reg, one per node.
func named(tb testing.TB, reg *prometheus.Registry, name string) []*dto.Metric {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// batched sums, over every node in reg, the requests sent to the sequencer and the messages
// they took.
func batched(tb testing.TB, reg *prometheus.Registry) (pubs, messages float64) {
	for _, m := range named(tb, reg, "rtlab_broker_request_batch_size") {
		pubs += m.GetHistogram().GetSampleSum()
		messages += float64(m.GetHistogram().GetSampleCount())
	}
	return pubs, messages
}

// direct is the configuration rtlab serve starts nodes with: requests go straight to the
// sequencer's node.
var direct = amqp.Config{Direct: "127.0.0.1:0"}

func TestConformance(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	reg := prometheus.NewRegistry()
	brokertest.Run(t, harness(srv, direct, reg))
	if n := counter(t, reg, "rtlab_broker_direct_requests_total"); n == 0 {
		t.Error("no request went straight to the sequencer's node")
	}

	// Without Direct, every request goes through the sequencer queue.
	t.Run("Queue", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		brokertest.Concurrent(t, harness(srv, amqp.Config{}, reg))
		if n := counter(t, reg, "rtlab_broker_direct_requests_total"); n != 0 {
			t.Errorf("%v request messages went straight to the sequencer's node, want none", n)
		}
	})

	// With a linger, concurrent requests to the sequencer share messages.
	t.Run("LingerBatches", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		brokertest.Concurrent(t, harness(srv, amqp.Config{Linger: 20 * time.Millisecond, Direct: direct.Direct}, reg))
		pubs, messages := batched(t, reg)
		t.Logf("%.0f requests in %.0f messages", pubs, messages)
		if messages == 0 || pubs < 2*messages {
			t.Fatalf("%.0f requests in %.0f messages: want batches of 2 or more on average", pubs, messages)
		}
	})
}

func BenchmarkBroker(b *testing.B) {
	brokertest.Bench(b, harness(brokertest.StartRabbit(b), direct, nil))
}

// counter sums counter name over every node in reg.
func counter(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	var sum float64
	for _, m := range named(tb, reg, name) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}
