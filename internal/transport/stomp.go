package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/metrics"
	"github.com/rtlab/rtlab/internal/stomp"
)

// stompVersions are the versions served, best first; also the WebSocket subprotocols.
var stompVersions = []string{"1.2", "1.1", "1.0"}

// maxPending bounds unacknowledged messages per subscription in client ack modes: a client
// that never acknowledges is a slow consumer.
const maxPending = 4096

// stompConn is one STOMP session over WebSocket. Fields are owned by the reader goroutine
// unless noted.
type stompConn struct {
	s         *Server
	w         *writer
	id        string
	ident     Identity // from the handshake or CONNECT; refreshed in place
	connected bool
	parser    *stomp.Parser
	subs      map[string]*stompSub // by subscription id
	tx        map[string][]stomp.Frame
	rl        rateLimiter
	hbIn      time.Duration          // client promised to send at least this often (0: never)
	hbOut     time.Duration          // we send at least this often (0: WebSocket pings instead); set before tracking
	userSeen  atomic.Pointer[string] // user, for other goroutines (DisconnectUser)
}

type ackMode int

const (
	ackAuto ackMode = iota
	ackClient
	ackClientIndividual
)

// stompSub is one SUBSCRIBE.
type stompSub struct {
	c     *stompConn
	id    string
	dest  string
	topic string
	ack   ackMode
	sub   *hub.Subscription
	guard Guard // the policy's check before each delivery; nil: none
	watch bool  // presence:true asked for the topic's presence

	mu      sync.Mutex
	pending []*hub.Publication // unacknowledged, in offset order (client modes); guarded by mu
}

// stompRedelivery marks a redelivery in the writer queue.
type stompRedelivery struct{ *stompSub }

func (k *stompSub) Deliver(p *hub.Publication) {
	if guardRefuses(k.guard, k.c.w, p) {
		return
	}
	if k.ack != ackAuto {
		k.mu.Lock()
		if len(k.pending) >= maxPending {
			k.mu.Unlock()
			k.c.s.m.QueueOverflows.WithLabelValues(metrics.STOMP).Inc()
			k.c.w.close(ReasonSlow, false)
			return
		}
		k.pending = append(k.pending, p)
		k.mu.Unlock()
	}
	k.c.w.send(item{pub: p, sub: k})
}

// Gap tells the client that the topic's epoch changed under the subscription.
func (k *stompSub) Gap(topic string, now hub.Position, reason string) {
	k.c.sendFrame(gapFrame(k.dest, k.id, topic, now.Offset, now.Epoch, reason))
}

// gapFrame is the MESSAGE that tells a subscription its history is gone.
func gapFrame(dest, id, topic string, offset uint64, epoch, reason string) *stomp.Frame {
	body, _ := json.Marshal(map[string]any{"topic": topic, "offset": offset, "epoch": epoch, "reason": reason})
	return &stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
		{Key: "destination", Value: dest}, {Key: "subscription", Value: id},
		{Key: "message-id", Value: id + ":gap"}, {Key: "gap", Value: "true"},
		{Key: "reason", Value: reason}, {Key: "epoch", Value: epoch},
		{Key: "content-type", Value: "application/json"},
	}, Body: body}
}

// encSTOMPTail is the part of a MESSAGE shared by every subscription: the headers after the
// per-subscription ones, the blank line, the body and the NUL.
func encSTOMPTail(p *hub.Publication) []byte {
	b := make([]byte, 0, len(p.Data)+160)
	b = append(b, "content-type:application/json\noffset:"...)
	b = strconv.AppendUint(b, p.Offset, 10)
	b = stomp.AppendHeader(append(b, '\n'), "epoch", p.Epoch)
	b = append(b, "time:"...)
	b = p.Time.UTC().AppendFormat(b, hub.TimeFormat)
	b = append(b, '\n')
	if p.Sender != "" {
		b = stomp.AppendHeader(b, "sender", p.Sender)
	}
	if p.Type != "" {
		b = stomp.AppendHeader(b, "type", p.Type)
	}
	b = append(b, "content-length:"...)
	b = strconv.AppendInt(b, int64(len(p.Data)), 10)
	b = append(b, "\n\n"...)
	b = append(b, p.Data...)
	return append(b, 0)
}

