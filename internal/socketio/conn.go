package socketio

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultPath         = "/socket.io/"
	DefaultMaxPayload   = 1 << 20 // the server's own default (maxHttpBufferSize) is 1e6
	DefaultWriteTimeout = 10 * time.Second
	DefaultDialTimeout  = 20 * time.Second // the JS client's connection timeout
	closeTimeout        = 2 * time.Second
)

// ErrClosed is returned by the methods of a Conn that Close has closed.
var ErrClosed = errors.New("socketio: connection closed")

// Options says where and how Dial connects. Only URL is required.
type Options struct {
	// URL is http(s):// or ws(s)://host:port, as given to the JS client's io(): a path other
	// than "/" names the namespace, and the query is sent with every request (the server's
	// socket.handshake.query).
	URL string
	// Path is the Engine.IO endpoint; "" means /socket.io/.
	Path string
	// Namespace overrides the URL's; "" means the URL's path, or "/".
	Namespace string
	// Transport is "polling" (stay on HTTP long-polling), "websocket" (WebSocket from the
	// start), or "" (polling, then upgrade to WebSocket when the server offers it, as the JS
	// client does).
	Transport string
	// Header is sent with every HTTP request and the WebSocket handshake.
	Header http.Header
	// Auth is the CONNECT packet's payload (the server's socket.handshake.auth), a JSON
	// object; nil sends none.
	Auth json.RawMessage
	// Dial opens the TCP connections (two for polling, one for WebSocket); nil means a
	// net.Dialer with a 10 s timeout. It returns a plain connection: TLS is added for https
	// and wss URLs with TLSConfig.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is used for https and wss URLs; nil means the defaults.
	TLSConfig *tls.Config
	// MaxPayload bounds a polling payload or WebSocket message from the server; 0 means
	// DefaultMaxPayload.
	MaxPayload int64
	// WriteTimeout bounds one send (a POST, a WebSocket write); 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
}

func (o *Options) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if o.Dial != nil {
		return o.Dial(ctx, network, addr)
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	return d.DialContext(ctx, network, addr)
}

func (o *Options) maxPayload() int64 {
	if o.MaxPayload > 0 {
		return o.MaxPayload
	}
	return DefaultMaxPayload
}

func (o *Options) writeTimeout() time.Duration {
	if o.WriteTimeout > 0 {
		return o.WriteTimeout
	}
	return DefaultWriteTimeout
}

// endpoints derives the polling and WebSocket URLs (without sid) and the namespace.
func (o *Options) endpoints() (poll, wsURL, nsp string, err error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return "", "", "", fmt.Errorf("socketio: URL: %w", err)
	}
	var hs, ws string
	switch u.Scheme {
	case "http", "ws":
		hs, ws = "http", "ws"
	case "https", "wss":
		hs, ws = "https", "wss"
	default:
		return "", "", "", fmt.Errorf("socketio: URL %q: scheme must be http, https, ws or wss", o.URL)
	}
	if u.Host == "" {
		return "", "", "", fmt.Errorf("socketio: URL %q has no host", o.URL)
	}
	nsp = o.Namespace
	if nsp == "" {
		nsp = u.Path
	}
	nsp = "/" + strings.TrimPrefix(nsp, "/")
	if strings.ContainsAny(nsp, ",") {
		return "", "", "", fmt.Errorf("socketio: namespace %q contains a comma", nsp)
	}
	path := o.Path
	if path == "" {
		path = DefaultPath
	}
	q := u.Query()
	q.Set("EIO", "4")
	q.Set("transport", "polling")
	poll = hs + "://" + u.Host + path + "?" + q.Encode()
	q.Set("transport", "websocket")
	return poll, ws + "://" + u.Host + path + "?" + q.Encode(), nsp, nil
}

// transport carries Engine.IO packets. recv is called by one goroutine at a time; send may be
// called by several (the transport serializes them).
type transport interface {
	name() string
	recv(ctx context.Context, deadline time.Time) ([][]byte, error)
	send(ctx context.Context, pkts ...[]byte) error
	close()
}

