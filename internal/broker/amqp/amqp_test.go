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
	return brokertest.Harness{
		Server:  srv,
		Shared:  true,
		Durable: true,
		Flush: func(tb testing.TB, ns string) {
			conn, err := amqp091.Dial(srv.URL)
			if err != nil {
				tb.Fatal(err)
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := ch.QueueDelete(ns+".log", false, false, false); err != nil {
				tb.Fatal(err)
			}
		},
		NewNode: func(tb testing.TB, ns string, policy hub.HistoryPolicy) hub.Broker {
			b, err := amqp.New(context.Background(), srv.URL, amqp.Config{
				Name:     ns,
				Policy:   func(string) hub.HistoryPolicy { return policy },
				MaxBytes: 64 << 20,
				Logger:   brokertest.Logger(),
			})
			if err != nil {
				tb.Fatal(err)
			}
			return b
		},
	}
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }
