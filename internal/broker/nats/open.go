package nats

import (
	"context"

	"github.com/rtlab/rtlab/internal/broker"
)

// Open connects to the NATS server at url as a node's broker and, when o.State asks, its
// state store, on one connection: the broker's, which the store does not close.
func Open(ctx context.Context, url string, o broker.Options) (broker.Opened, error) {
	b, err := New(ctx, url, Config{Policy: o.Policy, DurableSize: o.DurableSize, Logger: o.Logger, Registerer: o.Registerer})
	if err != nil {
		return broker.Opened{}, err
	}
	out := broker.Opened{Broker: b}
	if o.State {
		st, err := openState(ctx, b.js, "rtlab-state")
		if err != nil {
			_ = b.Close()
			return broker.Opened{}, err
		}
		out.State = st
	}
	return out, nil
}
