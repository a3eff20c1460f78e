package amqp

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// replica is this node's copy of every topic's recent publications, built by applying the
// log (the stream queue) in order. Every node applies the same log in the same order, so every
// node's replica holds the same offsets, epochs and history. History answers from it.
//
// A topic whose publications have all outlived their TTL is forgotten: History reports it as
// unused, and its next publication starts a new epoch .
type replica struct {
	policy func(string) hub.HistoryPolicy // filled in: Size and TTL > 0
	seed   maphash.Seed
	shards [numShards]replicaShard
}

const numShards = 64

type replicaShard struct {
	mu     sync.Mutex
	topics map[string]*topicLog // guarded by mu
}

// topicLog is one topic's state: its position and a ring of its latest publications.
type topicLog struct {
	epoch string
	top   uint64    // offset of the latest publication
	seq   uint64    // log offset of the latest publication
	last  time.Time // time of the latest publication
	ttl   time.Duration
	ring  []*hub.Publication // circular, len == cap == policy size
	head  int                // index of the oldest retained
	n     int                // retained count
}

// lastPub is what a publisher needs to know about a topic to publish the next offset.
type lastPub struct {
	seq     uint64 // log offset of the topic's latest message
	epoch   string
	offset  uint64
	time    time.Time // of the latest publication
	expired bool      // the latest publication outlived its TTL: the next one starts a new epoch
}

func newReplica(policy func(string) hub.HistoryPolicy) *replica {
	r := &replica{policy: policy, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].topics = make(map[string]*topicLog)
	}
	return r
}

func (r *replica) shardIndex(topic string) int {
	return int(maphash.String(r.seed, topic) % numShards)
}

func (r *replica) shard(topic string) *replicaShard { return &r.shards[r.shardIndex(topic)] }

// reset forgets everything, when the log it was built from is gone.
func (r *replica) reset() {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		clear(sh.topics)
		sh.mu.Unlock()
	}
}

// apply adds p, found at log offset seq, and reports whether it is new: a publication of an
// epoch already applied at or below its offset is a duplicate or a stale sequencer's, and every
// node ignores it alike. A jump in offsets (log entries removed before this node read them)
// restarts the retained history at p.
func (r *replica) apply(p *hub.Publication, seq uint64) bool {
	sh := r.shard(p.Topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.topics[p.Topic]
	if t != nil && t.epoch == p.Epoch && p.Offset <= t.top {
		return false
	}
	if t == nil {
		pol := r.policy(p.Topic)
		t = &topicLog{ring: make([]*hub.Publication, pol.Size), ttl: pol.TTL}
		sh.topics[p.Topic] = t
	}
	if t.epoch != p.Epoch || p.Offset != t.top+1 {
		t.clearLocked()
	}
	t.epoch, t.top, t.seq, t.last = p.Epoch, p.Offset, seq, p.Time
	t.appendLocked(p)
	return true
}

// last returns what is known of topic's latest publication.
func (r *replica) last(topic string, now time.Time) (lastPub, bool) {
	sh := r.shard(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.topics[topic]
	if t == nil {
		return lastPub{}, false
	}
	return lastPub{seq: t.seq, epoch: t.epoch, offset: t.top, time: t.last, expired: now.Sub(t.last) > t.ttl}, true
}

// history answers Broker.History from the replica.
func (r *replica) history(topic string, since uint64, limit int, now time.Time) hub.HistoryResult {
	sh := r.shard(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.topics[topic]
	if t == nil {
		return hub.HistoryResult{}
	}
	t.expireLocked(now)
	if t.n == 0 {
		delete(sh.topics, topic) // every publication expired: forget the topic
		return hub.HistoryResult{}
	}
	res := hub.HistoryResult{Top: hub.Position{Offset: t.top, Epoch: t.epoch}}
	oldest := t.ring[t.head].Offset
	res.Oldest = oldest
	if since >= t.top {
		return res
	}
	first := 0
	if since >= oldest {
		first = int(since - oldest + 1)
	}
	count := t.n - first
	if limit > 0 && count > limit {
		count = limit
	}
	res.Publications = make([]*hub.Publication, count)
	for i := range count {
		res.Publications[i] = t.ring[(t.head+first+i)%len(t.ring)]
	}
	return res
}

// sweep forgets topics whose publications all expired, bounding memory to live topics.
func (r *replica) sweep(now time.Time) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for name, t := range sh.topics {
			if now.Sub(t.last) > t.ttl {
				delete(sh.topics, name)
			}
		}
		sh.mu.Unlock()
	}
}

func (t *topicLog) clearLocked() {
	clear(t.ring)
	t.head, t.n = 0, 0
}

func (t *topicLog) appendLocked(p *hub.Publication) {
	if t.n == len(t.ring) {
		t.ring[t.head] = p
		t.head = (t.head + 1) % len(t.ring)
		return
	}
	t.ring[(t.head+t.n)%len(t.ring)] = p
	t.n++
}

func (t *topicLog) expireLocked(now time.Time) {
	cutoff := now.Add(-t.ttl)
	for t.n > 0 && t.ring[t.head].Time.Before(cutoff) {
		t.ring[t.head] = nil
		t.head = (t.head + 1) % len(t.ring)
		t.n--
	}
}

// recentRequests remembers the request ids of recently applied publications, so that a
// sequencer taking over does not append again a request its predecessor appended but had not
// acked when it stopped (RabbitMQ hands such requests to the next sequencer).
type recentRequests struct {
	window time.Duration
	mu     sync.Mutex
	ids    map[string]struct{} // guarded by mu
	order  []recentRequest     // ids in apply order, for expiry; guarded by mu
	head   int                 // order[:head] are expired; guarded by mu
}

type recentRequest struct {
	id string
	at time.Time
}

func newRecentRequests(window time.Duration) *recentRequests {
	return &recentRequests{window: window, ids: make(map[string]struct{})}
}

func (r *recentRequests) add(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = struct{}{}
	r.order = append(r.order, recentRequest{id: id, at: now})
	for r.head < len(r.order) && now.Sub(r.order[r.head].at) > r.window {
		delete(r.ids, r.order[r.head].id)
		r.head++
	}
	if r.head > len(r.order)/2 && r.head > 1024 {
		n := copy(r.order, r.order[r.head:])
		clear(r.order[n:])
		r.order, r.head = r.order[:n], 0
	}
}

func (r *recentRequests) seen(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}
