package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"
)

// sseDriver is a browser page with an EventSource: it reads the group's position, opens one
// stream from there (since=), publishes through the shared pool, and on a drop reconnects
// with Last-Event-ID as EventSource does.
//
// The position is read first because the stream itself gives no signal that the server has
// subscribed it: a stream opened "from now" could miss a publication sent between the answer's
// headers and the subscription, which would be counted as lost. Resuming from a known offset
// cannot miss anything.
type sseDriver struct{ c *cell }

func (d *sseDriver) httpPublish() bool                { return true }
func (d *sseDriver) publish(w *pubWorker, job pubJob) { w.httpPublish(job) }
func (d *sseDriver) leave(w *pubWorker, job pubJob)   { w.httpLeave(job) }

func (d *sseDriver) run(a *activity) { runStream(a, d.session) }

// SSE event kinds the generator tells apart.
const (
	evMessage = iota
	evGap
	evDisconnect
	evOther
)

// session is one stream: connect, read events until it ends. It reports whether the stream
// was opened.
func (d *sseDriver) session(a *activity) (opened bool) {
	v, c := a.v, d.c
	first := a.estab.Load() == 0
	var pos jobResult
	if first {
		var ok bool
		if pos, ok = d.position(a); !ok {
			return false
		}
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], "/api/sse?topic="...)
	b = append(b, v.topic...)
	var extra string
	if first {
		b = append(b, "&since="...)
		b = appendUint(b, pos.offset)
		if pos.epoch != "" {
			b = append(b, "&epoch="...)
			b = append(b, pos.epoch...)
		}
		b = v.tokenQuery(b, '&')
	} else {
		b = v.tokenQuery(b, '&')
		extra = "Last-Event-ID: " + v.topic + "=" + strconv.FormatUint(v.last, 10) + ":" + v.epoch + "\r\n"
	}
	l := newLink(a, time.Now())
	br, ok := c.openSSE(l, b, extra, "sse")
	*bp = b
	bufPool.Put(bp)
	if !ok {
		return false
	}
	defer a.clearConn()
	defer l.done()
	// The stream resumes from a known position: it is subscribed as soon as it is open. Events
	// wait in the socket while the greeting goes out.
	if err := l.subscribed(c.clk.now(), pos.offset, []byte(pos.epoch), false); err != nil {
		return true
	}
	return d.read(l, br)
}

// position asks the HTTP pool for the position of a's topic, as a page does before it opens
// its stream.
func (d *sseDriver) position(a *activity) (jobResult, bool) {
	v, c := a.v, d.c
	ch := make(chan jobResult, 1)
	select {
	case c.httpq[v.at()] <- pubJob{a: a, kind: jobFetch, done: ch}:
	case <-a.ctx.Done():
		return jobResult{}, false
	}
	var pos jobResult
	select {
	case pos = <-ch:
	case <-a.ctx.Done():
		return jobResult{}, false
	}
	if pos.err != nil {
		// The stream cannot open without its position: the user's attempt failed.
		c.connTried(v)
		c.connFailed(a, fmt.Errorf("sse: reading position: %w", pos.err))
		return jobResult{}, false
	}
	return pos, true
}

// read turns the stream's events into the link's until the stream ends; it reports that the
// stream was open.
func (d *sseDriver) read(l *link, br *bufio.Reader) bool {
	v, c := l.a.v, d.c
	event := evMessage
	var reason string
	var long []byte // a line longer than the reader's buffer
	var m wireMsg
	for {
		line, err := readLine(br, &long)
		if err != nil {
			if reason != "" {
				err = fmt.Errorf("server said %s: %w", reason, err)
			}
			return l.closed(fmt.Errorf("sse: %w", err))
		}
		switch {
		case len(line) == 0:
			event = evMessage
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			event = sseEvent(bytes.TrimSpace(line[6:]))
		case bytes.HasPrefix(line, []byte("data:")):
			data := bytes.TrimPrefix(line[5:], []byte(" "))
			switch event {
			case evMessage:
				now := c.clk.now()
				if err := parseMsg(data, &m); err != nil || !m.hasOffset {
					v.sh.fail(fmt.Errorf("sse: %w: event %.80q", errBadResponse, data), nil)
					continue
				}
				l.message(now, true, m.offset, m.epoch, m.data, len(data))
			case evGap:
				l.gap()
			case evDisconnect:
				if parseMsg(data, &m) == nil {
					reason = string(m.code)
				}
			default:
				v.sh.fail(fmt.Errorf("sse: event %.80q", data), nil)
			}
		}
	}
}

// sseEvent is the kind an event: line names.
func sseEvent(name []byte) int {
	switch string(name) {
	case "message":
		return evMessage
	case "gap":
		return evGap
	case "disconnect":
		return evDisconnect
	}
	return evOther
}

// openSSE opens an event stream for a's user: it dials, sends GET target (path and query) with
// the extra header lines, and reads the answer's head, which must be 200 text/event-stream. The
// stream's lines come from the returned reader (a chunked stream, as Centrifugo sends, decoded).
// It counts the attempt; ok is false when it failed or was abandoned, else the connection is
// a's until the caller's clearConn. what names the client in errors.
func (c *cell) openSSE(l *link, target []byte, extra, what string) (lines *bufio.Reader, ok bool) {
	a := l.a
	v := a.v
	c.connTried(v)
	conn, err := c.dial(a.ctx, v)
	if err != nil {
		c.connFailed(a, fmt.Errorf("%s: %w", what, err))
		return nil, false
	}
	if !a.setConn(conn) {
		_ = conn.Close()
		c.connAbandoned(v)
		return nil, false
	}
	bp := bufPool.Get().(*[]byte)
	req := appendRequest((*bp)[:0], "GET", c.nodes[v.at()], c.opts.withQuery(target), "Accept: text/event-stream\r\nCache-Control: no-cache\r\n"+extra, nil)
	_ = conn.SetDeadline(time.Now().Add(requestTimeout))
	_, err = conn.Write(req)
	*bp = req
	bufPool.Put(bp)
	br := bufio.NewReaderSize(conn, streamBufSize)
	var head respHead
	if err == nil {
		head, err = readHead(br)
	}
	if err == nil && (head.status != http.StatusOK || !head.stream) {
		n := int64(200)
		if head.length >= 0 { // a keep-alive answer: read its body, not up to the deadline
			n = min(n, head.length)
		}
		msg, _ := io.ReadAll(io.LimitReader(br, n))
		err = &StatusError{Code: head.status, Body: string(msg)}
	}
	if err != nil {
		a.clearConn()
		c.connFailed(a, fmt.Errorf("%s: %w", what, err))
		return nil, false
	}
	a.noDeadline()
	l.opened()
	if head.chunked {
		br = bufio.NewReaderSize(httputil.NewChunkedReader(br), streamBufSize)
	}
	return br, true
}

// readLine returns the next line of an event stream without its line end. A line longer than
// the reader's buffer is collected in *long (kept for the next one), up to maxMessage.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		*long = append((*long)[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = br.ReadSlice('\n')
			*long = append(*long, line...)
			if len(*long) > maxMessage {
				err = fmt.Errorf("sse: line over %d bytes", maxMessage)
			}
		}
		line = *long
	}
	return bytes.TrimRight(line, "\r\n"), err
}

// noDeadline clears the deadlines of a's connection unless the activity is being stopped
// (whose deadline must stay to wake the reader).
func (a *activity) noDeadline() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil && !a.ending() {
		_ = a.conn.SetDeadline(time.Time{})
	}
}

func appendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }
