package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transports"
)

// Publication cache slots used by transports (slot 0 is the hub's JSON).
const (
	slotWSMessage = 1 // WebSocket text frame of {"op":"message",...}
	slotWSData    = 2 // WebSocket text frame of the data alone (raw sockets)
	slotSTOMP     = 3 // STOMP MESSAGE headers and body shared by all subscriptions
)

func encWSMessage(p *hub.Publication) []byte {
	js := p.JSON()
	payload := make([]byte, 0, len(js)+16)
	payload = append(payload, `{"op":"message",`...)
	payload = append(payload, js[1:]...)
	return appendWSText(make([]byte, 0, len(payload)+10), payload)
}

func encWSData(p *hub.Publication) []byte {
	return appendWSText(make([]byte, 0, len(p.Data)+10), p.Data)
}

// RawSocket gives a raw WebSocket (HandleRawWS) its meaning: an application's own dialect.
// On a raw socket every delivery is the publication's data alone, and the client is answered
// nothing but errors: no connected, subscribed or ack messages, no gap or disconnect notices.
// Both methods run on the connection's reader goroutine.
type RawSocket interface {
	// Open is called once the socket is upgraded, before any frame is read.
	Open(ctx context.Context, c *RawConn)
	// Frame is called with each frame the client sends (but a token refresh, which the
	// transport serves).
	Frame(ctx context.Context, c *RawConn, msg []byte)
}

// RawConn is a raw WebSocket as its RawSocket sees it. Its methods are for the RawSocket's
// calls only.
type RawConn struct{ c *wsConn }

// Client is who the socket is.
func (r *RawConn) Client() Client { return r.c.client() }

// Subscribe subscribes the socket to topic from now; the refusal is returned, not sent.
func (r *RawConn) Subscribe(ctx context.Context, topic string) error {
	return r.c.subscribe(ctx, topic, nil, "", true, false)
}

// Allow takes one of the connection's publish tokens (--msg-rate): an error when there is none.
func (r *RawConn) Allow() error {
	if !r.c.allowPublish() {
		return r.c.s.errRateLimited()
	}
	return r.c.allowUserPublish(1)
}

// Error tells the client of err, as an {"op":"error"} message naming topic (when not empty).
func (r *RawConn) Error(err error, topic string) { r.c.replyError(err, nil, topic) }

// Op serves msg as an op of the JSON protocol (subscribe, unsubscribe, publish, ping, history,
// answered as on a raw socket) when it is one, and reports whether it was.
func (r *RawConn) Op(ctx context.Context, msg []byte) bool {
	if !isProtocolOp(msg) {
		return false
	}
	r.c.op(ctx, msg)
	return true
}

// wsConn is one WebSocket client. Its fields are owned by the reader goroutine unless noted.
type wsConn struct {
	conn
	raw  RawSocket   // nil: the JSON protocol (/api/ws)
	rawc RawConn     // what raw is handed: this connection
	rl   rateLimiter // publishes (--msg-rate)
	ops  rateLimiter // every message (--op-rate)
	// published: the last message handled was a publication (readMessage keeps the stack).
	published bool
	held      unresolved   // a keyed publish whose outcome is unknown
	pinged    atomic.Int64 // when the keepalive loop last pinged, in Unix ns (keepaliveDue)
	heard     atomic.Int64 // when a frame was last read (at most touchEvery ago), in Unix ns
}

// wsSink delivers a subscription's publications to its connection.
type wsSink struct {
	subHeld  // key: the topic
	c        *wsConn
	dataOnly bool // a raw socket's subscriptions receive the data unwrapped
	watch    bool // the client asked for the topic's presence (joins and leaves)
}

// Pace hands a resuming subscription's replay to the writer (hub.PacedSink).
func (k *wsSink) Pace(pull func(budget int) bool) { k.c.w.pace(pull) }

func (k *wsSink) Deliver(p *hub.Publication) {
	if guardRefuses(k.guard, k.c.w, p) {
		return
	}
	k.c.w.send(item{pub: p, sub: k})
}

// Gap tells a native client that its subscription's history broke before the publication at now.
func (k *wsSink) Gap(topic string, now hub.Position, reason string) {
	if k.dataOnly {
		return // raw sockets have no way to say it; they get the data as it comes
	}
	b, _ := json.Marshal(map[string]any{"op": "gap", "topic": topic, "offset": now.Offset, "epoch": now.Epoch, "reason": reason})
	k.c.w.sendRaw(appendWSText(nil, b))
}

