package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rtlab/rtlab/internal/boltmem"
)

// Bolt is a Store in a bbolt file of its own (the memory broker's, under --data-dir). A value
// is stored behind its 8-byte revision; revisions come from one sequence, so they never repeat.
// Puts from concurrent writers share a transaction (bbolt's Batch): one fsync for many.
type Bolt struct {
	db *bolt.DB
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens (creating) the file at path.
func OpenBolt(path string) (*Bolt, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("state: open %s: %w", path, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond
	return &Bolt{db: db}, nil
}

func (b *Bolt) Get(_ context.Context, kind, name string) (Record, error) {
	var rec Record
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte(kind)); bk != nil {
			rec = decodeBolt(bk.Get([]byte(name)))
		}
		return nil
	})
	return rec, err
}

func decodeBolt(v []byte) Record {
	if len(v) < 8 {
		return Record{}
	}
	return Record{Rev: binary.BigEndian.Uint64(v), Value: append([]byte(nil), v[8:]...)}
}

func (b *Bolt) Put(_ context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	if len(value) > MaxValue {
		return 0, ErrTooLarge
	}
	var next uint64
	err := b.db.Batch(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte(kind))
		if err != nil {
			return err
		}
		if decodeBolt(bk.Get([]byte(name))).Rev != rev {
			return ErrConflict
		}
		if next, err = bk.NextSequence(); err != nil {
			return err
		}
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), next)
		return bk.Put([]byte(name), append(v, value...))
	})
	if err != nil {
		return 0, err
	}
	return next, nil
}

func (b *Bolt) Delete(_ context.Context, kind, name string) error {
	return b.db.Batch(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte(kind)); bk != nil {
			return bk.Delete([]byte(name))
		}
		return nil
	})
}

func (b *Bolt) List(_ context.Context, kind string, fn func(string, []byte)) error {
	return b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(kind))
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			fn(string(k), decodeBolt(v).Value)
			return nil
		})
	})
}

func (b *Bolt) Close() error { return b.db.Close() }

// ReleaseMapped takes the file's pages out of this process's resident memory (see boltmem).
func (b *Bolt) ReleaseMapped() error { return boltmem.Release(b.db) }
