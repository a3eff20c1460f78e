package amqp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

// harness makes nodes on srv with cfg; Name, Policy, MaxBytes and Logger are the suite's.
// Each node registers its metrics in a registry of its own added to regs, unless regs is nil.
func harness(srv *brokertest.Server, cfg amqp.Config, regs *registries) brokertest.Harness {
	open := func(ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		c := cfg
		c.Name, c.Policy, c.MaxBytes, c.Logger = ns, policy, 64<<20, brokertest.Logger()
		if regs != nil {
			reg := prometheus.NewRegistry()
			regs.add(reg)
			c.Registerer = reg
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
	return brokertest.External(srv, open, deleteLog)
}

// registries collects the registry of every node a harness makes.
type registries struct {
	mu   sync.Mutex
	regs []*prometheus.Registry
}

func (r *registries) add(reg *prometheus.Registry) {
	r.mu.Lock()
	r.regs = append(r.regs, reg)
	r.mu.Unlock()
}

// batched sums, over every node, the publications appended and the messages they took.
func (r *registries) batched(tb testing.TB) (pubs, messages float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range r.regs {
		mfs, err := reg.Gather()
		if err != nil {
			tb.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "rtlab_broker_log_batch_size" {
				h := mf.GetMetric()[0].GetHistogram()
				pubs += h.GetSampleSum()
				messages += float64(h.GetSampleCount())
			}
		}
	}
	return pubs, messages
}

func TestConformance(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	brokertest.Run(t, harness(srv, amqp.Config{}, nil))

	// With a linger, concurrent publications share messages, and every node still counts
	// them alike.
	t.Run("LingerBatches", func(t *testing.T) {
		regs := &registries{}
		brokertest.Concurrent(t, harness(srv, amqp.Config{Linger: 20 * time.Millisecond}, regs))
		pubs, messages := regs.batched(t)
		t.Logf("%.0f publications in %.0f messages", pubs, messages)
		if messages == 0 || pubs < 2*messages {
			t.Fatalf("%.0f publications in %.0f messages: want batches of 2 or more on average", pubs, messages)
		}
	})
}

func BenchmarkBroker(b *testing.B) {
	brokertest.Bench(b, harness(brokertest.StartRabbit(b), amqp.Config{}, nil))
}