func (c *stompConn) appendItem(buf []byte, it item) []byte {
	if it.pub == nil {
		return append(buf, it.raw...)
	}
	var k *stompSub
	redelivered := false
	switch v := it.sub.(type) {
	case *stompSub:
		k = v
	case stompRedelivery:
		k, redelivered = v.stompSub, true
	}
	var head [256]byte
	h := append(head[:0], "MESSAGE\n"...)
	h = stomp.AppendHeader(h, "destination", k.dest)
	h = stomp.AppendHeader(h, "subscription", k.id)
	h = append(h, "message-id:"...)
	idStart := len(h)
	h = appendEscapedID(h, k.id)
	h = append(h, ':')
	h = strconv.AppendUint(h, it.pub.Offset, 10)
	idEnd := len(h)
	h = append(h, '\n')
	if k.ack != ackAuto {
		h = append(h, "ack:"...)
		h = append(h, h[idStart:idEnd]...)
		h = append(h, '\n')
	}
	if redelivered {
		h = append(h, "redelivered:true\n"...)
	}
	tail := it.pub.Cached(slotSTOMP, encSTOMPTail)
	buf = appendWSHeader(buf, 1, len(h)+len(tail))
	buf = append(buf, h...)
	return append(buf, tail...)
}

// appendEscapedID appends a subscription id as it appears inside a header value.
func appendEscapedID(dst []byte, id string) []byte {
	// AppendHeader escapes a "key:value\n" line; reuse it and strip the key and newline.
	line := stomp.AppendHeader(nil, "k", id)
	return append(dst, line[2:len(line)-1]...)
}

func (c *stompConn) goodbye(r Reason) []byte {
	switch r.Code {
	case ReasonReadError.Code:
		return nil
	case ReasonClientClosed.Code, "stomp_error", ReasonNormal.Code:
		return wsClose(r.WSCode, r.Code)
	}
	f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{
		{Key: "message", Value: r.Code + ": " + r.Text}, {Key: "content-type", Value: "text/plain"},
		{Key: "reconnect", Value: strconv.FormatBool(r.Reconnect)},
	}, Body: []byte(r.Text)}
	return append(appendWSText(nil, stomp.AppendFrame(nil, &f)), wsClose(r.WSCode, r.Code)...)
}

var stompEOL = appendWSText(nil, []byte{'\n'})

func (c *stompConn) keepalive() []byte {
	if c.hbOut > 0 {
		return stompEOL
	}
	return wsPing
}

func (c *stompConn) keepaliveDue(idle time.Duration) bool {
	if c.hbOut > 0 {
		return idle >= c.hbOut
	}
	return idle >= c.s.lim.PingInterval
}

// HandleSTOMP serves STOMP over WebSocket (/api/stomp, and the seed /location and /stomp/chat).
func (s *Server) HandleSTOMP(w http.ResponseWriter, r *http.Request) {
	// Anonymous handshakes are let through: STOMP clients log in with CONNECT.
	ident, err := s.policy.Authenticate(r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	conn, br, _, err := upgrade(w, r, func(p string) bool {
		return p == "v12.stomp" || p == "v11.stomp" || p == "v10.stomp"
	})
	if err != nil {
		return
	}
	c := &stompConn{
		s: s, id: "s" + strconv.FormatUint(s.nextID.Add(1), 36), ident: ident,
		parser: stomp.NewParser(stomp.Limits{MaxFrame: s.lim.MaxFrame}),
		subs:   make(map[string]*stompSub), rl: newRateLimiter(s.lim),
	}
	c.userSeen.Store(&ident.User)
	c.w = newWriter(conn, c, &s.lim, s.connStats(metrics.STOMP))
	s.bindIdentity(c.w, ident)
	if !s.track(c.w, metrics.STOMP) {
		c.w.close(ReasonShutdown, true)
		return
	}
	s.wg.Add(1)
	go c.run(conn, &wsReader{br: br, max: s.lim.MaxFrame + 64, pong: c.w.sendPong})
}

func (c *stompConn) run(conn net.Conn, rd *wsReader) {
	s := c.s
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		for _, k := range c.subs {
			s.hub.Unsubscribe(k.sub)
		}
		c.w.close(ReasonReadError, false)
		s.untrack(c.w, metrics.STOMP)
		s.policy.Disconnected(c.client())
	}()
	for {
		timeout := 2*s.lim.PingInterval + 10*time.Second
		if c.hbIn > 0 {
			timeout = 2*c.hbIn + time.Second
		}
		_ = conn.SetReadDeadline(time.Now().Add(timeout))
		_, msg, err := rd.readMessage()
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errFrameTooLarge):
				c.fail(fmt.Errorf("frame too large: more than %d bytes", s.lim.MaxFrame), nil, 1009)
			case errors.Is(err, io.EOF):
				c.w.close(ReasonClientClosed, false)
			case errors.As(err, &ne) && ne.Timeout() && c.hbIn > 0:
				c.w.close(ReasonHeartbeat, false)
			}
			return
		}
		c.parser.Feed(msg)
		for {
			f, ok, err := c.parser.Next()
			if err != nil {
				c.fail(err, nil, 4000)
				return
			}
			if !ok {
				break
			}
			if !c.handle(ctx, &f) {
				return
			}
		}
	}
}

