// Package broker holds what every shared broker is opened with and what opening one gives: the
// broker and the state store on the same connection. Each broker package (redis, nats, amqp)
// has an Open of this shape, and internal/app registers it under the URL schemes it serves.
package broker

import (
	"context"
	"log/slog"
	"sync/atomic"
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
	// Roles is shared by the shards of one node, to spread the roles that order topics over
	// nodes (RabbitMQ's sequencers); nil with one URL.
	Roles      *Roles
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Roles counts the shards whose topics a node orders, out of the shards it was opened with, so
// that a shard's broker can leave its role to another node once this one holds its share. It
// is safe for concurrent use.
type Roles struct {
	shards int
	held   atomic.Int64
}

// NewRoles returns the count for a node of shards shards, holding none.
func NewRoles(shards int) *Roles { return &Roles{shards: shards} }

// Shards is how many shards the node has.
func (r *Roles) Shards() int { return r.shards }

// Share is the most roles one of nodes nodes should hold: ceil(shards/nodes).
func (r *Roles) Share(nodes int) int { return (r.shards + nodes - 1) / nodes }

// Held is how many roles the node holds.
func (r *Roles) Held() int { return int(r.held.Load()) }

// Take takes a role if the node holds fewer than share, and reports whether it did.
func (r *Roles) Take(share int) bool {
	for {
		n := r.held.Load()
		if n >= int64(share) {
			return false
		}
		if r.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Leave gives a role up if the node holds more than share, and reports whether it did.
func (r *Roles) Leave(share int) bool {
	for {
		n := r.held.Load()
		if n <= int64(share) {
			return false
		}
		if r.held.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Force takes a role whatever the node holds.
func (r *Roles) Force() { r.held.Add(1) }

// Release gives a role up.
func (r *Roles) Release() { r.held.Add(-1) }

// Opened is an open broker and, when Options.State asked for it, its state store. Close the
// store before the broker: the broker owns the connection they share.
type Opened struct {
	Broker hub.Broker
	State  state.Store
}

// OpenFunc opens the broker at url.
type OpenFunc func(ctx context.Context, url string, o Options) (Opened, error)
