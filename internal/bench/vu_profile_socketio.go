package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/socketio"
	"github.com/rtlab/rtlab/internal/target"
)

// sioTransport is the profile's Socket.IO section as the generic driver reads it: its read
// paths, query, publish acknowledgement and join readiness.
func sioTransport(s *target.SocketIO) *target.Transport {
	t := &target.Transport{Name: target.SocketIOName, Headers: s.Headers, Query: s.Query, Read: s.Read}
	t.Publish.Ack = s.PubAck
	t.Subscribe.Ready = s.JoinReady
	return t
}

// sioConn is a Socket.IO session as the activity's connection, so that its stop, clearConn and
// endSession end it like any other. Only they use it; the driver reads and emits on sc.
type sioConn struct {
	net.Conn // nil: no byte stream to read or write
	sc       *socketio.Conn
}

func (s *sioConn) Close() error                     { return s.sc.Close() }
func (s *sioConn) Write([]byte) (int, error)        { return 0, errNoConn }
func (s *sioConn) SetWriteDeadline(time.Time) error { return nil }

// SetReadDeadline is how a stopping activity wakes its reader once the drain is over: the
// session is closed then, which ends Read.
func (s *sioConn) SetReadDeadline(t time.Time) error {
	time.AfterFunc(time.Until(t), func() { _ = s.sc.Close() })
	return nil
}

// sioURL is v's io() URL: the target's scheme and host, the namespace, the profile's query.
func (d *profDriver) sioURL(v *vu) string {
	o := d.c.opts
	u := "http://"
	if o.tlsConf != nil {
		u = "https://"
	}
	u += d.c.nodes[v.at()] + "/" + strings.TrimPrefix(d.sio.Namespace, "/")
	vals := d.vals(v, 0, 0)
	q := url.Values{}
	for _, h := range d.sio.Query {
		q.Add(h.Name, h.Value.Render(vals))
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return string(o.withQuery([]byte(u)))
}

// sioOptions are v's session options: its connections come from the cell's dialer (source
// addresses spread like every driver's) and TLS is the target's.
func (d *profDriver) sioOptions(v *vu) socketio.Options {
	vals := d.vals(v, 0, 0)
	so := socketio.Options{
		URL:       d.sioURL(v),
		Path:      d.sio.Path,
		Transport: d.sio.Transport,
		TLSConfig: d.c.opts.tlsConf,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.c.dialer(v.id).DialContext(ctx, network, addr)
		},
	}
	if so.Transport == target.SIOUpgrade {
		so.Transport = "" // the client's default
	}
	if len(d.sio.Headers) > 0 {
		so.Header = http.Header{}
		for _, h := range d.sio.Headers {
			so.Header.Add(h.Name, h.Value.Render(vals))
		}
	}
	if d.sio.Auth != nil {
		so.Auth = json.RawMessage(d.sio.Auth.Append(nil, vals))
	}
	return so
}

// sioOpen dials a's session and makes it a's connection, counting the attempt.
func (d *profDriver) sioOpen(a *activity) (sc *socketio.Conn, start time.Time, ok bool) {
	v, c := a.v, d.c
	c.connTried(v)
	start = time.Now()
	ctx, cancel := context.WithTimeout(a.ctx, socketio.DefaultDialTimeout)
	sc, err := socketio.Dial(ctx, d.sioOptions(v))
	cancel()
	if err != nil {
		c.connFailed(a, sioErr(err))
		return nil, start, false
	}
	if !a.setConn(&sioConn{sc: sc}) {
		_ = sc.Close()
		c.connAbandoned(v)
		return nil, start, false
	}
	return sc, start, true
}

// sioSession is one Socket.IO session: connect (the query may join), emit the join event,
// then read deliveries until it ends.
func (d *profDriver) sioSession(a *activity) (opened bool) {
	v, c := a.v, d.c
	sc, start, ok := d.sioOpen(a)
	if !ok {
		return false
	}
	defer a.clearConn()
	l := newLink(a, start)
	l.opened()
	defer l.done()
	if err := d.sioJoin(l, sc); err != nil {
		return l.closed(err)
	}
	if !d.ready(l) {
		return true
	}
	for {
		ev, args, err := sc.Read()
		if err != nil {
			return l.closed(sioErr(err))
		}
		if ev != d.sio.RecvEvent || len(args) == 0 {
			v.sh.update(func(k *counters) { k.other++ })
			continue
		}
		if d.message(l, args[0], len(args[0]), c.clk.now()) {
			return true
		}
	}
}

// sioJoin emits the profile's join event, if any; with ready: ack its acknowledgement (which
// Read receives) marks the subscription in place.
func (d *profDriver) sioJoin(l *link, sc *socketio.Conn) error {
	s := d.sio
	if s.JoinEvent == "" {
		return nil
	}
	var args []json.RawMessage
	if s.JoinData != nil {
		args = append(args, s.JoinData.Append(nil, d.vals(l.a.v, 0, 0)))
	}
	var err error
	if s.JoinReady.Kind == target.ReadyAck {
		err = sc.EmitFunc(func([]json.RawMessage) { _ = l.subscribed(d.c.clk.now(), 0, nil, false) }, s.JoinEvent, args...)
	} else {
		err = sc.Emit(s.JoinEvent, args...)
	}
	if err != nil {
		return fmt.Errorf("socketio: emit %s: %w", s.JoinEvent, err)
	}
	return nil
}

// sioPublish emits one publication on the user's own session, in the user's order; a
// fire-and-forget one is accepted once sent, an acknowledged one when its ack arrives.
func (d *profDriver) sioPublish(w *pubWorker, job pubJob) {
	a, seq := job.a, job.seq
	v := a.v
	s := d.sio
	w.body = s.PubData.Append(w.body[:0], d.vals(v, seq, v.pubs[seq].ts))
	a.mu.Lock()
	conn, _ := a.conn.(*sioConn)
	if conn == nil || !a.ready || a.stopping.Load() || !a.inOrderLocked(&a.wireNext, seq) {
		a.mu.Unlock()
		return
	}
	a.sentLocked(seq)
	var err error
	if s.PubAck == target.AckSocketIO {
		err = conn.sc.EmitFunc(func([]json.RawMessage) {
			if a.answered(int64(seq), true, nil) {
				_ = conn.sc.Close() // a leaving user's last answer: the reader ends
			}
		}, s.PubEvent, w.body)
	} else {
		err = conn.sc.Emit(s.PubEvent, w.body)
	}
	a.mu.Unlock()
	v.sh.update(func(k *counters) { k.pubSent++ })
	switch {
	case err != nil:
		a.answered(int64(seq), false, fmt.Errorf("socketio: emit %s: %w", s.PubEvent, err))
	case s.PubAck == target.AckNone:
		a.answered(int64(seq), true, nil)
	}
}

// sioErr names the client in err once: the client's own errors name it already.
func sioErr(err error) error {
	if strings.HasPrefix(err.Error(), "socketio: ") {
		return err
	}
	return fmt.Errorf("socketio: %w", err)
}

// sioDescribe names v's session for the pre-flight's errors: the URL, and the join event.
func (d *profDriver) sioDescribe(v *vu) string {
	s := fmt.Sprintf("socketio %s over %s", d.sioURL(v), d.sio.Transport)
	if d.sio.JoinEvent != "" {
		s += ", emit " + d.sio.JoinEvent
	}
	return s
}
