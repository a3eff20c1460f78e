package nats

import (
	"context"

	natsgo "github.com/nats-io/nats.go"

	"github.com/rtlab/rtlab/internal/hub"
)

// Broadcasts between nodes (presence, commands) are core NATS messages on one subject,
// <stream>-broadcast, outside the stream's subjects: they are not kept. nats.go subscribes
// again after a reconnect by itself.

var _ hub.Broadcaster = (*Broker)(nil)

func (b *Broker) broadcastSubject() string { return b.cfg.Stream + "-broadcast" }

// OnBroadcast subscribes to the broadcast subject; f receives every node's messages, this
// node's too, in the order each node sent them.
func (b *Broker) OnBroadcast(f func(msg []byte)) {
	_, err := b.nc.Subscribe(b.broadcastSubject(), func(m *natsgo.Msg) { f(m.Data) })
	if err != nil {
		b.log.Warn("nats broker: cannot receive broadcasts", "err", err)
	}
}

// Broadcast publishes msg to every node.
func (b *Broker) Broadcast(_ context.Context, msg []byte) error {
	if err := b.nc.Publish(b.broadcastSubject(), msg); err != nil {
		return b.wrap("broadcast", err)
	}
	return nil
}
