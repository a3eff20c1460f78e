package bench

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// at is the index of v's node now.
func (v *vu) at() int { return int(v.node.Load()) }

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

func (c clock) now() int64               { return c.base + int64(time.Since(c.t0)) }
func (c clock) at(d time.Duration) int64 { return c.base + int64(d) }

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
	id, group int          // group: the location group, or the chat room
	node      atomic.Int32 // index of the node it connects to; changes when it fails over (cell.dialAny)
	c         *cell
	sh        *shard
	topic     string // what it subscribes to: location/{g}, chat/{room}, or notify/{name} (an owner in the notify scenario)
	pubs      []pubRecord
	seq       int // next publication number; owned by the scheduler
	phase     time.Duration

	// Chat and notify scenarios. Immutable after newCell.
	name     string // user name it logs in as
	room     string // chat/{room} it enters
	owner    bool   // notify: the room's owner, who watches notify/{name} and does not TALK
	measured bool   // its receipts are deliveries of the scenario (false for notify members)
	talker   bool   // it TALKs

	token atomic.Pointer[string] // login token of the current session

	act       atomic.Pointer[activity] // current activity; nil when the user is not active
	connected atomic.Bool              // it has opened a connection in this run
	done      chan struct{}            // closed when the last activity's goroutine has ended

	// Receiver state, owned by the goroutine running the current activity.
	last    uint64   // highest offset seen (servers that give offsets), where a resume starts
	epoch   string   // the stream's epoch with last
	seen    []uint64 // per member of the group: highest seq seen and the ones below (see sequence)
	windows []window // appended at the end of each activity (chat: each session); read after the run
}

// activity is one stretch of a user's life, from its start event to its stop event. In the
// chat scenario it holds one session after another (login … LEAVE); the session fields are
// reset between them.
type activity struct {
	v        *vu
	ctx      context.Context // done when the activity ends
	cancel   context.CancelFunc
	leave    int64        // planned leave time (Unix ns)
	estab    atomic.Int64 // when the subscription was first confirmed (Unix ns); 0 before
	opens    atomic.Int32 // connections opened; every one after the first is a reconnect
	stopping atomic.Bool

	// The delivery window of the current session: receipts of publications whose intended
	// send time is in [from, cutoff) count. from is the first subscription confirmation
	// (location) or the first answered ENTER (chat, notify); cutoff starts at leave − grace and
	// a chat session that plans its own LEAVE lowers it to that LEAVE − grace.
	from   atomic.Int64
	cutoff atomic.Int64

	// Chat session state.
	entered   atomic.Bool  // the server has answered our ENTER (ws, stomp: on the current connection)
	talkFrom  atomic.Int64 // first TALK turn (Unix ns); 0 until entered
	talkUntil atomic.Int64 // no TALK turn at or after this; the session's LEAVE is due then
	leaving   atomic.Bool  // the session's LEAVE was handed to a worker
	sessDone  atomic.Bool  // the session has left: the driver closes its connection and returns
	inflight  atomic.Int32 // publications handed to workers and not yet sent (HTTP: not yet answered)

	mu       sync.Mutex // guards the fields below and serialises writes on conn
	conn     net.Conn   // current streaming connection; nil between connections
	ready    bool       // conn's subscription is confirmed: publications may be written on it
	pending  int        // publications written on conn and not answered yet
	lowSeq   int        // no publication below this seq is still pending on conn
	highSeq  int        // highest seq written on conn, plus one
	wireNext int        // the lowest seq that may still be sent (see inOrderLocked)

	httpMu   sync.Mutex // held while a publication of this user is on its way over the HTTP pool
	httpNext int        // as wireNext, for the HTTP pool; guarded by httpMu
}

// httpTurn reports whether publication seq may go over the HTTP pool now, and if so holds
// a.httpMu until the caller has its answer. One publication of a user is on its way at a time,
// in order: over the pool they travel on different connections, and a server may take two at
// once in either order. A turn that finds the last one still unanswered (a request slower than
// the interval) is skipped and counted, as an out-of-order one; no worker waits for another.
func (a *activity) httpTurn(seq int) bool {
	if !a.httpMu.TryLock() {
		a.v.c.outOfTurn.Add(1)
		return false
	}
	if !a.inOrderLocked(&a.httpNext, seq) {
		a.httpMu.Unlock()
		return false
	}
	return true
}

// inOrderLocked reports whether publication seq may be sent now, and if so records it as sent:
// not when a later publication of the user has already gone. Workers take the user's turns from
// a shared queue, so a worker that stalls (a busy machine) could otherwise send turn n after
// another worker sent n+1; dropping n keeps each sender's order intact on the wire, so the order
// receivers see is the server's doing. Such a turn is skipped like one that found the user not
// connected, and counted (cell.outOfTurn). The lock that guards next (a.mu for a user's own
// connection, a.httpMu for the pool) must be held.
func (a *activity) inOrderLocked(next *int, seq int) bool {
	if seq < *next {
		a.v.c.outOfTurn.Add(1)
		return false
	}
	*next = seq + 1
	return true
}

// established marks the subscription confirmed at now. The first confirmation of an activity
// (chat: of a session) sets the receiver's starting position and, in a scenario whose users
// send no greeting, opens its delivery window (else the greeting's answer does); later ones
// (after a reconnect that resumed) change nothing.
func (a *activity) established(now int64, offset uint64, epoch []byte) {
	v := a.v
	if a.estab.Load() == 0 {
		v.last, v.epoch = offset, string(epoch)
		a.estab.Store(now)
		if v.c.scn.greeting() == "" {
			a.from.Store(now)
		}
	}
}

