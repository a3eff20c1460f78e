package memory_test

import (
	"testing"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness() brokertest.Harness {
	return brokertest.Harness{
		NewNode: func(_ testing.TB, _ string, policy hub.HistoryPolicy) hub.Broker {
			return memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy { return policy }})
		},
		NewNodeFunc: func(_ testing.TB, _ string, policy func(string) hub.HistoryPolicy) hub.Broker {
			return memory.New(memory.Config{Policy: policy})
		},
	}
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness()) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness()) }
