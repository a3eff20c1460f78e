package redis

import (
	"context"

	"github.com/rtlab/rtlab/internal/broker"
)

// Open connects to the Redis (or Redis Cluster) at url as a node's broker and, when o.State
// asks, its state store, both on one client. The broker owns the client; the store does not
// close it, so close the store first (broker.Opened).
func Open(ctx context.Context, url string, o broker.Options) (broker.Opened, error) {
	cfg := Config{Policy: o.Policy, Logger: o.Logger, Registerer: o.Registerer}
	if err := cfg.fill(); err != nil {
		return broker.Opened{}, err
	}
	client, err := dial(ctx, url)
	if err != nil {
		return broker.Opened{}, err
	}
	out := broker.Opened{Broker: newBroker(client, IsCluster(url), cfg)}
	if o.State {
		out.State = NewState(client, "rtlab")
	}
	return out, nil
}
