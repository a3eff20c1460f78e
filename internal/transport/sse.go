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
	"github.com/rtlab/rtlab/internal/metrics"
)

// sseConn is one Server-Sent Events stream. The connection is hijacked after validation so
// that net/http's per-connection buffers and goroutine are released: an idle stream costs a
// reader goroutine and little else.
type sseConn struct {
	s        *Server
	w        *writer
	id, user string
	dataOnly bool          // a data stream (HandleDataSSE): data: carries the publication's data alone
	maxAge   time.Duration // the stream ends cleanly after this long; zero: never
	watch    bool          // the client asked for the topics' presence (presence=true)
	guards   []Guard       // per topic, from the policy

	mu     sync.Mutex     // guards topics and pos; taken by the writer while encoding
	topics []string       // in request order
	pos    []hub.Position // last position sent per topic
}

type sseSink struct {
	c     *sseConn
	idx   int   // index into topics
	guard Guard // the policy's check before each delivery; nil: none
}

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

// ReasonMaxAge closes an SSE stream that reached its maximum age (--sse-max-age, or a data
// stream's own).
var ReasonMaxAge = Reason{Code: "max_age", Text: "the stream reached its maximum age, reconnect with Last-Event-ID", WSCode: 1000, Reconnect: true}

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

// HandleSSE serves GET /api/sse?topic=A&topic=B.
func (s *Server) HandleSSE(w http.ResponseWriter, r *http.Request) {
	s.serveSSE(w, r, r.URL.Query()["topic"], false, s.streamAge())
}

// HandleDataSSE serves a stream of topic for an application's own dialect: data: carries each
// publication's data alone (no gap or presence events; a closing reason comes as a comment),
// and the stream ends cleanly after exactly maxAge (zero or negative: never).
func (s *Server) HandleDataSSE(w http.ResponseWriter, r *http.Request, topic string, maxAge time.Duration) {
	s.serveSSE(w, r, []string{topic}, true, max(maxAge, 0))
}

func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request, topics []string, dataOnly bool, maxAge time.Duration) {
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.checkOrigin(r)
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	if len(topics) == 0 {
		s.WriteError(w, r, fmt.Errorf("%w: give at least one topic= parameter", ErrBadRequest))
		return
	}
	if len(topics) > s.lim.MaxSubs {
		s.WriteError(w, r, fmt.Errorf("%w: at most %d per connection", ErrTooManySubs, s.lim.MaxSubs))
		return
	}
	seen := make(map[string]bool, len(topics))
	guards := make([]Guard, len(topics))
	for i, t := range topics {
		if err := hub.ValidateTopic(t); err != nil {
			s.WriteError(w, r, err)
			return
		}
		if seen[t] {
			s.WriteError(w, r, fmt.Errorf("%w: topic %q given twice", ErrBadRequest, t))
			return
		}
		seen[t] = true
		if guards[i], err = s.policy.CanSubscribe(Client{Identity: ident}, t); err != nil {
			s.WriteError(w, r, err)
			return
		}
	}
	// Where to start: a resume token, or since= for a single topic.
	resume := map[string]hub.Position{}
	tok := r.Header.Get("Last-Event-ID")
	if tok == "" {
		tok = r.URL.Query().Get("lastEventId")
	}
	if tok != "" {
		if resume, err = parseResumeToken(tok); err != nil {
			s.WriteError(w, r, err)
			return
		}
	} else if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || len(topics) != 1 {
			s.WriteError(w, r, fmt.Errorf("%w: since=%q must be an offset, with a single topic", ErrBadRequest, v))
			return
		}
		resume[topics[0]] = hub.Position{Offset: n, Epoch: r.URL.Query().Get("epoch")}
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
	conn, rw, err := hj.Hijack()
	if err != nil {
		release()
		return
	}
	if rw.Reader.Buffered() > 0 {
		// A pipelined request after an SSE request makes no sense; just serve the stream.
		_, _ = rw.Reader.Discard(rw.Reader.Buffered())
	}
	c := &sseConn{s: s, dataOnly: dataOnly, maxAge: maxAge, topics: topics, guards: guards, pos: make([]hub.Position, len(topics)),
		id: "e" + strconv.FormatUint(s.nextID.Add(1), 36), user: ident.User, watch: !dataOnly && wantsPresence(r)}
	c.w = newWriter(conn, c, &s.lim, s.connStats(metrics.SSE))
	// The stream ends at the token's expiry with event: disconnect (token_expired); an
	// EventSource reconnects, with a fresh token in its URL if the page gave it one.
	s.bindIdentity(c.w, ident)
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
		"Connection: close\r\nX-Accel-Buffering: no\r\n"
	if o := r.Header.Get("Origin"); o != "" {
		// checkOrigin let it through: CORS for this origin alone, never "*".
		head += "Access-Control-Allow-Origin: " + o + "\r\nVary: Origin\r\n"
	}
	s.wg.Add(1)
	go c.run(conn, resume, []byte(head+"\r\n"+sseRetry[:len(sseRetry)-1]+": connected\n\n"), release)
}

