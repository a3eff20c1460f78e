package hub

import (
	"context"
	"time"
)

// CatchUpPage is how many publications a subscription reads from history at a time while it
// catches up.
const CatchUpPage = 100

// maxCatchUpBuffer bounds the live publications a subscription holds while it catches up. Past
// it they are dropped and read again from history once the replay reaches them: they are in
// history too, so a long catch-up costs no more memory than a short one.
const maxCatchUpBuffer = 1 << 20

// PacedSink is a Sink whose deliveries wait in a queue, such as a connection's writer. A
// subscription that resumes behind does not hand it its whole replay at once, which could
// exceed the queue's bound however fast the client reads: it gives the sink pull, and the sink
// calls pull whenever its queue has room. pull delivers about budget bytes (at least one
// publication) and reports whether more is to come; when it returns false the subscription is
// live. pull must not be called concurrently with itself.
type PacedSink interface {
	Sink
	Pace(pull func(budget int) (more bool))
}

// catchUp is a subscription's state until it is live. Guarded by the subscription's mu.
type catchUp struct {
	pending  []*Publication // read from history, not yet delivered
	atTop    bool           // the last history read reached the topic's position at that time
	buf      []*Publication // live publications that arrived meanwhile
	bufBytes int            // approximate size of buf
	bufLost  bool           // buf overflowed and was dropped: read history again before going live
}

// approxBytes is what a publication is counted as in catch-up budgets.
func approxBytes(p *Publication) int { return len(p.Data) + 160 }

// reachesTop reports whether a read's publications go up to its position.
func reachesTop(r ReadResult) bool {
	n := len(r.Publications)
	if n == 0 {
		return true
	}
	last := r.Publications[n-1]
	return last.Epoch != r.Top.Epoch || last.Offset >= r.Top.Offset
}

// catchUpLocked returns the subscription's catch-up state, made on first use: a live
// subscription holds none.
func (s *Subscription) catchUpLocked() *catchUp {
	if s.cu == nil {
		s.cu = new(catchUp)
	}
	return s.cu
}

// bufferLocked keeps a live publication that arrived before the subscription caught up.
func (s *Subscription) bufferLocked(p *Publication) {
	cu := s.catchUpLocked()
	if cu.bufLost {
		return // to be read from history anyway
	}
	cu.bufBytes += approxBytes(p)
	if cu.bufBytes > maxCatchUpBuffer {
		clear(cu.buf)
		cu.buf, cu.bufBytes, cu.bufLost = nil, 0, true
		return
	}
	cu.buf = append(cu.buf, p)
}

// caughtUpLocked reports whether the replay is delivered up to where the buffer takes over.
func (s *Subscription) caughtUpLocked() bool {
	cu := s.cu
	return cu == nil || (len(cu.pending) == 0 && cu.atTop && !cu.bufLost)
}

// goLiveLocked delivers what was buffered and switches to live delivery. A buffer that does not
// follow on from the replay means history no longer held what lies between: deliverLocked tells
// the sink.
func (s *Subscription) goLiveLocked() {
	if s.cu != nil {
		for _, p := range s.cu.buf {
			s.deliverLocked(p)
		}
		s.cu = nil
	}
	s.live.Store(true)
}

// pull delivers about budget bytes of the replay, reading history a page at a time, and goes
// live once it has caught up. It reports whether more is to come.
func (s *Subscription) pull(budget int) bool {
	for {
		s.mu.Lock()
		if s.closed.Load() || s.live.Load() {
			s.cu = nil
			s.mu.Unlock()
			return false
		}
		cu := s.catchUpLocked()
		for len(cu.pending) > 0 && budget > 0 {
			p := cu.pending[0]
			cu.pending[0] = nil
			cu.pending = cu.pending[1:]
			budget -= approxBytes(p)
			s.deliverLocked(p)
		}
		if s.caughtUpLocked() {
			s.goLiveLocked()
			s.mu.Unlock()
			return false
		}
		if len(cu.pending) > 0 || budget <= 0 {
			s.mu.Unlock()
			return true
		}
		// Read on from where the sink is. A dropped buffer is read again from history too.
		cu.bufLost = false
		from := s.last
		s.mu.Unlock()
		page, atTop, ok := s.readPage(from)
		s.mu.Lock()
		if !ok {
			// History has nothing more to give (trimmed, epoch changed, broker unavailable):
			// go live; the sink is told of what is missing.
			s.goLiveLocked()
			s.mu.Unlock()
			return false
		}
		cu.pending, cu.atTop = page, atTop
		s.mu.Unlock()
	}
}

// readPage reads the next page of history after from. ok is false when it holds nothing newer
// in from's epoch.
func (s *Subscription) readPage(from Position) (page []*Publication, atTop, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hr, err := s.hub.broker.History(ctx, s.topic.name, from.Offset, CatchUpPage)
	if err != nil {
		return nil, false, false
	}
	epoch := from.Epoch
	if epoch == "" {
		epoch = hr.Top.Epoch
	}
	for _, p := range hr.Publications {
		if p.Epoch == epoch && p.Offset > from.Offset {
			page = append(page, p)
		}
	}
	if len(page) == 0 {
		return nil, false, false
	}
	res := ReadResult{Publications: page, Top: hr.Top}
	return page, reachesTop(res) || len(hr.Publications) < CatchUpPage, true
}
