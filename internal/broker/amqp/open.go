package amqp

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/broker"
)

// Settings are a node's RabbitMQ choices (--amqp-linger, --amqp-direct, --amqp-retry-ids):
// Config's Linger, Direct and RetryIDs, the same for every shard.
type Settings struct {
	Linger   time.Duration
	Direct   string
	RetryIDs int
}

// Opener returns the Open of a node's RabbitMQ brokers. Its shards (Options.Shards over one)
// share one count of sequencer roles, spreading the sequencers over the nodes, and each takes
// the direct port after the previous shard's, as each may be a sequencer on this node.
func (s Settings) Opener() broker.OpenFunc {
	var (
		mu    sync.Mutex
		roles *Roles
	)
	return func(ctx context.Context, url string, o broker.Options) (broker.Opened, error) {
		mu.Lock()
		if roles == nil && o.Shards > 1 {
			roles = NewRoles(o.Shards)
		}
		r := roles
		mu.Unlock()
		return open(ctx, url, o, Config{Linger: s.Linger, Direct: shardAddr(s.Direct, o.Shard), Roles: r, RetryIDs: s.RetryIDs})
	}
}

// shardAddr is the direct address of shard i: addr's port plus i, or addr itself when it takes
// any free port (port 0) or is not host:port.
func shardAddr(addr string, i int) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" || i == 0 {
		return addr
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i))
}

// Open connects to the RabbitMQ at url as a node's broker and, when o.State asks, its state
// store, with Settings' zero values (no linger, no direct requests).
func Open(ctx context.Context, url string, o broker.Options) (broker.Opened, error) {
	return open(ctx, url, o, Config{})
}

// open connects to the RabbitMQ at url with c's RabbitMQ settings as a node's broker and, when
// o.State asks, its state store, on one connection (each on channels of its own). Close the
// store first: the broker closes the connection.
func open(ctx context.Context, url string, o broker.Options, c Config) (broker.Opened, error) {
	c.Policy, c.DurableSize, c.Logger, c.Registerer = o.Policy, o.DurableSize, o.Logger, o.Registerer
	b, err := New(ctx, url, c)
	if err != nil {
		return broker.Opened{}, err
	}
	out := broker.Opened{Broker: b}
	if o.State {
		st, err := openState(ctx, b.conns, false, "rtlab.state")
		if err != nil {
			_ = b.Close()
			return broker.Opened{}, err
		}
		out.State = st
	}
	return out, nil
}
