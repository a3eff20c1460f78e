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
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/history"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/shrink"
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
	// MaxTopics bounds the topics held in memory. Zero means DefaultMaxTopics, negative
	// unlimited. A new topic over it makes room by forgetting the least recently used topic
	// without subscribers (among a sample); a topic with subscribers is never forgotten.
	MaxTopics int
	// DurableMaxBytes bounds the memory held by durable topics' windows, by history.Footprint.
	// Zero means DefaultDurableMaxBytes, negative unlimited. Over it, the least recently used
	// durable topics leave memory; they are read back from the Store when next used.
	DurableMaxBytes int64
	// DurableIdle is how long a durable topic without subscribers stays in memory unused. Zero
	// means one minute.
	DurableIdle time.Duration
}

// Defaults of Config's bounds.
const (
	DefaultMaxBytes        = 256 << 20 // non-durable history
	DefaultMaxTopics       = 100_000
	DefaultDurableMaxBytes = 64 << 20 // durable windows in memory
)

const numShards = 64

// Broker is an in-memory hub.Broker.
type Broker struct {
	cfg     Config
	seed    maphash.Seed
	shards  [numShards]shard
	handler hub.Handler // set by Run before any Publish
	stop    chan struct{}
	once    sync.Once

	retained  atomic.Int64 // Footprint of the non-durable topics' history
	durBytes  atomic.Int64 // Footprint of the durable topics' windows held in memory
	topics    atomic.Int64 // streams held in memory
	trimMu    sync.Mutex   // one trim at a time; others go on publishing
	shedMu    sync.Mutex   // one shedDurable at a time
	trimmed   atomic.Int64 // topics whose history a trim dropped
	forgotten atomic.Int64 // topics forgotten to make room (MaxTopics, DurableMaxBytes)
}

var _ hub.Broker = (*Broker)(nil)

type shard struct {
	mu      sync.Mutex
	streams shrink.Map[string, *stream] // guarded by mu
	subs    map[string]bool             // topics this node's hub subscribed to; guarded by mu
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
	loadErr   error  // durable history could not be read; publishing and reading fail
	sender    string // who published last: trimming takes from the largest publishers first
	gone      bool   // forgotten (no longer in its shard): a publisher holding it looks again
	// pending holds the keyed durable publications handed to the store and not yet committed,
	// each with a channel closed when its commit ends, so a retry meanwhile waits for it
	// rather than publishing again. Nil until a keyed durable publish; guarded by mu.
	pending map[retryKey]chan struct{}
}

// retryKey is a publication's sender and idempotency key.
type retryKey struct{ sender, key string }

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
	if cfg.MaxTopics == 0 {
		cfg.MaxTopics = DefaultMaxTopics
	}
	if cfg.DurableMaxBytes == 0 {
		cfg.DurableMaxBytes = DefaultDurableMaxBytes
	}
	if cfg.DurableIdle <= 0 {
		cfg.DurableIdle = time.Minute
	}
	b := &Broker{cfg: cfg, seed: maphash.MakeSeed(), stop: make(chan struct{})}
	for i := range b.shards {
		b.shards[i].streams = shrink.NewMap[string, *stream](numShards)
		b.shards[i].subs = make(map[string]bool)
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

// Subscribe notes that the hub has subscribers on topic, so it is never forgotten to make
// room. Every publication on this node is handed to the hub anyway, which drops topics
// without subscribers.
func (b *Broker) Subscribe(_ context.Context, topic string) error {
	sh := b.shard(topic)
	sh.mu.Lock()
	sh.subs[topic] = true
	sh.mu.Unlock()
	return nil
}

// Unsubscribe undoes Subscribe.
func (b *Broker) Unsubscribe(_ context.Context, topic string) error {
	sh := b.shard(topic)
	sh.mu.Lock()
	delete(sh.subs, topic)
	sh.mu.Unlock()
	return nil
}

func (b *Broker) shard(topic string) *shard {
	return &b.shards[maphash.String(b.seed, topic)%numShards]
}

// Publish assigns the next offset, stores the publication and delivers it. A durable topic's
// publication is delivered, and Publish returns, only once it is committed to the store.
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	now := b.cfg.Now()
	if req.Time.IsZero() {
		req.Time = now
	}
	s, err := b.stream(req.Topic, now, true)
	if err != nil {
		return nil, err
	}
	if s.durable {
		return b.publishDurable(ctx, s, req, now)
	}
	s.mu.Lock()
	if s.gone { // forgotten since it was looked up: publish on the one there now
		s.mu.Unlock()
		return b.Publish(ctx, req)
	}
	before := s.ring.Bytes()
	s.expireLocked(now)
	if req.Key != "" {
		if orig := s.ring.FindKey(req.Sender, req.Key); orig != nil {
			s.mu.Unlock()
			return hub.Duplicate(orig), nil
		}
	}
	s.top++
	p := &hub.Publication{
		Topic:  req.Topic,
		Offset: s.top,
		Epoch:  s.epoch,
		Time:   req.Time.Truncate(time.Millisecond),
		Sender: req.Sender,
		Type:   req.Type,
		Data:   req.Data,
		Key:    req.Key,
	}
	s.ring.Append(p)
	s.visible = p.Offset
	s.lastUsed = now
	s.sender = req.Sender
	s.queue = append(s.queue, p)
	grown := s.ring.Bytes() - before
	s.mu.Unlock()
	if b.retained.Add(grown) > b.cfg.MaxBytes && b.cfg.MaxBytes > 0 {
		b.trim()
	}
	b.deliver(s)
	return p, nil
}