// Conn is a Socket.IO connection to one namespace. Read is called by one goroutine; Emit,
// EmitAck and Close by any.
type Conn struct {
	o            Options
	nsp          string
	sid          string
	pingInterval time.Duration
	pingTimeout  time.Duration
	tr           transport // set by Dial; immutable after

	ctx    context.Context // ends with the connection; bounds polling requests
	cancel context.CancelFunc

	// Owned by the reader (Dial, then Read).
	pending  [][]byte  // Engine.IO packets received and not yet handled
	lastPing time.Time // the server's last ping (or the handshake)

	pings   atomic.Int64
	closing atomic.Bool
	done    chan struct{} // closed once the connection has ended
	once    sync.Once
	err     error // why it ended; written before done is closed

	ackMu   sync.Mutex
	acks    map[int64]func([]json.RawMessage) // guarded by ackMu
	nextAck atomic.Int64
}

// Dial opens an Engine.IO session, connects to the namespace and, for Transport "", upgrades
// to WebSocket. ctx bounds all of it; a refused CONNECT is an error carrying the server's
// message.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	poll, wsURL, nsp, err := o.endpoints()
	if err != nil {
		return nil, err
	}
	c := &Conn{o: o, nsp: nsp, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	deadline := handshakeDeadline(ctx)
	var upgrades []string
	switch o.Transport {
	case "", "polling":
		upgrades, err = c.openPolling(ctx, poll, deadline)
	case "websocket":
		err = c.openWebSocket(ctx, wsURL, deadline)
	default:
		err = fmt.Errorf("socketio: transport %q: want polling, websocket or empty", o.Transport)
	}
	if err == nil {
		err = c.connect(ctx, deadline)
	}
	if err == nil && o.Transport == "" && contains(upgrades, "websocket") {
		err = c.upgrade(ctx, wsURL, deadline)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if c.tr != nil {
			_ = c.Close()
		}
		c.shutdown(err)
		return nil, err
	}
	return c, nil
}

func handshakeDeadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(DefaultDialTimeout)
}

// openInfo is the Engine.IO open packet's data.
type openInfo struct {
	SID          string   `json:"sid"`
	Upgrades     []string `json:"upgrades"`
	PingInterval int64    `json:"pingInterval"`
	PingTimeout  int64    `json:"pingTimeout"`
}

// open takes the session from the server's first packet.
func (c *Conn) open(p []byte) ([]string, error) {
	var info openInfo
	if len(p) == 0 || p[0] != eioOpen || json.Unmarshal(p[1:], &info) != nil {
		return nil, fmt.Errorf("socketio: not an Engine.IO v4 server: first packet %.60q", p)
	}
	if info.SID == "" || info.PingInterval <= 0 || info.PingTimeout <= 0 {
		return nil, fmt.Errorf("socketio: open packet without sid, pingInterval or pingTimeout: %.120q", p)
	}
	c.sid = info.SID
	c.pingInterval = time.Duration(info.PingInterval) * time.Millisecond
	c.pingTimeout = time.Duration(info.PingTimeout) * time.Millisecond
	c.lastPing = time.Now()
	return info.Upgrades, nil
}

func (c *Conn) openPolling(ctx context.Context, poll string, deadline time.Time) ([]string, error) {
	p := &polling{
		client:     newPollingClient(&c.o),
		header:     c.o.Header,
		maxPayload: c.o.maxPayload(),
		timeout:    c.o.writeTimeout(),
	}
	body, err := p.get(ctx, poll, deadline, "polling handshake")
	if err != nil {
		p.close()
		return nil, err
	}
	pkts, err := splitPayload(body)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("socketio: not an Engine.IO v4 server: %w", err)
	}
	upgrades, err := c.open(pkts[0])
	if err != nil {
		p.close()
		return nil, err
	}
	c.pending = pkts[1:]
	p.url = poll + "&sid=" + url.QueryEscape(c.sid)
	c.tr = p
	return upgrades, nil
}

func (c *Conn) openWebSocket(ctx context.Context, wsURL string, deadline time.Time) error {
	w, err := dialWebSocket(ctx, &c.o, wsURL)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, w.close) // a WebSocket read does not watch ctx
	defer stop()
	pkts, err := w.recv(ctx, deadline)
	if err == nil {
		_, err = c.open(pkts[0])
	}
	if err != nil {
		w.close()
		return err
	}
	c.tr = w
	return nil
}

// connect sends CONNECT and waits for the namespace's answer.
func (c *Conn) connect(ctx context.Context, deadline time.Time) error {
	p, err := encodeConnect(c.nsp, c.o.Auth)
	if err != nil {
		return err
	}
	if err := c.tr.send(ctx, p); err != nil {
		return fmt.Errorf("socketio: connect %s: %w", c.nsp, err)
	}
	for {
		pk, err := c.nextPacket(ctx, deadline)
		if err != nil {
			return fmt.Errorf("socketio: connect %s: %w", c.nsp, err)
		}
		switch pk.typ {
		case sioConnect:
			return nil
		case sioConnectError:
			return &ConnectError{Namespace: c.nsp, Message: connectError(pk.data)}
		case sioDisconnect:
			return fmt.Errorf("socketio: connect %s: disconnected by the server", c.nsp)
		}
	}
}

