package amqp

import (
	"sync"
	"time"
)

// recentRequests remembers the request ids of recently applied publications, so that a
// sequencer taking over does not append again a request its predecessor appended but had not
// acked when it stopped (RabbitMQ hands such requests to the next sequencer).
type recentRequests struct {
	window time.Duration
	mu     sync.Mutex
	ids    map[string]struct{} // guarded by mu
	order  []recentRequest     // ids in apply order, for expiry; guarded by mu
	head   int                 // order[:head] are expired; guarded by mu
}

type recentRequest struct {
	id string
	at time.Time
}

func newRecentRequests(window time.Duration) *recentRequests {
	return &recentRequests{window: window, ids: make(map[string]struct{})}
}

func (r *recentRequests) add(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = struct{}{}
	r.order = append(r.order, recentRequest{id: id, at: now})
	for r.head < len(r.order) && now.Sub(r.order[r.head].at) > r.window {
		delete(r.ids, r.order[r.head].id)
		r.head++
	}
	if r.head > len(r.order)/2 && r.head > 1024 {
		n := copy(r.order, r.order[r.head:])
		clear(r.order[n:])
		r.order, r.head = r.order[:n], 0
	}
}

func (r *recentRequests) seen(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ids[id]
	return ok
}
