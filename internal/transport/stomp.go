package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transports"
)

// stompVersions are the versions served, best first; also the WebSocket subprotocols.
var stompVersions = []string{"1.2", "1.1", "1.0"}

// stompConn is one STOMP session over WebSocket. Fields are owned by the reader goroutine
// unless noted.
type stompConn struct {
	conn
	connected bool
	parser    *stomp.Parser
	tx        map[string]*stompTx // open transactions by id
	rl        rateLimiter         // publishes (--msg-rate)
	ops       rateLimiter         // every frame (--op-rate)
	hbIn      time.Duration       // client promised to send at least this often (0: never)
	hbOut     atomic.Int64        // nanoseconds: we send at least this often (0: pings, or nothing on TCP); read by the keepalive loop
	carrier   *stompCarrier       // WebSocket messages, or bare frames (STOMP over TCP, SockJS)
	version   string              // negotiated at CONNECT; "1.0" sessions get headers unescaped
	connectBy time.Time           // the CONNECT frame must come before this
	published bool                // the last message held a SEND (readMessage keeps the stack)
	refusals  int                 // SENDs refused on /user/queue/errors, for their message-ids
	held      unresolved          // a keyed SEND whose outcome is unknown
}

// stompTx is an open transaction: the SENDs it holds until COMMIT.
type stompTx struct {
	frames []stomp.Frame
	bytes  int // body and header bytes held
}

// frameBytes is what a held frame costs: its body and headers, and a little per header.
func frameBytes(f *stomp.Frame) int {
	n := len(f.Body)
	for _, h := range f.Headers {
		n += len(h.Key) + len(h.Value) + 32
	}
	return n
}

type ackMode int

const (
	ackAuto ackMode = iota
	ackClient
	ackClientIndividual
)

// stompSub is one SUBSCRIBE.
type stompSub struct {
	subHeld // key: the subscription's id
	c       *stompConn
	dest    string
	ack     ackMode
	watch   bool // presence:true asked for the topic's presence

	mu           sync.Mutex
	pending      []*hub.Publication // unacknowledged, in offset order (client modes); guarded by mu
	pendingBytes int                // their data bytes; guarded by mu
}

// stompRedelivery marks a redelivery in the writer queue.
type stompRedelivery struct{ *stompSub }

// Pace hands a resuming subscription's replay to the writer (hub.PacedSink).
func (k *stompSub) Pace(pull func(budget int) bool) { k.c.w.pace(pull) }

func (k *stompSub) Deliver(p *hub.Publication) {
	if guardRefuses(k.guard, k.c.w, p) {
		return
	}
	if k.ack != ackAuto {
		lim := &k.c.s.lim
		k.mu.Lock()
		if len(k.pending) >= lim.UnackedMsgs || k.pendingBytes+len(p.Data) > lim.UnackedBytes {
			n, b := len(k.pending), k.pendingBytes
			k.mu.Unlock()
			// A client that never acknowledges is a slow consumer: what it holds is bounded.
			k.c.s.m.QueueOverflows.WithLabelValues(k.c.w.stats.transport).Inc()
			k.c.w.close(ReasonSlow.with(fmt.Sprintf(
				"subscription %s has %d unacknowledged messages (%d bytes), at most %d and %d bytes: ACK them",
				k.key, n, b, lim.UnackedMsgs, lim.UnackedBytes)), false)
			return
		}
		k.pending = append(k.pending, p)
		k.pendingBytes += len(p.Data)
		k.mu.Unlock()
	}
	k.c.w.send(item{pub: p, sub: k})
}

// Gap tells the client that the subscription's history broke before the publication at now.
func (k *stompSub) Gap(topic string, now hub.Position, reason string) {
	k.c.sendFrame(gapFrame(k.dest, k.key, topic, now.Offset, now.Epoch, reason))
}

// gapFrame is the MESSAGE that tells a subscription its history is gone.
func gapFrame(dest, id, topic string, offset uint64, epoch, reason string) *stomp.Frame {
	body, _ := json.Marshal(map[string]any{"topic": topic, "offset": offset, "epoch": epoch, "reason": reason})
	return &stomp.Frame{Command: stomp.CmdMessage, Headers: nonEmpty(
		stomp.Header{Key: "destination", Value: dest}, stomp.Header{Key: "subscription", Value: id},
		stomp.Header{Key: "message-id", Value: id + ":gap"}, stomp.Header{Key: "gap", Value: "true"},
		stomp.Header{Key: "reason", Value: reason}, stomp.Header{Key: "epoch", Value: epoch},
		stomp.Header{Key: "content-type", Value: "application/json"},
	), Body: body}
}

// nonEmpty drops headers without a value: STOMP frames carry no empty headers, so an unknown
// value is left out rather than sent as "key:".
func nonEmpty(h ...stomp.Header) []stomp.Header {
	kept := h[:0]
	for _, x := range h {
		if x.Value != "" {
			kept = append(kept, x)
		}
	}
	return kept
}

