package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transports"
)

// sseConn is one Server-Sent Events stream. The connection is hijacked after validation so
// that net/http's per-connection buffers and goroutine are released: an idle stream costs a
// reader goroutine and little else.
type sseConn struct {
	conn
	dataOnly bool          // a data stream (HandleDataSSE): data: carries the publication's data alone
	maxAge   time.Duration // the stream ends cleanly after this long; zero: never
	watch    bool          // the client asked for the topics' presence (presence=true)
	announce bool          // tell where each topic starts (event: subscribed)

	mu     sync.Mutex     // guards topics and pos; taken by the writer while encoding
	topics []string       // in request order
	pos    []hub.Position // last position sent per topic
}

type sseSink struct {
	subHeld // key: the topic
	c       *sseConn
	idx     int // index into topics
}

// Pace hands a resuming subscription's replay to the writer (hub.PacedSink).
func (k *sseSink) Pace(pull func(budget int) bool) { k.c.w.pace(pull) }

func (k *sseSink) Deliver(p *hub.Publication) {
	if guardRefuses(k.guard, k.c.w, p) {
		return
	}
	k.c.w.send(item{pub: p, sub: k})
}

// Gap tells the client that the topic's epoch changed under the stream.
func (k *sseSink) Gap(topic string, now hub.Position, reason string) {
	b, _ := json.Marshal(map[string]any{"topic": topic, "offset": now.Offset, "epoch": now.Epoch, "reason": reason})
	k.c.w.sendRaw(fmt.Appendf(nil, "event: gap\ndata: %s\n\n", b))
}

func (c *sseConn) appendItem(buf []byte, it item) []byte {
	if it.pub == nil {
		return append(buf, it.raw...)
	}
	k := it.sub.(*sseSink)
	c.mu.Lock()
	c.pos[k.idx] = hub.Position{Offset: it.pub.Offset, Epoch: it.pub.Epoch}
	buf = append(buf, "id: "...)
	buf = c.appendTokenLocked(buf)
	c.mu.Unlock()
	buf = append(buf, "\ndata: "...)
	if c.dataOnly {
		buf = append(buf, it.pub.Data...)
	} else {
		buf = append(buf, it.pub.JSON()...)
	}
	return append(buf, "\n\n"...)
}

// appendTokenLocked appends the resume token: topic=offset:epoch for each topic.
func (c *sseConn) appendTokenLocked(buf []byte) []byte {
	for i, t := range c.topics {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, t...)
		buf = append(buf, '=')
		buf = strconv.AppendUint(buf, c.pos[i].Offset, 10)
		buf = append(buf, ':')
		buf = append(buf, c.pos[i].Epoch...)
	}
	return buf
}

func (c *sseConn) goodbye(r Reason) []byte {
	if r.Code == ReasonReadError.Code || r.Code == ReasonClientClosed.Code {
		return nil
	}
	var b []byte
	if c.dataOnly {
		// A data stream's data: is only ever a publication's data, so the reason goes in a comment.
		b = fmt.Appendf(nil, ": %s: %s\n", r.Code, r.Text)
	} else {
		msg, _ := json.Marshal(map[string]any{"code": r.Code, "reason": r.Text, "reconnect": r.Reconnect})
		b = fmt.Appendf(nil, "event: disconnect\ndata: %s\n\n", msg)
	}
	if r.Reconnect {
		// The last line an EventSource reads: reconnect (with Last-Event-ID) after this delay.
		b = append(b, sseRetry...)
	}
	return b
}

// sseRetry is the reconnection delay the server asks EventSource clients for.
const sseRetry = "retry: 2000\n\n"

// streamAge is how long a new /api/sse stream lives: --sse-max-age less up to a tenth, so
// streams opened together (after a restart) do not all reconnect at once.
func (s *Server) streamAge() time.Duration {
	age := s.lim.SSEMaxAge
	if age <= 0 {
		return 0
	}
	return age - rand.N(age/10+1)
}

var ssePing = []byte(": ping\n\n")