func (c *wsConn) appendItem(buf []byte, it item) []byte {
	if it.pub == nil {
		return append(buf, it.raw...)
	}
	if k, ok := it.sub.(*wsSink); ok && k.dataOnly {
		return append(buf, it.pub.Cached(slotWSData, encWSData)...)
	}
	return append(buf, it.pub.Cached(slotWSMessage, encWSMessage)...)
}

func (c *wsConn) goodbye(r Reason) []byte {
	if r.Code == ReasonReadError.Code {
		return nil
	}
	var b []byte
	if c.raw == nil && r.Code != ReasonClientClosed.Code {
		msg, _ := json.Marshal(struct {
			Op        string `json:"op"`
			Code      string `json:"code"`
			Reason    string `json:"reason"`
			Reconnect bool   `json:"reconnect"`
		}{"disconnect", r.Code, r.Text, r.Reconnect})
		b = appendWSText(b, msg)
	}
	return append(b, wsClose(r.WSCode, r.Code)...)
}

func (c *wsConn) keepalive() []byte { return wsPing }

// keepaliveDue pings a connection nothing was written to for PingInterval, and one whose
// client sent nothing for that long and was not pinged since: a client that only receives
// answers nothing but pings, and its reader drops it after two intervals without a frame. A
// client that sends is heard from already, and is spared a ping per interval.
func (c *wsConn) keepaliveDue(idle time.Duration) bool {
	now, every := time.Now().UnixNano(), int64(c.s.lim.PingInterval)
	if idle < c.s.lim.PingInterval && (now-c.heard.Load() < every || now-c.pinged.Load() < every) {
		return false
	}
	c.pinged.Store(now)
	return true
}

// HandleWS serves the WebSocket JSON protocol (/api/ws).
func (s *Server) HandleWS(w http.ResponseWriter, r *http.Request) { s.serveWS(w, r, nil) }

// HandleRawWS serves a raw WebSocket whose frames raw gives a meaning.
func (s *Server) HandleRawWS(w http.ResponseWriter, r *http.Request, raw RawSocket) {
	s.serveWS(w, r, raw)
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, raw RawSocket) {
	ident, conn, br, release, ok := s.upgradeSocket(w, r, false, nil)
	if !ok {
		return
	}
	c := &wsConn{
		conn: s.newConn("w", ident, release), raw: raw, rl: newRateLimiter(s.lim), ops: newOpLimiter(s.lim),
	}
	c.addr = addrKey(s.clientIP(r))
	c.rawc = RawConn{c}
	if !c.start(conn, c, transports.WS) {
		return
	}
	// A fresh goroutine reads, so net/http's handler goroutine (and its deeper stack) ends now.
	// A client is dropped after two ping intervals without a frame; pongs count.
	readTimeout := 2*s.lim.PingInterval + 10*time.Second
	touch := func() {
		now := time.Now()
		c.heard.Store(now.UnixNano())
		_ = conn.SetReadDeadline(now.Add(readTimeout))
	}
	touch()
	go c.run(conn, newMessageReader(br, s.lim.MaxFrame, c.pongPaced, touch, &c.published))
}

func (c *wsConn) run(conn net.Conn, rd messageReader) {
	s := c.s
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		c.close(ReasonReadError)
	}()
	c.open(ctx)
	for {
		_, msg, err := rd.readMessage()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.published = false
		c.handle(ctx, msg)
	}
}

// open greets the client, or hands a raw socket to its dialect. It and readFailed are kept
// out of run, whose frame every message's handling stands on.
func (c *wsConn) open(ctx context.Context) {
	if c.raw != nil {
		c.raw.Open(ctx, &c.rawc)
		return
	}
	c.reply(map[string]any{"op": "connected", "client": c.id, "user": c.ident.User})
}

// readFailed closes the connection after a failed read, with the reason the client is told.
func (c *wsConn) readFailed(err error) { c.s.closeAfterRead(c.w, err) }

// wsRequest is any client message of the native protocol.
type wsRequest struct {
	Op    string          `json:"op"`
	Topic string          `json:"topic"`
	Since *uint64         `json:"since"`
	Epoch string          `json:"epoch"`
	Data  json.RawMessage `json:"data"`
	Type  string          `json:"type"`
	ID    json.RawMessage `json:"id"`
	// Idem is a publish's idempotency key (hub.PublishRequest.Key).
	Idem string `json:"idem"`
	// Presence asks subscribe for the topic's presence: who is there, then joins and leaves.
	Presence bool `json:"presence"`
}

