// Package broker holds what every shared broker is opened with and what opening one gives: the
// broker and the state store on the same connection. Each broker package (redis, nats, amqp)
// has an Open of this shape, and internal/app registers it under the URL schemes it serves.
package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/state"
)

// Options are what a node gives every broker it opens.
type Options struct {
	// Policy gives each topic's history size and TTL; a negative TTL marks a durable topic.
	Policy func(topic string) hub.HistoryPolicy
	// DurableSize is what is kept per durable topic.
	DurableSize int
	// State asks for the node's state store too (rooms, revocations); only the first of
	// several shards carries it.
	State bool
	// AMQPLinger and AMQPDirect are RabbitMQ's (--amqp-linger, --amqp-direct).
	AMQPLinger time.Duration
	AMQPDirect string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Opened is an open broker and, when Options.State asked for it, its state store. Close the
// store before the broker: the broker owns the connection they share.
type Opened struct {
	Broker hub.Broker
	State  state.Store
}

// OpenFunc opens the broker at url.
type OpenFunc func(ctx context.Context, url string, o Options) (Opened, error)
