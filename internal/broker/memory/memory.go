// Package memory is the embedded, in-process Broker: one node, history in memory. A restart
// loses history, and the new process uses new epochs so clients are told so, except for
// durable topics, whose history is kept in a Store and continues across restarts.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"hash/maphash"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/history"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/store"
)

// Config configures a Broker.
type Config struct {
	// Policy gives each topic's history size and TTL. Nil means hub.HistoryPolicy{} defaults
	// (100 publications, 10 minutes).
	Policy func(topic string) hub.HistoryPolicy
	// IdleTTL is how long a topic with no retained history and no activity keeps its offset
	// and epoch. Zero means 1 hour. After it the topic starts over in a new epoch.
	IdleTTL time.Duration
	// Now returns the current time. Nil means time.Now; tests set it.
	Now func() time.Time
	// Store keeps the history of topics for which Durable returns true, so their offsets and
	// epoch continue after a restart. Nil keeps every topic in memory only.
	Store *store.Store
	// Durable selects the topics kept in Store. Nil means none.
	Durable func(topic string) bool
	// MaxBytes bounds the memory the history of non-durable topics may hold, by
	// history.Footprint. Zero means DefaultMaxBytes, negative unlimited. Over it, the least
	// recently used topics lose their history; their offsets and epoch stay, so a client that
	// resumes is told plainly that the publications are gone.
	MaxBytes int64
}

// DefaultMaxBytes is Config.MaxBytes's default: 256 MiB of non-durable history.
const DefaultMaxBytes = 256 << 20

const numShards = 64

// Broker is an in-memory hub.Broker.
type Broker struct {
	cfg     Config
	seed    maphash.Seed
	shards  [numShards]shard
	handler hub.Handler // set by Run before any Publish
	stop    chan struct{}
	once    sync.Once

	retained atomic.Int64 // Footprint of the non-durable topics' history
	trimMu   sync.Mutex   // one trim at a time; others go on publishing
	trimmed  atomic.Int64 // topics whose history a trim dropped
}

var _ hub.Broker = (*Broker)(nil)

type shard struct {
	mu      sync.Mutex
	streams map[string]*stream // guarded by mu
}

// stream is one topic's offsets and history. Publishing and reading lock mu. Publications are
// queued for delivery under mu, in offset order, and delivered under deliverMu, outside mu: the
// handler may read History (the hub does when it sees a gap), which takes mu. Whoever holds
// deliverMu delivers everything queued so far, so a Publish that gets deliverMu finds its
// publication delivered, by itself or by an earlier holder. Durable publishes also take
// appendMu (before mu) while handing over to the store.
type stream struct {
	appendMu  sync.Mutex
	deliverMu sync.Mutex
	mu        sync.Mutex
	queue     []*hub.Publication // to deliver, in offset order; guarded by mu
	spare     []*hub.Publication // the other queue array, reused; guarded by deliverMu
	epoch     string
	top       uint64 // last offset assigned
	visible   uint64 // last offset readable (and queued for delivery); below top while durable commits are pending
	ring      history.Ring
	lastUsed  time.Time
	policy    hub.HistoryPolicy
	durable   bool
	loadErr   error // durable history could not be read; publishing and reading fail
}

// New returns a memory broker.
func New(cfg Config) *Broker {
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Policy == nil {
		cfg.Policy = func(string) hub.HistoryPolicy { return hub.HistoryPolicy{} }
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	b := &Broker{cfg: cfg, seed: maphash.MakeSeed(), stop: make(chan struct{})}
	for i := range b.shards {
		b.shards[i].streams = make(map[string]*stream)
	}
	return b
}

// Run registers the handler and starts the idle sweeper.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	b.handler = h
	go b.sweep(ctx)
	return nil
}

// Close stops the sweeper.
func (b *Broker) Close() error {
	b.once.Do(func() { close(b.stop) })
	return nil
}

// Ready is always true: there is nothing to lose contact with.
func (b *Broker) Ready() bool { return true }

// Subscribe is a no-op: every publication on this node is handed to the hub, which drops
// topics without subscribers.
func (b *Broker) Subscribe(context.Context, string) error { return nil }

// Unsubscribe is a no-op, see Subscribe.
func (b *Broker) Unsubscribe(context.Context, string) error { return nil }

