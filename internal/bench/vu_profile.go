package bench

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/target"
)

// profDriver drives a server a target profile describes (--profile): the transport's mechanics
// are the lab's (framing, reconnection, the shared HTTP pool, the accounting), the routes,
// frames and where the bench's fields are come from the profile.
type profDriver struct {
	c      *cell
	t      *target.Transport
	sio    *target.SocketIO // the socketio transport's section; nil on the others
	users  []string         // {user} of each vu
	tokens []string         // {token} of each vu
	runFn  func(a *activity)
}

// newProfDriver makes the driver of transport, which Options.Validate has found in p with a
// client here, and mints every user's token.
func newProfDriver(c *cell, p *target.Profile, transport string) *profDriver {
	d := &profDriver{c: c, t: p.Transports[transport]}
	if transport == target.SocketIOName {
		d.sio, d.t = p.SocketIO, sioTransport(p.SocketIO)
	}
	n := c.plan.Peak
	d.users, d.tokens = make([]string, n), make([]string, n)
	now := time.Now()
	for i := range n {
		d.users[i] = p.User.Render(&target.Values{VU: i, Group: i % c.groups})
		// Validate minted one already: HS256 with a key does not fail.
		d.tokens[i], _ = p.Auth.Token(i, i%c.groups, d.users[i], now)
	}
	if transport == TransportSTOMPTCP {
		c.stompNodes = []string{nonEmptyStr(d.t.URL.String(), c.nodes[0])}
	}
	switch transport {
	case "ws":
		d.runFn = func(a *activity) { runStream(a, d.wsSession) }
	case "sse":
		d.runFn = func(a *activity) {
			var lastID string // kept over reconnects, as EventSource does
			runStream(a, func(a *activity) bool { return d.sseSession(a, &lastID) })
		}
	case "longpoll", "shortpoll":
		d.runFn = d.pollRun
	case "stomp", TransportSTOMPTCP, TransportSockJS:
		d.runFn = func(a *activity) { runStream(a, d.stompSession) }
	case target.SocketIOName:
		d.runFn = func(a *activity) { runStream(a, d.sioSession) }
	}
	return d
}

// profileClients are the transports a profile can be run on here.
var profileClients = []string{"shortpoll", "longpoll", "sse", "ws", "stomp", TransportSTOMPTCP, TransportSockJS, target.SocketIOName}

func (d *profDriver) run(a *activity)          { d.runFn(a) }
func (d *profDriver) httpPublish() bool        { return d.t.Publish.HTTP() }
func (d *profDriver) leave(*pubWorker, pubJob) {}

// vals are the template values of v's publication seq sent at ts.
func (d *profDriver) vals(v *vu, seq int, ts int64) *target.Values {
	return &target.Values{Group: v.group, VU: v.id, Seq: seq, TS: ts, User: d.users[v.id], Token: d.tokens[v.id]}
}

// route is the transport's URL for v with the profile's query parameters.
func (d *profDriver) route(v *vu, tmpl *target.Template, cursor string) string {
	vals := d.vals(v, 0, 0)
	vals.Cursor = url.QueryEscape(cursor)
	s := tmpl.Render(vals)
	for i, q := range d.t.Query {
		sep := "&"
		if i == 0 && !strings.Contains(s, "?") {
			sep = "?"
		}
		s += sep + url.QueryEscape(q.Name) + "=" + url.QueryEscape(q.Value.Render(vals))
	}
	return s
}

