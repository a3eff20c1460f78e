package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/metrics"
)

// Publication cache slots used by transports (slot 0 is the hub's JSON).
const (
	slotWSMessage = 1 // WebSocket text frame of {"op":"message",...}
	slotWSData    = 2 // WebSocket text frame of the data alone (seed routes)
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

// wsMode is the dialect a WebSocket connection speaks.
type wsMode int

const (
	modeNative wsMode = iota // /api/ws: the JSON protocol
	modeGroup                // /ws?group=G: seed raw socket; non-op frames publish to the group
	modeChat                 // /chat: seed raw chat
)

// wsConn is one WebSocket client. Its fields are owned by the reader goroutine unless noted.
type wsConn struct {
	s     *Server
	id    string
	ident Identity // refreshed in place by the refresh op; reader-owned
	user  string   // ident.User, which a refresh never changes; read by other goroutines
	mode  wsMode
	w     *writer // safe for concurrent use
	subs  map[string]*hub.Subscription
	group string // modeGroup: topic that non-op frames publish to
	room  string // modeChat: joined topic
	rl    rateLimiter
}

// wsSink delivers a subscription's publications to its connection.
type wsSink struct {
	c        *wsConn
	dataOnly bool  // seed dialects receive the data unwrapped
	watch    bool  // the client asked for the topic's presence (joins and leaves)
	guard    Guard // the policy's check before each delivery; nil: none
}

func (k *wsSink) Deliver(p *hub.Publication) {
	if guardRefuses(k.guard, k.c.w, p) {
		return
	}
	k.c.w.send(item{pub: p, sub: k})
}

// Gap tells a native client that the topic's epoch changed under its subscription.
func (k *wsSink) Gap(topic string, now hub.Position, reason string) {
	if k.dataOnly {
		return // seed sockets have no way to say it; they get the data as it comes
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
	if c.mode == modeNative && r.Code != ReasonClientClosed.Code {
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

func (c *wsConn) keepaliveDue(idle time.Duration) bool { return idle >= c.s.lim.PingInterval }

// HandleWS serves the native WebSocket JSON protocol (/api/ws).
func (s *Server) HandleWS(w http.ResponseWriter, r *http.Request) { s.serveWS(w, r, modeNative, "") }

// HandleSeedWS serves the seed raw WebSocket (/ws?group=G, default group 0).
func (s *Server) HandleSeedWS(w http.ResponseWriter, r *http.Request) {
	g := r.URL.Query().Get("group")
	if g == "" {
		g = "0"
	}
	topic := "location/" + g
	if err := hub.ValidateTopic(topic); err != nil {
		s.WriteError(w, r, err)
		return
	}
	s.serveWS(w, r, modeGroup, topic)
}

// HandleSeedChat serves the seed raw WebSocket chat (/chat).
func (s *Server) HandleSeedChat(w http.ResponseWriter, r *http.Request) {
	s.serveWS(w, r, modeChat, "")
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request, mode wsMode, group string) {
	ident, err := s.authenticate(r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	conn, br, _, err := upgrade(w, r, nil)
	if err != nil {
		return // the upgrader already answered with a 4xx
	}
	c := &wsConn{
		s: s, id: "w" + strconv.FormatUint(s.nextID.Add(1), 36), ident: ident, user: ident.User, mode: mode,
		subs: make(map[string]*hub.Subscription), group: group, rl: newRateLimiter(s.lim),
	}
	c.w = newWriter(conn, c, &s.lim, s.connStats(metrics.WS))
	s.bindIdentity(c.w, ident)
	if !s.track(c.w, metrics.WS) {
		c.w.close(ReasonShutdown, true)
		return
	}
	s.wg.Add(1)
	// A fresh goroutine reads, so net/http's handler goroutine (and its deeper stack) ends now.
	go c.run(conn, &wsReader{br: br, max: s.lim.MaxFrame, pong: c.w.sendPong})
}

func (c *wsConn) run(conn net.Conn, rd *wsReader) {
	s := c.s
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		for _, sub := range c.subs {
			s.hub.Unsubscribe(sub)
		}
		c.w.close(ReasonReadError, false)
		s.untrack(c.w, metrics.WS)
		s.policy.Disconnected(c.client())
	}()
	if c.mode == modeNative {
		c.reply(map[string]any{"op": "connected", "client": c.id, "user": c.ident.User})
	}
	if c.mode == modeGroup {
		if err := c.subscribe(ctx, c.group, nil, "", true, false); err != nil {
			c.replyError(err, nil, c.group)
		}
	}
	readTimeout := 2*s.lim.PingInterval + 10*time.Second
	for {
		_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
		_, msg, err := rd.readMessage()
		if err != nil {
			switch {
			case errors.Is(err, errFrameTooLarge):
				s.m.Refused.WithLabelValues("too_large").Inc()
				c.w.close(ProtocolReason("too_large", err.Error(), 1009), false)
			case errors.Is(err, io.EOF):
				c.w.close(ReasonClientClosed, false)
			}
			return
		}
		c.handle(ctx, msg)
	}
}

// wsRequest is any client message of the native protocol.
type wsRequest struct {
	Op    string          `json:"op"`
	Topic string          `json:"topic"`
	Since *uint64         `json:"since"`
	Epoch string          `json:"epoch"`
	Data  json.RawMessage `json:"data"`
	Type  string          `json:"type"`
	ID    json.RawMessage `json:"id"`
	// Presence asks subscribe for the topic's presence: who is there, then joins and leaves.
	Presence bool `json:"presence"`
}

func (c *wsConn) handle(ctx context.Context, msg []byte) {
	if tok, ok := refreshOp(msg); ok {
		c.refresh(tok)
		return
	}
	switch c.mode {
	case modeChat:
		c.handleChat(ctx, msg)
		return
	case modeGroup:
		if !isProtocolOp(msg) {
			c.publish(ctx, c.group, asJSON(msg), "", nil)
			return
		}
	}
	req, err := decodeRequest(msg)
	if err != nil {
		c.replyError(err, req.ID, req.Topic)
		return
	}
	switch req.Op {
	case "subscribe":
		if err := c.subscribe(ctx, req.Topic, req.Since, req.Epoch, c.mode != modeNative, req.Presence && c.mode == modeNative); err != nil {
			c.replyError(err, req.ID, req.Topic)
		}
	case "unsubscribe":
		sub, ok := c.subs[req.Topic]
		if !ok {
			c.replyError(fmt.Errorf("%w: not subscribed to %q", ErrBadRequest, req.Topic), req.ID, req.Topic)
			return
		}
		c.s.hub.Unsubscribe(sub)
		delete(c.subs, req.Topic)
		c.reply(map[string]any{"op": "unsubscribed", "topic": req.Topic})
	case "publish":
		c.publish(ctx, req.Topic, req.Data, req.Type, req.ID)
	case "ping":
		c.reply(map[string]any{"op": "pong", "id": req.ID})
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
	id, err := c.s.refreshIdentity(c.w, c.ident, token)
	if err != nil {
		c.replyError(err, nil, "")
		return
	}
	c.ident = id
	ans := map[string]any{"op": "refreshed"}
	if !id.Expires.IsZero() {
		ans["expires"] = id.Expires.UTC().Format(time.RFC3339)
	}
	c.reply(ans)
}

// decodeRequest parses and checks one client message of the native protocol. On error the
// returned request still carries whatever id and topic could be read, for the error reply.
func decodeRequest(msg []byte) (wsRequest, error) {
	var req wsRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		return wsRequest{}, fmt.Errorf("%w: invalid JSON: %v", ErrBadRequest, err)
	}
	switch req.Op {
	case "subscribe", "unsubscribe", "history":
		if req.Topic == "" {
			return req, fmt.Errorf("%w: %s needs a topic", ErrBadRequest, req.Op)
		}
	case "publish":
		if req.Topic == "" || len(req.Data) == 0 {
			return req, fmt.Errorf("%w: publish needs a topic and data", ErrBadRequest)
		}
	case "ping":
	case "":
		return req, fmt.Errorf("%w: message has no op", ErrBadRequest)
	default:
		return req, fmt.Errorf("%w: unknown op %q (want subscribe, unsubscribe, publish, ping, history)", ErrBadRequest, req.Op)
	}
	if len(req.ID) > 128 {
		return wsRequest{Op: req.Op, Topic: req.Topic}, fmt.Errorf("%w: id longer than 128 bytes", ErrBadRequest)
	}
	return req, nil
}

// isProtocolOp reports whether a seed-socket frame is a protocol message rather than a payload
// to publish: a JSON object whose "op" is one of the protocol's.
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

// asJSON returns msg if it is JSON, else msg as a JSON string.
func asJSON(msg []byte) json.RawMessage {
	if json.Valid(msg) {
		return msg
	}
	b, _ := json.Marshal(string(msg))
	return b
}

func (c *wsConn) subscribe(ctx context.Context, topic string, since *uint64, epoch string, dataOnly, watch bool) error {
	if err := hub.ValidateTopic(topic); err != nil {
		return err
	}
	if old, ok := c.subs[topic]; ok {
		c.s.hub.Unsubscribe(old) // a repeated subscribe restarts from the given position
		delete(c.subs, topic)
	} else if len(c.subs) >= c.s.lim.MaxSubs {
		return fmt.Errorf("%w: at most %d per connection", ErrTooManySubs, c.s.lim.MaxSubs)
	}
	guard, err := c.s.policy.CanSubscribe(c.client(), topic)
	if err != nil {
		return err
	}
	opts := hub.ReadOptions{Epoch: epoch}
	if since != nil {
		opts.Recover, opts.Since = true, *since
	}
	sub, res, err := c.s.hub.Subscribe(ctx, topic, &wsSink{c: c, dataOnly: dataOnly, watch: watch, guard: guard}, opts)
	if err != nil {
		return err
	}
	c.subs[topic] = sub
	if c.mode == modeNative {
		ans := map[string]any{"op": "subscribed", "topic": topic, "offset": res.Top.Offset,
			"epoch": res.Top.Epoch, "recovered": res.Recovered}
		if !res.Recovered {
			ans["reason"] = res.Reason
		}
		c.reply(ans)
	}
	sub.Start()
	return nil
}

func (c *wsConn) publish(ctx context.Context, topic string, data json.RawMessage, typ string, id json.RawMessage) {
	if !c.rl.allow(time.Now()) {
		c.replyError(c.s.errRateLimited(), id, topic)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := c.s.policy.Publish(pctx, c.client(), hub.PublishRequest{Topic: topic, Data: data, Type: typ, Sender: c.ident.User})
	if err != nil {
		c.replyError(err, id, topic)
		return
	}
	if c.mode == modeNative {
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
		b = append(b, '}')
		c.w.sendRaw(appendWSText(nil, b))
	}
}

// chatMessage is the seed chat's message shape.
type chatMessage struct {
	Type   string          `json:"type"`
	Sender string          `json:"sender"`
	RoomID json.RawMessage `json:"roomId"`
}

func (c *wsConn) handleChat(ctx context.Context, msg []byte) {
	var m chatMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		c.replyError(fmt.Errorf("%w: chat message must be a JSON object {type, sender, message, roomId}: %v", ErrBadRequest, err), nil, "")
		return
	}
	room := string(bytes.Trim(m.RoomID, `"`))
	if room == "" || room == "null" {
		if c.room == "" {
			c.replyError(fmt.Errorf("%w: the first message needs a roomId", ErrBadRequest), nil, "")
			return
		}
	} else if c.room == "" {
		topic := "chat/" + room
		if err := c.subscribe(ctx, topic, nil, "", true, false); err != nil {
			c.replyError(err, nil, topic)
			return
		}
		c.room = topic
	}
	topic := c.room
	if room != "" && room != "null" {
		topic = "chat/" + room
	}
	sender := m.Sender
	if c.ident.User != "" {
		sender = c.ident.User
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !c.rl.allow(time.Now()) {
		c.replyError(c.s.errRateLimited(), nil, topic)
		return
	}
	req := hub.PublishRequest{Topic: topic, Data: msg, Type: m.Type, Sender: sender}
	err := c.s.policy.SeedJoin(pctx, c.client(), req)
	if err == nil {
		_, err = c.s.policy.Publish(pctx, c.client(), req)
	}
	if err != nil {
		c.replyError(err, nil, topic)
	}
}

func (c *wsConn) client() Client { return Client{ID: c.id, Identity: c.ident} }

func (c *wsConn) reply(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.w.sendRaw(appendWSText(nil, b))
}

func (c *wsConn) replyError(err error, id json.RawMessage, topic string) {
	code, _ := errorCode(err)
	if code != "internal" && code != "unavailable" {
		c.s.m.Refused.WithLabelValues(code).Inc()
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