// encSTOMPTail is the part of a MESSAGE shared by every subscription: the headers after the
// per-subscription ones, the blank line, the body and the NUL.
func encSTOMPTail(p *hub.Publication) []byte { return appendSTOMPTail(p, true) }

func appendSTOMPTail(p *hub.Publication, escape bool) []byte {
	b := make([]byte, 0, len(p.Data)+160)
	b = append(b, "content-type:application/json\noffset:"...)
	b = strconv.AppendUint(b, p.Offset, 10)
	b = append(b, '\n')
	if p.Epoch != "" {
		b = stomp.AppendHeader(b, "epoch", p.Epoch)
	}
	// The time's colons are escaped (\c) as STOMP 1.1 and 1.2 require of every header value.
	b = append(b, "time:"...)
	start := len(b)
	b = p.Time.UTC().AppendFormat(b, hub.TimeFormat)
	if escape {
		b = append(b[:start], stomp.AppendEscaped(nil, string(b[start:]))...)
	}
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

// encSTOMPTail10 is encSTOMPTail for STOMP 1.0 sessions, which know no escapes: their time
// header keeps its colons.
func encSTOMPTail10(p *hub.Publication) []byte { return appendSTOMPTail(p, false) }

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
	h = stomp.AppendHeader(h, "subscription", k.key)
	h = append(h, "message-id:"...)
	idStart := len(h)
	h = stomp.AppendEscaped(h, k.key)
	if c.version == "1.0" {
		h = append(h, ':') // 1.0 knows no escapes
	} else {
		h = append(h, '\\', 'c')
	}
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
	if c.version == "1.0" {
		tail = encSTOMPTail10(it.pub) // rare: not worth a cache slot on every publication
	}
	buf = c.carrier.head(buf, len(h)+len(tail))
	buf = append(buf, h...)
	return append(buf, tail...)
}

func (c *stompConn) goodbye(r Reason) []byte {
	switch r.Code {
	case ReasonReadError.Code:
		return nil
	case ReasonClientClosed.Code, reasonSTOMPError.Code, ReasonNormal.Code:
		return c.carrier.end(r.WSCode, r.Code)
	}
	f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{
		{Key: "message", Value: r.Code + ": " + r.Text}, {Key: "content-type", Value: "text/plain"},
		{Key: "reconnect", Value: strconv.FormatBool(r.Reconnect)},
	}, Body: []byte(r.Text)}
	return append(c.carrier.wire(stomp.AppendFrame(nil, &f)), c.carrier.end(r.WSCode, r.Code)...)
}

func (c *stompConn) keepalive() []byte {
	if c.hbOut.Load() > 0 {
		return c.carrier.beat
	}
	return c.carrier.idle
}

// keepaliveDue says whether the keepalive loop writes a heart-beat now. It looks again only
// after kaPeriod, so a heart-beat goes out when waiting for that look (and a quarter period
// more, for a late one) could leave the client without one for the negotiated interval.
func (c *stompConn) keepaliveDue(idle time.Duration) bool {
	if hb := time.Duration(c.hbOut.Load()); hb > 0 {
		p := c.s.kaPeriod
		return idle+p+p/4 >= hb
	}
	return idle >= c.s.lim.PingInterval
}

// HandleSTOMP serves STOMP over WebSocket (/api/stomp, and wherever the application routes it).
func (s *Server) HandleSTOMP(w http.ResponseWriter, r *http.Request) {
	// Anonymous handshakes are let through: STOMP clients log in with CONNECT.
	ident, conn, br, release, ok := s.upgradeSocket(w, r, true, func(p string) bool {
		return p == "v12.stomp" || p == "v11.stomp" || p == "v10.stomp"
	})
	if !ok {
		return
	}
	c := s.newSTOMPConn(ident, false, release)
	c.addr = addrKey(s.clientIP(r))
	if !c.start(conn, c, transports.STOMP) {
		return
	}
	// Until CONNECT, heart-beats and pings do not count: the first frame must come within
	// FirstFrameTimeout of the upgrade, so a socket cannot be held open with "\n" alone.
	c.connectBy = time.Now().Add(s.lim.FirstFrameTimeout)
	touch := func() { _ = conn.SetReadDeadline(c.readDeadline()) }
	touch()
	go c.run(conn, newMessageReader(br, s.lim.MaxFrame+64, c.pongPaced, touch, &c.published))
}

func (c *stompConn) run(conn net.Conn, rd messageReader) {
	s := c.s
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		c.close(ReasonReadError)
	}()
	for {
		_ = conn.SetReadDeadline(c.readDeadline()) // CONNECT may have changed it
		_, msg, err := rd.readMessage()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.published = false
		beats := c.parser.HeartBeats()
		c.parser.Feed(msg)
		for {
			f, ok, err := c.parser.Next()
			if err != nil {
				c.badFrame(err)
				return
			}
			if !ok {
				break
			}
			if !c.ops.pace(ctx, c.w.conn) || !c.handle(ctx, &f) {
				return
			}
		}
		if !c.paceBeats(ctx, beats) {
			return
		}
	}
}