// trim drops the history of non-durable topics until it fits in nine tenths of MaxBytes,
// taking from the largest publishers first: the topics whose last publisher holds the most
// history lose theirs, least recently used first. A client flooding topics trims its own,
// never the idle topics others published to while it holds more than they do. It looks at
// every topic (at most MaxTopics); the cost falls only on the publish that went over.
func (b *Broker) trim() {
	if !b.trimMu.TryLock() {
		return // another publish is trimming
	}
	defer b.trimMu.Unlock()
	type held struct {
		s    *stream
		used time.Time
	}
	by := make(map[string][]held) // publisher → its topics holding history
	total := make(map[string]int64)
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for _, s := range sh.streams.M {
			if s.durable {
				continue
			}
			s.mu.Lock()
			if n := s.ring.Bytes(); n > 0 {
				by[s.sender] = append(by[s.sender], held{s, s.lastUsed})
				total[s.sender] += n
			}
			s.mu.Unlock()
		}
		sh.mu.Unlock()
	}
	for _, hs := range by {
		slices.SortFunc(hs, func(a, b held) int { return a.used.Compare(b.used) })
	}
	goal := b.cfg.MaxBytes / 10 * 9
	for b.retained.Load() > goal {
		who, most := "", int64(0)
		for k, n := range total {
			if n > most {
				who, most = k, n
			}
		}
		if most == 0 {
			return
		}
		h := by[who][0]
		if by[who] = by[who][1:]; len(by[who]) == 0 {
			delete(total, who)
		}
		h.s.mu.Lock()
		freed := h.s.ring.Bytes()
		h.s.ring.Clear()
		h.s.mu.Unlock()
		b.retained.Add(-freed)
		if _, ok := total[who]; ok {
			total[who] -= freed
		}
		b.trimmed.Add(1)
	}
}

// makeRoom forgets the least recently used topic without subscribers among a sample (32 of
// them, shard after shard from a random one), so a new topic fits within MaxTopics. It
// reports whether it forgot one.
func (b *Broker) makeRoom() bool {
	for range 3 {
		var victim *stream
		var vsh *shard
		var vname string
		var vused time.Time
		start, looked := mrand.IntN(numShards), 0
		for i := 0; i < numShards && looked < 32; i++ {
			sh := &b.shards[(start+i)%numShards]
			sh.mu.Lock()
			for name, s := range sh.streams.M { // map order is random
				if sh.subs[name] {
					continue
				}
				if looked++; looked > 32 {
					break
				}
				s.mu.Lock()
				if victim == nil || s.lastUsed.Before(vused) {
					victim, vsh, vname, vused = s, sh, name, s.lastUsed
				}
				s.mu.Unlock()
			}
			sh.mu.Unlock()
		}
		if victim == nil {
			return false // every topic has subscribers
		}
		vsh.mu.Lock()
		ok := vsh.streams.M[vname] == victim && b.forgetLocked(vsh, vname, victim, false)
		vsh.mu.Unlock()
		if ok {
			b.forgotten.Add(1)
			return true
		}
	}
	return false
}