func (c *sseConn) keepalive() []byte { return ssePing }

func (c *sseConn) keepaliveDue(idle time.Duration) bool { return idle >= c.s.lim.SSEHeartbeat }

// parseResumeToken parses an SSE event id (topic=offset:epoch,...).
func parseResumeToken(tok string) (map[string]hub.Position, error) {
	out := make(map[string]hub.Position)
	for part := range strings.SplitSeq(tok, ",") {
		eq := strings.LastIndexByte(part, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%w: Last-Event-ID %q is not topic=offset:epoch", ErrBadRequest, tok)
		}
		off, epoch, _ := strings.Cut(part[eq+1:], ":")
		n, err := strconv.ParseUint(off, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: Last-Event-ID %q has a bad offset", ErrBadRequest, tok)
		}
		out[part[:eq]] = hub.Position{Offset: n, Epoch: epoch}
	}
	return out, nil
}

// sseRequest is what a stream is asked for: its topics, where each resumes, presence.
type sseRequest struct {
	topics   []string
	resume   map[string]hub.Position
	presence bool
	announce bool // event: subscribed per topic (POST /api/sse)
}

// HandleSSE serves GET /api/sse?topic=A&topic=B.
func (s *Server) HandleSSE(w http.ResponseWriter, r *http.Request) {
	req, err := sseQuery(r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	s.serveSSE(w, r, req, false, s.streamAge())
}

// HandleSSEPost serves POST /api/sse: the topics and positions come in a JSON body
// ({"topics":[{"topic","since"?,"epoch"?}],"presence"?}), so that a client with many topics
// never outgrows a URL or header limit. The stream is the same as GET /api/sse's.
func (s *Server) HandleSSEPost(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Topics []struct {
			Topic string  `json:"topic"`
			Since *uint64 `json:"since"`
			Epoch string  `json:"epoch"`
		} `json:"topics"`
		Presence bool `json:"presence"`
	}
	b, err := s.readBody(w, r)
	if err == nil && b != nil {
		if jerr := json.Unmarshal(b, &body); jerr != nil {
			err = fmt.Errorf("%w: body: %v", ErrBadRequest, jerr)
		}
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	req := sseRequest{resume: map[string]hub.Position{}, presence: body.Presence, announce: true}
	for _, t := range body.Topics {
		req.topics = append(req.topics, t.Topic)
		if t.Since != nil {
			req.resume[t.Topic] = hub.Position{Offset: *t.Since, Epoch: t.Epoch}
		}
	}
	s.serveSSE(w, r, req, false, s.streamAge())
}

// sseQuery reads a GET stream's request: topic= parameters, and where to start (a resume
// token in Last-Event-ID or lastEventId, or since= for a single topic).
func sseQuery(r *http.Request) (sseRequest, error) {
	q := r.URL.Query()
	req := sseRequest{topics: q["topic"], resume: map[string]hub.Position{}, presence: wantsPresence(r)}
	tok := r.Header.Get("Last-Event-ID")
	if tok == "" {
		tok = q.Get("lastEventId")
	}
	if tok != "" {
		var err error
		req.resume, err = parseResumeToken(tok)
		return req, err
	}
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || len(req.topics) != 1 {
			return req, fmt.Errorf("%w: since=%q must be an offset, with a single topic", ErrBadRequest, v)
		}
		req.resume[req.topics[0]] = hub.Position{Offset: n, Epoch: q.Get("epoch")}
	}
	return req, nil
}