// readFailed ends the session on a failed read, telling the client why when it is to blame.
// It and badFrame are kept out of run, whose frame every frame's handling stands on.
func (c *stompConn) readFailed(err error) {
	s := c.s
	var ne net.Error
	switch {
	case !c.connected && isTimeout(err):
		c.fail(fmt.Errorf("%w: no CONNECT frame within %s of the upgrade (--first-frame-timeout)", ErrTimeout, s.lim.FirstFrameTimeout), nil, 4000)
	case errors.Is(err, errFrameTooLarge):
		c.fail(fmt.Errorf("%w: a frame over %d bytes (--max-frame)", hub.ErrTooLarge, s.lim.MaxFrame), nil, 1009)
	case s.closeAfterRead(c.w, err): // a protocol error, invalid text or a close: closed
	case errors.As(err, &ne) && ne.Timeout() && c.hbIn > 0:
		c.w.close(ReasonHeartbeat, false)
	}
}

// badFrame ends the session on a frame the parser refused; the parser says what is wrong.
func (c *stompConn) badFrame(err error) {
	c.fail(fmt.Errorf("%w: %w", ErrBadRequest, err), nil, 4000)
}

// readDeadline is when the session ends unless the client sends something: two heart-beat
// intervals (or ping intervals) from now, and never after connectBy before CONNECT. A TCP
// client that asked for no heart-beats has none: it is never cut for silence.
func (c *stompConn) readDeadline() time.Time {
	timeout := 2*c.s.lim.PingInterval + 10*time.Second
	if c.hbIn > 0 {
		timeout = 2*c.hbIn + time.Second
	} else if c.carrier.silent && c.connected {
		return time.Time{}
	}
	d := time.Now().Add(timeout)
	if !c.connected && c.connectBy.Before(d) {
		d = c.connectBy
	}
	return d
}

// fail sends an ERROR frame and closes the session, as STOMP requires for bad input.
func (c *stompConn) fail(err error, cause *stomp.Frame, wsCode uint16) {
	code, _ := errorCode(err)
	c.s.m.Refused.WithLabelValues(c.w.stats.transport, code).Inc()
	msg := err.Error()
	if code == "internal" {
		msg = "internal error"
	}
	if code == "unavailable" || code == "outcome_unknown" {
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
	c.w.sendRaw(c.carrier.wire(stomp.AppendFrame(nil, &f)))
	r := reasonSTOMPError.with(msg)
	r.WSCode = wsCode
	c.w.close(r, true)
}

// sendFrame queues a frame (on WebSocket, as one message).
func (c *stompConn) sendFrame(f *stomp.Frame) {
	c.w.sendRaw(c.carrier.wire(stomp.AppendFrame(nil, f)))
}

func (c *stompConn) receipt(f *stomp.Frame, extra ...stomp.Header) {
	rid, ok := f.Get("receipt")
	if !ok {
		return
	}
	c.sendFrame(&stomp.Frame{Command: stomp.CmdReceipt, Headers: nonEmpty(append([]stomp.Header{{Key: "receipt-id", Value: rid}}, extra...)...)})
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
		c.unsubscribe(id)
		c.receipt(f)
	case stomp.CmdSend:
		if dest, _ := f.Get("destination"); dest == refreshDestination {
			return c.onRefresh(f)
		}
		if txid, ok := f.Get("transaction"); ok {
			return c.onTxSend(f, txid)
		}
		return c.onSend(ctx, f, false)
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
		if err != nil && !c.s.policy.AuthRequired() && isPasscode(f) {
			// Open dev mode: login:guest passcode:guest (stompjs, tutorials) connects anonymously.
			ident, err = Identity{}, nil
		}
		if err != nil {
			c.fail(err, f, 4003)
			return false
		}
		if ident.User != "" && c.ident.User == "" {
			// Admitted anonymously at the upgrade: the user's connections are counted now.
			if err := c.admitUser(ident.User); err != nil {
				c.fail(err, f, 4000)
				return false
			}
		}
		if ident.User != "" {
			c.bindIdentity(ident)
		}
	}
	if c.ident.User == "" && c.s.policy.AuthRequired() {
		c.fail(fmt.Errorf("%w: CONNECT needs a token: passcode, or an Authorization: Bearer header", ErrUnauthorized), f, 4003)
		return false
	}
	// Heart-beats: we can send every StompHeartbeat and want to hear as often. The keepalive
	// loop looks every kaPeriod, at most half of StompHeartbeat, so what is granted is kept.
	ours := c.s.lim.StompHeartbeat
	var hbOut time.Duration
	if hb, ok := f.Get("heart-beat"); ok {
		cx, cy, err := parseHeartBeat(hb)
		if err != nil {
			c.fail(err, f, 4000)
			return false
		}
		if cy > 0 {
			hbOut = max(ours, cy)
		}
		if cx > 0 {
			c.hbIn = max(ours, cx)
		}
	}
	c.hbOut.Store(int64(hbOut))
	c.connected, c.version = true, version
	h := []stomp.Header{
		{Key: "version", Value: version},
		{Key: "session", Value: c.id},
		{Key: "server", Value: "rtlab"},
		{Key: "heart-beat", Value: fmt.Sprintf("%d,%d", hbOut.Milliseconds(), c.hbIn.Milliseconds())},
	}
	if c.ident.User != "" { // STOMP has no empty headers: an anonymous session has no user-name
		h = append(h, stomp.Header{Key: "user-name", Value: c.ident.User})
	}
	c.sendFrame(&stomp.Frame{Command: stomp.CmdConnected, Headers: h})
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

// isPasscode says whether the frame's token is its passcode (no Authorization header).
func isPasscode(f *stomp.Frame) bool {
	_, auth := f.Get("Authorization")
	_, pass := f.Get("passcode")
	return pass && !auth
}

// onRefresh replaces the session's token: RECEIPT (with the new expiry), or ERROR and close.
func (c *stompConn) onRefresh(f *stomp.Frame) bool {
	id, err := c.refreshIdentity(frameToken(f))
	if err != nil {
		c.fail(err, f, 4003)
		return false
	}
	c.dropRefused()
	if id.Expires.IsZero() {
		c.receipt(f)
	} else {
		c.receipt(f, stomp.Header{Key: "expires", Value: id.Expires.UTC().Format(time.RFC3339)})
	}
	return true
}

// dropRefused ends the subscriptions a refreshed token no longer allows (narrower
// rtlab.subscribe grants): each is told with a MESSAGE carrying header unsubscribed:forbidden
// and the reason, and receives nothing more.
func (c *stompConn) dropRefused() {
	c.recheck(func(ks subscriber, err error) {
		k := ks.(*stompSub)
		code, _ := errorCode(err)
		body, _ := json.Marshal(map[string]any{"topic": k.topic, "code": code, "reason": reasonText(err)})
		c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
			{Key: "destination", Value: k.dest}, {Key: "subscription", Value: k.key},
			{Key: "message-id", Value: k.key + ":unsubscribed"}, {Key: "unsubscribed", Value: code},
			{Key: "reason", Value: reasonText(err)}, {Key: "content-type", Value: "application/json"},
		}, Body: body})
	})
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

