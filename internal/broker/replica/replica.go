// Package replica is a node's copy of topics of a publication log: for each topic, its position
// and its latest publications, applied in each topic's order with their offsets. RabbitMQ's
// sequencer keeps every topic in one (it reads the whole log when it takes over) and every node
// keeps the topics it follows, seeded from the sequencer and fed by live copies; History answers
// from it without a round trip.
//
// The package also holds what the log brokers share around it: the encoding of a publication in
// the log (codec.go, NATS too) and how a per-topic policy is bounded by what the log retains
// (Policies).
package replica

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/history"
	"github.com/rtlab/rtlab/internal/hub"
)

// Shards is how many ways a Replica is sharded by topic. Brokers that serialize their own
// publishes per topic can use Shard to keep one lock per shard.
const Shards = 64

// Replica is a node's copy of every topic's recent publications. It is safe for concurrent use.
//
// A topic whose publications have all outlived their TTL is forgotten: History reports it as
// unused, and its next publication starts a new epoch (the log forgets it too).
type Replica struct {
	policy func(string) hub.HistoryPolicy // Size and TTL > 0 for every topic; immutable
	seed   maphash.Seed
	shards [Shards]shard
}

type shard struct {
	mu     sync.Mutex
	topics map[string]*topicLog // guarded by mu
}

// topicLog is one topic's state: its position and a ring of its latest publications. It is
// guarded by its shard's mu.
type topicLog struct {
	epoch string
	top   uint64        // offset of the latest publication
	seq   uint64        // log position of the latest publication
	last  time.Time     // time of the latest publication
	ttl   time.Duration // negative: never expires (a durable topic)
	ring  history.Ring
}

// Last is what a publisher needs to know about a topic's latest publication to assign the next
// offset.
type Last struct {
	Seq     uint64 // log position (stream sequence, log offset) of the topic's latest message
	Epoch   string
	Offset  uint64
	Time    time.Time // of the latest publication
	Expired bool      // the latest publication outlived its TTL: the next one starts a new epoch
}

// New returns an empty replica. policy gives each topic's history size and TTL; it must return
// Size > 0 and TTL > 0 for every topic (see Policies).
func New(policy func(topic string) hub.HistoryPolicy) *Replica {
	r := &Replica{policy: policy, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].topics = make(map[string]*topicLog)
	}
	return r
}

// Shard returns the index, below Shards, of topic's shard.
func (r *Replica) Shard(topic string) int {
	return int(maphash.String(r.seed, topic) % Shards)
}

func (r *Replica) shard(topic string) *shard { return &r.shards[r.Shard(topic)] }

// Reset forgets everything, when the log the replica was built from is gone.
func (r *Replica) Reset() {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		clear(sh.topics)
		sh.mu.Unlock()
	}
}

// Apply adds p, found at log position seq, and reports whether it is new. A publication of an
// epoch already applied at or below its offset is not: it is a duplicate, or a stale writer's,
// and every node that applies the same log ignores it alike. A jump in offsets (entries removed
// from the log before this node read them) restarts the retained history at p.
func (r *Replica) Apply(p *hub.Publication, seq uint64) bool {
	applied, _ := r.apply(p, seq, false)
	return applied
}

// ApplyNewer is Apply for a node that may read a topic's publications twice and from two
// sources (a live copy, and the log it catches up from): a publication of another epoch than
// the topic's is taken only if it is not older than the topic's latest. A topic's epochs
// follow each other in time, so an older epoch read late is stale and ignored.
func (r *Replica) ApplyNewer(p *hub.Publication, seq uint64) bool {
	applied, _ := r.apply(p, seq, true)
	return applied
}

// ApplyLive is ApplyNewer for a live copy, which also reports whether p jumped over offsets of
// its epoch that the topic lacks (copies were missed): its history then restarts at p.
func (r *Replica) ApplyLive(p *hub.Publication) (applied, jumped bool) { return r.apply(p, 0, true) }