// HandleDataSSE serves a stream of topic for an application's own dialect: data: carries each
// publication's data alone (no gap or presence events; a closing reason comes as a comment),
// and the stream ends cleanly after exactly maxAge (zero or negative: never).
func (s *Server) HandleDataSSE(w http.ResponseWriter, r *http.Request, topic string, maxAge time.Duration) {
	req, err := sseQuery(r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	req.topics, req.presence = []string{topic}, false
	s.serveSSE(w, r, req, true, max(maxAge, 0))
}

// serveSSE checks the request and starts the stream. A topic refused on its own (the policy
// forbids it, it is past --max-subs) is told in an event: refused naming it, and the stream
// goes on for the others; a stream of one topic that is refused is answered with the error.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, req sseRequest, dataOnly bool, maxAge time.Duration) {
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.checkOrigin(r)
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	topics := req.topics
	if len(topics) == 0 {
		s.WriteError(w, r, fmt.Errorf("%w: give at least one topic= parameter", ErrBadRequest))
		return
	}
	c := &sseConn{conn: s.newConn("e", ident, nil), dataOnly: dataOnly, maxAge: maxAge,
		watch: !dataOnly && req.presence, announce: req.announce}
	sinks, refused, err := c.sinks(topics)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.WriteError(w, r, fmt.Errorf("%w: SSE needs HTTP/1.1", ErrBadRequest))
		return
	}
	release, err := s.admit(r, ident.User)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	c.release = release
	conn, rw, err := hj.Hijack()
	if err != nil {
		release()
		return
	}
	if rw.Reader.Buffered() > 0 {
		// A pipelined request after an SSE request makes no sense; just serve the stream.
		_, _ = rw.Reader.Discard(rw.Reader.Buffered())
	}
	c.open(r.Context(), conn, sinks, req.resume, append(sseHead(r), refused...))
}

// sseHead is the head of a stream's response, and its first lines: the retry: delay and a
// comment, so that the client sees the stream open at once.
func sseHead(r *http.Request) []byte {
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
		"Connection: close\r\nX-Accel-Buffering: no\r\n"
	if o := r.Header.Get("Origin"); o != "" {
		// checkOrigin let it through: CORS for this origin alone, never "*".
		head += "Access-Control-Allow-Origin: " + o + "\r\nVary: Origin\r\n"
	}
	return []byte(head + "\r\n" + sseRetry[:len(sseRetry)-1] + ": connected\n\n")
}

// sinks checks the topics a stream asks for (conn.mayHold) and returns a sink for each it may
// hold. A bad or repeated topic refuses the request (err); a topic refused on its own (the
// Policy, --max-subs) is told in an event: refused naming it, unless it is the stream's only
// topic or the stream is a data stream: then the request is refused.
func (c *sseConn) sinks(topics []string) (sinks []*sseSink, refused []byte, err error) {
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		if seen[t] {
			return nil, nil, fmt.Errorf("%w: topic %q given twice", ErrBadRequest, t)
		}
		seen[t] = true
		g, no, err := c.mayHold(t, len(sinks))
		if err != nil {
			return nil, nil, err
		}
		if no != nil {
			if len(topics) == 1 || c.dataOnly {
				return nil, nil, no
			}
			code, _ := errorCode(no)
			c.s.m.Refused.WithLabelValues(transports.SSE, code).Inc()
			refused = appendRefusedEvent(refused, t, no)
			continue
		}
		sinks = append(sinks, &sseSink{subHeld: subHeld{key: t, topic: t, guard: g}, c: c, idx: len(sinks)})
	}
	c.topics = make([]string, len(sinks))
	for i, k := range sinks {
		c.topics[i] = k.topic
	}
	c.pos = make([]hub.Position, len(sinks))
	return sinks, refused, nil
}

// sseStart is where a held subscription starts: the hub's answer and what was asked.
type sseStart struct {
	res  hub.ReadResult
	opts hub.ReadOptions
}