// STOMPDests gives STOMP destinations besides /topic/{topic} a meaning: an application's own,
// such as those of clients written for another server. Its methods are called on sessions'
// reader goroutines and must be safe for concurrent use.
type STOMPDests interface {
	// Dest returns where a SUBSCRIBE (send false) or SEND destination leads; ok is false for
	// a destination it does not know.
	Dest(dest string, send bool) (r STOMPRoute, ok bool)
	// Forms names the destinations Dest knows, for the refusal of an unknown one, as
	// "/sub/a/{x} or /sub/b/{y}".
	Forms(send bool) string
}

// STOMPRoute is where a STOMP destination leads.
type STOMPRoute struct {
	Topic string
	// Publish publishes a SEND to the destination in place of Policy.Publish; req.Data is nil
	// when the frame has no body, and Publish decides what that means. Nil: Policy.Publish, and
	// a SEND needs a body. It may return a nil publication when it published nothing;
	// SendHeaders(ctx) gives the frame's headers.
	Publish func(ctx context.Context, c Client, req hub.PublishRequest) (*hub.Publication, error)
	// Check, for a COMMIT, refuses what Publish would, publishing nothing; nil: the Policy's
	// PublishChecker, with the SEND's data (an empty one as {}).
	Check func(ctx context.Context, c Client, req hub.PublishRequest) error
	// Prepare, set in place of Publish, publishes in two steps: all the checks (an application's
	// backend asked, its answer checked), then commit. A COMMIT prepares every SEND of its
	// transaction before committing any. A SEND refused here is the sender's alone: it is told
	// on its /user/queue/errors subscriptions and in its RECEIPT, and the session goes on.
	Prepare func(ctx context.Context, c Client, req hub.PublishRequest) (commit func(context.Context) (*hub.Publication, error), err error)
	// Reply, for a SUBSCRIBE, answers the subscriber once (Spring's @SubscribeMapping) in
	// place of a subscription to Topic; nil data sends nothing. SendHeaders(ctx) gives the
	// frame's headers.
	Reply func(ctx context.Context, c Client, dest string) (json.RawMessage, error)
}

