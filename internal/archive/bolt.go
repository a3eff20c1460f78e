package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rtlab/rtlab/internal/boltmem"
	"github.com/rtlab/rtlab/internal/hub"
)

// Bolt is a Store in a bbolt file, for one node. Layout (integers big-endian):
//
//	bucket "pubs":   topic 0x00 epoch 0x00 offset(8)  → time-ms(8) len(sender) sender len(type) type data
//	bucket "epochs": topic 0x00 epoch                 → time-ms(8) of its first stored publication
//
// Topics and epochs never hold a NUL byte, so a topic's keys sort by epoch, then offset.
type Bolt struct {
	db *bolt.DB
}

var (
	boltPubs   = []byte("pubs")
	boltEpochs = []byte("epochs")
)

// BoltOptions tune OpenBolt.
type BoltOptions struct {
	// NoSync skips fsync on commit: for tests and benchmarks only.
	NoSync bool
}

// OpenBolt opens or creates the archive file at path (its directory is created).
func OpenBolt(path string, opt BoltOptions) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("archive: create directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType, NoSync: opt.NoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("archive: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(boltPubs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(boltEpochs)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("archive: open %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

var _ Store = (*Bolt)(nil)

func boltPrefix(dst []byte, topic, epoch string) []byte {
	dst = append(dst, topic...)
	dst = append(dst, 0)
	dst = append(dst, epoch...)
	return append(dst, 0)
}

func boltKey(dst []byte, topic, epoch string, off uint64) []byte {
	return binary.BigEndian.AppendUint64(boltPrefix(dst, topic, epoch), off)
}

func boltEpochKey(topic, epoch string) []byte {
	return append(append([]byte(topic), 0), epoch...)
}

func encodeRecord(dst []byte, p *hub.Publication) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.Time.UnixMilli()))
	dst = binary.AppendUvarint(dst, uint64(len(p.Sender)))
	dst = append(dst, p.Sender...)
	dst = binary.AppendUvarint(dst, uint64(len(p.Type)))
	dst = append(dst, p.Type...)
	return append(dst, p.Data...)
}

var errCorrupt = errors.New("archive: corrupt record")

func decodeRecord(topic, epoch string, off uint64, v []byte) (*hub.Publication, error) {
	if len(v) < 8 {
		return nil, errCorrupt
	}
	p := &hub.Publication{Topic: topic, Epoch: epoch, Offset: off,
		Time: time.UnixMilli(int64(binary.BigEndian.Uint64(v))).UTC()}
	v = v[8:]
	for _, s := range []*string{&p.Sender, &p.Type} {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return nil, errCorrupt
		}
		*s, v = string(v[k:k+int(n)]), v[k+int(n):]
	}
	p.Data = append([]byte(nil), v...) // v belongs to bbolt
	return p, nil
}

