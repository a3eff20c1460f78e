// Package broker holds what every broker is opened with and what opening one gives: the broker
// and the state store (on the same connection for a shared broker), and any files beside them.
// Each broker package (memory, redis, nats, amqp) has an Open of this shape, and internal/app
// lists it under the URL schemes it serves.
package broker

import (
	"context"
	"log/slog"

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
	// Shard is which of the node's Shards brokers of one kind this one is, from 0 (--broker
	// with several URLs); Shards is 0 or 1 with one URL.
	Shard, Shards int
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Opened is an open broker and, when Options.State asked for it, its state store. Close the
// store before the broker: the broker owns the connection they share.
type Opened struct {
	Broker hub.Broker
	State  state.Store
	// Files are what the broker keeps on disk beside itself (the memory broker's durable
	// topics): closed after it, their mapped pages returned with the node's other files.
	Files []File
	// DurableAt is the file durable topics are kept in, for the start-up line; empty when a
	// broker server keeps them, or none are.
	DurableAt string
}

// File is a file a broker keeps beside itself, mapped into the process (a bbolt file).
type File interface {
	Close() error
	ReleaseMapped() error
}

// OpenFunc opens the broker at url.
type OpenFunc func(ctx context.Context, url string, o Options) (Opened, error)
