package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gobwas/ws"
)

// Centrifugo clients. cfWSDriver speaks its bidirectional JSON protocol over
// /connection/websocket as centrifuge-js does: connect, wait for the reply, subscribe (after a
// drop: with recover, offset and epoch), publish on the same connection and wait for the
// reply. cfSSEDriver is a page with an EventSource on /connection/uni_sse: the server
// subscribes it to the channels its token names, and it publishes through Centrifugo's HTTP
// API, as an application's backend would for a browser that cannot send on its stream.

// cfTokenTTL is how long the connection tokens the bench signs are valid.
const cfTokenTTL = 24 * time.Hour

// cfToken returns v's connection token, "" when the server takes clients without one.
// A unidirectional client's token names its channel.
func (c *cell) cfToken(v *vu, uni bool) string {
	if len(c.opts.cfSecret) == 0 || (!uni && c.opts.AuthSecret == "") {
		return ""
	}
	var chans []string
	if uni {
		chans = []string{v.topic}
	}
	return cfToken(c.opts.cfSecret, "u"+strconv.Itoa(v.id), chans, time.Now().Add(cfTokenTTL).Unix())
}

type cfWSDriver struct{ c *cell }

func (d *cfWSDriver) httpPublish() bool { return false }

// leave is never called: chat and notify do not run on Centrifugo.
func (d *cfWSDriver) leave(w *pubWorker, job pubJob) { job.reply(jobResult{}) }

func (d *cfWSDriver) run(a *activity) { runStream(a, d.session) }

