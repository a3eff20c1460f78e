package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// requestTimeout bounds one publish or position request.
const requestTimeout = 10 * time.Second

// conn returns the worker's pooled keep-alive connection, dialling it when needed.
func (w *pubWorker) conn() (*httpConn, error) {
	if w.hc != nil {
		return w.hc, nil
	}
	c := w.c
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	conn, err := c.dialAddr(ctx, w.node, c.nodes[w.node])
	if err != nil {
		w.down = true
		return nil, fmt.Errorf("publish pool: connect: %w", err)
	}
	w.hc = newHTTPConn(conn, c.nodes[w.node], true)
	return w.hc, nil
}

// do sends one request over the pool connection, dropping the connection after any failure so
// the next request starts on a fresh one.
func (w *pubWorker) do(req []byte, fn func(status int, body []byte) error) error {
	hc, err := w.conn()
	if err != nil {
		return err
	}
	err = hc.roundTrip(req, time.Now().Add(requestTimeout), fn)
	if err == nil {
		return nil
	}
	var se *StatusError
	closed := errors.Is(err, errConnClose)
	if closed || !errors.As(err, &se) {
		hc.close()
		w.hc = nil
	}
	if closed && se == nil {
		return nil // answered, then closed by the server: a normal end of keep-alive
	}
	return err
}

// httpPublish sends job's publication with POST /api/publish/{topic}.
func (w *pubWorker) httpPublish(job pubJob) {
	a := job.a
	v := a.v
	c := w.c
	p := &v.pubs[job.seq]
	w.body = c.appendPub(w.body[:0], v, job.seq, p.ts)
	w.buf = append(w.buf[:0], "/api/publish/"...)
	topic, typ := c.scn.publishTo(v)
	w.buf = append(w.buf, topic...)
	if typ != "" {
		w.buf = append(w.buf, "?type="...)
		w.buf = append(w.buf, typ...)
	}
	w.buf = c.opts.withQuery(w.buf)
	path := len(w.buf)
	w.buf = appendRequest(w.buf, "POST", c.nodes[w.node], w.buf[:path], v.authHeader(), w.body)
	req := w.buf[path:]
	if !a.httpTurn(job.seq) {
		return
	}
	defer a.httpMu.Unlock()
	p.state.Store(pubSent)
	v.sh.update(func(k *counters) { k.pubSent++ })
	err := w.do(req, func(status int, body []byte) error {
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		return nil
	})
	w.settleHTTP(p, v, err)
}

// settleHTTP records the answer to a publication of v sent over the pool: accepted (and its
// latency from the intended send time) or failed.
func (w *pubWorker) settleHTTP(p *pubRecord, v *vu, err error) {
	now := w.c.clk.now()
	if err != nil {
		p.state.Store(pubFailed)
		v.sh.fail(fmt.Errorf("publish: %w", err), func(k *counters) { k.pubFailed++; k.requests++ })
		return
	}
	p.state.Store(pubOK)
	v.sh.mu.Lock()
	v.sh.c.requests++
	recordDur(v.sh.hist[histPublish], time.Duration(now-p.ts))
	v.sh.mu.Unlock()
}

// fetchPosition reads the current position of job.a.v's topic (GET /api/poll/{topic} without
// since), as a page does before it opens its SSE stream.
func (w *pubWorker) fetchPosition(job pubJob) {
	v := job.a.v
	w.buf = append(w.buf[:0], "/api/poll/"...)
	w.buf = append(w.buf, v.topic...)
	w.buf = w.c.opts.withQuery(w.buf)
	path := len(w.buf)
	w.buf = appendRequest(w.buf, "GET", w.c.nodes[w.node], w.buf[:path], v.authHeader(), nil)
	var res jobResult
	err := w.do(w.buf[path:], func(status int, body []byte) error {
		if status != http.StatusOK {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		var m wireMsg
		if err := parseMsg(body, &m); err != nil || !m.hasOffset {
			return fmt.Errorf("%w: poll answer without offset", errBadResponse)
		}
		res.offset, res.epoch = m.offset, string(m.epoch)
		return nil
	})
	v.sh.update(func(k *counters) { k.requests++ })
	res.err = err
	job.reply(res)
}
