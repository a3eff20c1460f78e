package nats_test

import (
	"context"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/nats"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness(tb testing.TB) brokertest.Harness {
	srv := brokertest.StartNATS(tb)
	return brokertest.Harness{
		Server:  srv,
		Shared:  true,
		Durable: true,
		Flush: func(tb testing.TB, ns string) {
			nc, err := natsgo.Connect(srv.URL)
			if err != nil {
				tb.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			if err := js.DeleteStream(context.Background(), ns); err != nil {
				tb.Fatal(err)
			}
		},
		NewNode: func(tb testing.TB, ns string, policy hub.HistoryPolicy) hub.Broker {
			b, err := nats.New(context.Background(), srv.URL, nats.Config{
				Stream: ns,
				Policy: func(string) hub.HistoryPolicy { return policy },
				Logger: brokertest.Logger(),
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
