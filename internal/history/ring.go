// Package history holds Ring, a topic's latest publications kept in memory, bounded in count
// and age. The memory broker and the replicas of the NATS and RabbitMQ brokers keep one per
// topic.
package history

import (
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// Ring keeps the latest publications of one topic in offset order, at most its size. It relies
// on the offsets it holds being contiguous (one topic, one epoch). It is not safe for concurrent
// use: its owner locks it.
type Ring struct {
	size  int                // most publications kept
	buf   []*hub.Publication // circular; nil until the first Append, grown by doubling up to size
	head  int                // index of the oldest retained
	n     int                // retained count
	bytes int64              // Footprint of the retained publications
	// keys finds the newest retained publication of each (sender, idempotency key); nil until
	// a keyed publication is appended, so unkeyed topics pay nothing for it.
	keys map[idem]*hub.Publication
}

// idem is a publication's sender and idempotency key.
type idem struct{ sender, key string }

// NewRing returns a ring holding at most size publications (at least 1). Its buffer is
// allocated by the first Append and grows as publications come, so a topic that is only looked
// at costs a few words and one holding a few publications a few more (a durable room's window
// of 1,000 is not 8 KiB of pointers until it holds 1,000).
func NewRing(size int) Ring {
	return Ring{size: max(size, 1)}
}

// Footprint estimates the memory a retained publication holds: its data, which the transports
// also keep in two or three encodings cached on it, its names, and the struct itself.
func Footprint(p *hub.Publication) int64 {
	return int64(3*len(p.Data) + 2*len(p.Topic) + len(p.Epoch) + len(p.Sender) + len(p.Type) + 256)
}

// Append adds p as the newest, dropping the oldest when full.
func (r *Ring) Append(p *hub.Publication) {
	if r.n == len(r.buf) && len(r.buf) < r.size {
		r.grow()
	}
	r.bytes += Footprint(p)
	if p.Key != "" {
		if r.keys == nil {
			r.keys = make(map[idem]*hub.Publication)
		}
		r.keys[idem{p.Sender, p.Key}] = p
	}
	if r.n == len(r.buf) {
		r.drop(r.buf[r.head])
		r.buf[r.head] = p
		r.head = (r.head + 1) % len(r.buf)
		return
	}
	r.buf[(r.head+r.n)%len(r.buf)] = p
	r.n++
}

// grow doubles the buffer (up to size), oldest first at index 0.
func (r *Ring) grow() {
	buf := make([]*hub.Publication, min(r.size, max(4, 2*len(r.buf))))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// Expire drops publications published before cutoff.
func (r *Ring) Expire(cutoff time.Time) {
	for r.n > 0 && r.buf[r.head].Time.Before(cutoff) {
		r.drop(r.buf[r.head])
		r.buf[r.head] = nil
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	if r.n == 0 {
		r.buf, r.keys = nil, nil // an idle topic gives its buffer back
	}
}

// drop accounts for p leaving the ring: its bytes, and its key unless a newer publication of
// the same key is indexed (a publish that was not a retry: the key was reused after the TTL).
func (r *Ring) drop(p *hub.Publication) {
	r.bytes -= Footprint(p)
	if p.Key == "" {
		return
	}
	k := idem{p.Sender, p.Key}
	if r.keys[k] == p {
		delete(r.keys, k)
	}
}

// Clear drops everything and gives the buffer back.
func (r *Ring) Clear() {
	r.buf, r.keys = nil, nil
	r.head, r.n, r.bytes = 0, 0, 0
}

// Bytes is the Footprint of the retained publications.
func (r *Ring) Bytes() int64 { return r.bytes }

// Len is the number of publications retained.
func (r *Ring) Len() int { return r.n }

// Oldest is the offset of the oldest retained publication, 0 when empty.
func (r *Ring) Oldest() uint64 {
	if r.n == 0 {
		return 0
	}
	return r.buf[r.head].Offset
}

// After returns the retained publications with offset > since, oldest first, at most limit
// (limit <= 0 means all).
func (r *Ring) After(since uint64, limit int) []*hub.Publication {
	if r.n == 0 || since >= r.buf[(r.head+r.n-1)%len(r.buf)].Offset {
		return nil
	}
	first := 0 // index (from head) of the first publication after since
	if oldest := r.buf[r.head].Offset; since >= oldest {
		first = int(since - oldest + 1)
	}
	count := r.n - first
	if limit > 0 && count > limit {
		count = limit
	}
	out := make([]*hub.Publication, count)
	for i := range count {
		out[i] = r.buf[(r.head+first+i)%len(r.buf)]
	}
	return out
}

// FindKey returns the newest retained publication sender published with idempotency key key,
// nil when none is.
func (r *Ring) FindKey(sender, key string) *hub.Publication {
	return r.keys[idem{sender, key}]
}
