package replica

import "github.com/rtlab/rtlab/internal/hub"

// Seed merges pubs, topic's retained publications in offset order as read from another
// replica, with what this one holds of the topic: a node that starts following a topic takes
// its history from whoever holds it, while its own live copies may already have begun. Each
// publication is applied as ApplyNewer would, the seed first, so the live copies extend it.
// whole is false when the live copies held start past the end of pubs: offsets between them
// are missing, and the topic's history restarts after the hole.
func (r *Replica) Seed(topic string, pubs []*hub.Publication) (whole bool) {
	sh := r.shard(topic)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var held []*hub.Publication
	if t := sh.topics[topic]; t != nil {
		held = t.ring.After(0, 0)
		delete(sh.topics, topic)
	}
	for _, p := range pubs {
		r.applyLocked(sh, p, 0, true)
	}
	whole = true
	for _, p := range held {
		if _, jumped := r.applyLocked(sh, p, 0, true); jumped {
			whole = false
		}
	}
	return whole
}

// Retain forgets every topic for which keep is false.
func (r *Replica) Retain(keep func(topic string) bool) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for name := range sh.topics {
			if !keep(name) {
				delete(sh.topics, name)
			}
		}
		sh.mu.Unlock()
	}
}

// Forget forgets topic.
func (r *Replica) Forget(topic string) {
	sh := r.shard(topic)
	sh.mu.Lock()
	delete(sh.topics, topic)
	sh.mu.Unlock()
}