// run subscribes, then starts the response, so a client that has seen the stream open misses
// nothing published after that; then it replays and waits for the client to leave.
func (c *sseConn) run(conn net.Conn, resume map[string]hub.Position, head []byte, release func()) {
	s := c.s
	defer s.wg.Done()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	type started struct {
		idx  int
		sub  *hub.Subscription
		res  hub.ReadResult
		opts hub.ReadOptions
	}
	subs := make([]started, 0, len(c.topics))
	var failed []byte
	tracked := false
	defer func() {
		cancel()
		for _, st := range subs {
			s.hub.Unsubscribe(st.sub)
		}
		c.w.close(ReasonReadError, false)
		if tracked {
			s.untrack(c.w, metrics.SSE)
		}
	}()
	for i, t := range c.topics {
		opts := hub.ReadOptions{}
		if p, ok := resume[t]; ok {
			opts = hub.ReadOptions{Recover: true, Since: p.Offset, Epoch: p.Epoch}
		}
		sub, res, err := s.hub.Subscribe(ctx, t, &sseSink{c: c, idx: i, guard: c.guards[i]}, opts)
		if err != nil {
			b, _ := json.Marshal(map[string]string{"topic": t, "reason": reasonText(err)})
			failed = fmt.Appendf(failed, "event: refused\ndata: %s\n\n", b)
			continue
		}
		subs = append(subs, started{idx: i, sub: sub, res: res, opts: opts})
	}
	// The head goes first; the connection is tracked (keepalive, shutdown) only after it.
	c.w.sendRaw(append(head, failed...))
	if len(subs) == 0 {
		// Nothing to stream: close, so EventSource reconnects (and retries) instead of idling.
		c.w.close(Reason{Code: "unavailable", Text: "no topic could be subscribed, retry", Reconnect: true}, true)
		return
	}
	if tracked = s.track(c.w, metrics.SSE); !tracked {
		c.w.close(ReasonShutdown, true)
		return
	}
	for _, st := range subs {
		i, t, res, opts := st.idx, c.topics[st.idx], st.res, st.opts
		c.mu.Lock()
		c.pos[i] = res.Top
		if opts.Recover && res.Recovered {
			c.pos[i] = hub.Position{Offset: opts.Since, Epoch: res.Top.Epoch}
		}
		c.mu.Unlock()
		if !res.Recovered {
			b, _ := json.Marshal(map[string]any{"topic": t, "offset": res.Top.Offset, "epoch": res.Top.Epoch, "reason": res.Reason})
			c.w.sendRaw(fmt.Appendf(nil, "event: gap\ndata: %s\n\n", b))
		}
		st.sub.Start()
	}
	// Clients send nothing on an SSE stream; reading only tells us when they leave, or, with
	// a deadline, when the stream has reached its age.
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
