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
	v := job.a.v
	b := append(w.body[:0], `{"op":"publish","topic":"`...)
	b = append(b, v.room...)
	b = append(b, `","type":"LEAVE","id":`...)
	b = strconv.AppendInt(b, idLeave, 10)
	b = append(b, `,"data":{"message":"LEAVE"}}`...)
	w.body = b
	w.frame = appendClientFrame(w.frame[:0], ws.OpText, b)
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
	c.connOpened(a, time.Since(start))

	sub := append(make([]byte, 0, 128), `{"op":"subscribe","topic":"`...)
	sub = append(sub, v.topic...)
	sub = append(sub, '"')
	if a.estab.Load() != 0 { // resume where this user left off
		sub = append(sub, `,"since":`...)
		sub = strconv.AppendUint(sub, v.last, 10)
		sub = append(sub, `,"epoch":"`...)
		sub = append(sub, v.epoch...)
		sub = append(sub, '"')
	}
	sub = append(sub, '}')
	if err := a.writeFrame(ws.OpText, sub); err != nil {
		c.connDropped(a, fmt.Errorf("ws: subscribe: %w", err))
		return true
	}
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	counted := false
	defer func() {
		if counted {
			c.connected.Add(-1)
		}
	}()
	var reason string
	var m wireMsg
	for {
		p, err := s.next(pong)
		if err != nil {
			if reason != "" {
				err = fmt.Errorf("server said %s: %w", reason, err)
			}
			c.connDropped(a, fmt.Errorf("ws: %w", err))
			return true
		}
		now := c.clk.now()
		if err := parseMsg(p, &m); err != nil {
			v.sh.fail(fmt.Errorf("ws: %w: %.80q", errBadResponse, p), nil)
			continue
		}
		switch string(m.op) {
		case "message":
			v.position(m.offset, m.epoch)
			v.receive(a, m.data, len(p), now)
		case "ack":
			switch m.id {
			case idEnter:
				c.enteredAt(a, now)
			case idLeave:
				a.sessDone.Store(true)
				return true
			default:
				if a.answered(m.id, true, nil) {
					return true
				}
			}
		case "error":
			err := fmt.Errorf("ws: error %s: %s", m.code, m.reason)
			if m.hasID && (m.id == idEnter || m.id == idLeave) {
				v.sh.fail(fmt.Errorf("chat: %w", err), nil)
				if m.id == idLeave {
					a.sessDone.Store(true)
				}
				return true // close; an ENTER is tried again on the next connection
			}
			if m.hasID {
				if a.answered(m.id, false, err) {
					return true
				}
			} else {
				v.sh.fail(err, nil)
			}
		case "subscribed":
			if m.hasRecov && !m.recovered {
				v.gap()
			}
			a.mu.Lock()
			a.ready = true
			a.mu.Unlock()
			a.established(now, m.offset, m.epoch)
			if !counted {
				counted = true
				c.connected.Add(1)
			}
			if c.opts.chatLike() && !a.entered.Load() && !a.leaving.Load() {
				if err := a.writeFrame(ws.OpText, enterWS(v.room)); err != nil {
					c.connDropped(a, fmt.Errorf("ws: ENTER: %w", err))
					return true
				}
			}
		case "disconnect":
			reason = string(m.code)
		}
	}
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
	chat := d.c.opts.chatLike()
	b := append(w.body[:0], `{"op":"publish","topic":"`...)
	if chat {
		b = append(b, v.room...)
		b = append(b, `","type":"TALK`...)
	} else {
		b = append(b, v.topic...)
	}
	b = append(b, `","id":`...)
	b = strconv.AppendInt(b, int64(job.seq), 10)
	b = append(b, `,"data":`...)
	b = d.c.appendPub(b, v, job.seq, p.ts)
	b = append(b, '}')
	w.body = b
	w.frame = appendClientFrame(w.frame[:0], ws.OpText, b)
	a.writePublication(job.seq, w.frame, chat)
}

// enterWS is the ENTER of a chat session on the native WebSocket protocol.
func enterWS(room string) []byte {
	b := append(make([]byte, 0, 128), `{"op":"publish","topic":"`...)
	b = append(b, room...)
	b = append(b, `","type":"ENTER","id":`...)
	b = strconv.AppendInt(b, idEnter, 10)
	return append(b, `,"data":{"message":"ENTER"}}`...)
}
