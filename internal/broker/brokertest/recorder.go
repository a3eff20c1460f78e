package brokertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// Recorder is a hub.Handler that keeps every publication it is given, per topic, and notes
// contract violations: concurrent calls for one topic.
type Recorder struct {
	mu       sync.Mutex
	byTopic  map[string][]*hub.Publication // guarded by mu
	inFlight map[string]bool               // topics inside HandlePublication; guarded by mu
	errs     []error                       // guarded by mu

	Resubscribed atomic.Int64 // HandleResubscribed calls
}

var _ hub.Handler = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{byTopic: map[string][]*hub.Publication{}, inFlight: map[string]bool{}}
}

// HandlePublication records p.
func (r *Recorder) HandlePublication(p *hub.Publication) {
	r.mu.Lock()
	if r.inFlight[p.Topic] {
		r.errs = append(r.errs, fmt.Errorf("HandlePublication called concurrently for %s", p.Topic))
	}
	r.inFlight[p.Topic] = true
	r.mu.Unlock()
	time.Sleep(0) // widen the window a concurrent call would hit
	r.mu.Lock()
	r.byTopic[p.Topic] = append(r.byTopic[p.Topic], p)
	delete(r.inFlight, p.Topic)
	r.mu.Unlock()
}

// HandleResubscribed counts the call.
func (r *Recorder) HandleResubscribed() { r.Resubscribed.Add(1) }

// Get returns a copy of what topic received so far.
func (r *Recorder) Get(topic string) []*hub.Publication {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*hub.Publication(nil), r.byTopic[topic]...)
}

// Err returns the contract violations seen.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// WaitCount waits until topic has received at least n publications.
func (r *Recorder) WaitCount(tb testing.TB, topic string, n int, timeout time.Duration) {
	tb.Helper()
	eventually.Nil(tb, timeout, func() error {
		if got := len(r.Get(topic)); got < n {
			return notYet("%s: %d of %d publications delivered", topic, got, n)
		}
		return nil
	})
}

// CheckOrder reports whether topic's deliveries are in offset order: each publication is the
// next offset of the same epoch, or the start of a new epoch.
func (r *Recorder) CheckOrder(topic string) error {
	if err := checkOrder(r.Get(topic)); err != nil {
		return fmt.Errorf("%s: delivered %w", topic, err)
	}
	return nil
}

// checkOrder reports whether ps are in offset order: each publication is the next offset of the
// same epoch, or the start of a new epoch.
func checkOrder(ps []*hub.Publication) error {
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		if a.Epoch == b.Epoch && b.Offset != a.Offset+1 {
			return fmt.Errorf("offset %d after %d in epoch %s", b.Offset, a.Offset, a.Epoch)
		}
	}
	return nil
}
