// Package shard is a hub.Broker that spreads topics over several independent brokers (Redis
// instances, say): each topic lives on one of them, chosen by a consistent hash of its name,
// which decides its offsets, keeps its history and carries its publications. So each topic is
// ordered by one server, as with a single broker, but the work of ordering all topics divides
// by the number of shards, and a node subscribes on a topic's shard only.
//
// The hash is jump consistent hashing (Lamping and Veach, 2014) of the topic's FNV-1a hash, as
// Centrifugo shards Redis: every node with the same list, in the same order, puts a topic on the
// same shard, and appending a shard moves only 1/N of the topics. Reordering or removing shards
// moves topics to a shard that does not know them: their next publication starts a new epoch
// there, so clients are told, as after a wiped broker.
//
// Broadcasts (presence, commands) go through the first shard, which carries little traffic.
package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// Broker is a hub.Broker over several shards. It is safe for concurrent use.
type Broker struct {
	shards []hub.Broker
}

var (
	_ hub.Broker      = (*Broker)(nil)
	_ hub.Broadcaster = (*Broker)(nil)
)

// New returns a Broker over shards, which it owns (Close closes them). Every node must list the
// same shards in the same order.
func New(shards []hub.Broker) (*Broker, error) {
	if len(shards) == 0 {
		return nil, errors.New("shard: no broker")
	}
	return &Broker{shards: shards}, nil
}

// Index is the shard of topic among n: jump consistent hash of topic's FNV-1a hash.
func Index(topic string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(topic))
	key := h.Sum64()
	var b, j int64 = -1, 0
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

func (b *Broker) of(topic string) hub.Broker { return b.shards[Index(topic, len(b.shards))] }

// Shards returns the brokers, in order.
func (b *Broker) Shards() []hub.Broker { return b.shards }

// Run starts every shard, in parallel, with h as the handler of each: a shard that recovered
// from an outage calls h.HandleResubscribed, and the hub checks all its topics, which is more
// than needed but rare.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	errs := make([]error, len(b.shards))
	var wg sync.WaitGroup
	for i, s := range b.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx, h); err != nil {
				errs[i] = fmt.Errorf("shard %d: %w", i+1, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	return b.of(req.Topic).Publish(ctx, req)
}

func (b *Broker) Subscribe(ctx context.Context, topic string) error {
	return b.of(topic).Subscribe(ctx, topic)
}

func (b *Broker) Unsubscribe(ctx context.Context, topic string) error {
	return b.of(topic).Unsubscribe(ctx, topic)
}

func (b *Broker) History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	return b.of(topic).History(ctx, topic, since, limit)
}

// Ready reports whether every shard is ready: with one down, its topics cannot be served, and
// /readyz says so.
func (b *Broker) Ready() bool {
	for _, s := range b.shards {
		if !s.Ready() {
			return false
		}
	}
	return true
}

func (b *Broker) Close() error {
	errs := make([]error, len(b.shards))
	for i, s := range b.shards {
		errs[i] = s.Close()
	}
	return errors.Join(errs...)
}

// Broadcast sends msg through the first shard, when it carries broadcasts.
func (b *Broker) Broadcast(ctx context.Context, msg []byte) error {
	if bc, ok := b.shards[0].(hub.Broadcaster); ok {
		return bc.Broadcast(ctx, msg)
	}
	return nil
}

// OnBroadcast sets the receiver of the first shard's broadcasts.
func (b *Broker) OnBroadcast(f func(msg []byte)) {
	if bc, ok := b.shards[0].(hub.Broadcaster); ok {
		bc.OnBroadcast(f)
	}
}

type topicLister interface {
	TopicsSince(ctx context.Context, since time.Time) ([]string, error)
}

// TopicsSince names the durable topics published to since since on every shard that can name
// them (archive sweeps).
func (b *Broker) TopicsSince(ctx context.Context, since time.Time) ([]string, error) {
	var all []string
	for i, s := range b.shards {
		l, ok := s.(topicLister)
		if !ok {
			continue
		}
		ts, err := l.TopicsSince(ctx, since)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i+1, err)
		}
		all = append(all, ts...)
	}
	return all, nil
}