func (c *wsConn) handle(ctx context.Context, msg []byte) {
	if !c.ops.pace(ctx, c.w.conn) {
		return
	}
	if tok, ok := refreshOp(msg); ok {
		c.refresh(tok)
		return
	}
	if c.raw != nil {
		c.raw.Frame(ctx, &c.rawc, msg)
		return
	}
	c.op(ctx, msg)
}

// op serves one message of the JSON protocol.
func (c *wsConn) op(ctx context.Context, msg []byte) {
	req := new(wsRequest) // on the heap in any case (json.Unmarshal), and off the reader's stack
	if err := decodeRequest(msg, req); err != nil {
		c.replyError(err, req.ID, req.Topic)
		return
	}
	switch req.Op {
	case "subscribe":
		if err := c.subscribe(ctx, req.Topic, req.Since, req.Epoch, c.raw != nil, req.Presence && c.raw == nil); err != nil {
			c.replyError(err, req.ID, req.Topic)
		}
	case "unsubscribe":
		if !c.unsubscribe(req.Topic) {
			c.replyError(fmt.Errorf("%w: not subscribed to %q", ErrBadRequest, req.Topic), req.ID, req.Topic)
			return
		}
		c.reply(map[string]any{"op": "unsubscribed", "topic": req.Topic})
	case "publish":
		c.publish(ctx, hub.PublishRequest{Topic: req.Topic, Data: req.Data, Type: req.Type, Key: req.Idem}, req.ID)
	case "ping":
		c.w.sendRaw(pongMessage(req.ID)) // limit.go
	case "history":
		c.history(ctx, msg) // history.go
	}
}

