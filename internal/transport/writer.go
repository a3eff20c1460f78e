package transport

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// framer turns queued items into wire bytes for one transport.
type framer interface {
	// appendItem appends the wire form of it to buf.
	appendItem(buf []byte, it item) []byte
	// goodbye is written last when the server closes the connection; nil writes nothing.
	goodbye(r Reason) []byte
	// keepalive is written when the connection has been idle; nil writes nothing.
	keepalive() []byte
}

// item is one queued message: a publication (with the transport's per-subscription context)
// or pre-encoded raw bytes.
type item struct {
	pub *hub.Publication
	sub any
	raw []byte
}

// keepItem marks a raw item that is written even when the backlog is dropped (close without
// flush): the head of an HTTP response, without which the goodbye after it is not HTTP.
var keepItem any = new(struct{ keep bool })

// writer owns the write side of one connection. Everyone else queues; a single goroutine,
// started when the queue becomes non-empty and gone when it drains, writes everything queued
// in one Write. Idle connections therefore cost no goroutine and no buffer on this side.
type writer struct {
	conn    net.Conn
	f       framer
	limits  *Limits
	stats   *connStats
	lastOut atomic.Int64 // unix nanoseconds of the last write
	// deadline is the write deadline set on conn; owned by the running writer goroutine.
	deadline time.Time

	mu         sync.Mutex
	queue      []item                  // guarded by mu
	spare      []item                  // guarded by mu; reused to avoid allocating a queue per batch
	queued     int                     // approximate bytes queued; guarded by mu
	running    bool                    // a writer goroutine is active; guarded by mu
	closing    bool                    // no more items accepted; guarded by mu
	closeAfter bool                    // close the conn once the queue is written; guarded by mu
	pullers    []func(budget int) bool // subscriptions catching up (pace); guarded by mu
	reason     Reason                  // why it closed; set once; guarded by mu
	closed     chan struct{}
}

// connStats are the callbacks a writer reports to.
type connStats struct {
	transport string // the metrics label
	sent      func(n int)
	lag       func(d time.Duration)
	overflow  func()
}

func newWriter(conn net.Conn, f framer, lim *Limits, st *connStats) *writer {
	w := &writer{conn: conn, f: f, limits: lim, stats: st, closed: make(chan struct{})}
	w.lastOut.Store(time.Now().UnixNano())
	return w
}

// approxSize is what a queued publication is charged against the queue bound.
func approxSize(p *hub.Publication) int { return len(p.Data) + 160 }

// send queues it. It never blocks. When the queue bound is exceeded the connection is cut off
// as a slow consumer: the backlog is dropped and the client is told why.
func (w *writer) send(it item) bool {
	size := len(it.raw)
	if it.pub != nil {
		size += approxSize(it.pub)
	}
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return false
	}
	if w.queued+size > w.limits.QueueBytes {
		w.mu.Unlock()
		if w.stats != nil && w.stats.overflow != nil {
			w.stats.overflow()
		}
		w.close(ReasonSlow, false)
		return false
	}
	w.queue = append(w.queue, it)
	w.queued += size
	w.startLocked()
	w.mu.Unlock()
	return true
}

// sendRaw queues pre-encoded bytes.
func (w *writer) sendRaw(b []byte) bool { return w.send(item{raw: b}) }

// pace takes a subscription's catch-up (hub.PacedSink): a first part at once (so a short replay
// is queued before anything the caller queues next), the rest as the queue drains, so a replay of any size flows at the client's pace instead of overflowing the
// queue. Only a client that stops reading is cut off (send).
func (w *writer) pace(pull func(budget int) bool) {
	w.mu.Lock()
	// At once only when nothing else is catching up and the queue is low: several
	// subscriptions resuming together (an SSE stream of many topics) share the queue instead.
	now := !w.closing && len(w.pullers) == 0 && w.queued <= w.pullBudget()
	w.mu.Unlock()
	if now && !pull(w.pullBudget()) {
		return
	}
	w.mu.Lock()
	if !w.closing {
		w.pullers = append(w.pullers, pull)
		w.startLocked()
	}
	w.mu.Unlock()
}

// pullBudget is how much a catch-up queues at a time: a quarter of the queue, so that live
// publications still find room.
func (w *writer) pullBudget() int { return max(w.limits.QueueBytes/4, 1) }

// pull lets each catch-up queue its next part; those that are done are dropped. Called by the
// writer goroutine, without mu.
func (w *writer) pull() {
	w.mu.Lock()
	ps := w.pullers
	w.pullers = nil
	w.mu.Unlock()
	budget := max(w.pullBudget()/len(ps), 1)
	more := ps[:0]
	for _, pull := range ps {
		if pull(budget) {
			more = append(more, pull)
		}
	}
	clear(ps[len(more):])
	w.mu.Lock()
	if !w.closing {
		w.pullers = append(more, w.pullers...)
	}
	w.mu.Unlock()
}