// ConnectError is a namespace's refusal of CONNECT (its middleware's error).
type ConnectError struct {
	Namespace string
	Message   string // the server's message
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("socketio: namespace %s refused the connection: %s", e.Namespace, e.Message)
}

// upgrade moves the session to WebSocket: probe, then the upgrade packet. No GET is pending
// (the reader is this goroutine), so the server flushes what it holds onto the WebSocket.
func (c *Conn) upgrade(ctx context.Context, wsURL string, deadline time.Time) error {
	w, err := dialWebSocket(ctx, &c.o, wsURL+"&sid="+url.QueryEscape(c.sid))
	if err != nil {
		return fmt.Errorf("socketio: upgrade: %w", err)
	}
	stop := context.AfterFunc(ctx, w.close) // a WebSocket read does not watch ctx
	defer stop()
	err = w.send(ctx, []byte("2probe"))
	var pkts [][]byte
	if err == nil {
		pkts, err = w.recv(ctx, deadline)
	}
	if err == nil && string(pkts[0]) != "3probe" {
		err = fmt.Errorf("socketio: upgrade probe answered %.60q", pkts[0])
	}
	if err == nil {
		err = w.send(ctx, []byte{eioUpgrade})
	}
	if err != nil {
		w.close()
		return fmt.Errorf("socketio: upgrade: %w", err)
	}
	c.tr.close()
	c.tr = w
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// nextPacket returns the next Socket.IO packet of the namespace, answering pings on the way.
// A zero deadline means the server's ping is due: pingInterval+pingTimeout after the last.
func (c *Conn) nextPacket(ctx context.Context, deadline time.Time) (packet, error) {
	for {
		if len(c.pending) == 0 {
			d := deadline
			if d.IsZero() {
				d = c.lastPing.Add(c.pingInterval + c.pingTimeout)
			}
			pkts, err := c.tr.recv(ctx, d)
			if err != nil {
				return packet{}, c.recvError(err)
			}
			c.pending = pkts
		}
		p := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		pk, ok, err := c.engine(ctx, p)
		if err != nil || ok {
			return pk, err
		}
	}
}

// recvError names a missed ping.
func (c *Conn) recvError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("socketio: no ping from the server within pingInterval+pingTimeout (%s): %w",
			c.pingInterval+c.pingTimeout, err)
	}
	return err
}

// engine handles one Engine.IO packet; ok is true when it carries the namespace's packet.
func (c *Conn) engine(ctx context.Context, p []byte) (pk packet, ok bool, err error) {
	if len(p) == 0 {
		return pk, false, errors.New("socketio: empty Engine.IO packet")
	}
	switch p[0] {
	case eioPing:
		c.lastPing = time.Now()
		c.pings.Add(1)
		pong := append([]byte{eioPong}, p[1:]...)
		return pk, false, c.tr.send(ctx, pong)
	case eioNoop, eioPong:
		return pk, false, nil
	case eioClose:
		return pk, false, errors.New("socketio: the server closed the session")
	case eioMessage:
		pk, err = decodePacket(p[1:])
		// Other namespaces multiplexed on the session are not ours to read.
		return pk, err == nil && pk.nsp == c.nsp, err
	}
	return pk, false, fmt.Errorf("socketio: unexpected Engine.IO packet %.40q", p)
}

// Read returns the next event of the namespace. It answers the server's pings and delivers
// acknowledgements to EmitAck; it fails when a ping is missed, the server disconnects or
// sends what this client cannot decode, and then keeps returning that error. An event that
// asks for an acknowledgement is returned like any other; it is not acknowledged.
func (c *Conn) Read() (event string, args []json.RawMessage, err error) {
	select {
	case <-c.done:
		return "", nil, c.err
	default:
	}
	for {
		pk, err := c.nextPacket(c.ctx, time.Time{})
		if err == nil {
			var ok bool
			event, args, ok, err = c.dispatch(pk)
			if ok {
				return event, args, nil
			}
		}
		if err != nil {
			if c.closing.Load() {
				err = ErrClosed
			}
			c.shutdown(err)
			return "", nil, c.err
		}
	}
}

