package bench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gobwas/ws"
)

// wsDriver is a client of the native WebSocket protocol (/api/ws): one connection, subscribe,
// then publish over the same connection with an id and wait for the ack. After a drop it
// reconnects and resubscribes with since= and epoch=.
type wsDriver struct{ c *cell }

func (d *wsDriver) httpPublish() bool { return false }

func (d *wsDriver) leave(w *pubWorker, job pubJob) {
	w.body = appendWSChat(w.body[:0], job.a.v.room, "LEAVE", idLeave)
	w.frame = appendClientFrame(w.frame[:0], ws.OpText, w.body)
	streamLeave(job.a, w.frame)
}

func (d *wsDriver) run(a *activity) { runStream(a, d.session) }

// runStream reconnects a streaming user's sessions with backoff until its activity ends. A
// session that got connected resets the backoff.
func runStream(a *activity, session func(*activity) bool) {
	fails := 0
	for a.ctx.Err() == nil && !a.sessDone.Load() {
		opened := session(a)
		if a.leaving.Load() {
			// The session's LEAVE was sent and the connection is gone: it is left either way
			// (the server publishes LEAVE when a connection that entered drops).
			a.sessDone.Store(true)
		}
		if a.ending() || a.ctx.Err() != nil {
			return
		}
		if opened {
			fails = 0
		}
		if !a.sleep(backoff(fails)) {
			return
		}
		fails++
	}
}

func (d *wsDriver) session(a *activity) (opened bool) {
	v, c := a.v, d.c
	path := string(v.tokenQuery([]byte("/api/ws"), '?')) // no token: no query
	s, start, ok := c.openWS(a, path, nil, "ws")
	if !ok {
		return false
	}
	defer a.endStream(s)
	l := newLink(a, start)
	l.opened()
	defer l.done()
	l.greet = func(typ string) error { return a.writeFrame(ws.OpText, appendWSChat(nil, v.room, typ, idEnter)) }
	if err := a.writeFrame(ws.OpText, d.subscribe(a)); err != nil {
		return l.closed(fmt.Errorf("ws: subscribe: %w", err))
	}
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	var reason string
	var m wireMsg
	for {
		p, err := s.next(pong)
		if err != nil {
			if reason != "" {
				err = fmt.Errorf("server said %s: %w", reason, err)
			}
			return l.closed(fmt.Errorf("ws: %w", err))
		}
		now := c.clk.now()
		if err := parseMsg(p, &m); err != nil {
			v.sh.fail(fmt.Errorf("ws: %w: %.80q", errBadResponse, p), nil)
			continue
		}
		if string(m.op) == "disconnect" {
			reason = string(m.code)
			continue
		}
		if d.event(l, &m, len(p), now) {
			return true
		}
	}
}

// subscribe is the user's subscribe request; after a drop it resumes where the user left off.
func (d *wsDriver) subscribe(a *activity) []byte {
	v := a.v
	sub := append(make([]byte, 0, 128), `{"op":"subscribe","topic":"`...)
	sub = append(sub, v.topic...)
	sub = append(sub, '"')
	if a.estab.Load() != 0 {
		sub = append(sub, `,"since":`...)
		sub = strconv.AppendUint(sub, v.last, 10)
		sub = append(sub, `,"epoch":"`...)
		sub = append(sub, v.epoch...)
		sub = append(sub, '"')
	}
	return append(sub, '}')
}

// event hands one message of the server (size bytes) to the link; it reports whether the
// session is over.
func (d *wsDriver) event(l *link, m *wireMsg, size int, now int64) (end bool) {
	switch string(m.op) {
	case "message":
		l.message(now, true, m.offset, m.epoch, m.data, size)
	case "gap":
		// History broke under the live subscription; the publications of the new position
		// follow and move the user's position there.
		l.gap()
	case "ack":
		return l.answered(now, wsReply(m.id))
	case "error":
		err := fmt.Errorf("ws: error %s: %s", m.code, m.reason)
		if !m.hasID {
			l.a.v.sh.fail(err, nil)
			return false
		}
		r := wsReply(m.id)
		if r.kind != replyPub {
			l.a.v.sh.fail(fmt.Errorf("chat: %w", err), nil)
		}
		return l.refused(r, err)
	case "subscribed":
		// A resume that lost publications is told by the {"op":"gap"} that follows, counted
		// there; recovered:false here is the same loss.
		if err := l.subscribed(now, m.offset, m.epoch, false); err != nil {
			l.closed(fmt.Errorf("ws: ENTER: %w", err))
			return true
		}
	}
	return false
}

// wsReply names the request a WebSocket ack or error answers, by its id.
func wsReply(id int64) reply {
	switch id {
	case idEnter:
		return reply{kind: replyGreeting}
	case idLeave:
		return reply{kind: replyLeave}
	}
	return reply{seq: id}
}

// endStream closes a streaming session: a leaving user says goodbye with a close frame, as a
// browser closing the page does.
func (a *activity) endStream(s *wsStream) {
	if a.ending() {
		a.mu.Lock()
		if a.conn != nil {
			_ = a.conn.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = a.conn.Write(wsClose)
		}
		a.mu.Unlock()
	}
	a.clearConn()
	if s.big != nil {
		bodyPool.Put(s.big)
		s.big = nil
	}
}

func (d *wsDriver) publish(w *pubWorker, job pubJob) {
	a := job.a
	v := a.v
	p := &v.pubs[job.seq]
	topic, typ := d.c.scn.publishTo(v)
	b := append(w.body[:0], `{"op":"publish","topic":"`...)
	b = append(b, topic...)
	if typ != "" {
		b = append(b, `","type":"`...)
		b = append(b, typ...)
	}
	b = append(b, `","id":`...)
	b = strconv.AppendInt(b, int64(job.seq), 10)
	b = append(b, `,"data":`...)
	b = d.c.appendPub(b, v, job.seq, p.ts)
	b = append(b, '}')
	w.body = b
	w.frame = appendClientFrame(w.frame[:0], ws.OpText, b)
	a.writePublication(job.seq, w.frame)
}

// appendWSChat appends a chat message of type typ (ENTER, LEAVE) to room on the native
// WebSocket protocol, with request id.
func appendWSChat(dst []byte, room, typ string, id int64) []byte {
	dst = append(dst, `{"op":"publish","topic":"`...)
	dst = append(dst, room...)
	dst = append(dst, `","type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"data":{"message":"`...)
	dst = append(dst, typ...)
	return append(dst, `"}}`...)
}
