// Package state keeps the application's small shared records: chat rooms' owners and members,
// revoked tokens. They are state of their own, never rebuilt from a topic's bounded history,
// and the same on every node. This package holds the contract, the memory and bbolt backends
// (the memory broker's); each shared broker's package holds its own beside it, on the broker's
// connection (a Redis hash, a JetStream key-value bucket, a RabbitMQ stream folded by every node).
//
// A record is a small value with a revision. Writers change it by compare-and-set: read,
// modify, Put with the revision read; a concurrent change makes the Put fail with
// ErrConflict, and Update reads and tries again.
package state

import (
	"context"
	"errors"
	"fmt"
)

// Errors of a Store.
var (
	// ErrConflict: the record changed since it was read (or exists, for a create).
	ErrConflict = errors.New("state: record changed concurrently")
	// ErrTooLarge: a value over MaxValue.
	ErrTooLarge = errors.New("state: value too large")
)

// MaxValue bounds one record's value.
const MaxValue = 256 << 10

// Record is a stored value and its revision. Rev 0 means the record does not exist.
type Record struct {
	Value []byte
	Rev   uint64
}

// Store holds records by kind and name. Every method is safe for concurrent use. A Get after a
// Put on the same node returns what was put or newer.
type Store interface {
	// Get returns the record, or Rev 0 when there is none.
	Get(ctx context.Context, kind, name string) (Record, error)
	// Put stores value if the record's revision is still rev (0: it must not exist) and
	// returns the new revision, or ErrConflict.
	Put(ctx context.Context, kind, name string, value []byte, rev uint64) (uint64, error)
	// Delete removes the record; a missing record is no error.
	Delete(ctx context.Context, kind, name string) error
	// List calls fn with every record of kind, in no particular order.
	List(ctx context.Context, kind string, fn func(name string, value []byte)) error
	// Close releases the store's resources.
	Close() error
}

// maxTries bounds Update's retries under contention.
const maxTries = 64

// ErrUnchanged, returned by an Update function, leaves the record as it is; Update then
// returns the current value and no error.
var ErrUnchanged = errors.New("state: unchanged")

// Update changes a record by compare-and-set: fn gets the current value (nil when missing)
// and returns the new one, or an error that Update returns as is (ErrUnchanged: keep the
// current value, no error). fn may be called more than once.
func Update(ctx context.Context, s Store, kind, name string, fn func(cur []byte) ([]byte, error)) ([]byte, error) {
	for range maxTries {
		rec, err := s.Get(ctx, kind, name)
		if err != nil {
			return nil, err
		}
		next, err := fn(rec.Value)
		if errors.Is(err, ErrUnchanged) {
			return rec.Value, nil
		}
		if err != nil {
			return nil, err
		}
		if len(next) > MaxValue {
			return nil, fmt.Errorf("%w: %s %s would be %d bytes, at most %d", ErrTooLarge, kind, name, len(next), MaxValue)
		}
		_, err = s.Put(ctx, kind, name, next, rec.Rev)
		if errors.Is(err, ErrConflict) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return next, nil
	}
	return nil, fmt.Errorf("%w: %s %s: gave up after %d tries", ErrConflict, kind, name, maxTries)
}
