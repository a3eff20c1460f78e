package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// writeBatch writes items into tx: records, then per topic the meta row and retention. It runs
// on the committer goroutine, which owns s.groups, s.order and s.arena. A publication that
// cannot be stored gets its own error in item.err; only a storage error fails the transaction.
func (s *Store) writeBatch(tx *bolt.Tx, items []item) error {
	meta := tx.Bucket(bucketMeta)
	pubs := tx.Bucket(bucketPubs)
	// FillPercent stays at bbolt's default 0.5. Filling leaves to 95% halves the file when few
	// topics are busy, but topics share leaves (a topic's tail sits next to the next topic's
	// head), so with many busy topics it causes more splits and more pages per commit: the
	// worst case got a third slower. That case is the one that costs, so it wins.

	// Group by topic, keeping Append order inside each group, so meta and retention are done
	// once per topic and batch rather than once per publication.
	defer s.resetGroups()
	for i := range items {
		it := &items[i]
		if it.p == nil {
			continue
		}
		if it.p.Topic == "" || strings.IndexByte(it.p.Topic, 0) >= 0 {
			it.err = fmt.Errorf("%w: %q", ErrBadTopic, it.p.Topic)
			continue
		}
		g := s.groups[it.p.Topic]
		if g == nil {
			g = s.newGroup(it.p.Topic)
		}
		g.items = append(g.items, it)
	}

	// Values must stay valid until the commit (bbolt keeps references, it copies only keys).
	// They are carved out of one arena; when it grows, earlier values keep the old array.
	s.arena = s.arena[:0]
	var key []byte
	for _, g := range s.order {
		topic := g.topic
		var (
			top    uint64
			epoch  string
			exists bool
		)
		if v := meta.Get([]byte(topic)); v != nil {
			var err error
			if top, epoch, err = parseMeta(v); err != nil {
				return fmt.Errorf("topic %s: %w", topic, err)
			}
			exists = true
		}
		wrote := false
		for _, it := range g.items {
			p := it.p
			if !exists || p.Epoch != epoch {
				// A new epoch means the caller's history was reset: drop the old one so Load
				// never mixes epochs.
				if exists {
					if err := deleteThrough(pubs, topic, math.MaxUint64); err != nil {
						return fmt.Errorf("topic %s: drop epoch %s: %w", topic, epoch, err)
					}
				}
				epoch, top, exists, wrote = p.Epoch, 0, true, true
			}
			if p.Offset <= top {
				it.err = fmt.Errorf("%w: %s offset %d, stored top %d in epoch %s", ErrOutOfOrder, topic, p.Offset, top, epoch)
				continue
			}
			start := len(s.arena)
			s.arena = appendRecord(s.arena, p)
			key = appendKey(key[:0], topic, p.Offset)
			if err := pubs.Put(key, s.arena[start:len(s.arena):len(s.arena)]); err != nil {
				return fmt.Errorf("topic %s offset %d: %w", topic, p.Offset, err)
			}
			top, wrote = p.Offset, true
		}
		if !wrote {
			continue
		}
		start := len(s.arena)
		s.arena = appendMeta(s.arena, top, epoch)
		if err := meta.Put([]byte(topic), s.arena[start:len(s.arena):len(s.arena)]); err != nil {
			return fmt.Errorf("topic %s meta: %w", topic, err)
		}
		keep := s.keepFor(topic)
		if top > uint64(keep) {
			if err := deleteThrough(pubs, topic, top-uint64(keep)); err != nil {
				return fmt.Errorf("topic %s retention: %w", topic, err)
			}
		}
	}
	return nil
}

func (s *Store) keepFor(topic string) int {
	if k := s.keep(topic); k > 0 {
		return k
	}
	return DefaultKeep
}

func (s *Store) newGroup(topic string) *group {
	var g *group
	if n := len(s.order); n < cap(s.order) && s.order[:n+1][n] != nil {
		g = s.order[:n+1][n] // reuse a group from an earlier batch
	} else {
		g = new(group)
	}
	g.topic = topic
	s.order = append(s.order, g)
	s.groups[topic] = g
	return g
}

// resetGroups empties the groups for the next batch, keeping their memory.
func (s *Store) resetGroups() {
	for _, g := range s.order {
		clear(g.items)
		g.items = g.items[:0]
		g.topic = ""
	}
	s.order = s.order[:0]
	clear(s.groups)
}

// deleteThrough deletes topic's records with offsets <= last. Records are ordered by offset, so
// it deletes from the front of the topic's range and stops at the first it keeps.
func deleteThrough(pubs *bolt.Bucket, topic string, last uint64) error {
	prefix := appendPrefix(nil, topic)
	c := pubs.Cursor()
	// Seek again after each Delete: a bbolt cursor's Next skips an element after Delete.
	for k, _ := c.Seek(prefix); k != nil; k, _ = c.Seek(prefix) {
		if len(k) != len(prefix)+8 || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		if binary.BigEndian.Uint64(k[len(prefix):]) > last {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}
