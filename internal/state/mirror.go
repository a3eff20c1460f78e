package state

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The marker record: its value names the shared store's current epoch. A store that lost its
// data (a Redis restarted without persistence, FLUSHALL) has none, or one a node set since.
const (
	kindEpoch = "epoch"
	nameEpoch = "marker"
)

// Mirror is a shared Store (on a broker that may lose its data) with this node's copy of every
// record it read or wrote beside it. When the shared store comes back empty, the node writes
// its copies back (create-only: what another node restored first, or wrote since, stays) and
// sets a new epoch marker, so every other node restores what it knows too and runs its
// OnRestore functions (a node started after the loss then learns the revocations). The loss is
// noticed by a check every interval, and at once when a record this node holds is missing.
// The copy holds no more than the shared store does.
type Mirror struct {
	shared   Store
	log      *slog.Logger
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	restoring sync.Mutex // one restore at a time

	mu      sync.Mutex
	recs    map[string]map[string][]byte // kind → name → value; guarded by mu
	epoch   string                       // the marker last seen; guarded by mu
	restore []func(context.Context)      // guarded by mu
}

var _ Store = (*Mirror)(nil)

// NewMirror wraps shared, setting its epoch marker when it has none, and checks the marker
// every interval until Close.
func NewMirror(ctx context.Context, shared Store, interval time.Duration, log *slog.Logger) (*Mirror, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{shared: shared, log: log, interval: interval, done: make(chan struct{}),
		recs: make(map[string]map[string][]byte)}
	if _, err := m.check(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.watch(wctx)
	return m, nil
}

// OnRestore adds fn, run (with the watch's context) after the shared store was found empty or
// at a new epoch and this node's copies were written back.
func (m *Mirror) OnRestore(fn func(context.Context)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restore = append(m.restore, fn)
}

func (m *Mirror) watch(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Long enough to write back many records, one round trip each.
			cctx, cancel := context.WithTimeout(ctx, max(m.interval, 30*time.Second))
			_, _ = m.check(cctx) // the broker is down: the next tick tries again
			cancel()
		}
	}
}

// check reads the marker; when it is missing or not the one last seen, it writes this node's
// copies back, sets a new marker if it wrote any (or there was none) and runs the OnRestore
// functions. It reports whether the epoch had changed.
func (m *Mirror) check(ctx context.Context) (bool, error) {
	fns, wrote, err := m.restoreOnce(ctx)
	if err != nil || fns == nil {
		return false, err
	}
	m.log.Warn("the broker's state store is at a new epoch (it lost its data, or another node restored it): this node's rooms and revocations written back", "records", wrote)
	for _, fn := range fns {
		fn(ctx) // unlocked: fn may read the store
	}
	return true, nil
}

// restoreOnce is check's locked part: it returns the OnRestore functions to run (nil when the
// epoch is the one last seen, or is the first this node sees) and how many records it wrote.
func (m *Mirror) restoreOnce(ctx context.Context) ([]func(context.Context), int, error) {
	m.restoring.Lock()
	defer m.restoring.Unlock()
	r, err := m.shared.Get(ctx, kindEpoch, nameEpoch)
	if err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	known, first := m.epoch, m.epoch == ""
	m.mu.Unlock()
	if r.Rev != 0 && string(r.Value) == known {
		return nil, 0, nil
	}
	wrote, err := m.writeBack(ctx)
	if err != nil {
		return nil, wrote, err
	}
	cur := string(r.Value)
	if r.Rev == 0 || wrote > 0 {
		if cur, err = m.newEpoch(ctx, r.Rev); err != nil {
			return nil, wrote, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch = cur
	if first {
		return nil, wrote, nil
	}
	return append([]func(context.Context){}, m.restore...), wrote, nil
}

// newEpoch sets a new marker over revision rev and returns the marker then current.
func (m *Mirror) newEpoch(ctx context.Context, rev uint64) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	_, err := m.shared.Put(ctx, kindEpoch, nameEpoch, []byte(id), rev)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, ErrConflict) {
		return "", fmt.Errorf("state: new epoch marker: %w", err)
	}
	r, err := m.shared.Get(ctx, kindEpoch, nameEpoch) // another node set one first
	if err != nil {
		return "", err
	}
	return string(r.Value), nil
}

// writeBack creates every record of the copy that the shared store lacks.
func (m *Mirror) writeBack(ctx context.Context) (int, error) {
	type rec struct {
		kind, name string
		value      []byte
	}
	var all []rec
	m.mu.Lock()
	for kind, byName := range m.recs {
		for name, v := range byName {
			all = append(all, rec{kind, name, v})
		}
	}
	m.mu.Unlock()
	wrote := 0
	for _, r := range all {
		_, err := m.shared.Put(ctx, r.kind, r.name, r.value, 0)
		switch {
		case err == nil:
			wrote++
		case !errors.Is(err, ErrConflict):
			return wrote, fmt.Errorf("state: write back %s %s: %w", r.kind, r.name, err)
		}
	}
	return wrote, nil
}

func (m *Mirror) keep(kind, name string, v []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[kind] == nil {
		m.recs[kind] = make(map[string][]byte)
	}
	if cur, ok := m.recs[kind][name]; ok && bytes.Equal(cur, v) {
		return // the common read of an unchanged record: no copy
	}
	m.recs[kind][name] = append([]byte(nil), v...)
}

func (m *Mirror) forget(kind, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs[kind], name)
}

func (m *Mirror) has(kind, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.recs[kind][name]
	return ok
}

// Remember keeps a copy of a record another node wrote and announced.
func (m *Mirror) Remember(kind, name string, value []byte) { m.keep(kind, name, value) }

// Get reads the shared record. One this node holds but the shared store lacks was either
// deleted by another node or lost with the store's data: the marker tells which.
func (m *Mirror) Get(ctx context.Context, kind, name string) (Record, error) {
	r, err := m.shared.Get(ctx, kind, name)
	if err != nil {
		return r, err
	}
	if r.Rev == 0 && m.has(kind, name) {
		changed, err := m.check(ctx)
		if err != nil {
			return Record{}, err
		}
		// Read again even when the epoch is unchanged: the watch may have restored it meanwhile.
		if r, err = m.shared.Get(ctx, kind, name); err != nil {
			return r, err
		}
		if r.Rev == 0 && !changed {
			m.forget(kind, name)
		}
	}
	if r.Rev != 0 {
		m.keep(kind, name, r.Value)
	}
	return r, nil
}

func (m *Mirror) Put(ctx context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	n, err := m.shared.Put(ctx, kind, name, value, rev)
	if err == nil {
		m.keep(kind, name, value)
	}
	return n, err
}

func (m *Mirror) Delete(ctx context.Context, kind, name string) error {
	m.forget(kind, name)
	return m.shared.Delete(ctx, kind, name)
}

func (m *Mirror) List(ctx context.Context, kind string, fn func(string, []byte)) error {
	return m.shared.List(ctx, kind, func(name string, v []byte) {
		m.keep(kind, name, v)
		fn(name, v)
	})
}

// Close stops the check and closes the shared store.
func (m *Mirror) Close() error {
	m.cancel()
	<-m.done
	return m.shared.Close()
}
