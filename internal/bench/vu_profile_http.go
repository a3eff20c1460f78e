package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// sseSession is one event stream on the profile's route: the stream counts as subscribed once
// its head is in (or after the profile's delay); events named as the profile says are
// deliveries. A reconnect sends Last-Event-ID, as EventSource does.
func (d *profDriver) sseSession(a *activity, lastID *string) (opened bool) {
	v := a.v
	l := newLink(a, time.Now())
	extra := d.headerLines(v, d.t.Headers)
	if id := *lastID; id != "" {
		extra += "Last-Event-ID: " + id + "\r\n"
	}
	br, ok := d.c.openSSE(l, []byte(d.route(v, d.t.URL, "")), extra, "sse")
	if !ok {
		return false
	}
	defer a.clearConn()
	defer l.done()
	if !d.ready(l) {
		return true
	}
	return d.sseRead(l, br, lastID)
}

// sseRead reads events until the stream ends; an event's data lines are joined with \n.
func (d *profDriver) sseRead(l *link, br *bufio.Reader, lastID *string) bool {
	want := d.t.Read.Event
	if want == "" {
		want = "message"
	}
	event := "message"
	var data, long []byte
	for {
		line, err := readLine(br, &long)
		if err != nil {
			return l.closed(fmt.Errorf("sse: %w", err))
		}
		switch {
		case len(line) == 0:
			if len(data) > 0 && event == want {
				d.message(l, data, len(data), d.c.clk.now())
			} else if len(data) > 0 {
				n := len(data)
				l.a.v.sh.update(func(k *counters) { k.other++; k.bytesIn += int64(n) })
			}
			event, data = "message", data[:0]
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			event = string(bytes.TrimSpace(line[6:]))
		case bytes.HasPrefix(line, []byte("id:")):
			*lastID = string(bytes.TrimSpace(line[3:]))
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
	}
}

// pollRun polls the profile's route on one keep-alive connection: in a loop (longpoll) or
// every interval (shortpoll). With a cursor path, the first poll reads the cursor only and
// opens the window; without one, the window opens with the first poll. A status other than
// 200 counts as a failed connection.
func (d *profDriver) pollRun(a *activity) {
	v, c := a.v, d.c
	l := newLink(a, time.Now())
	var hc *httpConn
	disconnect := func() {
		if hc != nil {
			a.clearConn()
			hc = nil
		}
		l.done()
	}
	defer disconnect()
	every := d.t.Interval
	if every == 0 {
		every = c.opts.Interval
	}
	var cursor string
	fails := 0
	for a.ctx.Err() == nil {
		if hc == nil {
			if hc = d.pollConn(l); hc == nil {
				if !a.sleep(backoff(fails)) {
					return
				}
				fails++
				continue
			}
		}
		start := time.Now()
		err := d.poll(l, hc, &cursor)
		var se *StatusError
		if errors.Is(err, errConnClose) && !errors.As(err, &se) {
			disconnect() // answered, then the server ended keep-alive
			err = nil
		}
		if err != nil {
			if a.ending() || a.ctx.Err() != nil {
				return
			}
			if errors.As(err, &se) {
				c.connTried(v)
				c.connFailed(a, err)
			} else {
				l.closed(err)
			}
			disconnect()
			if !a.sleep(backoff(fails)) {
				return
			}
			fails++
			continue
		}
		fails = 0
		l.serving()
		if d.t.Name == "shortpoll" && !a.sleep(every-time.Since(start)) {
			return
		}
	}
}

// pollConn dials a's keep-alive connection for polling.
func (d *profDriver) pollConn(l *link) *httpConn {
	a := l.a
	v, c := a.v, d.c
	c.connTried(v)
	start := time.Now()
	conn, err := c.dial(a.ctx, v)
	if err != nil {
		c.connFailed(a, fmt.Errorf("%s: %w", d.t.Name, err))
		return nil
	}
	if !a.setConn(conn) {
		_ = conn.Close()
		c.connAbandoned(v)
		return nil
	}
	l.start = start
	l.opened()
	return newHTTPConn(conn, c.nodes[v.at()], d.t.Name == "longpoll")
}

// poll makes one request and hands its deliveries to the link.
func (d *profDriver) poll(l *link, hc *httpConn, cursor *string) error {
	a := l.a
	v, c := a.v, d.c
	r := &d.t.Read
	first := a.estab.Load() == 0
	if first && r.Cursor == nil {
		a.established(c.clk.now(), 0, nil)
	}
	route := d.t.URL
	if first && r.Cursor != nil && d.t.Subscribe.URL != nil {
		route = d.t.Subscribe.URL
	}
	path := d.route(v, route, *cursor)
	req := appendRequest(nil, "GET", c.nodes[v.at()], []byte(path), d.headerLines(v, d.t.Headers), nil)
	deadline := time.Now().Add(requestTimeout + c.opts.LongWait)
	return hc.roundTrip(req, deadline, func(status int, body []byte) error {
		now := c.clk.now()
		v.sh.update(func(k *counters) { k.requests++ })
		if want := nonZero(d.t.Subscribe.Ready.Status, http.StatusOK); status != want {
			return fmt.Errorf("%s GET %s: %w", d.t.Name, path, &StatusError{Code: status, Body: string(body[:min(len(body), 200)])})
		}
		if r.Cursor != nil {
			if cur, ok := r.Cursor.Text(body); ok {
				*cursor = cur
			}
			if first {
				a.established(now, 0, nil)
				return nil
			}
		}
		return d.items(l, body, now)
	})
}

// items hands each delivery of a poll answer to the link.
func (d *profDriver) items(l *link, body []byte, now int64) error {
	r := &d.t.Read
	each := func(elem []byte) error {
		d.message(l, elem, len(elem), now)
		return nil
	}
	if r.Items != nil {
		return r.Items.Each(body, each)
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		return eachElement(b, each)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		d.message(l, body, len(body), now)
	}
	return nil
}

func nonZero(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