func (c *stompConn) client() Client { return Client{ID: c.id, Identity: c.ident} }

// fail sends an ERROR frame and closes the session, as STOMP requires for bad input.
func (c *stompConn) fail(err error, cause *stomp.Frame, wsCode uint16) {
	code, _ := errorCode(err)
	c.s.m.Refused.WithLabelValues("stomp_" + code).Inc()
	msg := err.Error()
	if code == "internal" {
		msg = "internal error"
	}
	if code == "unavailable" {
		wsCode = 1013 // try again later: the broker is away, not the client's fault
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{
		{Key: "message", Value: msg}, {Key: "content-type", Value: "text/plain"},
	}}
	if cause != nil {
		if rid, ok := cause.Get("receipt"); ok {
			f.Headers = append(f.Headers, stomp.Header{Key: "receipt-id", Value: rid})
		}
		f.Body = []byte(fmt.Sprintf("%s\n\nframe: %s", msg, cause.Command))
	}
	c.w.sendRaw(appendWSText(nil, stomp.AppendFrame(nil, &f)))
	c.w.close(ProtocolReason("stomp_error", msg, wsCode), true)
}

// sendFrame queues a frame as one WebSocket message.
func (c *stompConn) sendFrame(f *stomp.Frame) {
	c.w.sendRaw(appendWSText(nil, stomp.AppendFrame(nil, f)))
}

func (c *stompConn) receipt(f *stomp.Frame, extra ...stomp.Header) {
	rid, ok := f.Get("receipt")
	if !ok {
		return
	}
	c.sendFrame(&stomp.Frame{Command: stomp.CmdReceipt, Headers: append([]stomp.Header{{Key: "receipt-id", Value: rid}}, extra...)})
}

// handle processes one frame and reports whether the session goes on.
func (c *stompConn) handle(ctx context.Context, f *stomp.Frame) bool {
	if !c.connected && f.Command != stomp.CmdConnect && f.Command != stomp.CmdStomp {
		// Lenient: some scripts skip CONNECT; treat the session as a 1.2 one without heart-beats.
		if c.ident.User == "" && c.s.policy.AuthRequired() {
			c.fail(fmt.Errorf("%w: send CONNECT with a token (passcode or Authorization) first", ErrUnauthorized), f, 4003)
			return false
		}
		c.connected = true
	}
	switch f.Command {
	case stomp.CmdConnect, stomp.CmdStomp:
		return c.onConnect(f)
	case stomp.CmdSubscribe:
		return c.onSubscribe(ctx, f)
	case stomp.CmdUnsubscribe:
		id, ok := f.Get("id")
		if !ok {
			id, ok = f.Get("destination") // 1.0 clients may unsubscribe by destination
		}
		if !ok {
			c.fail(fmt.Errorf("%w: UNSUBSCRIBE needs an id header", ErrBadRequest), f, 4000)
			return false
		}
		if k := c.subs[id]; k != nil {
			c.s.hub.Unsubscribe(k.sub)
			delete(c.subs, id)
		}
		c.receipt(f)
	case stomp.CmdSend:
		if dest, _ := f.Get("destination"); dest == refreshDestination {
			return c.onRefresh(f)
		}
		if txid, ok := f.Get("transaction"); ok {
			if _, open := c.tx[txid]; !open {
				c.fail(fmt.Errorf("%w: transaction %q was not begun", ErrBadRequest, txid), f, 4000)
				return false
			}
			c.tx[txid] = append(c.tx[txid], stomp.Frame{Command: f.Command, Headers: f.Headers, Body: append([]byte(nil), f.Body...)})
			c.receipt(f)
			return true
		}
		return c.onSend(ctx, f)
	case stomp.CmdAck, stomp.CmdNack:
		return c.onAck(f)
	case stomp.CmdBegin, stomp.CmdCommit, stomp.CmdAbort:
		return c.onTx(ctx, f)
	case stomp.CmdDisconnect:
		c.receipt(f)
		c.w.close(ReasonNormal, true)
		return false
	default:
		c.fail(fmt.Errorf("%w: %s is a server frame", ErrBadRequest, f.Command), f, 4000)
		return false
	}
	return true
}

