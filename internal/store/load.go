package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/rtlab/rtlab/internal/hub"
	bolt "go.etcd.io/bbolt"
)

// Load returns topic's persisted state, or false if the topic was never persisted. It reads
// only what is committed: publications still queued by Append are not in it, so a caller that
// drops a topic from memory and loads it again must Flush first (or wait for the topic's last
// done), or it would reuse offsets.
func (s *Store) Load(topic string) (TopicState, bool, error) {
	var (
		st TopicState
		ok bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		st, ok, err = s.loadTx(tx, topic, &decoder{})
		return err
	})
	if err != nil {
		return TopicState{}, false, fmt.Errorf("store: load %s: %w", topic, err)
	}
	return st, ok, nil
}

// ForEach calls fn with every persisted topic's state, in topic name order, all from one
// consistent snapshot; it is meant for loading everything at startup. It stops at the first
// error fn returns and returns it. fn runs inside a read transaction: it must not call Flush or
// Close, and should not Append, since a long read can hold up commits.
func (s *Store) ForEach(fn func(topic string, st TopicState) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		d := &decoder{}
		c := tx.Bucket(bucketMeta).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			topic := string(k)
			st, _, err := s.loadTx(tx, topic, d)
			if err != nil {
				return fmt.Errorf("store: load %s: %w", topic, err)
			}
			if err := fn(topic, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// Topics returns the name of every persisted topic, in name order.
func (s *Store) Topics() ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: topics: %w", err)
	}
	return out, nil
}

func (s *Store) loadTx(tx *bolt.Tx, topic string, d *decoder) (TopicState, bool, error) {
	v := tx.Bucket(bucketMeta).Get([]byte(topic))
	if v == nil {
		return TopicState{}, false, nil
	}
	top, epoch, err := parseMeta(v)
	if err != nil {
		return TopicState{}, false, err
	}
	st := TopicState{Epoch: epoch, Top: top}
	keep := uint64(s.keepFor(topic))
	first := uint64(1)
	if top > keep {
		first = top - keep + 1 // Keep may have shrunk since these were written
	}
	st.Publications = make([]*hub.Publication, 0, min(top-first+1, 4096))
	prefix := appendPrefix(nil, topic)
	c := tx.Bucket(bucketPubs).Cursor()
	for k, v := c.Seek(appendKey(nil, topic, first)); k != nil; k, v = c.Next() {
		if len(k) != len(prefix)+8 || !bytes.HasPrefix(k, prefix) {
			break
		}
		off := binary.BigEndian.Uint64(k[len(prefix):])
		if off > top {
			// Cannot happen: meta and records change in one transaction.
			return TopicState{}, false, fmt.Errorf("%w: offset %d above top %d", ErrCorrupt, off, top)
		}
		p, err := d.decode(topic, epoch, off, v)
		if err != nil {
			return TopicState{}, false, err
		}
		st.Publications = append(st.Publications, p)
	}
	return st, true, nil
}
