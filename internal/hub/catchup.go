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

// bufferLocked keeps a live publication that arrived before the subscription caught up.
func (s *Subscription) bufferLocked(p *Publication) {
	if s.bufLost {
		return // to be read from history anyway
	}
	s.bufBytes += approxBytes(p)
	if s.bufBytes > maxCatchUpBuffer {
		clear(s.buf)
		s.buf, s.bufBytes, s.bufLost = nil, 0, true
		return
	}
	s.buf = append(s.buf, p)
}

// caughtUpLocked reports whether the replay is delivered up to where the buffer takes over.
func (s *Subscription) caughtUpLocked() bool {
	return len(s.pending) == 0 && s.atTop && !s.bufLost
}

// goLiveLocked delivers what was buffered and switches to live delivery. A buffer that does not
// follow on from the replay means history no longer held what lies between: deliverLocked tells
// the sink.
func (s *Subscription) goLiveLocked() {
	for _, p := range s.buf {
		s.deliverLocked(p)
	}
	s.catchUp = catchUp{}
	s.live.Store(true)
}

// pull delivers about budget bytes of the replay, reading history a page at a time, and goes
// live once it has caught up. It reports whether more is to come.
func (s *Subscription) pull(budget int) bool {
	for {
		s.mu.Lock()
		if s.closed.Load() || s.live.Load() {
			s.catchUp = catchUp{}
			s.mu.Unlock()
			return false
		}
		for len(s.pending) > 0 && budget > 0 {
			p := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			budget -= approxBytes(p)
			s.deliverLocked(p)
		}
		if s.caughtUpLocked() {
			s.goLiveLocked()
			s.mu.Unlock()
			return false
		}
		if len(s.pending) > 0 || budget <= 0 {
			s.mu.Unlock()
			return true
		}
		// Read on from where the sink is. A dropped buffer is read again from history too.
		s.bufLost = false
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
		s.pending, s.atTop = page, atTop
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
