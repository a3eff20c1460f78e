package auth

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrTooManyRevocations refuses a revocation when the list is full of unexpired ones.
var ErrTooManyRevocations = errors.New("auth: too many revoked tokens")

// DefaultMaxRevocations bounds a Revocations whose max is zero.
const DefaultMaxRevocations = 100_000

// Revocations is the set of revoked token ids, each kept until its token would have expired
// anyway. It is bounded: when full of unexpired entries, Add refuses. Safe for concurrent use.
type Revocations struct {
	max int
	now func() time.Time

	mu        sync.RWMutex
	ids       map[string]time.Time // id → the token's expiry; guarded by mu
	nextPrune time.Time            // guarded by mu
}

// NewRevocations returns an empty set of at most max entries (zero: DefaultMaxRevocations).
func NewRevocations(max int, now func() time.Time) *Revocations {
	if max <= 0 {
		max = DefaultMaxRevocations
	}
	if now == nil {
		now = time.Now
	}
	return &Revocations{max: max, now: now, ids: make(map[string]time.Time)}
}

// Add revokes id until exp. Adding an expired or present id does nothing and succeeds.
func (r *Revocations) Add(id string, exp time.Time) error {
	now := r.now()
	if !exp.After(now) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ids[id]; ok {
		return nil
	}
	// Drop expired entries at most once a minute, or when full.
	if now.After(r.nextPrune) || len(r.ids) >= r.max {
		for k, e := range r.ids {
			if !e.After(now) {
				delete(r.ids, k)
			}
		}
		r.nextPrune = now.Add(time.Minute)
	}
	if len(r.ids) >= r.max {
		return fmt.Errorf("%w: %d unexpired revocations, at most %d", ErrTooManyRevocations, len(r.ids), r.max)
	}
	r.ids[id] = exp
	return nil
}

// Has reports whether id is revoked.
func (r *Revocations) Has(id string) bool {
	r.mu.RLock()
	exp, ok := r.ids[id]
	r.mu.RUnlock()
	return ok && exp.After(r.now())
}

// Len reports how many entries are held, expired ones not yet dropped included.
func (r *Revocations) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.ids)
}