func (c *stompConn) onConnect(f *stomp.Frame) bool {
	if c.connected {
		c.fail(fmt.Errorf("%w: already connected", ErrBadRequest), f, 4000)
		return false
	}
	version := "1.0"
	if av, ok := f.Get("accept-version"); ok {
		version = ""
		offered := strings.Split(av, ",")
		for _, v := range stompVersions {
			for _, o := range offered {
				if strings.TrimSpace(o) == v && version == "" {
					version = v
				}
			}
		}
		if version == "" {
			c.fail(fmt.Errorf("%w: accept-version %q: supported versions are 1.2,1.1,1.0", ErrBadRequest, av), f, 4000)
			return false
		}
	}
	if token := frameToken(f); token != "" {
		ident, err := c.s.policy.AuthenticateToken(token)
		if err != nil {
			c.fail(err, f, 4003)
			return false
		}
		if ident.User != "" {
			c.ident = ident
			c.userSeen.Store(&ident.User)
			c.s.bindIdentity(c.w, ident)
		}
	}
	if c.ident.User == "" && c.s.policy.AuthRequired() {
		c.fail(fmt.Errorf("%w: CONNECT needs a token: passcode, or an Authorization: Bearer header", ErrUnauthorized), f, 4003)
		return false
	}
	// Heart-beats: we can send every StompHeartbeat and want to hear as often.
	ours := c.s.lim.StompHeartbeat
	if hb, ok := f.Get("heart-beat"); ok {
		cx, cy, err := parseHeartBeat(hb)
		if err != nil {
			c.fail(err, f, 4000)
			return false
		}
		if cy > 0 {
			c.hbOut = max(ours, cy)
		}
		if cx > 0 {
			c.hbIn = max(ours, cx)
		}
	}
	c.connected = true
	c.sendFrame(&stomp.Frame{Command: stomp.CmdConnected, Headers: []stomp.Header{
		{Key: "version", Value: version},
		{Key: "session", Value: c.id},
		{Key: "server", Value: "rtlab"},
		{Key: "heart-beat", Value: fmt.Sprintf("%d,%d", c.hbOut.Milliseconds(), c.hbIn.Milliseconds())},
		{Key: "user-name", Value: c.ident.User},
	}})
	return true
}

// refreshDestination is where a STOMP client SENDs a fresh token (header passcode or
// Authorization) before its token expires.
const refreshDestination = "/rtlab/refresh"

// frameToken is the token a frame carries: its passcode, or an Authorization: Bearer header.
func frameToken(f *stomp.Frame) string {
	token, _ := f.Get("passcode")
	if auth, ok := f.Get("Authorization"); ok {
		token, _ = strings.CutPrefix(auth, "Bearer ")
	}
	return token
}

// onRefresh replaces the session's token: RECEIPT (with the new expiry), or ERROR and close.
func (c *stompConn) onRefresh(f *stomp.Frame) bool {
	id, err := c.s.refreshIdentity(c.w, c.ident, frameToken(f))
	if err != nil {
		c.fail(err, f, 4003)
		return false
	}
	c.ident = id
	if id.Expires.IsZero() {
		c.receipt(f)
	} else {
		c.receipt(f, stomp.Header{Key: "expires", Value: id.Expires.UTC().Format(time.RFC3339)})
	}
	return true
}