func (d *cfWSDriver) session(a *activity) (opened bool) {
	v, c := a.v, d.c
	s, start, ok := c.openWS(a, "/connection/websocket", nil, "centrifugo")
	if !ok {
		return false
	}
	defer a.endStream(s)
	if err := a.writeFrame(ws.OpText, appendCfConnect(make([]byte, 0, 256), c.cfToken(v, false))); err != nil {
		c.connFailed(a, fmt.Errorf("centrifugo: connect: %w", err))
		return false
	}
	l := newLink(a, start)
	defer l.done()
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	answerPings := false
	var m cfMsg
	for {
		p, err := s.next(pong)
		if err != nil {
			return l.closed(fmt.Errorf("centrifugo: %w", err))
		}
		now := c.clk.now()
		for len(p) > 0 {
			line := p
			if i := bytes.IndexByte(p, '\n'); i >= 0 {
				line, p = p[:i], p[i+1:]
			} else {
				p = nil
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if err := parseCf(line, &m); err != nil {
				v.sh.fail(fmt.Errorf("centrifugo: %w: %.80q", errJSON, line), nil)
				continue
			}
			if m.empty { // a ping
				if answerPings {
					if err := a.writeFrame(ws.OpText, []byte("{}")); err != nil {
						return l.closed(fmt.Errorf("centrifugo: pong: %w", err))
					}
				}
				continue
			}
			if m.connect && !m.err {
				answerPings = m.pong
			}
			if end, err := d.event(l, &m, len(line), now); end {
				if err != nil {
					return l.closed(err)
				}
				return true
			}
		}
	}
}

// event hands one reply or push of the server (size bytes) to the link. It reports whether
// the session is over, and why when it failed.
func (d *cfWSDriver) event(l *link, m *cfMsg, size int, now int64) (end bool, err error) {
	a := l.a
	v := a.v
	switch {
	case m.err:
		err := fmt.Errorf("centrifugo: error %d %s", m.errCode, m.errMsg)
		switch {
		case m.id == cfConnectID:
			return true, fmt.Errorf("connect: %w", err)
		case m.id == cfSubscribeID:
			return true, fmt.Errorf("subscribe: %w", err)
		case m.id >= cfPubID:
			return l.refused(reply{seq: int64(m.id - cfPubID)}, err), nil
		}
		v.sh.fail(err, nil)
	case m.connect:
		l.opened()
		sub := appendCfSubscribe(make([]byte, 0, 192), v.topic, a.estab.Load() != 0, v.last, v.epoch)
		if err := a.writeFrame(ws.OpText, sub); err != nil {
			return true, fmt.Errorf("centrifugo: subscribe: %w", err)
		}
	case m.sub:
		d.c.cfSubscribed(l, m, now)
	case m.publish:
		return m.id >= cfPubID && l.answered(now, reply{seq: int64(m.id - cfPubID)}), nil
	case m.pub:
		l.message(now, true, m.offset, m.epoch, m.data, size)
	case m.disconnect:
		what := "disconnect"
		if m.unsubscribe {
			what = "unsubscribe"
		}
		return true, fmt.Errorf("centrifugo: server sent %s %d %s", what, m.code, m.reason)
	}
	return false, nil
}

// cfSubscribed hands a subscription's confirmation to the link, and the publications it
// brought back after a drop.
func (c *cell) cfSubscribed(l *link, m *cfMsg, now int64) {
	v := l.a.v
	_ = l.subscribed(now, m.offset, m.epoch, m.wasRecovering && !m.recovered) // no greeting: location only
	v.position(m.offset, m.epoch)
	if err := c.recovered(l, m, now); err != nil {
		v.sh.fail(err, nil)
	}
}

// recovered receives the publications a subscribe result brought back after a drop.
func (c *cell) recovered(l *link, m *cfMsg, now int64) error {
	err := eachCfPublication(m.pubs, func(p *cfMsg, raw []byte) {
		l.message(now, true, p.offset, p.epoch, p.data, len(raw))
	})
	if err != nil {
		return fmt.Errorf("centrifugo: recovered publications: %w", err)
	}
	return nil
}

func (d *cfWSDriver) publish(w *pubWorker, job pubJob) {
	a := job.a
	v := a.v
	p := &v.pubs[job.seq]
	w.body = d.c.appendPub(w.body[:0], v, job.seq, p.ts)
	w.buf = appendCfPublish(w.buf[:0], job.seq, v.topic, w.body)
	w.frame = appendClientFrame(w.frame[:0], ws.OpText, w.buf)
	a.writePublication(job.seq, w.frame)
}

type cfSSEDriver struct{ c *cell }

func (d *cfSSEDriver) httpPublish() bool                { return true }
func (d *cfSSEDriver) publish(w *pubWorker, job pubJob) { w.cfAPIPublish(job) }
func (d *cfSSEDriver) leave(w *pubWorker, job pubJob)   { job.reply(jobResult{}) }
func (d *cfSSEDriver) run(a *activity)                  { runStream(a, d.session) }

func (d *cfSSEDriver) session(a *activity) (opened bool) {
	v, c := a.v, d.c
	bp := bufPool.Get().(*[]byte)
	target := append((*bp)[:0], "/connection/uni_sse?cf_connect="...)
	target = append(target, cfUniConnect(c.cfToken(v, true), v.topic, a.estab.Load() != 0, v.last, v.epoch)...)
	l := newLink(a, time.Now())
	lines, ok := c.openSSE(l, target, "", "centrifugo sse")
	*bp = target
	bufPool.Put(bp)
	if !ok {
		return false
	}
	defer a.clearConn()
	defer l.done()
	var long []byte
	var m cfMsg
	for {
		line, err := readLine(lines, &long)
		if err != nil {
			return l.closed(fmt.Errorf("centrifugo sse: %w", err))
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank lines end events; comments and other fields carry nothing here
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		now := c.clk.now()
		if err := parseCf(data, &m); err != nil {
			v.sh.fail(fmt.Errorf("centrifugo sse: %w: %.80q", errJSON, data), nil)
			continue
		}
		switch {
		case m.connect:
			if !m.sub || string(m.subChannel) != v.topic {
				return l.closed(fmt.Errorf("centrifugo sse: connected without a subscription to %s", v.topic))
			}
			c.cfSubscribed(l, &m, now)
		case m.pub:
			l.message(now, true, m.offset, m.epoch, m.data, len(data))
		case m.disconnect:
			return l.closed(fmt.Errorf("centrifugo sse: server sent disconnect %d %s", m.code, m.reason))
		}
	}
}

// cfAPIPublish publishes job's publication through Centrifugo's HTTP API (POST /api/publish
// with the API key), over the shared pool. Centrifugo answers 200 either way; a refusal is an
// "error" member in the body.
func (w *pubWorker) cfAPIPublish(job pubJob) {
	a := job.a
	v := a.v
	c := w.c
	p := &v.pubs[job.seq]
	// The pool's workers write no WebSocket frames: that buffer holds the data here.
	data := c.appendPub(w.frame[:0], v, job.seq, p.ts)
	w.frame = data
	w.body = append(w.body[:0], `{"channel":"`...)
	w.body = append(w.body, v.topic...)
	w.body = append(w.body, `","data":`...)
	w.body = append(w.body, data...)
	w.body = append(w.body, '}')
	w.buf = appendRequest(w.buf[:0], "POST", c.nodes[w.node], c.opts.withQuery([]byte("/api/publish")),
		c.opts.cfHeaders, w.body)
	if !a.httpTurn(job.seq) {
		return
	}
	defer a.httpMu.Unlock()
	p.state.Store(pubSent)
	v.sh.update(func(k *counters) { k.pubSent++ })
	err := w.do(w.buf, func(status int, body []byte) error {
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		var m cfMsg
		if err := parseCf(body, &m); err != nil {
			return fmt.Errorf("%w: publish answer %.80q", errBadResponse, body)
		}
		if m.err {
			return fmt.Errorf("centrifugo: error %d %s", m.errCode, m.errMsg)
		}
		return nil
	})
	w.settleHTTP(p, v, err)
}