// Write stores the publications not stored yet, in one transaction.
func (b *Bolt) Write(_ context.Context, pubs []*hub.Publication) (int, error) {
	n := 0
	err := b.db.Update(func(tx *bolt.Tx) error {
		n = 0
		bp, be := tx.Bucket(boltPubs), tx.Bucket(boltEpochs)
		for _, p := range pubs {
			// Fresh buffers: bbolt keeps the slices given to Put until the commit.
			k := boltKey(nil, p.Topic, p.Epoch, p.Offset)
			if bp.Get(k) != nil {
				continue
			}
			v := encodeRecord(make([]byte, 0, 8+len(p.Sender)+len(p.Type)+len(p.Data)+4), p)
			if err := bp.Put(k, v); err != nil {
				return err
			}
			n++
			ek := boltEpochKey(p.Topic, p.Epoch)
			first := be.Get(ek)
			if first == nil || int64(binary.BigEndian.Uint64(first)) > p.Time.UnixMilli() {
				if err := be.Put(ek, binary.BigEndian.AppendUint64(nil, uint64(p.Time.UnixMilli()))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("archive: write %d publications: %w", len(pubs), err)
	}
	return n, nil
}

// Count returns how many offsets in [from, to] of topic's epoch are stored.
func (b *Bolt) Count(_ context.Context, topic, epoch string, from, to uint64) (int, error) {
	n := 0
	err := b.db.View(func(tx *bolt.Tx) error {
		prefix := boltPrefix(nil, topic, epoch)
		end := boltKey(nil, topic, epoch, to)
		c := tx.Bucket(boltPubs).Cursor()
		for k, _ := c.Seek(boltKey(nil, topic, epoch, from)); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) <= 0; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// Page returns up to limit publications with offset < before, newest first.
func (b *Bolt) Page(_ context.Context, topic, epoch string, before uint64, limit int) ([]*hub.Publication, error) {
	var out []*hub.Publication
	err := b.db.View(func(tx *bolt.Tx) error {
		prefix := boltPrefix(nil, topic, epoch)
		c := tx.Bucket(boltPubs).Cursor()
		k, v := c.Seek(boltKey(nil, topic, epoch, clampOffset(before)))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Prev() {
			off := binary.BigEndian.Uint64(k[len(prefix):])
			if off >= before {
				continue
			}
			p, err := decodeRecord(topic, epoch, off, v)
			if err != nil {
				return fmt.Errorf("%s offset %d: %w", topic, off, err)
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("archive: page of %s: %w", topic, err)
	}
	return out, nil
}

type boltEpoch struct {
	epoch string
	first int64
}

func (b *Bolt) epochsTx(tx *bolt.Tx, topic string) []boltEpoch {
	prefix := append([]byte(topic), 0)
	var es []boltEpoch
	c := tx.Bucket(boltEpochs).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		es = append(es, boltEpoch{epoch: string(k[len(prefix):]), first: int64(binary.BigEndian.Uint64(v))})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].first < es[j].first })
	return es
}

// lastOffsetTx returns the latest stored offset of topic's epoch, 0 when none is.
func lastOffsetTx(tx *bolt.Tx, topic, epoch string) uint64 {
	prefix := boltPrefix(nil, topic, epoch)
	c := tx.Bucket(boltPubs).Cursor()
	k, _ := c.Seek(boltKey(nil, topic, epoch, maxOffset))
	if k == nil {
		k, _ = c.Last()
	} else if !bytes.HasPrefix(k, prefix) {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(prefix):])
}

// PrevEpoch returns the epoch stored before epoch and its latest offset.
func (b *Bolt) PrevEpoch(_ context.Context, topic, epoch string) (hub.Position, bool, error) {
	var (
		pos hub.Position
		ok  bool
	)
	err := b.db.View(func(tx *bolt.Tx) error {
		es := b.epochsTx(tx, topic)
		cut := int64(1<<63 - 1)
		for _, e := range es {
			if e.epoch == epoch {
				cut = e.first
			}
		}
		for i := len(es) - 1; i >= 0; i-- {
			if e := es[i]; e.epoch != epoch && e.first <= cut {
				if top := lastOffsetTx(tx, topic, e.epoch); top > 0 {
					pos, ok = hub.Position{Offset: top, Epoch: e.epoch}, true
					return nil
				}
			}
		}
		return nil
	})
	return pos, ok, err
}

// Prune deletes what r no longer keeps.
func (b *Bolt) Prune(_ context.Context, r Retention, now time.Time, topics []string) (int, error) {
	n := 0
	err := b.db.Update(func(tx *bolt.Tx) error {
		if r.Age > 0 {
			m, err := pruneOlderTx(tx, now.Add(-r.Age).UnixMilli())
			n += m
			if err != nil {
				return err
			}
		}
		if r.Count > 0 {
			for _, topic := range topics {
				m, err := b.pruneCountTx(tx, topic, uint64(r.Count))
				n += m
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("archive: prune: %w", err)
	}
	return n, nil
}

// pruneOlderTx deletes every publication stored before cutoff (Unix milliseconds).
func pruneOlderTx(tx *bolt.Tx, cutoff int64) (int, error) {
	n := 0
	c := tx.Bucket(boltPubs).Cursor()
	for k, v := c.First(); k != nil; {
		if len(v) >= 8 && int64(binary.BigEndian.Uint64(v)) < cutoff {
			kc := append([]byte(nil), k...)
			if err := c.Delete(); err != nil {
				return n, err
			}
			n++
			k, v = c.Seek(kc) // after Delete, Next would skip a key
			continue
		}
		k, v = c.Next()
	}
	return n, nil
}

// pruneCountTx deletes what a count retention of keep no longer keeps of topic: the newest
// epoch's publications up to its top offset minus keep, and every older epoch's once the newest
// reaches keep.
func (b *Bolt) pruneCountTx(tx *bolt.Tx, topic string, keep uint64) (int, error) {
	es := b.epochsTx(tx, topic)
	if len(es) == 0 {
		return 0, nil
	}
	newest := es[len(es)-1].epoch
	top := lastOffsetTx(tx, topic, newest)
	bp := tx.Bucket(boltPubs)
	n := 0
	for _, e := range es {
		prefix := boltPrefix(nil, topic, e.epoch)
		c := bp.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); {
			off := binary.BigEndian.Uint64(k[len(prefix):])
			drop := e.epoch != newest && top >= keep || e.epoch == newest && top > keep && off <= top-keep
			if !drop {
				break // offsets ascend: the rest of this epoch is kept
			}
			kc := append([]byte(nil), k...)
			if err := c.Delete(); err != nil {
				return n, err
			}
			n++
			k, _ = c.Seek(kc)
		}
	}
	return n, nil
}

// Close closes the file.
func (b *Bolt) Close() error { return b.db.Close() }

// ReleaseMapped takes the file's pages out of this process's resident memory (see boltmem):
// a sweep after a flood reads and writes most of the file. A no-op after Close.
func (b *Bolt) ReleaseMapped() error { return boltmem.Release(b.db) }

// String names the store for logs.
func (b *Bolt) String() string { return "bbolt " + strconv.Quote(b.db.Path()) }
