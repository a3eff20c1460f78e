package amqp

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/hub"
)

// Broadcasts between nodes (presence, commands) go through a fanout exchange, <name>.broadcast,
// to a queue of each node's own (exclusive: it goes with the node's connection). They are not
// logged: a message sent while a node is away is lost for it, which presence refreshes make
// up for.

var _ hub.Broadcaster = (*Broker)(nil)

func (b *Broker) broadcastX() string { return b.cfg.Name + ".broadcast" }

// OnBroadcast sets the function that receives every node's broadcasts, this node's too.
func (b *Broker) OnBroadcast(f func(msg []byte)) { b.onBroadcast.Store(&f) }

// Broadcast sends msg to every node.
func (b *Broker) Broadcast(ctx context.Context, msg []byte) error {
	s := b.session.Load()
	var ch *amqp.Channel
	if s != nil {
		ch = s.bcast.Load()
	}
	if ch == nil {
		return hub.Unavailable("amqp", errors.New("not connected"))
	}
	if err := ch.PublishWithContext(ctx, b.broadcastX(), "", false, false, amqp.Publishing{Body: msg}); err != nil {
		return hub.Unavailable("amqp", fmt.Errorf("broadcast: %w", err))
	}
	return nil
}

// startBroadcast declares the exchange and this node's queue on a channel of its own, and
// starts receiving (with run, so the session ends when receiving fails).
func (b *Broker) startBroadcast(s *session, run func(func() error)) error {
	ch, err := s.conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.ExchangeDeclare(b.broadcastX(), "fanout", false, false, false, false, nil); err != nil {
		return fmt.Errorf("declare %s: %w", b.broadcastX(), err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fmt.Errorf("declare this node's broadcast queue: %w", err)
	}
	if err := ch.QueueBind(q.Name, "", b.broadcastX(), false, nil); err != nil {
		return fmt.Errorf("bind this node's broadcast queue: %w", err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume this node's broadcast queue: %w", err)
	}
	s.bcast.Store(ch)
	run(func() error {
		for {
			select {
			case d, ok := <-msgs:
				if !ok {
					return errors.New("broadcast consumer closed")
				}
				if f := b.onBroadcast.Load(); f != nil {
					(*f)(d.Body)
				}
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
	})
	return nil
}