// destRoute maps a STOMP destination to its route. send selects the publishing forms.
func (s *Server) destRoute(dest string, send bool) (STOMPRoute, error) {
	if t, ok := strings.CutPrefix(dest, "/topic/"); ok {
		return STOMPRoute{Topic: t}, nil
	}
	if s.dests != nil {
		if r, ok := s.dests.Dest(dest, send); ok {
			return r, nil
		}
	}
	if t, ok := strings.CutPrefix(dest, "/queue/"); ok {
		return STOMPRoute{Topic: "queue/" + t}, nil // Spring's simple broker: a topic by another name
	}
	verb := "SUBSCRIBE to /topic/{topic}, /queue/{name}"
	if send {
		verb = "SEND to /topic/{topic}, /queue/{name}"
	}
	if s.dests != nil {
		verb += ", " + s.dests.Forms(send)
	}
	return STOMPRoute{}, fmt.Errorf("%w: unknown destination %q: %s", ErrBadRequest, dest, verb)
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
	if route, err := c.route(dest, false); err == nil && route.Reply != nil {
		c.onReply(ctx, f, dest, route)
		return true
	}
	// The frame is read, and answered, in functions of their own: the hub's subscribe is
	// deep, and every connection's reader goroutine keeps the stack its first frames needed.
	k, opts := c.subscription(f, dest)
	if k == nil {
		return false // the session failed
	}
	refused, err := c.subscribe(ctx, k, opts, func(res *hub.ReadResult) { c.subscribed(f, k, res) })
	switch {
	case refused != nil:
		c.refuseSubscription(f, k.key, dest, refused)
	case unavailable(err):
		// The broker is away: this subscription alone is refused, as on WebSocket; the client
		// subscribes again later on the same session.
		c.refuseSubscription(f, k.key, dest, err)
	case err != nil:
		c.fail(err, f, 4000)
		return false
	}
	return true
}

// unavailable says whether err is the broker's (or the closing hub's) passing trouble, which
// refuses one SUBSCRIBE or SEND and not the session.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	code, _ := errorCode(err)
	return code == "unavailable" || code == "outcome_unknown"
}

// onReply answers a SUBSCRIBE to a route that replies once (Spring's @SubscribeMapping): the
// reply is a MESSAGE to the subscription, which holds nothing after it; a refusal is told as
// any refused subscription's.
func (c *stompConn) onReply(ctx context.Context, f *stomp.Frame, dest string, route STOMPRoute) {
	id, ok := f.Get("id")
	if !ok {
		id = dest
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := route.Reply(context.WithValue(rctx, sendFrameKey{}, f), c.client(), dest)
	if err != nil {
		c.refuseSubscription(f, id, dest, err)
		return
	}
	if len(data) > 0 && string(data) != "null" {
		c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
			{Key: "destination", Value: dest}, {Key: "subscription", Value: id}, {Key: "message-id", Value: id + ":reply"},
			{Key: "content-type", Value: "application/json"},
		}, Body: data})
	}
	c.receipt(f)
}

// subscription reads a SUBSCRIBE to dest and returns the subscription it asks for, or fails
// the session (nil). conn.subscribe checks the rest.
func (c *stompConn) subscription(f *stomp.Frame, dest string) (*stompSub, hub.ReadOptions) {
	var opts hub.ReadOptions
	route, err := c.route(dest, false)
	if err != nil {
		c.fail(err, f, 4000)
		return nil, opts
	}
	id, ok := f.Get("id")
	if !ok {
		id = dest // 1.0 clients may omit id
	}
	if c.find(id) != nil {
		c.fail(fmt.Errorf("%w: subscription id %q is already in use", ErrBadRequest, id), f, 4000)
		return nil, opts
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
		return nil, opts
	}
	if v, ok := f.Get("since"); ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.fail(fmt.Errorf("%w: since %q is not an offset", ErrBadRequest, v), f, 4000)
			return nil, opts
		}
		opts.Recover, opts.Since = true, n
		opts.Epoch, _ = f.Get("epoch")
	}
	k := &stompSub{subHeld: subHeld{key: id, topic: route.Topic}, c: c, dest: dest, ack: mode}
	k.watch = headerTrue(f, "presence")
	return k, opts
}

// refuseSubscription answers a SUBSCRIBE refused on its own account (the policy forbids the
// topic, or the session holds --max-subs). An ERROR frame would end the session, as STOMP
// requires of ERROR, and every other subscription with it; so the refusal is a MESSAGE to
// the refused subscription with a refused header (the code) and message (the reason), and the
// RECEIPT, when one was asked for, carries the same two headers.
func (c *stompConn) refuseSubscription(f *stomp.Frame, id, dest string, err error) {
	code, _ := errorCode(err)
	c.s.m.Refused.WithLabelValues(transports.STOMP, code).Inc()
	msg := reasonText(err)
	c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
		{Key: "subscription", Value: id}, {Key: "destination", Value: dest}, {Key: "message-id", Value: "refused-" + id},
		{Key: "refused", Value: code}, {Key: "message", Value: msg}, {Key: "content-type", Value: "text/plain"},
	}, Body: []byte(msg)})
	c.receipt(f, stomp.Header{Key: "refused", Value: code}, stomp.Header{Key: "message", Value: msg})
}

