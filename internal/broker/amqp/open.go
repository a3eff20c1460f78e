package amqp

import (
	"context"

	"github.com/rtlab/rtlab/internal/broker"
)

// Open connects to the RabbitMQ at url as a node's broker and, when o.State asks, its state
// store, on one connection (each on channels of its own). Close the store first: the broker
// closes the connection.
func Open(ctx context.Context, url string, o broker.Options) (broker.Opened, error) {
	b, err := New(ctx, url, Config{Policy: o.Policy, DurableSize: o.DurableSize, Linger: o.AMQPLinger, Direct: o.AMQPDirect, Roles: o.Roles, Logger: o.Logger, Registerer: o.Registerer})
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