// headerLines are the transport's headers and cookies for v, as HTTP header lines.
func (d *profDriver) headerLines(v *vu, hs []target.Header) string {
	vals := d.vals(v, 0, 0)
	var b strings.Builder
	for _, h := range hs {
		b.WriteString(h.Name + ": " + h.Value.Render(vals) + "\r\n")
	}
	for i, k := range d.t.Cookies {
		if i == 0 {
			b.WriteString("Cookie: ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(k.Name + "=" + k.Value.Render(vals))
		if i == len(d.t.Cookies)-1 {
			b.WriteString("\r\n")
		}
	}
	return b.String()
}

// message hands one message of the server to the link: a delivery (its fields where the
// profile reads them), the answer to a publication, or the sign that the subscription is in
// place. It reports whether the connection has nothing more to do (a leaving user's last
// answer).
func (d *profDriver) message(l *link, msg []byte, size int, now int64) (end bool) {
	a := l.a
	v := a.v
	r := &d.t.Read
	pub := &d.t.Publish
	if pub.Ack == target.AckReply && matchAll(pub.ReplyMatch, msg) {
		if seq, ok := pub.ReplySeq.Text(msg); ok {
			if n, err := parseSeq(seq); err == nil {
				return l.answered(now, reply{seq: n})
			}
		}
	}
	if rd := &d.t.Subscribe.Ready; rd.Kind == target.ReadyMessage && a.estab.Load() == 0 && matchAll(rd.Match, msg) {
		_ = l.subscribed(now, 0, nil, false)
	}
	if !r.Matches(msg) {
		v.sh.update(func(k *counters) { k.other++; k.bytesIn += int64(size) })
		return false
	}
	f, err := r.Extract(msg)
	if err != nil {
		v.sh.fail(fmt.Errorf("%s: %w", d.t.Name, err), nil)
		return false
	}
	df := dataFields{vu: f.VU, seq: f.Seq, ts: f.TS, ok: true}
	// The record holds the exact intended send time; the message's may have lost digits in a
	// double (a server that keeps ms as a float), or not be there at all.
	if p := d.c.pubRecord(f.VU, f.Seq); p != nil && (f.TS == 0 || absDiff(f.TS, p.ts) < int64(time.Second)) {
		df.ts = p.ts
	}
	l.message(now, false, 0, nil, df, size)
	if pub.Ack == target.AckEcho && f.VU == int64(v.id) {
		return l.answered(now, reply{seq: f.Seq})
	}
	return false
}

func matchAll(ms []target.Match, msg []byte) bool {
	r := target.Read{Match: ms}
	return r.Matches(msg)
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

func parseSeq(s string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(s, &n)
	return n, err
}

// ready marks the subscription in place when the profile says it is once open: at once, or
// after its delay (what arrives meanwhile waits in the socket and falls before the window).
func (d *profDriver) ready(l *link) bool {
	rd := &d.t.Subscribe.Ready
	switch rd.Kind {
	case target.ReadyDelay:
		if !l.a.sleep(rd.Delay) {
			return false
		}
	case target.ReadyOpen:
	default:
		return true
	}
	_ = l.subscribed(d.c.clk.now(), 0, nil, false)
	return true
}

// wsSession is one WebSocket: open, send the subscribe frames, read until it ends.
func (d *profDriver) wsSession(a *activity) (opened bool) {
	v, c := a.v, d.c
	s, start, ok := c.openWSWith(a, d.route(v, d.t.URL, ""), d.t.Subprotocols, d.headerLines(v, d.t.Headers), "ws")
	if !ok {
		return false
	}
	defer a.endStream(s)
	l := newLink(a, start)
	l.opened()
	defer l.done()
	for _, f := range d.t.Subscribe.Send {
		if err := a.writeFrame(ws.OpText, f.Append(nil, d.vals(v, 0, 0))); err != nil {
			return l.closed(fmt.Errorf("ws: subscribe: %w", err))
		}
	}
	if !d.ready(l) {
		return true
	}
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	for {
		p, err := s.next(pong)
		if err != nil {
			return l.closed(fmt.Errorf("ws: %w", err))
		}
		end, err := d.wsMessage(l, p, c.clk.now())
		if err != nil {
			return l.closed(fmt.Errorf("ws: pong: %w", err))
		}
		if end {
			return true
		}
	}
}

// wsMessage hands a WebSocket message to message, line by line when the profile says the
// server batches (Centrifugo's JSON protocol), and answers the server's pings.
func (d *profDriver) wsMessage(l *link, p []byte, now int64) (end bool, err error) {
	for len(p) > 0 {
		line := p
		p = nil
		if d.t.Lines {
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line, p = line[:i], line[i+1:]
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
		}
		if d.t.Ping != "" && string(line) == d.t.Ping {
			if err := l.a.writeFrame(ws.OpText, []byte(d.t.Pong)); err != nil {
				return true, err
			}
			continue
		}
		if d.message(l, line, len(line), now) {
			return true, nil
		}
	}
	return false, nil
}

// publish sends one publication: over the shared HTTP pool, as a WebSocket frame, as a STOMP
// SEND, or as a Socket.IO event.
func (d *profDriver) publish(w *pubWorker, job pubJob) {
	switch {
	case d.sio != nil:
		d.sioPublish(w, job)
	case d.t.Publish.HTTP():
		d.publishHTTP(w, job)
	case d.t.Publish.Destination != nil:
		d.stompPublish(w, job)
	default:
		a := job.a
		p := &a.v.pubs[job.seq]
		w.body = d.t.Publish.Body.Append(w.body[:0], d.vals(a.v, job.seq, p.ts))
		w.frame = appendClientFrame(w.frame[:0], ws.OpText, w.body)
		d.written(a, job.seq, w.frame)
	}
}

// written writes a publication on a's connection; a fire-and-forget one is accepted once
// written.
func (d *profDriver) written(a *activity, seq int, frame []byte) {
	a.writePublication(seq, frame)
	if d.t.Publish.Ack == target.AckNone {
		a.answered(int64(seq), true, nil)
	}
}

// publishHTTP sends a publication with the profile's request over the shared pool; any
// status but the one wanted (any 2xx by default) fails it.
func (d *profDriver) publishHTTP(w *pubWorker, job pubJob) {
	a := job.a
	v := a.v
	c := w.c
	pub := &d.t.Publish
	p := &v.pubs[job.seq]
	vals := d.vals(v, job.seq, p.ts)
	w.body = pub.Body.Append(w.body[:0], vals)
	if pub.Body == nil {
		w.body = nil
	}
	path := d.route(v, pub.URL, "")
	hs := append(d.t.Headers[:len(d.t.Headers):len(d.t.Headers)], pub.Headers...) // the transport's, then the request's own
	w.buf = appendRequest(w.buf[:0], pub.Method, c.nodes[w.node], []byte(path), d.headerLines(v, hs), w.body)
	if !a.httpTurn(job.seq) {
		return
	}
	defer a.httpMu.Unlock()
	p.state.Store(pubSent)
	v.sh.update(func(k *counters) { k.pubSent++ })
	err := w.do(w.buf, func(status int, body []byte) error {
		if (pub.Status == 0 && status/100 != 2) || (pub.Status != 0 && status != pub.Status) {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("%s %s: %w", pub.Method, path, err)
	}
	w.settleHTTP(p, v, err)
}
