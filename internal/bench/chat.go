package bench

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// The chat and notify scenarios. A user's activity is a run of sessions:
//
//	login → connect → subscribe → ENTER → TALK every interval → LEAVE → disconnect
//
// then a pause of one interval and the next session, until the stages remove the user. With
// --hold (always in the notify scenario) there is one session and it TALKs until the user is
// removed. The scheduler walks the users' phases as in the location scenario; a session's
// TALK turns are the --talks turns that follow its ENTER answer, and its LEAVE is due at the
// turn after the last one, so the session's end is known once it has entered and the delivery
// window can end the grace period before it.
//
// In the notify scenario user r owns room r: it is the room's first member (users start in id
// order, and the others wait until it has entered), subscribes to notify/{owner} instead of the
// room, and never TALKs. The others subscribe to the room and TALK; what is measured is the
// NOTIFY each TALK makes the server publish to the owner.

// WebSocket request ids of the session's ENTER and LEAVE; TALKs use their seq (≥ 0).
const (
	idEnter = -1
	idLeave = -2
)

// STOMP receipt ids of the session's ENTER and LEAVE.
const (
	receiptEnter = "enter"
	receiptLeave = "leave"
)

// runChat runs the sessions of a chat user's activity; with notify, a member waits until its
// room's owner has entered.
func (c *cell) runChat(a *activity, notify bool) {
	v := a.v
	base := a.cutoff.Load() // leave − grace
	fails := 0
	for a.ctx.Err() == nil {
		a.estab.Store(0)
		a.from.Store(0)
		a.cutoff.Store(base)
		a.entered.Store(false)
		a.talkFrom.Store(0)
		a.talkUntil.Store(0)
		a.leaving.Store(false)
		a.sessDone.Store(false)
		a.opens.Store(0) // a new session connects afresh: not a reconnect
		v.resetStream()
		if err := c.login(a); err != nil {
			if !a.sleep(backoff(fails)) {
				return
			}
			fails++
			continue
		}
		fails = 0
		if notify && !v.owner {
			select {
			case <-c.ownerIn[v.group]:
			case <-a.ctx.Done():
				return
			}
		}
		c.drv.run(a)
		a.closeWindow()
		if c.drv.httpPublish() && a.entered.Load() && !a.leaving.Load() && !a.sessDone.Load() && c.ctx.Err() == nil {
			// Removed by the stages mid-session. A WebSocket or STOMP user just closes (the
			// server publishes its LEAVE); an HTTP user has no connection the server could
			// watch, so it says LEAVE itself, as a page's unload handler would. Not after an
			// interrupt: then the run is over.
			c.leaveHTTP(a)
		}
		if c.opts.Hold || a.ctx.Err() != nil {
			return
		}
		if !a.sleep(c.opts.Interval) {
			return
		}
	}
}

