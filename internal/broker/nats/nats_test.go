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
	open := func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return nats.New(context.Background(), url, nats.Config{Stream: ns, Policy: policy, Logger: brokertest.Logger()})
	}
	deleteStream := func(ns string) error {
		nc, err := natsgo.Connect(srv.URL)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		return js.DeleteStream(context.Background(), ns)
	}
	return brokertest.External(srv, open, deleteStream)
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }
