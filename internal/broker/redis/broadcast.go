package redis

import (
	"context"

	"github.com/rtlab/rtlab/internal/hub"
)

// Broadcasts between nodes (presence, commands) go over one pub/sub channel, <prefix>:b, which
// every node subscribes to on its pub/sub connection along with its topics' channels.

var _ hub.Broadcaster = (*Broker)(nil)

func (b *Broker) broadcastChannel() string { return b.cfg.Prefix + ":b" }

// OnBroadcast makes the node receive broadcasts: the pub/sub connection subscribes to the
// broadcast channel from its next (first) session on. Call it before Run.
func (b *Broker) OnBroadcast(f func(msg []byte)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onBroadcast = f
	b.channels[b.broadcastChannel()] = struct{}{}
}

// Broadcast publishes msg on the broadcast channel; every node receives it, this one too.
func (b *Broker) Broadcast(ctx context.Context, msg []byte) error {
	publish := b.client.Publish
	if b.sharded {
		publish = b.client.SPublish // on the channel's master only, not over the cluster bus
	}
	if err := publish(ctx, b.broadcastChannel(), msg).Err(); err != nil {
		return b.wrap("broadcast", err)
	}
	return nil
}

func (b *Broker) receiveBroadcast(payload string) {
	b.mu.Lock()
	f := b.onBroadcast
	b.mu.Unlock()
	if f != nil {
		f([]byte(payload))
	}
}