// subscribed answers a SUBSCRIBE the hub took: its receipt with where the subscription
// starts, then a gap notice when it could not resume where it asked.
func (c *stompConn) subscribed(f *stomp.Frame, k *stompSub, res *hub.ReadResult) {
	c.receipt(f, stomp.Header{Key: "offset", Value: strconv.FormatUint(res.Top.Offset, 10)}, stomp.Header{Key: "epoch", Value: res.Top.Epoch})
	if !res.Recovered {
		next := res.Next()
		c.sendFrame(gapFrame(k.dest, k.key, k.topic, next.Offset, next.Epoch, res.Reason))
	}
}

// onTxSend holds a SEND of transaction txid until it is committed.
func (c *stompConn) onTxSend(f *stomp.Frame, txid string) bool {
	tx := c.tx[txid]
	if tx == nil {
		c.fail(fmt.Errorf("%w: transaction %q was not begun", ErrBadRequest, txid), f, 4000)
		return false
	}
	lim := &c.s.lim
	n := frameBytes(f)
	if len(tx.frames) >= lim.StompTxFrames || tx.bytes+n > lim.StompTxBytes {
		c.fail(fmt.Errorf("%w: transaction %q would hold more than %d frames or %d bytes of bodies and headers (--stomp-tx-frames, --stomp-tx-bytes): commit smaller ones",
			hub.ErrTooLarge, txid, lim.StompTxFrames, lim.StompTxBytes), f, 1009)
		return false
	}
	// The body is copied: it may share the parser's buffer (headers are the frame's own).
	tx.frames = append(tx.frames, stomp.Frame{Command: f.Command, Headers: f.Headers, Body: append([]byte(nil), f.Body...)})
	tx.bytes += n
	c.receipt(f)
	return true
}

// PublishBatchError is a PublishChecker's refusal of one request of the batch, by its index.
type PublishBatchError struct {
	Index int
	Err   error
}

func (e *PublishBatchError) Error() string { return e.Err.Error() }
func (e *PublishBatchError) Unwrap() error { return e.Err }

// commitFn publishes a prepared SEND.
type commitFn func(context.Context) (*hub.Publication, error)

// txSend is a held SEND read as onSend reads it: its route and what it asks to publish.
func (c *stompConn) txSend(f *stomp.Frame) (STOMPRoute, hub.PublishRequest, error) {
	dest, _ := f.Get("destination")
	route, err := c.route(dest, true)
	if err != nil {
		return route, hub.PublishRequest{}, err
	}
	if err := hub.ValidateTopic(route.Topic); err != nil {
		return route, hub.PublishRequest{}, err
	}
	data := json.RawMessage(f.Body)
	switch {
	case len(strings.TrimSpace(string(f.Body))) == 0:
		if route.Publish == nil && route.Prepare == nil {
			return route, hub.PublishRequest{}, fmt.Errorf("%w: SEND needs a body (the data to publish)", ErrBadRequest)
		}
		data = nil
	case !json.Valid(f.Body):
		data = AsJSON(f.Body)
	}
	typ, _ := f.Get("type")
	key, _ := f.Get("idempotency-key")
	return route, hub.PublishRequest{Topic: route.Topic, Data: data, Type: typ, Sender: c.ident.User, Key: key}, nil
}

// txFrameError names the held SEND a COMMIT was refused for.
func txFrameError(i, n int, f *stomp.Frame, err error) error {
	dest, _ := f.Get("destination")
	return fmt.Errorf("SEND %d of %d (destination %s): %w", i+1, n, dest, err)
}

// checkCommit checks every SEND of a transaction before any is published, so that a COMMIT
// publishes all of them or none: the rate (the transaction takes one token per SEND, all at
// once), destinations, bodies, permissions as the Policy checks them, and last the routes
// that prepare (an application's backend is asked only when all else passed). It returns the
// prepared SENDs' commits, by frame.
func (c *stompConn) checkCommit(ctx context.Context, frames []stomp.Frame) ([]commitFn, error) {
	reqs := make([]hub.PublishRequest, 0, len(frames))
	at := make([]int, 0, len(frames)) // the frame of each of reqs
	routes := make([]STOMPRoute, len(frames))
	for i := range frames {
		route, req, err := c.txSend(&frames[i])
		if err != nil {
			return nil, txFrameError(i, len(frames), &frames[i], err)
		}
		routes[i] = route
		if route.Check != nil {
			if err := route.Check(ctx, c.client(), req); err != nil {
				return nil, txFrameError(i, len(frames), &frames[i], err)
			}
			continue
		}
		if route.Prepare == nil {
			if req.Data == nil {
				req.Data = json.RawMessage("{}") // the route makes the data; the rest is checked
			}
			reqs, at = append(reqs, req), append(at, i)
		}
	}
	if pc, ok := c.s.policy.(PublishChecker); ok {
		if err := pc.CheckPublish(ctx, c.client(), reqs); err != nil {
			var be *PublishBatchError
			if errors.As(err, &be) && be.Index >= 0 && be.Index < len(at) {
				return nil, txFrameError(at[be.Index], len(frames), &frames[at[be.Index]], be.Err)
			}
			return nil, err
		}
	}
	if !c.rl.allowN(time.Now(), len(frames)) {
		return nil, fmt.Errorf("%w: a transaction of %d SENDs, at most %g messages per second (burst %d)", ErrRateLimited, len(frames), c.s.lim.MsgRate, c.s.lim.MsgBurst)
	}
	if err := c.allowUserPublish(len(frames)); err != nil {
		return nil, fmt.Errorf("a transaction of %d SENDs: %w", len(frames), err)
	}
	commits := make([]commitFn, len(frames))
	for i := range frames {
		if routes[i].Prepare == nil {
			continue
		}
		_, req, _ := c.txSend(&frames[i])
		commit, err := routes[i].Prepare(context.WithValue(ctx, sendFrameKey{}, &frames[i]), c.client(), req)
		if err != nil {
			return nil, txFrameError(i, len(frames), &frames[i], err)
		}
		commits[i] = commit
	}
	return commits, nil
}

