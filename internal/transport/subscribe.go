package transport

import (
	"context"
	"fmt"

	"github.com/rtlab/rtlab/internal/hub"
)

// subscriber is a subscription's sink as its connection holds it: wsSink, sseSink, stompSub.
type subscriber interface {
	hub.Sink
	held() *subHeld
}

// subHeld is what every subscription of a streaming connection holds, whatever its transport.
// Set before the hub subscribes it; then read-only (sub is set by conn.hold).
type subHeld struct {
	key   string // what the client names it by: its topic (WebSocket, SSE), its id (STOMP)
	topic string
	sub   *hub.Subscription
	guard Guard // the policy's check before each delivery; nil: none
}

func (h *subHeld) held() *subHeld { return h }

// subscribe is the one way a streaming connection subscribes: the checks (mayHold: the
// topic's name, --max-subs, the Policy, whose guard k keeps), the hub's subscription from
// opts (hold), the client's answer (answer: where the subscription starts), and only then its
// start, so that the client hears where it starts before any publication. refused is a refusal
// of this subscription alone (--max-subs, the Policy); err is a bad request or a failure.
func (c *conn) subscribe(ctx context.Context, k subscriber, opts hub.ReadOptions, answer func(res *hub.ReadResult)) (refused, err error) {
	h := k.held()
	if h.guard, refused, err = c.mayHold(h.topic, len(c.subs)); refused != nil || err != nil {
		return refused, err
	}
	res, err := c.hold(ctx, k, opts)
	if err != nil {
		return nil, err
	}
	answer(&res)
	h.sub.Start()
	return nil, nil
}

// mayHold checks a subscription to topic on a connection that holds (or asked for) n: its
// name (err), then --max-subs and the Policy (refused), whose guard it returns.
func (c *conn) mayHold(topic string, n int) (g Guard, refused, err error) {
	if err := hub.ValidateTopic(topic); err != nil {
		return nil, nil, err
	}
	if n >= c.s.lim.MaxSubs {
		return nil, fmt.Errorf("%w: at most %d per connection", ErrTooManySubs, c.s.lim.MaxSubs), nil
	}
	g, refused = c.s.policy.CanSubscribe(c.client(), topic)
	return g, refused, nil
}

// hold subscribes k at the hub and adds it to the connection's subscriptions. The caller
// answers the client, then starts the subscription (k.held().sub.Start).
func (c *conn) hold(ctx context.Context, k subscriber, opts hub.ReadOptions) (hub.ReadResult, error) {
	sub, res, err := c.s.hub.Subscribe(ctx, k.held().topic, k, opts)
	if err != nil {
		return res, err
	}
	k.held().sub = sub
	c.subs = append(c.subs, k)
	return res, nil
}

// find returns the subscription the client names key, or nil.
func (c *conn) find(key string) subscriber {
	for _, k := range c.subs {
		if k.held().key == key {
			return k
		}
	}
	return nil
}

// unsubscribe ends the subscription the client names key; false when there is none.
func (c *conn) unsubscribe(key string) bool {
	for i, k := range c.subs {
		if k.held().key == key {
			c.drop(i)
			return true
		}
	}
	return false
}

// drop ends the i-th subscription.
func (c *conn) drop(i int) {
	c.s.hub.Unsubscribe(c.subs[i].held().sub)
	last := len(c.subs) - 1
	c.subs[i] = c.subs[last]
	c.subs[last] = nil
	c.subs = c.subs[:last]
}

// recheck asks the Policy again about every subscription (after a token refresh, whose grants
// may be narrower) and ends each it refuses, telling the client through told.
func (c *conn) recheck(told func(k subscriber, err error)) {
	for i := 0; i < len(c.subs); {
		k := c.subs[i]
		if _, err := c.s.policy.CanSubscribe(c.client(), k.held().topic); err != nil {
			c.drop(i)
			told(k, err)
			continue
		}
		i++
	}
}

// unsubscribeAll ends every subscription, as the connection ends.
func (c *conn) unsubscribeAll() {
	for i, k := range c.subs {
		c.s.hub.Unsubscribe(k.held().sub)
		c.subs[i] = nil
	}
	c.subs = nil
}