// refreshOp recognises {"op":"refresh","token":"..."} in any dialect and returns the token.
func refreshOp(msg []byte) (string, bool) {
	if !bytes.Contains(msg, []byte(`"refresh"`)) {
		return "", false
	}
	var m struct {
		Op    string `json:"op"`
		Token string `json:"token"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Op != "refresh" {
		return "", false
	}
	return m.Token, true
}

// refresh replaces the connection's token: {"op":"refreshed","expires":...}, or an error and
// the connection goes on with its old token (and closes when that one expires).
func (c *wsConn) refresh(token string) {
	id, err := c.refreshIdentity(token)
	if err != nil {
		c.replyError(err, nil, "")
		return
	}
	// Subscriptions the new token no longer allows (narrower rtlab.subscribe) end, each with
	// its error, before the answer.
	c.recheck(func(k subscriber, err error) { c.replyError(err, nil, k.held().topic) })
	ans := map[string]any{"op": "refreshed"}
	if !id.Expires.IsZero() {
		ans["expires"] = id.Expires.UTC().Format(time.RFC3339)
	}
	c.reply(ans)
}

// decodeRequest parses and checks one client message of the native protocol into req. On error
// req still carries whatever id and topic could be read, for the error reply.
func decodeRequest(msg []byte, req *wsRequest) error {
	if err := json.Unmarshal(msg, req); err != nil {
		*req = wsRequest{}
		return fmt.Errorf("%w: invalid JSON: %v", ErrBadRequest, err)
	}
	if !utf8.Valid(msg) {
		// A binary frame is not checked as a text frame is, and decoding turned its invalid
		// bytes into U+FFFD: refused instead, as everywhere else.
		if !utf8.Valid(req.ID) {
			req.ID = nil
		}
		return fmt.Errorf("%w: message is not valid UTF-8", ErrBadRequest)
	}
	switch req.Op {
	case "subscribe", "unsubscribe", "history":
		if req.Topic == "" {
			return fmt.Errorf("%w: %s needs a topic", ErrBadRequest, req.Op)
		}
	case "publish":
		if req.Topic == "" || len(req.Data) == 0 {
			return fmt.Errorf("%w: publish needs a topic and data", ErrBadRequest)
		}
	case "ping":
	case "":
		return fmt.Errorf("%w: message has no op", ErrBadRequest)
	default:
		return fmt.Errorf("%w: unknown op %q (want subscribe, unsubscribe, publish, ping, history)", ErrBadRequest, req.Op)
	}
	if len(req.ID) > 128 {
		req.ID = nil
		return fmt.Errorf("%w: id longer than 128 bytes", ErrBadRequest)
	}
	return nil
}

// isProtocolOp reports whether a raw socket's frame is a protocol message rather than the
// application's own: a JSON object whose "op" is one of the protocol's.
func isProtocolOp(msg []byte) bool {
	if !bytes.Contains(msg, []byte(`"op"`)) {
		return false
	}
	var probe struct {
		Op string `json:"op"`
	}
	if json.Unmarshal(msg, &probe) != nil {
		return false
	}
	switch probe.Op {
	case "subscribe", "unsubscribe", "publish", "ping", "refresh", "history":
		return true
	}
	return false
}

// AsJSON returns msg if it is JSON, else msg as a JSON string.
func AsJSON(msg []byte) json.RawMessage {
	if json.Valid(msg) || !utf8.Valid(msg) { // invalid UTF-8 stays as it is, for the hub to refuse
		return msg
	}
	b, _ := json.Marshal(string(msg))
	return b
}

// subscribe subscribes the connection to topic (conn.subscribe); a repeated subscribe restarts
// from the position given.
func (c *wsConn) subscribe(ctx context.Context, topic string, since *uint64, epoch string, dataOnly, watch bool) error {
	c.unsubscribe(topic)
	opts := hub.ReadOptions{Epoch: epoch}
	if since != nil {
		opts.Recover, opts.Since = true, *since
	}
	k := &wsSink{subHeld: subHeld{key: topic, topic: topic}, c: c, dataOnly: dataOnly, watch: watch}
	refused, err := c.conn.subscribe(ctx, k, opts, func(res *hub.ReadResult) {
		if c.raw != nil {
			return
		}
		ans := map[string]any{"op": "subscribed", "topic": topic, "offset": res.Top.Offset,
			"epoch": res.Top.Epoch, "recovered": res.Recovered}
		if !res.Recovered {
			ans["reason"] = res.Reason
		}
		c.reply(ans)
		if !res.Recovered {
			k.Gap(topic, res.Next(), res.Reason) // a notice as on every path, before the replay
		}
	})
	if refused != nil {
		return refused
	}
	return err
}

// allowPublish takes one of the connection's publish tokens (--msg-rate), and marks the message
// being handled as a publication, whose reader keeps its stack (readMessage).
func (c *wsConn) allowPublish() bool {
	c.published = true
	return c.rl.allow(time.Now())
}

// publish publishes req (its sender is the connection's) and answers with an ack.
func (c *wsConn) publish(ctx context.Context, req hub.PublishRequest, id json.RawMessage) {
	if !c.allowPublish() {
		c.replyError(c.s.errRateLimited(), id, req.Topic)
		return
	}
	if err := c.allowUserPublish(1); err != nil {
		c.replyError(err, id, req.Topic)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req.Sender = c.ident.User
	err := c.held.check(req)
	var p *hub.Publication
	if err == nil {
		p, err = c.s.policy.Publish(pctx, c.client(), req)
		c.held.settle(req, err)
	}
	if err != nil {
		c.replyError(err, id, req.Topic)
		return
	}
	if c.raw == nil {
		b := make([]byte, 0, 96)
		b = append(b, `{"op":"ack","id":`...)
		if len(id) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, id...)
		}
		b = append(b, `,"topic":`...)
		b = hub.AppendJSONString(b, p.Topic)
		b = append(b, `,"offset":`...)
		b = strconv.AppendUint(b, p.Offset, 10)
		b = append(b, `,"epoch":`...)
		b = hub.AppendJSONString(b, p.Epoch)
		if p.Duplicate {
			b = append(b, `,"duplicate":true`...)
		}
		b = append(b, '}')
		c.w.sendRaw(appendWSText(nil, b))
	}
}

func (c *wsConn) reply(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.w.sendRaw(appendWSText(nil, b))
}

func (c *wsConn) replyError(err error, id json.RawMessage, topic string) {
	code, _ := errorCode(err)
	if !serverSide(code) {
		c.s.m.Refused.WithLabelValues(transports.WS, code).Inc()
	}
	ans := map[string]any{"op": "error", "code": code, "reason": reasonText(err)}
	if len(id) > 0 {
		ans["id"] = id
	}
	if topic != "" {
		ans["topic"] = topic
	}
	c.reply(ans)
}