// onSend publishes a SEND; paid says the rate was already taken for it (a committed
// transaction's).
func (c *stompConn) onSend(ctx context.Context, f *stomp.Frame, paid bool) bool {
	c.published = true
	dest, ok := f.Get("destination")
	if !ok || dest == "" {
		c.fail(fmt.Errorf("%w: SEND needs a destination header", ErrBadRequest), f, 4000)
		return false
	}
	route, err := c.route(dest, true)
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	// Copied: the body may share the parser's buffer, and the data lives on in history.
	data := json.RawMessage(append([]byte(nil), f.Body...))
	switch {
	case len(strings.TrimSpace(string(f.Body))) == 0:
		if route.Publish == nil && route.Prepare == nil {
			c.fail(fmt.Errorf("%w: SEND needs a body (the data to publish)", ErrBadRequest), f, 4000)
			return false
		}
		data = nil // the route decides what an empty SEND publishes
	case !json.Valid(f.Body):
		data = AsJSON(f.Body)
	}
	if err := c.allowSend(paid); err != nil {
		c.fail(err, f, 4000)
		return false
	}
	typ, _ := f.Get("type")
	key, _ := f.Get("idempotency-key")
	pctx, cancel := context.WithTimeout(context.WithValue(ctx, sendFrameKey{}, f), 10*time.Second)
	defer cancel()
	req := hub.PublishRequest{Topic: route.Topic, Data: data, Type: typ, Sender: c.ident.User, Key: key}
	if route.Prepare != nil {
		c.sendPrepared(pctx, f, dest, route, req)
		return true
	}
	publish := c.s.policy.Publish
	if route.Publish != nil {
		publish = route.Publish
	}
	err = c.held.check(req)
	var p *hub.Publication
	if err == nil {
		p, err = publish(pctx, c.client(), req)
		c.held.settle(req, err)
	}
	if err != nil && unavailable(err) && !paid {
		c.refuseSend(f, dest, err) // the broker is away: this SEND alone fails, the session goes on
		return true
	}
	if err != nil {
		c.fail(err, f, 4000)
		return false
	}
	c.sent(f, p)
	return true
}

// sent answers a published SEND: its receipt, with where the publication is.
func (c *stompConn) sent(f *stomp.Frame, p *hub.Publication) {
	if p == nil { // a route that published nothing (an application's backend said so)
		c.receipt(f)
		return
	}
	if p.Duplicate {
		c.receipt(f, stomp.Header{Key: "offset", Value: strconv.FormatUint(p.Offset, 10)}, stomp.Header{Key: "epoch", Value: p.Epoch}, stomp.Header{Key: "duplicate", Value: "true"})
		return
	}
	c.receipt(f, stomp.Header{Key: "offset", Value: strconv.FormatUint(p.Offset, 10)}, stomp.Header{Key: "epoch", Value: p.Epoch})
}

// sendPrepared publishes a SEND to a route that prepares; a refusal is the sender's alone.
func (c *stompConn) sendPrepared(ctx context.Context, f *stomp.Frame, dest string, route STOMPRoute, req hub.PublishRequest) {
	commit, err := route.Prepare(ctx, c.client(), req)
	var p *hub.Publication
	if err == nil {
		p, err = commit(ctx)
	}
	if err != nil {
		c.refuseSend(f, dest, err)
		return
	}
	c.sent(f, p)
}

// errorsDest is where a session hears of its refused SENDs, as Spring's
// @SendToUser("/queue/errors").
const errorsDest = "/user/queue/errors"

// refuseSend tells the sender, and only it, that a SEND was refused: a MESSAGE to each of the
// session's subscriptions to /user/queue/errors, and the RECEIPT, when one was asked for, with
// headers refused (the code) and message (the reason). The session goes on.
func (c *stompConn) refuseSend(f *stomp.Frame, dest string, err error) {
	code, _ := errorCode(err)
	c.s.m.Refused.WithLabelValues(c.w.stats.transport, code).Inc()
	msg := reasonText(err)
	body, _ := json.Marshal(map[string]string{"error": code, "reason": msg, "destination": dest})
	for _, ks := range c.subs {
		k, ok := ks.(*stompSub)
		if !ok || k.dest != errorsDest {
			continue
		}
		c.refusals++
		c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
			{Key: "destination", Value: errorsDest}, {Key: "subscription", Value: k.key},
			{Key: "message-id", Value: k.key + ":refused-" + strconv.Itoa(c.refusals)},
			{Key: "refused", Value: code}, {Key: "message", Value: msg}, {Key: "content-type", Value: "application/json"},
		}, Body: body})
	}
	c.receipt(f, stomp.Header{Key: "refused", Value: code}, stomp.Header{Key: "message", Value: msg})
}

