package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/target"
)

// stompOpen opens a's STOMP connection as the profile's transport says: a WebSocket, a SockJS
// session or a TCP connection.
func (d *profDriver) stompOpen(a *activity) (s stompStream, start time.Time, end func(), ok bool) {
	v, c := a.v, d.c
	switch d.t.Name {
	case "stomp":
		ws, start, ok := c.openWSWith(a, d.route(v, d.t.URL, ""), d.t.Subprotocols, d.headerLines(v, d.t.Headers), "stomp")
		if !ok {
			return nil, start, nil, false
		}
		return ws, start, func() { a.endStream(ws) }, true
	case TransportSockJS:
		sj, start, ok := c.openSockJSAt(a, d.route(v, d.t.URL, ""))
		return sj, start, a.clearConn, ok
	}
	return c.openSTOMPTCP(a)
}

// stompWrite writes one frame on a's connection.
func (d *profDriver) stompWrite(a *activity, frame []byte) error {
	if d.t.Name == "stomp" {
		return a.writeFrame(ws.OpText, frame)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writeLocked(frame)
}

// appendHeaders appends STOMP header lines: defaults first unless the profile names them.
func appendHeaders(f []byte, defaults [][2]string, hs []target.Header, vals *target.Values) []byte {
	for _, kv := range defaults {
		named := false
		for _, h := range hs {
			named = named || strings.EqualFold(h.Name, kv[0])
		}
		if !named {
			f = append(f, kv[0]+":"+kv[1]+"\n"...)
		}
	}
	for _, h := range hs {
		f = append(f, h.Name...)
		f = append(f, ':')
		f = h.Value.Append(f, vals)
		f = append(f, '\n')
	}
	return f
}

// stompSession is one STOMP session: CONNECT, SUBSCRIBE (with a receipt when the profile
// waits for one), then MESSAGEs and the answers to SENDs until it ends.
func (d *profDriver) stompSession(a *activity) (opened bool) {
	v, c := a.v, d.c
	s, start, end, ok := d.stompOpen(a)
	if !ok {
		return false
	}
	defer end()
	vals := d.vals(v, 0, 0)
	f := appendHeaders([]byte("CONNECT\n"), [][2]string{{"accept-version", "1.2"}, {"host", c.nodes[v.at()]}, {"heart-beat", "0,0"}}, d.t.Connect, vals)
	if err := d.stompWrite(a, append(f, "\n\x00"...)); err != nil {
		c.connFailed(a, fmt.Errorf("stomp: CONNECT: %w", err))
		return false
	}
	l := newLink(a, start)
	defer l.done()
	return stompRead(a, l, s, &c.clk, d.stompFrame)
}

// stompFrame hands one frame of the server to the link; it reports whether the session is
// over, and why when it failed.
func (d *profDriver) stompFrame(l *link, fr *stomp.Frame, size int, now int64) (end bool, err error) {
	a := l.a
	switch fr.Command {
	case stomp.CmdMessage:
		return d.message(l, fr.Body, size, now), nil
	case stomp.CmdReceipt:
		id, _ := fr.Get("receipt-id")
		if id == subReceipt {
			_ = l.subscribed(now, 0, nil, false)
		} else if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			return l.answered(now, reply{seq: n}), nil
		}
	case stomp.CmdConnected:
		l.opened()
		vals := d.vals(a.v, 0, 0)
		sub := d.t.Subscribe
		f := append([]byte("SUBSCRIBE\nid:0\ndestination:"), sub.Destination.Append(nil, vals)...)
		f = append(f, "\nack:auto\n"...)
		if sub.Ready.Kind == target.ReadyReceipt {
			f = append(f, "receipt:"+subReceipt+"\n"...)
		}
		f = appendHeaders(f, nil, sub.Headers, vals)
		if err := d.stompWrite(a, append(f, "\n\x00"...)); err != nil {
			return true, fmt.Errorf("stomp: SUBSCRIBE: %w", err)
		}
		if !d.ready(l) {
			return true, nil
		}
	case stomp.CmdError:
		msg, _ := fr.Get("message")
		err := fmt.Errorf("stomp: ERROR %s", msg)
		rid, _ := fr.Get("receipt-id")
		if n, perr := strconv.ParseInt(rid, 10, 64); perr == nil {
			l.refused(reply{seq: n}, err)
		}
		return true, err
	}
	return false, nil
}

// stompPublish sends a SEND with the profile's destination, headers and body; with a receipt
// when the profile acknowledges by RECEIPT.
func (d *profDriver) stompPublish(w *pubWorker, job pubJob) {
	a := job.a
	v := a.v
	p := &v.pubs[job.seq]
	pub := &d.t.Publish
	vals := d.vals(v, job.seq, p.ts)
	w.body = pub.Body.Append(w.body[:0], vals)
	b := append(w.buf[:0], "SEND\ndestination:"...)
	b = pub.Destination.Append(b, vals)
	b = append(b, '\n')
	b = appendHeaders(b, [][2]string{{"content-type", "application/json"}}, pub.Headers, vals)
	if pub.Ack == target.AckReceipt {
		b = append(b, "receipt:"...)
		b = strconv.AppendInt(b, int64(job.seq), 10)
		b = append(b, '\n')
	}
	b = append(b, "content-length:"...)
	b = strconv.AppendInt(b, int64(len(w.body)), 10)
	b = append(b, "\n\n"...)
	b = append(b, w.body...)
	w.buf = append(b, 0)
	if d.t.Name == "stomp" {
		w.frame = appendClientFrame(w.frame[:0], ws.OpText, w.buf)
	} else {
		w.frame = append(w.frame[:0], w.buf...)
	}
	d.written(a, job.seq, w.frame)
}