// login asks the HTTP pool for a token (POST /api/login) and keeps it for the session; with
// --auth-secret the user already holds one.
func (c *cell) login(a *activity) error {
	v := a.v
	if c.opts.AuthSecret != "" {
		return nil // a token minted with the secret (POST /api/login is off then)
	}
	ch := make(chan jobResult, 1)
	select {
	case c.httpq[v.at()] <- pubJob{a: a, kind: jobLogin, at: c.clk.now(), done: ch}:
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
	select {
	case r := <-ch:
		if r.err == nil {
			v.token.Store(&r.token)
		}
		return r.err
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// greetHTTP sends the session's greeting (ENTER) over the HTTP pool and waits for the answer.
func (c *cell) greetHTTP(a *activity) error {
	ch := make(chan jobResult, 1)
	select {
	case c.httpq[a.v.at()] <- pubJob{a: a, kind: jobEnter, done: ch}:
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
	select {
	case r := <-ch:
		if r.err == nil {
			c.enteredAt(a, c.clk.now())
		}
		return r.err
	case <-a.ctx.Done():
		return a.ctx.Err()
	}
}

// leaveHTTP sends LEAVE over the HTTP pool for a user the stages removed, waiting at most the
// drain time for the answer.
func (c *cell) leaveHTTP(a *activity) {
	ch := make(chan jobResult, 1)
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case c.httpq[a.v.at()] <- pubJob{a: a, kind: jobLeave, done: ch}:
	case <-t.C:
		return
	}
	select {
	case <-ch:
	case <-t.C:
	}
}

// enteredAt records the server's answer to the session's ENTER at now. The first one opens the
// session's delivery window and fixes its TALK turns; a later one (a WebSocket or STOMP user
// entering again on a new connection) only allows TALKs again.
func (c *cell) enteredAt(a *activity, now int64) {
	a.entered.Store(true)
	if a.from.Load() != 0 {
		return
	}
	v := a.v
	if v.talker {
		from := c.nextTurn(v, now)
		until := int64(math.MaxInt64)
		if !c.opts.Hold {
			until = from + int64(c.opts.Talks)*int64(c.opts.Interval)
			a.cutoff.Store(min(a.cutoff.Load(), until-int64(c.opts.Grace)))
		}
		a.talkUntil.Store(until)
		a.talkFrom.Store(from) // last: the scheduler looks at talkFrom first
	}
	a.from.Store(now)
	if v.owner {
		c.ownerOnce[v.group].Do(func() { close(c.ownerIn[v.group]) })
	}
}

// nextTurn returns v's first publish turn (Unix ns) strictly after now: turns fall at v's
// phase within every interval, exactly the slots the scheduler walks.
func (c *cell) nextTurn(v *vu, now int64) int64 {
	iv := int64(c.opts.Interval)
	first := c.clk.base + int64(v.phase)
	if now < first {
		return first
	}
	return first + ((now-first)/iv+1)*iv
}

// chatTurn decides a chat user's scheduled turn at ts: it reports whether a TALK is due; when
// the session's TALKs are over it hands the session's LEAVE to a worker instead.
func (c *cell) chatTurn(a *activity, ts int64, q chan<- pubJob, done <-chan struct{}) bool {
	from := a.talkFrom.Load()
	if from == 0 || ts < from || a.ending() || a.leaving.Load() {
		return false
	}
	if ts < a.talkUntil.Load() {
		return true
	}
	a.leaving.Store(true)
	select {
	case q <- pubJob{a: a, kind: jobLeave}:
	case <-done:
	}
	return false
}

// appendTalk appends the data of a TALK: the sender, its number and its intended send time, in
// fields (for room members) and in the message text, which is all the server copies into the
// owner's NOTIFY.
func appendTalk(dst []byte, v *vu, seq int, ts int64) []byte {
	dst = append(dst, `{"message":"`...)
	dst = appendTalkText(dst, int64(v.id), int64(seq), ts)
	dst = append(dst, '"')
	return appendTrace(dst, v, seq, ts)
}

// appendTalkText appends "vu=17 seq=4 ts=1795383601123000000", which parseTalkText reads back.
func appendTalkText(dst []byte, id, seq, ts int64) []byte {
	dst = append(dst, "vu="...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, " seq="...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, " ts="...)
	return strconv.AppendInt(dst, ts, 10)
}

// authHeader is the Authorization header line of v's requests ("" without a token).
func (v *vu) authHeader() string {
	if t := v.token.Load(); t != nil {
		return "Authorization: Bearer " + *t + "\r\n"
	}
	return ""
}

// tokenQuery appends "access_token=TOKEN" for transports that cannot send headers (EventSource
// and WebSocket in browsers) after sep ('?' or '&'); nothing without a token.
func (v *vu) tokenQuery(dst []byte, sep byte) []byte {
	if t := v.token.Load(); t != nil {
		dst = append(dst, sep)
		dst = append(dst, "access_token="...)
		dst = append(dst, *t...)
	}
	return dst
}

// login makes job's POST /api/login and hands back the token.
func (w *pubWorker) login(job pubJob) {
	v, c := job.a.v, w.c
	w.body = append(w.body[:0], `{"user":"`...)
	w.body = append(w.body, v.name...)
	w.body = append(w.body, `"}`...)
	w.buf = appendRequest(w.buf[:0], "POST", c.nodes[w.node], c.opts.withQuery([]byte("/api/login")), "", w.body)
	var res jobResult
	err := w.do(w.buf, func(status int, body []byte) error {
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		var m wireMsg
		if err := parseMsg(body, &m); err != nil || len(m.token) == 0 {
			return fmt.Errorf("%w: login answer without token", errBadResponse)
		}
		res.token = string(m.token)
		return nil
	})
	now := c.clk.now()
	v.sh.mu.Lock()
	v.sh.c.loginTried++
	v.sh.c.requests++
	if err == nil {
		recordDur(v.sh.hist[histLogin], time.Duration(now-job.at))
	}
	v.sh.mu.Unlock()
	if err != nil {
		v.sh.fail(fmt.Errorf("login: %w", err), func(k *counters) { k.loginFailed++ })
	}
	res.err = err
	job.reply(res)
}

// chatHTTP publishes an ENTER or LEAVE of a.v's session with POST /api/publish/chat/{room}.
// A failure is counted as an error; ENTER and LEAVE are not in the publish figures, which are
// the TALKs'.
func (w *pubWorker) chatHTTP(a *activity, typ string) error {
	v, c := a.v, w.c
	w.body = append(w.body[:0], `{"message":"`...)
	w.body = append(w.body, typ...)
	w.body = append(w.body, `"}`...)
	w.buf = append(w.buf[:0], "/api/publish/"...)
	w.buf = append(w.buf, v.room...)
	w.buf = append(w.buf, "?type="...)
	w.buf = append(w.buf, typ...)
	w.buf = c.opts.withQuery(w.buf)
	path := len(w.buf)
	w.buf = appendRequest(w.buf, "POST", c.nodes[w.node], w.buf[:path], v.authHeader(), w.body)
	err := w.do(w.buf[path:], func(status int, body []byte) error {
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		return nil
	})
	v.sh.update(func(k *counters) { k.requests++ })
	if err != nil {
		err = fmt.Errorf("chat %s: %w", typ, err)
		v.sh.fail(err, nil)
	}
	return err
}

// waitSent waits, at most the drain time, until the TALKs of a already handed to workers have
// been sent (HTTP: answered). A LEAVE must not overtake them: over the HTTP pool they travel on
// other connections, and even on one WebSocket two workers could write in either order; a
// TALK that arrives after its sender's LEAVE is refused.
func waitSent(a *activity) {
	deadline := time.Now().Add(drainTimeout)
	for a.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// httpLeave is the leave of the HTTP transports: POST the LEAVE, then end the session.
func (w *pubWorker) httpLeave(job pubJob) {
	waitSent(job.a)
	err := w.chatHTTP(job.a, "LEAVE")
	job.a.endSession()
	job.reply(jobResult{err: err})
}

// streamLeave is the leave of WebSocket and STOMP: write frame (the LEAVE) on the user's own
// connection; the reader ends the session when the answer arrives. A user that is not
// connected and entered right now has nothing to leave (the server published its LEAVE when
// its connection dropped): the session ends at once.
func streamLeave(a *activity, frame []byte) {
	waitSent(a)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping.Load() {
		return
	}
	if a.conn == nil || !a.ready || !a.entered.Load() {
		a.sessDone.Store(true)
		if a.conn != nil {
			_ = a.conn.SetReadDeadline(time.Now())
		}
		return
	}
	_ = a.writeLocked(frame)
}