// shedDurable takes the least recently used durable topics out of memory until their windows
// fit in nine tenths of DurableMaxBytes. Nothing is lost: they are read back from the store.
func (b *Broker) shedDurable() {
	if !b.shedMu.TryLock() {
		return
	}
	defer b.shedMu.Unlock()
	type held struct {
		name string
		s    *stream
		sh   *shard
		used time.Time
	}
	var hs []held
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for name, s := range sh.streams.M {
			if s.durable {
				s.mu.Lock()
				hs = append(hs, held{name, s, sh, s.lastUsed})
				s.mu.Unlock()
			}
		}
		sh.mu.Unlock()
	}
	slices.SortFunc(hs, func(a, b held) int { return a.used.Compare(b.used) })
	goal := b.cfg.DurableMaxBytes / 10 * 9
	for _, h := range hs {
		if b.durBytes.Load() <= goal {
			return
		}
		h.sh.mu.Lock()
		// Subscribed or not: a durable topic's window is in the store, read back when next used.
		ok := h.sh.streams.M[h.name] == h.s && b.forgetLocked(h.sh, h.name, h.s, true)
		h.sh.mu.Unlock()
		if ok {
			b.forgotten.Add(1)
		}
	}
}

// forgetLocked takes s out of sh when it may go: it has no subscribers on this node (unless
// force), and a durable topic has nothing waiting for the store, which holds all of it then.
// The caller holds sh.mu.
func (b *Broker) forgetLocked(sh *shard, name string, s *stream, force bool) bool {
	if !force && sh.subs[name] {
		return false
	}
	if s.durable {
		if !s.appendMu.TryLock() {
			return false // a publish is handing over to the store
		}
		defer s.appendMu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.durable && s.visible != s.top {
		return false
	}
	s.gone = true
	if s.durable {
		b.durBytes.Add(-s.ring.Bytes())
	} else {
		b.retained.Add(-s.ring.Bytes())
	}
	sh.streams.Delete(name)
	b.topics.Add(-1)
	return true
}

// RetainedBytes is the estimated memory held by non-durable topics' history.
func (b *Broker) RetainedBytes() int64 { return b.retained.Load() }

// Trimmed counts the topics whose history was dropped to stay within MaxBytes.
func (b *Broker) Trimmed() int64 { return b.trimmed.Load() }

// DurableBytes is the estimated memory held by durable topics' windows.
func (b *Broker) DurableBytes() int64 { return b.durBytes.Load() }

// Topics is the number of topics held in memory.
func (b *Broker) Topics() int64 { return b.topics.Load() }

// Forgotten counts the topics taken out of memory to make room (MaxTopics, DurableMaxBytes).
func (b *Broker) Forgotten() int64 { return b.forgotten.Load() }

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
	if s.gone { // forgotten since it was looked up: publish on the one there now
		s.mu.Unlock()
		s.appendMu.Unlock()
		return b.Publish(ctx, req)
	}
	if s.loadErr != nil {
		s.mu.Unlock()
		s.appendMu.Unlock()
		return nil, s.loadErr
	}
	if req.Key != "" {
		orig, wait := s.retryOfLocked(req)
		if orig != nil || wait != nil {
			s.mu.Unlock()
			s.appendMu.Unlock()
			return b.answerRetry(ctx, req, orig, wait)
		}
	}
	s.top++
	p := &hub.Publication{
		Topic: req.Topic, Offset: s.top, Epoch: s.epoch, Time: req.Time.Truncate(time.Millisecond),
		Sender: req.Sender, Type: req.Type, Data: req.Data, Key: req.Key,
	}
	s.lastUsed = now
	s.sender = req.Sender
	if req.Key != "" {
		if s.pending == nil {
			s.pending = make(map[retryKey]chan struct{})
		}
		s.pending[retryKey{req.Sender, req.Key}] = make(chan struct{})
	}
	s.mu.Unlock()
	committed := make(chan error, 1)
	b.cfg.Store.Append(p, func(err error) {
		b.commitDone(s, p, err)
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

// retryOfLocked finds an earlier publication of req's key: retained (orig), or handed to the
// store and not yet committed (wait, closed when its commit ends). The caller holds s.mu.
func (s *stream) retryOfLocked(req hub.PublishRequest) (orig *hub.Publication, wait chan struct{}) {
	if orig = s.ring.FindKey(req.Sender, req.Key); orig != nil {
		return orig, nil
	}
	return nil, s.pending[retryKey{req.Sender, req.Key}]
}

// answerRetry answers a retry: with the original's position, or, while the original's commit
// is pending, with whatever a publish finds once it ends (the position if it was committed, a
// new publication if it failed).
func (b *Broker) answerRetry(ctx context.Context, req hub.PublishRequest, orig *hub.Publication, wait chan struct{}) (*hub.Publication, error) {
	if orig != nil {
		return hub.Duplicate(orig), nil
	}
	select {
	case <-wait:
		return b.Publish(ctx, req)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// commitDone is the store's answer for p: committed, p is retained and delivered. Either way
// a retry waiting for p's commit goes on.
func (b *Broker) commitDone(s *stream, p *hub.Publication, err error) {
	s.mu.Lock()
	if p.Key != "" {
		k := retryKey{p.Sender, p.Key}
		close(s.pending[k])
		if delete(s.pending, k); len(s.pending) == 0 {
			s.pending = nil
		}
	}
	if err != nil {
		s.mu.Unlock()
		return
	}
	before := s.ring.Bytes()
	s.expireLocked(b.cfg.Now())
	s.ring.Append(p)
	s.visible = p.Offset
	s.queue = append(s.queue, p)
	grown := s.ring.Bytes() - before
	s.mu.Unlock()
	if b.durBytes.Add(grown) > b.cfg.DurableMaxBytes && b.cfg.DurableMaxBytes > 0 {
		go b.shedDurable() // not on the store's goroutine, which calls done
	}
	b.deliver(s)
}

// History returns retained publications after since.
// A topic nobody has published to has no epoch yet: reading it answers an empty result and
// keeps nothing, so looking up names costs no memory.
func (b *Broker) History(_ context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	now := b.cfg.Now()
	s, err := b.stream(topic, now, false)
	if err != nil || s == nil {
		return hub.HistoryResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return hub.HistoryResult{}, s.loadErr
	}
	b.expireLocked(s, now)
	if !s.durable {
		// A durable topic's use is its publishes: the archive reads every topic published to at
		// each sweep, and reads counting as use would keep every room in memory for good.
		s.lastUsed = now
	}
	return hub.HistoryResult{
		Top:          hub.Position{Offset: s.visible, Epoch: s.epoch},
		Oldest:       s.ring.Oldest(),
		Publications: s.ring.After(since, limit),
	}, nil
}

// stream returns topic's stream, creating it when create is set. Without create, a topic that
// is neither in memory nor (durable) in the store gives nil, and a durable one read from the
// store is answered from without being kept: reading rooms (an archive's sweep after a
// restart) brings none of them into memory.
func (b *Broker) stream(topic string, now time.Time, create bool) (*stream, error) {
	sh := b.shard(topic)
	sh.mu.Lock()
	s := sh.streams.M[topic]
	sh.mu.Unlock()
	if s != nil {
		return s, nil
	}
	durable := b.cfg.Store != nil && b.cfg.Durable != nil && b.cfg.Durable(topic)
	if !durable && !create {
		return nil, nil // a read of a topic never published to: nothing to make (an epoch costs a getrandom)
	}
	if create && b.cfg.MaxTopics > 0 && b.topics.Load() >= int64(b.cfg.MaxTopics) && !b.makeRoom() {
		return nil, fmt.Errorf("%w: %d topics held, each with subscribers (--max-topics)", hub.ErrTooManyTopics, b.cfg.MaxTopics)
	}
	pol := b.cfg.Policy(topic).Resolved() // a negative TTL: kept until trimmed by Size (durable topics)
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
			return nil, nil
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cur := sh.streams.M[topic]; cur != nil {
		return cur, nil // made meanwhile by another caller
	}
	if !create {
		return s, nil // a durable topic read: answered, not kept
	}
	if s.epoch == "" {
		s.epoch = NewEpoch()
	}
	sh.streams.Set(topic, s)
	b.topics.Add(1)
	if durable {
		b.durBytes.Add(s.ring.Bytes())
	}
	return s, nil
}

// TopicsSince names the topics in memory published to (a non-durable one: or read) since
// since, and, when since is zero, every topic kept in the store: what an archive sweep must
// look at.
func (b *Broker) TopicsSince(_ context.Context, since time.Time) ([]string, error) {
	var out []string
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for name, s := range sh.streams.M {
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
		before := b.retained.Load() + b.durBytes.Load()
		b.sweepOnce(b.cfg.Now())
		if freed := before - b.retained.Load() - b.durBytes.Load(); freed > 32<<20 {
			// A flood has gone: give its memory back to the system now rather than over many
			// minutes (a full collection, at most once a minute and only after one).
			debug.FreeOSMemory()
		}
	}
}

// sweepOnce expires history and forgets idle topics.
func (b *Broker) sweepOnce(now time.Time) {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for name, s := range sh.streams.M {
			s.mu.Lock()
			b.expireLocked(s, now)
			idle := s.ring.Len() == 0 && now.Sub(s.lastUsed) > b.cfg.IdleTTL
			// Durable topics leave memory sooner: their state is read back from the store.
			idle = idle || (s.durable && now.Sub(s.lastUsed) > b.cfg.DurableIdle)
			s.mu.Unlock()
			if idle {
				b.forgetLocked(sh, name, s, false)
			}
		}
		sh.streams.Tidy()
		sh.mu.Unlock()
	}
}

// NewEpoch returns a short random epoch name.
func NewEpoch() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