// sendFrameKey is the context key of the SEND frame a route's Publish is called for.
type sendFrameKey struct{}

// SendHeaders returns the headers of the SEND frame a STOMPRoute's Publish was called for.
func SendHeaders(ctx context.Context) []stomp.Header {
	if f, ok := ctx.Value(sendFrameKey{}).(*stomp.Frame); ok {
		return f.Headers
	}
	return nil
}

// userDest is the prefix of the connected user's own destinations, as Spring's user
// destinations: SUBSCRIBE /user/queue/{name} is the topic user/{user}/queue/{name}, which
// the application's backend publishes to for that user alone.
const userDest = "/user/"

// UserTopic returns the topic behind user's destination /user/{rest}.
func UserTopic(user, rest string) string { return "user/" + user + "/" + rest }

// route is destRoute with the session's user destinations.
func (c *stompConn) route(dest string, send bool) (STOMPRoute, error) {
	rest, ok := strings.CutPrefix(dest, userDest)
	if !ok {
		return c.s.destRoute(dest, send)
	}
	switch {
	case send:
		return STOMPRoute{}, fmt.Errorf("%w: %s* destinations are fed by the application's backend (the server API); clients SUBSCRIBE to them", ErrForbidden, userDest)
	case c.ident.User == "":
		return STOMPRoute{}, fmt.Errorf("%w: %s%s is the connected user's own: CONNECT with a token first", ErrUnauthorized, userDest, rest)
	}
	return STOMPRoute{Topic: UserTopic(c.ident.User, rest)}, nil
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
	k, _ := c.find(id[:max(colon, 0)]).(*stompSub)
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
				continue // counted again when redelivered
			}
			k.pendingBytes -= len(p.Data)
		case p.Offset < off && k.ack == ackClient:
			k.pendingBytes -= len(p.Data) // client mode acknowledges cumulatively
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
		c.tx = make(map[string]*stompTx)
	}
	tx, open := c.tx[txid]
	switch f.Command {
	case stomp.CmdBegin:
		if open {
			c.fail(fmt.Errorf("%w: transaction %q already begun", ErrBadRequest, txid), f, 4000)
			return false
		}
		if len(c.tx) >= c.s.lim.StompTxMax {
			c.fail(fmt.Errorf("%w: %d transactions open, at most %d per session (--stomp-tx-max)", ErrBadRequest, len(c.tx), c.s.lim.StompTxMax), f, 4000)
			return false
		}
		c.tx[txid] = &stompTx{}
	case stomp.CmdCommit, stomp.CmdAbort:
		if !open {
			c.fail(fmt.Errorf("%w: transaction %q was not begun", ErrBadRequest, txid), f, 4000)
			return false
		}
		delete(c.tx, txid)
		if f.Command == stomp.CmdCommit {
			if !c.commit(ctx, f, txid, tx.frames) {
				return false
			}
		}
	}
	c.receipt(f)
	return true
}

// commit publishes a transaction's SENDs once all of them passed checkCommit.
func (c *stompConn) commit(ctx context.Context, f *stomp.Frame, txid string, frames []stomp.Frame) bool {
	commits, err := c.checkCommit(ctx, frames)
	if err != nil {
		c.fail(fmt.Errorf("transaction %q not committed, none of its %d SENDs published: %w", txid, len(frames), err), f, 4000)
		return false
	}
	for i := range frames {
		frames[i].Del("receipt")
		if commits[i] == nil {
			if !c.onSend(ctx, &frames[i], true) {
				return false
			}
			continue
		}
		if _, err := commits[i](ctx); err != nil {
			c.fail(fmt.Errorf("transaction %q: SEND %d of %d: %w", txid, i+1, len(frames), err), f, 4000)
			return false
		}
	}
	return true
}

// newSTOMPConn is a STOMP session's state, whatever carries its frames (bare: STOMP over TCP
// and SockJS; else WebSocket messages), admitted by release: one place for its limits, so no
// carrier misses one.
func (s *Server) newSTOMPConn(ident Identity, bare bool, release func()) *stompConn {
	carrier := stompOverWS
	if bare {
		carrier = stompBare
	}
	return &stompConn{
		conn: s.newConn("s", ident, release), carrier: carrier,
		parser: stomp.NewParser(stomp.Limits{MaxFrame: s.lim.MaxFrame}),
		rl:     newRateLimiter(s.lim), ops: newOpLimiter(s.lim),
	}
}
