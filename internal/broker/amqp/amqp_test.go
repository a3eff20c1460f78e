package amqp_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// harness makes nodes on srv with cfg; Name, Policy, MaxBytes and Logger are the suite's.
// Unless reg is nil, each node registers its metrics there under a label node="<n>".
func harness(srv *brokertest.Server, cfg amqp.Config, reg prometheus.Registerer) brokertest.Harness {
	var nodes atomic.Int32
	open := func(ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		c := cfg
		c.Name, c.Policy, c.MaxBytes, c.Logger = ns, policy, 64<<20, brokertest.Logger()
		if reg != nil {
			node := strconv.Itoa(int(nodes.Add(1)))
			c.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, reg)
		}
		return amqp.New(context.Background(), srv.URL, c)
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

// batched sums, over every node in reg, the requests sent to the sequencer and the messages
// they took.
func batched(tb testing.TB, reg *prometheus.Registry) (pubs, messages float64) {
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rtlab_broker_request_batch_size" {
			continue
		}
		for _, m := range mf.GetMetric() {
			pubs += m.GetHistogram().GetSampleSum()
			messages += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return pubs, messages
}

func TestConformance(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	brokertest.Run(t, harness(srv, amqp.Config{}, nil))

	// With a linger, concurrent requests to the sequencer share messages.
	t.Run("LingerBatches", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		brokertest.Concurrent(t, harness(srv, amqp.Config{Linger: 20 * time.Millisecond}, reg))
		pubs, messages := batched(t, reg)
		t.Logf("%.0f requests in %.0f messages", pubs, messages)
		if messages == 0 || pubs < 2*messages {
			t.Fatalf("%.0f requests in %.0f messages: want batches of 2 or more on average", pubs, messages)
		}
	})
}

func BenchmarkBroker(b *testing.B) {
	brokertest.Bench(b, harness(brokertest.StartRabbit(b), amqp.Config{}, nil))
}