// Publish assigns the next offset, stores the publication and delivers it. A durable topic's
// publication is delivered, and Publish returns, only once it is committed to the store.
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	now := b.cfg.Now()
	if req.Time.IsZero() {
		req.Time = now
	}
	s := b.stream(req.Topic, now, true)
	if s.durable {
		return b.publishDurable(ctx, s, req, now)
	}
	s.mu.Lock()
	before := s.ring.Bytes()
	s.expireLocked(now)
	s.top++
	p := &hub.Publication{
		Topic:  req.Topic,
		Offset: s.top,
		Epoch:  s.epoch,
		Time:   req.Time.Truncate(time.Millisecond),
		Sender: req.Sender,
		Type:   req.Type,
		Data:   req.Data,
	}
	s.ring.Append(p)
	s.visible = p.Offset
	s.lastUsed = now
	s.queue = append(s.queue, p)
	grown := s.ring.Bytes() - before
	s.mu.Unlock()
	if b.retained.Add(grown) > b.cfg.MaxBytes && b.cfg.MaxBytes > 0 {
		b.trim()
	}
	b.deliver(s)
	return p, nil
}

// trim drops the history of least recently used non-durable topics until their history fits
// in nine tenths of MaxBytes. It samples a few topics at a time, as finding the least recently
// used of all would take every shard's lock; the cost falls only on publishes over the bound.
func (b *Broker) trim() {
	if !b.trimMu.TryLock() {
		return // another publish is trimming
	}
	defer b.trimMu.Unlock()
	goal := b.cfg.MaxBytes / 10 * 9
	for misses := 0; b.retained.Load() > goal && misses < 8; {
		var victim *stream
		var oldest time.Time
		start := mrand.IntN(numShards)
		for i := range 4 {
			sh := &b.shards[(start+i*numShards/4)%numShards]
			sh.mu.Lock()
			// Map order is random: a sample of up to 8 streams that hold history, looking at 64
			// at most, since once trimming has begun most streams hold none and a sample of any
			// 8 would often find no victim.
			looked, found := 0, 0
			for _, s := range sh.streams {
				if looked++; looked > 64 || found == 8 {
					break
				}
				if s.durable {
					continue
				}
				s.mu.Lock()
				if s.ring.Len() > 0 {
					found++
					if victim == nil || s.lastUsed.Before(oldest) {
						victim, oldest = s, s.lastUsed
					}
				}
				s.mu.Unlock()
			}
			sh.mu.Unlock()
		}
		if victim == nil {
			misses++
			continue
		}
		victim.mu.Lock()
		freed := victim.ring.Bytes()
		victim.ring.Clear()
		victim.mu.Unlock()
		b.retained.Add(-freed)
		b.trimmed.Add(1)
	}
}

// RetainedBytes is the estimated memory held by non-durable topics' history.
func (b *Broker) RetainedBytes() int64 { return b.retained.Load() }

// Trimmed counts the topics whose history was dropped to stay within MaxBytes.
func (b *Broker) Trimmed() int64 { return b.trimmed.Load() }

// deliver hands everything queued on s to the handler, in order. When it returns, whatever
// was queued before the call has been delivered.
func (b *Broker) deliver(s *stream) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	s.mu.Lock()
	q := s.queue
	s.queue = s.spare[:0] // two arrays take turns, so publishing allocates nothing here
	s.mu.Unlock()
	for _, p := range q {
		b.handler.HandlePublication(p)
	}
	clear(q)
	s.spare = q
}