// open is conn.subscribe's path for all the stream's topics at once, with the response's head
// between the subscriptions and their answers: it subscribes the sinks at the hub (conn.hold),
// so a client that has seen the stream open misses nothing published after that; starts the
// connection (conn.startResponse) with the head, which is written even if the stream is cut off at once
// (every answer is valid HTTP); then tells where each topic starts and starts it; and leaves
// the stream to its reader (run).
func (c *sseConn) open(ctx context.Context, nc net.Conn, sinks []*sseSink, resume map[string]hub.Position, head []byte) {
	starts := make([]sseStart, 0, len(sinks)) // as c.subs
	for _, k := range sinks {
		opts := hub.ReadOptions{}
		if p, ok := resume[k.topic]; ok {
			opts = hub.ReadOptions{Recover: true, Since: p.Offset, Epoch: p.Epoch}
		}
		res, err := c.hold(ctx, k, opts)
		if err != nil {
			head = appendRefusedEvent(head, k.topic, err)
			continue
		}
		starts = append(starts, sseStart{res, opts})
	}
	if len(c.subs) == 0 {
		c.refuse(nc, head, reasonNoTopic)
		return
	}
	// The stream ends at the token's expiry with event: disconnect (token_expired); an
	// EventSource reconnects, with a fresh token in its URL if the page gave it one.
	if !c.startResponse(nc, c, transports.SSE, head) {
		return
	}
	for i, k := range c.subs {
		c.answer(k.(*sseSink), &starts[i])
		k.held().sub.Start()
	}
	go c.run(nc)
}

// refuse answers a stream that has nothing to stream: the head, then the goodbye with r, so
// that EventSource reconnects (and retries) instead of idling. The stream was never started:
// like a refused request, it is not counted as a connection.
func (c *sseConn) refuse(nc net.Conn, head []byte, r Reason) {
	_ = nc.SetWriteDeadline(time.Now().Add(min(c.s.lim.WriteTimeout, time.Second)))
	_, _ = nc.Write(append(head, c.goodbye(r)...))
	_ = nc.Close()
	c.release()
	c.s.policy.Disconnected(c.client())
}

// answer records where k starts and tells the client: a gap when it does not start where it
// asked, else (POST /api/sse) where it starts.
func (c *sseConn) answer(k *sseSink, st *sseStart) {
	c.mu.Lock()
	c.pos[k.idx] = st.res.Top
	if st.opts.Recover && st.res.Recovered {
		c.pos[k.idx] = hub.Position{Offset: st.opts.Since, Epoch: st.res.Top.Epoch}
	}
	at := c.pos[k.idx]
	c.mu.Unlock()
	if !st.res.Recovered {
		next := st.res.Next() // as a live gap's: the publication after the notice
		b, _ := json.Marshal(map[string]any{"topic": k.topic, "offset": next.Offset, "epoch": next.Epoch, "reason": st.res.Reason})
		c.w.sendRaw(fmt.Appendf(nil, "event: gap\ndata: %s\n\n", b))
	} else if c.announce {
		// Where the topic starts, before anything of it: a "from now" subscription can
		// resume from there even if nothing is published before the stream breaks.
		b, _ := json.Marshal(map[string]any{"topic": k.topic, "offset": at.Offset, "epoch": at.Epoch})
		c.w.sendRaw(fmt.Appendf(nil, "event: subscribed\ndata: %s\n\n", b))
	}
}

// run waits for the client to leave, or for the stream to reach its age. Clients send nothing
// on an SSE stream; reading only tells when they leave.
func (c *sseConn) run(conn net.Conn) {
	defer c.s.wg.Done()
	defer c.close(ReasonReadError)
	if c.maxAge > 0 {
		_ = conn.SetReadDeadline(time.Now().Add(c.maxAge))
	}
	var buf [64]byte
	for {
		if _, err := conn.Read(buf[:]); err != nil {
			var ne net.Error
			if c.maxAge > 0 && errors.As(err, &ne) && ne.Timeout() {
				// Everything queued is written, then the goodbye and its retry: line, then the
				// connection closes: the response is complete. Publications that come after
				// are not queued; the client resumes from the last id it read.
				c.w.close(ReasonMaxAge, true)
			}
			return
		}
	}
}

// appendRefusedEvent appends an event: refused naming topic, with the code and reason.
func appendRefusedEvent(b []byte, topic string, err error) []byte {
	code, _ := errorCode(err)
	msg, _ := json.Marshal(map[string]string{"topic": topic, "code": code, "reason": reasonText(err)})
	return fmt.Appendf(b, "event: refused\ndata: %s\n\n", msg)
}