func parseHeartBeat(v string) (time.Duration, time.Duration, error) {
	a, b, ok := strings.Cut(v, ",")
	x, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	y, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%w: heart-beat %q is not cx,cy", ErrBadRequest, v)
	}
	return time.Duration(x) * time.Millisecond, time.Duration(y) * time.Millisecond, nil
}

// destTopic maps a STOMP destination to a topic. forSend selects the publishing forms.
func destTopic(dest string, forSend bool) (topic string, seed bool, err error) {
	var t string
	switch {
	case strings.HasPrefix(dest, "/topic/"):
		return dest[len("/topic/"):], false, nil
	case forSend && strings.HasPrefix(dest, "/pub/share/"):
		t = "location/" + dest[len("/pub/share/"):]
	case forSend && strings.HasPrefix(dest, "/pub/chat/message/"):
		t = "chat/" + dest[len("/pub/chat/message/"):]
	case !forSend && strings.HasPrefix(dest, "/sub/location/"):
		t = "location/" + dest[len("/sub/location/"):]
	case !forSend && strings.HasPrefix(dest, "/sub/chat/"):
		t = "chat/" + dest[len("/sub/chat/"):]
	default:
		verb := "SUBSCRIBE to /topic/{topic}, /sub/location/{g} or /sub/chat/{room}"
		if forSend {
			verb = "SEND to /topic/{topic}, /pub/share/{g} or /pub/chat/message/{room}"
		}
		return "", false, fmt.Errorf("%w: unknown destination %q: %s", ErrBadRequest, dest, verb)
	}
	return t, true, nil
}

func (c *stompConn) onSubscribe(ctx context.Context, f *stomp.Frame) bool {
	dest, ok := f.Get("destination")
	if !ok || dest == "" {
		c.fail(fmt.Errorf("%w: SUBSCRIBE needs a destination header", ErrBadRequest), f, 4000)
		return false
	}
	if strings.HasPrefix(dest, historyDest) {
		return c.onHistory(ctx, f, dest) // one page of history (history.go)
	}
	topic, _, err := destTopic(dest, false)
	if err == nil {
		err = hub.ValidateTopic(topic)
	}
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	id, ok := f.Get("id")
	if !ok {
		id = dest // 1.0 clients may omit id
	}
	if _, dup := c.subs[id]; dup {
		c.fail(fmt.Errorf("%w: subscription id %q is already in use", ErrBadRequest, id), f, 4000)
		return false
	}
	if len(c.subs) >= c.s.lim.MaxSubs {
		c.fail(fmt.Errorf("%w: at most %d per connection", ErrTooManySubs, c.s.lim.MaxSubs), f, 4000)
		return false
	}
	mode := ackAuto
	switch v, _ := f.Get("ack"); v {
	case "", "auto":
	case "client":
		mode = ackClient
	case "client-individual":
		mode = ackClientIndividual
	default:
		c.fail(fmt.Errorf("%w: ack %q: want auto, client or client-individual", ErrBadRequest, v), f, 4000)
		return false
	}
	guard, err := c.s.policy.CanSubscribe(c.client(), topic)
	if err != nil {
		c.fail(err, f, 4003)
		return false
	}
	opts := hub.ReadOptions{}
	if v, ok := f.Get("since"); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.fail(fmt.Errorf("%w: since %q is not an offset", ErrBadRequest, v), f, 4000)
			return false
		}
		opts.Recover, opts.Since = true, n
		opts.Epoch, _ = f.Get("epoch")
	}
	k := &stompSub{c: c, id: id, dest: dest, topic: topic, ack: mode, guard: guard}
	k.watch = headerTrue(f, "presence")
	sub, res, err := c.s.hub.Subscribe(ctx, topic, k, opts)
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	k.sub = sub
	c.subs[id] = k
	c.receipt(f, stomp.Header{Key: "offset", Value: strconv.FormatUint(res.Top.Offset, 10)}, stomp.Header{Key: "epoch", Value: res.Top.Epoch})
	if !res.Recovered {
		c.sendFrame(gapFrame(dest, id, topic, res.Top.Offset, res.Top.Epoch, res.Reason))
	}
	sub.Start()
	return true
}