// publishDurable assigns the offset and hands the publication to the store under appendMu, so
// the store sees a topic's offsets in order, but does not wait for the commit under any lock:
// a topic's publishes are not serialized on fsyncs. The store calls done in append order,
// which is offset order per topic; done appends to memory under mu, then delivers. Append may
// block when the store is backed up; it never holds mu meanwhile, so done can always run.
func (b *Broker) publishDurable(ctx context.Context, s *stream, req hub.PublishRequest, now time.Time) (*hub.Publication, error) {
	s.appendMu.Lock()
	s.mu.Lock()
	if s.loadErr != nil {
		s.mu.Unlock()
		s.appendMu.Unlock()
		return nil, s.loadErr
	}
	s.top++
	p := &hub.Publication{
		Topic: req.Topic, Offset: s.top, Epoch: s.epoch, Time: req.Time.Truncate(time.Millisecond),
		Sender: req.Sender, Type: req.Type, Data: req.Data,
	}
	s.lastUsed = now
	s.mu.Unlock()
	committed := make(chan error, 1)
	b.cfg.Store.Append(p, func(err error) {
		if err == nil {
			s.mu.Lock()
			s.expireLocked(b.cfg.Now())
			s.ring.Append(p)
			s.visible = p.Offset
			s.queue = append(s.queue, p)
			s.mu.Unlock()
			b.deliver(s)
		}
		committed <- err
	})
	s.appendMu.Unlock()
	select {
	case err := <-committed:
		if err != nil {
			// The offset stays used: subscribers see the jump, nothing is silently renumbered.
			return nil, fmt.Errorf("memory: persist %s offset %d: %w", p.Topic, p.Offset, err)
		}
		return p, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// History returns retained publications after since.
// A topic nobody has published to has no epoch yet: reading it answers an empty result and
// keeps nothing, so looking up names costs no memory.
func (b *Broker) History(_ context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	now := b.cfg.Now()
	s := b.stream(topic, now, false)
	if s == nil {
		return hub.HistoryResult{}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return hub.HistoryResult{}, s.loadErr
	}
	b.expireLocked(s, now)
	s.lastUsed = now
	return hub.HistoryResult{
		Top:          hub.Position{Offset: s.visible, Epoch: s.epoch},
		Oldest:       s.ring.Oldest(),
		Publications: s.ring.After(since, limit),
	}, nil
}

// stream returns topic's stream, creating it when create is set. Without create, a topic that
// is neither in memory nor (durable) in the store gives nil.
func (b *Broker) stream(topic string, now time.Time, create bool) *stream {
	sh := &b.shards[maphash.String(b.seed, topic)%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.streams[topic]
	if s != nil {
		return s
	}
	durable := b.cfg.Store != nil && b.cfg.Durable != nil && b.cfg.Durable(topic)
	if !durable && !create {
		return nil // a read of a topic never published to: nothing to make (an epoch costs a getrandom)
	}
	pol := b.cfg.Policy(topic).Filled() // a negative TTL: kept until trimmed by Size (durable topics)
	s = &stream{ring: history.NewRing(pol.Size), policy: pol, lastUsed: now, durable: durable}
	if durable {
		st, ok, err := b.cfg.Store.Load(topic)
		switch {
		case err != nil:
			s.loadErr = fmt.Errorf("memory: load durable history of %s: %w", topic, err)
		case ok:
			s.epoch, s.top, s.visible = st.Epoch, st.Top, st.Top
			for _, p := range st.Publications {
				s.ring.Append(p)
			}
		case !create:
			return nil
		}
	}
	if s.epoch == "" {
		s.epoch = NewEpoch()
	}
	sh.streams[topic] = s
	return s
}

// TopicsSince names the topics published to or read since since, and, when since is zero,
// every topic kept in the store: what an archive sweep must look at.
func (b *Broker) TopicsSince(_ context.Context, since time.Time) ([]string, error) {
	var out []string
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for name, s := range sh.streams {
			s.mu.Lock()
			if !s.lastUsed.Before(since) {
				out = append(out, name)
			}
			s.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	if since.IsZero() && b.cfg.Store != nil {
		topics, err := b.cfg.Store.Topics()
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		out = append(out, topics...)
	}
	return out, nil
}

// expireLocked is stream.expireLocked that keeps the broker's count of retained bytes.
func (b *Broker) expireLocked(s *stream, now time.Time) {
	before := s.ring.Bytes()
	s.expireLocked(now)
	if !s.durable {
		b.retained.Add(s.ring.Bytes() - before)
	}
}

// expireLocked drops publications older than the TTL (a negative TTL keeps them).
func (s *stream) expireLocked(now time.Time) {
	if s.policy.TTL < 0 {
		return
	}
	s.ring.Expire(now.Add(-s.policy.TTL))
}

// sweep forgets idle topics whose history expired, so memory stays bounded by live topics.
func (b *Broker) sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.stop:
			return
		case <-t.C:
		}
		now := b.cfg.Now()
		for i := range b.shards {
			sh := &b.shards[i]
			sh.mu.Lock()
			for name, s := range sh.streams {
				s.mu.Lock()
				b.expireLocked(s, now)
				// Durable topics may be forgotten too: their state is reloaded from the store.
				idle := s.ring.Len() == 0 && now.Sub(s.lastUsed) > b.cfg.IdleTTL
				s.mu.Unlock()
				if idle {
					delete(sh.streams, name)
				}
			}
			sh.mu.Unlock()
		}
	}
}

// NewEpoch returns a short random epoch name.
func NewEpoch() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
