package state

import (
	"context"
	"sync"
)

// Memory is a Store in this process's memory: for a server without --data-dir, and tests.
type Memory struct {
	mu   sync.Mutex
	rev  uint64                       // last revision handed out; guarded by mu
	recs map[string]map[string]Record // kind → name → record; guarded by mu
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{recs: make(map[string]map[string]Record)} }

func (m *Memory) Get(_ context.Context, kind, name string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[kind][name], nil
}

func (m *Memory) Put(_ context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	if len(value) > MaxValue {
		return 0, ErrTooLarge
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[kind][name].Rev != rev {
		return 0, ErrConflict
	}
	if m.recs[kind] == nil {
		m.recs[kind] = make(map[string]Record)
	}
	m.rev++
	m.recs[kind][name] = Record{Value: append([]byte(nil), value...), Rev: m.rev}
	return m.rev, nil
}

func (m *Memory) Delete(_ context.Context, kind, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs[kind], name)
	return nil
}

func (m *Memory) List(_ context.Context, kind string, fn func(string, []byte)) error {
	m.mu.Lock()
	recs := make(map[string][]byte, len(m.recs[kind]))
	for n, r := range m.recs[kind] {
		recs[n] = r.Value
	}
	m.mu.Unlock()
	for n, v := range recs {
		fn(n, v)
	}
	return nil
}

func (m *Memory) Close() error { return nil }
