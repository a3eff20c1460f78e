package bench

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// pollLimit is asked of every poll so that a busy group (large --groups) still fits in one
// answer; a full answer is followed at once by another poll.
const pollLimit = 1000

// pollDriver is a short-polling user (GET every interval with since=) or, with long, a
// long-polling user (GET with wait= in a loop). Each user keeps one keep-alive connection and
// publishes through the shared pool.
type pollDriver struct {
	c     *cell
	long  bool
	every time.Duration // short polling: the polling interval
}

func (d *pollDriver) httpPublish() bool                { return true }
func (d *pollDriver) publish(w *pubWorker, job pubJob) { w.httpPublish(job) }
func (d *pollDriver) leave(w *pubWorker, job pubJob)   { w.httpLeave(job) }

func (d *pollDriver) run(a *activity) {
	v, c := a.v, d.c
	var hc *httpConn
	// The activity's accounting: the user counts as connected from an answered poll until its
	// keep-alive connection is gone (or, after a keep-alive close, until the next one fails).
	l := newLink(a, time.Now())
	disconnect := func() {
		if hc != nil {
			a.clearConn()
			hc = nil
		}
		l.done()
		l.open = false // the next connection opens with its first answered poll
	}
	defer disconnect()
	// pending: a connection is dialled but not yet answered, so neither opened nor failed; the
	// user leaving then abandons it.
	pending := false
	defer func() {
		if pending {
			c.connAbandoned(v)
		}
	}()
	fails := 0
	var next time.Time // short polling: when the next poll is due
	for a.ctx.Err() == nil && !a.sessDone.Load() {
		if hc == nil {
			var stay bool
			if hc, stay = d.connect(l); hc == nil {
				if !stay || !a.sleep(backoff(fails)) {
					return
				}
				fails++
				continue
			}
			pending = true
		}
		if a.greetDue() {
			// Subscribed (the first poll read the position): greet (enter the room).
			if err := c.greetHTTP(a); err != nil {
				if !a.sleep(backoff(fails)) {
					return
				}
				fails++
				continue
			}
		}
		if !d.long && !next.IsZero() {
			if !a.sleep(time.Until(next)) {
				return
			}
		}
		more, err := d.poll(l, hc)
		var se *StatusError
		isStatus := errors.As(err, &se)
		closed := errors.Is(err, errConnClose)
		if closed && !isStatus {
			err = nil // answered, then closed: not a failure
		}
		pending = false // answered, or failed below
		if err == nil && !l.open {
			l.opened()
		}
		if err != nil {
			d.failed(l, err, isStatus) // an attempt of a leaving user counts as abandoned
			if a.ending() || a.ctx.Err() != nil {
				return
			}
			if closed || !isStatus || !l.open {
				disconnect() // the next poll starts on a fresh connection
			}
			if !a.sleep(backoff(fails)) {
				return
			}
			fails++
			continue
		}
		if closed {
			disconnect() // the server ended keep-alive: the next poll reconnects
		}
		fails = 0
		l.serving()
		if !d.long && !more {
			now := time.Now()
			if next.IsZero() {
				next = now
			}
			next = next.Add(d.every)
			if next.Before(now) { // a poll took longer than the interval: poll at once
				next = now
			}
		}
	}
}

// connect dials a keep-alive connection for l's user and counts the attempt. On failure hc is
// nil, and stay says whether the user is still there to try again.
func (d *pollDriver) connect(l *link) (hc *httpConn, stay bool) {
	a, c := l.a, d.c
	v := a.v
	c.connTried(v)
	start := time.Now()
	conn, err := c.dial(a.ctx, v)
	if err != nil {
		c.connFailed(a, err)
		return nil, true
	}
	if !a.setConn(conn) {
		_ = conn.Close()
		c.connAbandoned(v)
		return nil, false
	}
	l.start = start
	// A long poll holds its reader for the whole wait anyway; a short poll borrows one.
	return newHTTPConn(conn, c.nodes[v.at()], d.long), true
}

// failed counts a poll that failed with err: before the connection's first
// answer, a failed attempt; after it, a refusal (an HTTP error status) counts as an attempt
// of its own that failed, so that a server refusing users mid-run shows in the failed
// connections as one refusing them at the start does; any other error is a drop.
func (d *pollDriver) failed(l *link, err error, isStatus bool) {
	err = fmt.Errorf("poll: %w", err)
	if isStatus && l.open {
		d.c.connTried(l.a.v)
		d.c.connFailed(l.a, err)
		return
	}
	l.closed(err)
}

// poll makes one request. The first of an activity carries no since and only reads the
// topic's position, which opens the user's delivery window; later ones read publications
// after the last offset seen. more reports a full answer.
func (d *pollDriver) poll(l *link, hc *httpConn) (more bool, err error) {
	a := l.a
	v, c := a.v, d.c
	first := a.estab.Load() == 0
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b := append((*bp)[:0], "/api/poll/"...)
	b = append(b, v.topic...)
	if !first {
		b = append(b, '?')
		b = v.resumeQuery(b)
		b = append(b, "&limit="...)
		b = strconv.AppendInt(b, pollLimit, 10)
		if d.long {
			b = append(b, "&wait="...)
			b = strconv.AppendInt(b, int64(c.opts.LongWait/time.Millisecond), 10)
			b = append(b, "ms"...)
		}
	}
	b = c.opts.withQuery(b)
	path := len(b)
	b = appendRequest(b, "GET", c.nodes[v.at()], b[:path], v.authHeader(), nil)
	*bp = b
	deadline := time.Now().Add(requestTimeout)
	if d.long && !first {
		deadline = deadline.Add(c.opts.LongWait)
	}
	err = hc.roundTrip(b[path:], deadline, func(status int, body []byte) error {
		now := c.clk.now()
		v.sh.update(func(k *counters) { k.requests++ })
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		var m wireMsg
		if err := parseMsg(body, &m); err != nil || !m.hasOffset {
			return fmt.Errorf("%w: poll answer %.80q", errBadResponse, body)
		}
		if first {
			a.established(now, m.offset, m.epoch)
			return nil
		}
		if m.hasRecov && !m.recovered {
			l.gap()
		}
		n := 0
		pubs := m.pubs
		var pm wireMsg
		err := eachElement(pubs, func(elem []byte) error {
			n++
			if err := parseMsg(elem, &pm); err != nil || !pm.hasOffset {
				return fmt.Errorf("%w: publication %.80q", errBadResponse, elem)
			}
			l.message(now, true, pm.offset, pm.epoch, pm.data, len(elem))
			return nil
		})
		if n == 0 && string(m.epoch) != v.epoch {
			// History was lost and nothing published since: start over at the new epoch.
			v.last, v.epoch = m.offset, string(m.epoch)
		}
		more = n >= pollLimit
		return err
	})
	return more, err
}