func (r *Replica) apply(p *hub.Publication, seq uint64, newerOnly bool) (applied, jumped bool) {
	sh := r.shard(p.Topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return r.applyLocked(sh, p, seq, newerOnly)
}

func (r *Replica) applyLocked(sh *shard, p *hub.Publication, seq uint64, newerOnly bool) (applied, jumped bool) {
	t := sh.topics[p.Topic]
	if t != nil && t.epoch == p.Epoch && p.Offset <= t.top {
		return false, false
	}
	if newerOnly && t != nil && t.epoch != p.Epoch && p.Time.Before(t.last) {
		return false, false
	}
	if t == nil {
		pol := r.policy(p.Topic)
		t = &topicLog{ring: history.NewRing(pol.Size), ttl: pol.TTL}
		sh.topics[p.Topic] = t
	}
	jumped = t.epoch == p.Epoch && p.Offset != t.top+1
	if t.epoch != p.Epoch || jumped {
		t.ring.Clear()
	}
	t.epoch, t.top, t.seq, t.last = p.Epoch, p.Offset, seq, p.Time
	t.ring.Append(p)
	return true, jumped
}

// Last returns what is known of topic's latest publication, and false when the topic is unknown.
func (r *Replica) Last(topic string, now time.Time) (Last, bool) {
	sh := r.shard(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.topics[topic]
	if t == nil {
		return Last{}, false
	}
	return Last{Seq: t.seq, Epoch: t.epoch, Offset: t.top, Time: t.last, Expired: t.expired(now)}, true
}

// History answers hub.Broker.History from the replica: the retained publications after since
// (at most limit; limit <= 0 means all) that have not outlived their TTL at now.
func (r *Replica) History(topic string, since uint64, limit int, now time.Time) hub.HistoryResult {
	sh := r.shard(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.topics[topic]
	if t == nil {
		return hub.HistoryResult{}
	}
	if t.ttl >= 0 {
		t.ring.Expire(now.Add(-t.ttl))
	}
	if t.ring.Len() == 0 {
		delete(sh.topics, topic) // every publication expired: forget the topic
		return hub.HistoryResult{}
	}
	return hub.HistoryResult{
		Top:          hub.Position{Offset: t.top, Epoch: t.epoch},
		Oldest:       t.ring.Oldest(),
		Publications: t.ring.After(since, limit),
	}
}

// Sweep forgets topics whose publications all expired at now, bounding memory to live topics.
func (r *Replica) Sweep(now time.Time) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for name, t := range sh.topics {
			if t.expired(now) {
				delete(sh.topics, name)
			}
		}
		sh.mu.Unlock()
	}
}

// expired reports whether the topic's latest publication outlived its TTL at now.
func (t *topicLog) expired(now time.Time) bool { return t.ttl >= 0 && now.Sub(t.last) > t.ttl }

// DurableTopicsSince names the durable topics (negative TTL) whose latest publication is from
// since or later, for archive sweeps.
func (r *Replica) DurableTopicsSince(since time.Time) []string {
	var out []string
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for name, t := range sh.topics {
			if t.ttl < 0 && !t.last.Before(since) {
				out = append(out, name)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// SweepEvery calls Sweep every interval until ctx ends.
func (r *Replica) SweepEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Sweep(now)
		}
	}
}

// Policies fills in retention, what the log keeps per topic: its zero fields are taken from
// policy("") (when policy is not nil), then default to 100 publications and 10 minutes. It
// returns retention and the per-topic policy for New: policy(topic) narrowed to retention, since
// a replica cannot keep more than the log it is built from. A nil policy means retention for
// every topic. A topic whose policy has a negative TTL is durable: it lives in a log of its own
// that keeps durableSize publications per topic and never expires them, so its policy is
// narrowed to durableSize and keeps its negative TTL.
func Policies(retention hub.HistoryPolicy, durableSize int, policy func(topic string) hub.HistoryPolicy) (hub.HistoryPolicy, func(topic string) hub.HistoryPolicy) {
	if policy != nil {
		def := policy("")
		if retention.Size <= 0 {
			retention.Size = def.Size
		}
		if retention.TTL <= 0 {
			retention.TTL = def.TTL
		}
	}
	if retention.TTL < 0 {
		retention.TTL = 0 // the log's retention expires: a durable log is configured apart
	}
	retention = retention.Resolved()
	return retention, func(topic string) hub.HistoryPolicy {
		p := retention
		if policy != nil {
			u := policy(topic)
			if u.TTL < 0 {
				if u.Size <= 0 || u.Size > durableSize {
					u.Size = durableSize
				}
				return u
			}
			if u.Size > 0 && u.Size < p.Size {
				p.Size = u.Size
			}
			if u.TTL > 0 && u.TTL < p.TTL {
				p.TTL = u.TTL
			}
		}
		return p
	}
}

// EveryTopic is embedded by a Broker whose every node applies the whole log to its Replica: the
// node receives every topic, subscribed or not (the hub drops topics without local
// subscribers), so Subscribe and Unsubscribe have nothing to do, and whatever a later History
// does not show is delivered.
type EveryTopic struct{}

// Subscribe does nothing: the node receives every topic.
func (EveryTopic) Subscribe(context.Context, string) error { return nil }

// Unsubscribe does nothing, see Subscribe.
func (EveryTopic) Unsubscribe(context.Context, string) error { return nil }
