package amqp_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness(tb testing.TB) brokertest.Harness {
	srv := brokertest.StartRabbit(tb)
	open := func(ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return amqp.New(context.Background(), srv.URL, amqp.Config{Name: ns, Policy: policy, MaxBytes: 64 << 20, Logger: brokertest.Logger()})
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

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }
