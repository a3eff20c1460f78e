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
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	answerPings := false
	counted := false
	defer func() {
		if counted {
			c.connected.Add(-1)
		}
	}()
	end := func(err error) bool {
		if opened {
			c.connDropped(a, err)
		} else {
			c.connFailed(a, err)
		}
		return opened
	}
	var m cfMsg
	for {
		p, err := s.next(pong)
		if err != nil {
			return end(fmt.Errorf("centrifugo: %w", err))
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
			switch {
			case m.empty:
				if answerPings {
					if err := a.writeFrame(ws.OpText, []byte("{}")); err != nil {
						return end(fmt.Errorf("centrifugo: pong: %w", err))
					}
				}
			case m.err:
				err := fmt.Errorf("centrifugo: error %d %s", m.errCode, m.errMsg)
				switch {
				case m.id == cfConnectID:
					return end(fmt.Errorf("connect: %w", err))
				case m.id == cfSubscribeID:
					return end(fmt.Errorf("subscribe: %w", err))
				case m.id >= cfPubID:
					if a.answered(int64(m.id-cfPubID), false, err) {
						return true
					}
				default:
					v.sh.fail(err, nil)
				}
			case m.connect:
				opened = true
				answerPings = m.pong
				c.connOpened(a, time.Since(start))
				sub := appendCfSubscribe(make([]byte, 0, 192), v.topic, a.estab.Load() != 0, v.last, v.epoch)
				if err := a.writeFrame(ws.OpText, sub); err != nil {
					return end(fmt.Errorf("centrifugo: subscribe: %w", err))
				}
			case m.sub:
				if m.wasRecovering && !m.recovered {
					v.gap()
				}
				a.mu.Lock()
				a.ready = true
				a.mu.Unlock()
				a.established(now, m.offset, m.epoch)
				v.position(m.offset, m.epoch)
				if err := d.c.recovered(a, &m, now); err != nil {
					v.sh.fail(err, nil)
				}
				if !counted {
					counted = true
					c.connected.Add(1)
				}
			case m.publish:
				if m.id >= cfPubID && a.answered(int64(m.id-cfPubID), true, nil) {
					return true
				}
			case m.pub:
				v.position(m.offset, m.epoch)
				v.receive(a, m.data, len(line), now)
			case m.disconnect:
				what := "disconnect"
				if m.unsubscribe {
					what = "unsubscribe"
				}
				return end(fmt.Errorf("centrifugo: server sent %s %d %s", what, m.code, m.reason))
			}
		}
	}
}

// recovered receives the publications a subscribe result brought back after a drop.
func (c *cell) recovered(a *activity, m *cfMsg, now int64) error {
	v := a.v
	err := eachCfPublication(m.pubs, func(p *cfMsg, raw []byte) {
		v.position(p.offset, p.epoch)
		v.receive(a, p.data, len(raw), now)
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
	a.writePublication(job.seq, w.frame, false)
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
	lines, ok := c.openSSE(a, target, "", "centrifugo sse")
	*bp = target
	bufPool.Put(bp)
	if !ok {
		return false
	}
	defer a.clearConn()
	counted := false
	defer func() {
		if counted {
			c.connected.Add(-1)
		}
	}()
	var long []byte
	var m cfMsg
	for {
		line, err := readLine(lines, &long)
		if err != nil {
			c.connDropped(a, fmt.Errorf("centrifugo sse: %w", err))
			return true
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
				c.connDropped(a, fmt.Errorf("centrifugo sse: connected without a subscription to %s", v.topic))
				return true
			}
			if m.wasRecovering && !m.recovered {
				v.gap()
			}
			a.established(now, m.offset, m.epoch)
			v.position(m.offset, m.epoch)
			if err := c.recovered(a, &m, now); err != nil {
				v.sh.fail(err, nil)
			}
			if !counted {
				counted = true
				c.connected.Add(1)
			}
		case m.pub:
			v.position(m.offset, m.epoch)
			v.receive(a, m.data, len(data), now)
		case m.disconnect:
			c.connDropped(a, fmt.Errorf("centrifugo sse: server sent disconnect %d %s", m.code, m.reason))
			return true
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
	w.buf = appendRequest(w.buf[:0], "POST", c.nodes[w.node], []byte("/api/publish"),
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