// dispatch handles a packet of the namespace; ok is true for an event.
func (c *Conn) dispatch(pk packet) (event string, args []json.RawMessage, ok bool, err error) {
	switch pk.typ {
	case sioEvent:
		event, args, err = eventArgs(pk.data)
		return event, args, err == nil, err
	case sioAck:
		args, err = ackArgs(pk.data)
		if err == nil {
			c.deliverAck(pk.ack, args)
		}
		return "", nil, false, err
	case sioDisconnect:
		return "", nil, false, fmt.Errorf("socketio: namespace %s disconnected by the server", c.nsp)
	case sioConnectError:
		return "", nil, false, &ConnectError{Namespace: c.nsp, Message: connectError(pk.data)}
	}
	return "", nil, false, nil // a repeated CONNECT
}

// Emit sends event with args, each one JSON value.
func (c *Conn) Emit(event string, args ...json.RawMessage) error {
	p, err := encodeEvent(c.nsp, -1, event, args)
	if err != nil {
		return err
	}
	return c.send(p)
}

// EmitAck sends event with args and waits for the server's acknowledgement, until ctx ends or
// the connection does. A goroutine must be calling Read, which receives the acknowledgement.
func (c *Conn) EmitAck(ctx context.Context, event string, args ...json.RawMessage) ([]json.RawMessage, error) {
	ch := make(chan []json.RawMessage, 1) // sent at most once
	id, err := c.emitFunc(func(args []json.RawMessage) { ch <- args }, event, args)
	if err != nil {
		return nil, err
	}
	defer c.forgetAck(id)
	select {
	case args := <-ch:
		return args, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("socketio: ack of %q: %w", event, ctx.Err())
	case <-c.done:
		return nil, c.err
	}
}

// EmitFunc sends event with args and returns once it is sent; fn gets the server's
// acknowledgement, called by the goroutine in Read (so it must not block, nor call Read). fn
// is never called when the connection ends first: a load generator with many acknowledgements
// outstanding needs no goroutine per wait.
func (c *Conn) EmitFunc(fn func(args []json.RawMessage), event string, args ...json.RawMessage) error {
	_, err := c.emitFunc(fn, event, args)
	return err
}

func (c *Conn) emitFunc(fn func([]json.RawMessage), event string, args []json.RawMessage) (int64, error) {
	id := c.nextAck.Add(1) - 1
	p, err := encodeEvent(c.nsp, id, event, args)
	if err != nil {
		return id, err
	}
	c.ackMu.Lock()
	if c.acks == nil {
		c.acks = make(map[int64]func([]json.RawMessage))
	}
	c.acks[id] = fn
	c.ackMu.Unlock()
	if err := c.send(p); err != nil {
		c.forgetAck(id)
		return id, err
	}
	return id, nil
}

func (c *Conn) forgetAck(id int64) {
	c.ackMu.Lock()
	delete(c.acks, id)
	c.ackMu.Unlock()
}

func (c *Conn) deliverAck(id int64, args []json.RawMessage) {
	c.ackMu.Lock()
	fn := c.acks[id]
	delete(c.acks, id)
	c.ackMu.Unlock()
	if fn != nil {
		fn(args)
	}
}

func (c *Conn) send(p []byte) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	return c.tr.send(c.ctx, p)
}

// Close ends the session (telling the server when it can) and the connection. Read returns
// ErrClosed after.
func (c *Conn) Close() error {
	if c.closing.Swap(true) {
		return nil
	}
	select {
	case <-c.done:
	default:
		ctx, cancel := context.WithTimeout(c.ctx, closeTimeout)
		_ = c.tr.send(ctx, []byte{eioClose})
		cancel()
	}
	c.shutdown(ErrClosed)
	return nil
}

// shutdown ends the connection with err, once.
func (c *Conn) shutdown(err error) {
	c.once.Do(func() {
		c.err = err
		c.cancel()
		if c.tr != nil {
			c.tr.close()
		}
		close(c.done)
	})
}

// SID is the Engine.IO session id.
func (c *Conn) SID() string { return c.sid }

// Transport is "polling" or "websocket": where the session is now.
func (c *Conn) Transport() string { return c.tr.name() }

// Pings counts the server's pings answered.
func (c *Conn) Pings() int64 { return c.pings.Load() }

// PingInterval is the server's, from its open packet.
func (c *Conn) PingInterval() time.Duration { return c.pingInterval }
