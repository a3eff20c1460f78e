package bench

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// clock gives Unix-nanosecond timestamps read from the monotonic clock, so intended send times
// written into messages and receive times compare exactly even if the wall clock is stepped.
type clock struct {
	t0   time.Time
	base int64 // t0 as Unix nanoseconds
}

func newClock() clock {
	t := time.Now()
	return clock{t0: t, base: t.UnixNano()}
}

func (c clock) now() int64                     { return c.base + int64(time.Since(c.t0)) }
func (c clock) at(d time.Duration) int64       { return c.base + int64(d) }
func (c clock) elapsed(ts int64) time.Duration { return time.Duration(ts - c.base) }

// Publication record states.
const (
	pubUnused = iota // never sent (the user was not connected when its turn came)
	pubSent          // written; outcome not known yet
	pubOK            // the server acknowledged it
	pubFailed        // the server refused it, or the outcome is unknown
)

// pubRecord is one publication of one user, indexed by its seq. Receivers find it from the vu
// and seq in the message and count their receipt; the accounting at the end of the run pairs
// these counts with the group membership windows.
type pubRecord struct {
	ts    int64         // intended send time (Unix ns); written by the scheduler before sending
	recv  atomic.Int32  // receipts inside the receivers' windows
	state atomic.Uint32 // pubUnused, pubSent, pubOK, pubFailed
}

// window is the span of intended send times a receiver is expected to receive: from the moment
// its subscription was confirmed to its planned leave time minus the grace period.
type window struct{ from, to int64 }

// vu is one virtual user. Its id is stable for the whole run cell; each time the plan starts
// it, an activity covers that stretch of its life.
type vu struct {
	id, group, node int
	c               *cell
	sh              *shard
	topic           string // location/{group}
	pubs            []pubRecord
	seq             int // next publication number; owned by the scheduler
	phase           time.Duration

	act  atomic.Pointer[activity] // current activity; nil when the user is not active
	done chan struct{}            // closed when the last activity's goroutine has ended

	// Receiver state, owned by the goroutine running the current activity.
	last    uint64 // highest offset seen
	mask    uint64 // bit k set: offset last-k was seen
	epoch   string
	windows []window // appended at the end of each activity; read after the run
}

// activity is one stretch of a user's life, from its start event to its stop event.
type activity struct {
	v        *vu
	ctx      context.Context // done when the activity ends
	cancel   context.CancelFunc
	leave    int64        // planned leave time (Unix ns)
	cutoff   int64        // leave − grace
	estab    atomic.Int64 // when the subscription was first confirmed (Unix ns); 0 before
	stopping atomic.Bool

	mu      sync.Mutex // guards the fields below and serialises writes on conn
	conn    net.Conn   // current streaming connection; nil between connections
	ready   bool       // conn's subscription is confirmed: publications may be written on it
	pending int        // publications written on conn and not answered yet
	lowSeq  int        // no publication below this seq is still pending on conn
	highSeq int        // highest seq written on conn, plus one
}

// canPublish reports whether the scheduler should publish for a: the user is connected and
// subscribed and not leaving.
func (a *activity) canPublish() bool {
	return a.estab.Load() != 0 && !a.stopping.Load()
}

// established marks the subscription confirmed at now. The first confirmation of an activity
// opens its delivery window and sets the receiver's starting position; later ones (after a
// reconnect that resumed) change nothing.
func (a *activity) established(now int64, offset uint64, epoch []byte) {
	v := a.v
	if a.estab.Load() == 0 {
		v.last, v.mask, v.epoch = offset, ^uint64(0), string(epoch)
		a.estab.Store(now)
	}
}

// sleep waits for d or the end of the activity; it reports whether the activity is still on.
func (a *activity) sleep(d time.Duration) bool {
	if d <= 0 {
		return a.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.ctx.Done():
		return false
	}
}

// setConn records the activity's current streaming connection so stop can interrupt reads.
func (a *activity) setConn(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping.Load() {
		return false
	}
	a.conn, a.ready, a.pending = c, false, 0
	return true
}

// clearConn forgets the connection after it failed or closed; publications still pending on
// it have an unknown outcome and count as failed.
func (a *activity) clearConn() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		_ = a.conn.Close()
	}
	a.conn, a.ready = nil, false
	v := a.v
	for s := a.lowSeq; s < a.highSeq && s < len(v.pubs); s++ {
		if v.pubs[s].state.CompareAndSwap(pubSent, pubFailed) {
			v.sh.update(func(c *counters) { c.pubFailed++; c.errors++ })
		}
	}
	a.pending = 0
	a.lowSeq = a.highSeq
}

// stop ends the activity: no more publications, and the reader is woken up. Streaming
// transports get drain to collect the answers to publications already written.
func (a *activity) stop(drain time.Duration) {
	a.stopping.Store(true)
	a.mu.Lock()
	if a.conn != nil {
		d := time.Duration(0)
		if a.pending > 0 {
			d = drain
		}
		_ = a.conn.SetReadDeadline(time.Now().Add(d))
	}
	a.mu.Unlock()
	a.cancel()
}

// receive accounts one publication seen by v: duplicates and reordering from the topic's
// offsets, latency from the publisher's intended send time, and the expected-delivery count
// when it falls inside the activity's window.
func (v *vu) receive(a *activity, offset uint64, epoch []byte, d dataFields, size int, now int64) {
	if string(epoch) != v.epoch {
		if v.epoch != "" {
			v.last, v.mask = 0, 0
		}
		v.epoch = string(epoch)
	}
	if offset > v.last {
		if shift := offset - v.last; shift >= 64 {
			v.mask = 1
		} else {
			v.mask = v.mask<<shift | 1
		}
		v.last = offset
	} else {
		back := v.last - offset
		if back >= 64 || v.mask&(1<<back) != 0 {
			v.sh.update(func(c *counters) { c.duplicates++; c.bytesIn += int64(size) })
			return
		}
		v.mask |= 1 << back
		v.sh.update(func(c *counters) { c.outOfOrder++ })
	}
	if !d.ok {
		v.sh.update(func(c *counters) { c.foreign++; c.bytesIn += int64(size) })
		return
	}
	v.sh.delivered(time.Duration(now-d.ts), size)
	if d.ts >= a.estab.Load() && d.ts < a.cutoff {
		if p := v.c.pubRecord(d.vu, d.seq); p != nil {
			p.recv.Add(1)
		}
	}
}

// gap counts a notice from the server that history was lost.
func (v *vu) gap() { v.sh.update(func(c *counters) { c.gaps++ }) }

// resumeQuery appends the query parameters that resume after the last offset seen.
func (v *vu) resumeQuery(dst []byte) []byte {
	dst = append(dst, "since="...)
	dst = strconv.AppendUint(dst, v.last, 10)
	if v.epoch != "" {
		dst = append(dst, "&epoch="...)
		dst = append(dst, v.epoch...)
	}
	return dst
}