// sendPong queues the answer to a WebSocket ping.
func (w *writer) sendPong(payload []byte) { w.sendRaw(wsPong(payload)) }

func (w *writer) startLocked() {
	if !w.running {
		w.running = true
		go w.run()
	}
}

// close closes the connection with reason. With flush, what is queued is written first (a
// graceful close such as shutdown); without, the backlog is dropped. Either way the framer's
// goodbye is written last when there is one. Only the first call counts.
func (w *writer) close(r Reason, flush bool) {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return
	}
	w.closing = true
	w.reason = r
	w.pullers = nil
	if !flush {
		kept := w.queue[:0]
		for _, it := range w.queue {
			if it.sub == keepItem {
				kept = append(kept, it)
			}
		}
		clear(w.queue[len(kept):])
		w.queue = kept
		w.queued = 0
	}
	bye := w.f.goodbye(r)
	if bye == nil && !flush {
		w.mu.Unlock()
		w.shut()
		return
	}
	if bye != nil {
		w.queue = append(w.queue, item{raw: bye})
	}
	w.closeAfter = true
	w.startLocked()
	w.mu.Unlock()
}

// shut closes the socket once.
func (w *writer) shut() {
	select {
	case <-w.closed:
		return
	default:
	}
	w.mu.Lock()
	select {
	case <-w.closed:
	default:
		close(w.closed)
		_ = w.conn.Close()
	}
	w.mu.Unlock()
}

// Reason returns why the connection closed (zero if it has not).
func (w *writer) closeReason() Reason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxPooledBuf keeps one huge batch from pinning memory in the pool.
const maxPooledBuf = 256 << 10

func (w *writer) run() {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			*bp = (*bp)[:0]
			bufPool.Put(bp)
		}
	}()
	for {
		w.mu.Lock()
		if len(w.pullers) > 0 && w.queued <= w.pullBudget() {
			// Catch-ups go on while the queue is low, whatever else is queued with them.
			w.mu.Unlock()
			w.pull()
			w.mu.Lock()
		}
		if len(w.queue) == 0 {
			if len(w.pullers) > 0 {
				w.mu.Unlock() // a catch-up whose part queued nothing (refused by its guard)
				continue
			}
			w.running = false
			after := w.closeAfter
			w.mu.Unlock()
			if after {
				w.shut()
			}
			return
		}
		batch := w.queue
		w.queue = w.spare[:0]
		w.spare = nil
		w.queued = 0
		final := w.closeAfter
		w.mu.Unlock()

		buf := (*bp)[:0]
		var oldest time.Time
		msgs := 0
		for i := range batch {
			if p := batch[i].pub; p != nil {
				if msgs == 0 {
					oldest = p.Time
				}
				msgs++
			}
			buf = w.f.appendItem(buf, batch[i])
		}
		clear(batch)
		*bp = buf

		w.setDeadline(final)
		_, err := w.conn.Write(buf)
		now := time.Now()
		w.lastOut.Store(now.UnixNano())
		if err != nil {
			r := ReasonWriteError
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r = ReasonWriteTimeout
			}
			w.mu.Lock()
			if !w.closing {
				w.closing, w.reason = true, r
			}
			w.pullers = nil
			w.running = false
			w.mu.Unlock()
			w.shut()
			return
		}
		if w.stats != nil && msgs > 0 {
			w.stats.sent(msgs)
			w.stats.lag(now.Sub(oldest))
		}
		w.mu.Lock()
		if w.spare == nil {
			w.spare = batch[:0]
		}
		w.mu.Unlock()
	}
}

// setDeadline gives the next write WriteTimeout, or a second for the last one (a goodbye should
// not hold shutdown up). Setting a deadline costs a lock and a timer update in the runtime's
// poller, which showed in profiles at one per write; so a deadline still more than half the
// timeout away is kept: a write may then block between half and all of WriteTimeout.
func (w *writer) setDeadline(final bool) {
	timeout := w.limits.WriteTimeout
	if final && timeout > time.Second {
		timeout = time.Second
	}
	now := time.Now()
	if !final && w.deadline.Sub(now) > timeout/2 {
		return
	}
	w.deadline = now.Add(timeout)
	_ = w.conn.SetWriteDeadline(w.deadline)
}

// idleFor reports how long nothing was written.
func (w *writer) idleFor(now time.Time) time.Duration {
	return time.Duration(now.UnixNano() - w.lastOut.Load())
}