func (c *stompConn) onSend(ctx context.Context, f *stomp.Frame) bool {
	dest, ok := f.Get("destination")
	if !ok || dest == "" {
		c.fail(fmt.Errorf("%w: SEND needs a destination header", ErrBadRequest), f, 4000)
		return false
	}
	topic, seed, err := destTopic(dest, true)
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	// Copied: the body may share the parser's buffer, and the data lives on in history.
	data := json.RawMessage(append([]byte(nil), f.Body...))
	switch {
	case len(strings.TrimSpace(string(f.Body))) == 0:
		if !seed {
			c.fail(fmt.Errorf("%w: SEND needs a body (the data to publish)", ErrBadRequest), f, 4000)
			return false
		}
		data = GeneratedPosition()
	case !json.Valid(f.Body):
		data = asJSON(f.Body)
	}
	if !c.rl.allow(time.Now()) {
		c.fail(c.s.errRateLimited(), f, 4000)
		return false
	}
	typ, _ := f.Get("type")
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := hub.PublishRequest{Topic: topic, Data: data, Type: typ, Sender: c.ident.User}
	if seed && strings.HasPrefix(topic, "chat/") {
		err = c.s.policy.SeedJoin(pctx, c.client(), req) // /pub/chat/message/{room}
	}
	var p *hub.Publication
	if err == nil {
		p, err = c.s.policy.Publish(pctx, c.client(), req)
	}
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	c.receipt(f, stomp.Header{Key: "offset", Value: strconv.FormatUint(p.Offset, 10)}, stomp.Header{Key: "epoch", Value: p.Epoch})
	return true
}

func (c *stompConn) onAck(f *stomp.Frame) bool {
	id, ok := f.Get("id")
	if !ok {
		id, ok = f.Get("message-id")
	}
	if !ok {
		c.fail(fmt.Errorf("%w: %s needs an id header", ErrBadRequest, f.Command), f, 4000)
		return false
	}
	colon := strings.LastIndexByte(id, ':')
	off, err := strconv.ParseUint(id[colon+1:], 10, 64)
	k := c.subs[id[:max(colon, 0)]]
	if colon < 0 || err != nil || k == nil || k.ack == ackAuto {
		c.fail(fmt.Errorf("%w: %s id %q matches no message awaiting acknowledgement", ErrBadRequest, f.Command, id), f, 4000)
		return false
	}
	var redeliver *hub.Publication
	k.mu.Lock()
	kept := k.pending[:0]
	for _, p := range k.pending {
		switch {
		case p.Offset == off:
			if f.Command == stomp.CmdNack {
				redeliver = p
			}
		case p.Offset < off && k.ack == ackClient:
			// client mode acknowledges cumulatively
		default:
			kept = append(kept, p)
		}
	}
	clear(k.pending[len(kept):])
	k.pending = kept
	k.mu.Unlock()
	if redeliver != nil {
		c.w.send(item{pub: redeliver, sub: stompRedelivery{k}})
	}
	c.receipt(f)
	return true
}

func (c *stompConn) onTx(ctx context.Context, f *stomp.Frame) bool {
	txid, ok := f.Get("transaction")
	if !ok {
		c.fail(fmt.Errorf("%w: %s needs a transaction header", ErrBadRequest, f.Command), f, 4000)
		return false
	}
	if c.tx == nil {
		c.tx = make(map[string][]stomp.Frame)
	}
	frames, open := c.tx[txid]
	switch f.Command {
	case stomp.CmdBegin:
		if open {
			c.fail(fmt.Errorf("%w: transaction %q already begun", ErrBadRequest, txid), f, 4000)
			return false
		}
		if len(c.tx) >= 16 {
			c.fail(fmt.Errorf("%w: too many open transactions", ErrBadRequest), f, 4000)
			return false
		}
		c.tx[txid] = nil
	case stomp.CmdCommit, stomp.CmdAbort:
		if !open {
			c.fail(fmt.Errorf("%w: transaction %q was not begun", ErrBadRequest, txid), f, 4000)
			return false
		}
		delete(c.tx, txid)
		if f.Command == stomp.CmdCommit {
			for i := range frames {
				frames[i].Del("receipt")
				if !c.onSend(ctx, &frames[i]) {
					return false
				}
			}
		}
	}
	c.receipt(f)
	return true
}