// inWindow reports whether a publication sent at ts is expected at a's user now.
func (a *activity) inWindow(ts int64) bool {
	from := a.from.Load()
	return from != 0 && ts >= from && ts < a.cutoff.Load()
}

// closeWindow records the current delivery window (if one opened) in the user's windows. Users
// whose receipts are not measured (notify members) have none.
func (a *activity) closeWindow() {
	if from := a.from.Load(); from != 0 && a.v.measured {
		a.v.windows = append(a.v.windows, window{from: from, to: a.cutoff.Load()})
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
	if a.ending() {
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
	if !v.c.drv.httpPublish() {
		// ENTER on a WebSocket or STOMP connection lasts as long as the connection: the server
		// publishes LEAVE when it drops, and the next connection enters again.
		a.entered.Store(false)
	}
	for s := a.lowSeq; s < a.highSeq && s < len(v.pubs); s++ {
		if v.pubs[s].state.CompareAndSwap(pubSent, pubFailed) {
			v.sh.update(func(c *counters) { c.pubFailed++; c.errors++ })
		}
	}
	a.pending = 0
	a.lowSeq = a.highSeq
}

// ending reports whether the user is leaving: its activity is being stopped, or its chat
// session has left.
func (a *activity) ending() bool { return a.stopping.Load() || a.sessDone.Load() }

// endSession marks the chat session over from outside its reader (a worker got the answer to
// an HTTP LEAVE) and closes the connection, which wakes the reader even in the middle of a
// long poll.
func (a *activity) endSession() {
	a.sessDone.Store(true)
	a.mu.Lock()
	if a.conn != nil {
		_ = a.conn.Close()
	}
	a.mu.Unlock()
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

// position records where v is in its topic's stream, for a resume after a drop: the offset and
// epoch of a publication or subscription, on servers that give them (rtlab, Centrifugo).
func (v *vu) position(offset uint64, epoch []byte) {
	// Centrifugo names the epoch on some publications only: no epoch means the same one.
	if len(epoch) > 0 && string(epoch) != v.epoch {
		v.epoch, v.last = string(epoch), offset
		return
	}
	v.last = max(v.last, offset)
}

// receive accounts one publication seen by v. What is measured comes from the payload alone,
// so it is the same on every server: duplicates and order from the sender's sequence number,
// latency from its intended send time, and the expected-delivery count when the publication
// falls inside the activity's window.
func (v *vu) receive(a *activity, d dataFields, size int, now int64) {
	if !d.ok || !v.measured {
		v.sh.update(func(c *counters) { v.c.scn.unmeasured(c, size) })
		return
	}
	dup, ooo, ours := v.sequence(d)
	switch {
	case !ours:
		v.sh.update(func(c *counters) { c.foreign++; c.bytesIn += int64(size) })
		return
	case dup:
		v.sh.update(func(c *counters) { c.duplicates++; c.bytesIn += int64(size) })
		v.c.flt.duplicated(now)
		return
	case ooo:
		v.sh.update(func(c *counters) { c.outOfOrder++ })
		v.c.flt.reordered(now)
	}
	// Latency is recorded only for receipts the delivery ratio can count: in the receiver's
	// window, of a publication on record. One sent while the receiver subscribed or after its
	// cutoff (the grace before it leaves) counts as outside the window, in neither.
	p := v.c.pubRecord(d.vu, d.seq)
	in := p != nil && a.inWindow(d.ts)
	v.sh.delivered(time.Duration(now-d.ts), size, in)
	if in {
		p.recv.Add(1)
		v.c.flt.received(v.id, d.ts)
	}
}

// seqWindow is how many of a sender's latest sequence numbers a receiver remembers: an older one
// arriving late counts as a duplicate, since it can no longer be told apart from one.
const seqWindow = 32

// sequence checks publication d against what v has seen of its sender: a number seen before is
// a duplicate, one below the highest seen and not seen before arrives out of order (it still
// counts as received). ours is false for a sender outside v's group, which the server should
// never have delivered here. Each receiver keeps 8 bytes per member of its group: the highest
// number seen (plus one) and a mask of the seqWindow below it.
func (v *vu) sequence(d dataFields) (dup, ooo, ours bool) {
	c := v.c
	groups := int64(c.groups)
	if d.vu < 0 || d.vu >= int64(len(c.vus)) || d.vu%groups != int64(v.group) || d.seq < 0 || d.seq >= 1<<31 {
		return false, false, false
	}
	if v.seen == nil {
		v.seen = make([]uint64, (int64(len(c.vus))-int64(v.group)+groups-1)/groups)
	}
	s := &v.seen[d.vu/groups]
	last, mask := uint32(*s>>32), uint32(*s)
	n := uint32(d.seq) + 1
	switch {
	case n > last:
		if shift := n - last; shift >= seqWindow {
			mask = 1
		} else {
			mask = mask<<shift | 1
		}
		last = n
	case last-n >= seqWindow || mask&(1<<(last-n)) != 0:
		return true, false, true
	default:
		mask |= 1 << (last - n)
		ooo = true
	}
	*s = uint64(last)<<32 | uint64(mask)
	return false, ooo, true
}

// resetStream forgets v's position and what it has seen: a new activity (chat: a new session)
// is a fresh client.
func (v *vu) resetStream() {
	v.last, v.epoch = 0, ""
	clear(v.seen)
}

// gap counts a notice from the server that history was lost.
func (v *vu) gap() {
	v.sh.update(func(c *counters) { c.gaps++ })
	v.c.flt.gap(v.id, v.c.clk.now())
}

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
