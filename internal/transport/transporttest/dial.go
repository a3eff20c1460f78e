package transporttest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// Dialer says how a test opens its connections. The zero value dials from any loopback
// address with no extra headers.
type Dialer struct {
	// From is the local address connections come from (127.0.0.2, say), so that a test's
	// connections meet per-address limits apart from other clients'. Empty: any.
	From string
	// Header holds extra request headers (Origin, Authorization...).
	Header http.Header
	// Protocols are the WebSocket subprotocols offered.
	Protocols []string
	// RcvBuf, when set, shrinks the socket's receive buffer to about that many bytes, so that
	// a client that stops reading makes the server's writes block soon instead of after
	// megabytes of kernel buffering.
	RcvBuf int
	// TLS configures https:// and wss:// connections; nil: the system's roots.
	TLS *tls.Config
}

// Bearer returns a copy of d that sends token as Authorization: Bearer.
func (d Dialer) Bearer(token string) Dialer {
	h := d.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+token)
	d.Header = h
	return d
}

func (d Dialer) net() *net.Dialer {
	nd := &net.Dialer{Timeout: 5 * time.Second}
	if d.From != "" {
		nd.LocalAddr = &net.TCPAddr{IP: net.ParseIP(d.From)}
	}
	if d.RcvBuf > 0 {
		nd.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, d.RcvBuf)
			})
			return errors.Join(err, serr)
		}
	}
	return nd
}

// HTTP returns an HTTP client whose connections come from d.From.
func (d Dialer) HTTP() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.net().DialContext, MaxIdleConnsPerHost: 4, TLSClientConfig: d.TLS}}
}

// Call makes an HTTP request with d's headers and returns the status and the body. It fails
// the test when the server does not answer.
func (d Dialer) Call(t testing.TB, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := d.HTTP().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return res.StatusCode, b
}

// StatusError is a refused upgrade or event stream: the HTTP answer in place of the switch.
type StatusError struct {
	Status     int
	Body       string
	RetryAfter string // the Retry-After header, if any
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("status %d: %s", e.Status, strings.TrimSpace(e.Body))
	if e.RetryAfter != "" {
		s += " (Retry-After: " + e.RetryAfter + ")"
	}
	return s
}

// readStatusError reads a refused request's answer from r.
func readStatusError(status int, r *bufio.Reader, req *http.Request) *StatusError {
	e := &StatusError{Status: status}
	res, err := http.ReadResponse(r, req)
	if err != nil {
		return e
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	e.Body, e.RetryAfter = string(b), res.Header.Get("Retry-After")
	return e
}

// WS opens a WebSocket to url and fails the test unless the server upgrades it. The connection
// is closed when the test ends.
func (d Dialer) WS(t testing.TB, url string) *WSConn {
	t.Helper()
	c, err := d.TryWS(context.Background(), url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.t = t
	t.Cleanup(func() { c.Conn.Close() })
	return c
}

// TryWS opens a WebSocket to url. A refused upgrade is a *StatusError with the server's answer.
// The caller closes the connection; methods that fail a test need Bind first.
func (d Dialer) TryWS(ctx context.Context, url string) (*WSConn, error) {
	var refused *StatusError
	wd := ws.Dialer{
		Timeout:   5 * time.Second,
		Protocols: d.Protocols,
		NetDial:   d.net().DialContext,
		TLSConfig: d.TLS,
		OnStatusError: func(status int, _ []byte, r io.Reader) {
			// r is the whole answer: read it as a response, so that the body ends at its
			// Content-Length instead of when the server closes.
			refused = readStatusError(status, bufio.NewReader(r), nil)
		},
	}
	if len(d.Header) > 0 {
		wd.Header = ws.HandshakeHeaderHTTP(d.Header)
	}
	conn, br, _, err := wd.Dial(ctx, url)
	if err != nil {
		if refused != nil {
			return nil, refused
		}
		return nil, err
	}
	c := &WSConn{Conn: conn, rd: conn}
	if br != nil { // the server wrote right after its answer: keep those bytes
		c.rd = io.MultiReader(br, conn)
	}
	return c, nil
}

// DialWS opens a WebSocket to url with the subprotocols given (see Dialer.WS).
func DialWS(t testing.TB, url string, protocols ...string) *WSConn {
	t.Helper()
	return Dialer{Protocols: protocols}.WS(t, url)
}

// WSConn is a WebSocket client connection as a test drives it: it writes what the test says
// (rules broken if the test likes) and reads what the server sends, answering its pings.
type WSConn struct {
	Conn net.Conn
	t    testing.TB // nil until bound: then the methods that fail the test work
	rd   io.Reader  // reads through the handshake's buffer
}

// Bind ties a connection opened with TryWS to t, for the methods that fail the test.
func (c *WSConn) Bind(t testing.TB) *WSConn { c.t = t; return c }

// Close closes the connection without a close frame, as a vanished client does.
func (c *WSConn) Close() error { return c.Conn.Close() }

// Goodbye sends a close frame (1000), as a browser closing the page does; the server then
// closes the connection.
func (c *WSConn) Goodbye() error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return wsutil.WriteClientMessage(c.Conn, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
}

// CloseError is the server's close frame; it wraps io.EOF.
type CloseError struct {
	Code   uint16
	Reason string
}

func (e *CloseError) Error() string { return fmt.Sprintf("closed %d %q", e.Code, e.Reason) }
func (e *CloseError) Unwrap() error { return io.EOF }

// Write writes a text message and returns the error: the server may have closed.
func (c *WSConn) Write(s string) error {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return wsutil.WriteClientText(c.Conn, []byte(s))
}

// Send writes a text message and fails the test when it cannot.
func (c *WSConn) Send(s string) {
	c.t.Helper()
	if err := c.Write(s); err != nil {
		c.t.Fatalf("ws send: %v", err)
	}
}

// SendBinary writes a binary message and fails the test when it cannot.
func (c *WSConn) SendBinary(b []byte) {
	c.t.Helper()
	if err := wsutil.WriteClientBinary(c.Conn, b); err != nil {
		c.t.Fatalf("ws send: %v", err)
	}
}

// RawFrame writes one frame built by hand, with h as the test likes it (its Length is set
// from payload, which is masked when h says so).
func (c *WSConn) RawFrame(h ws.Header, payload []byte) {
	c.t.Helper()
	h.Length = int64(len(payload))
	p := append([]byte(nil), payload...)
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, h)
	b.Write(p)
	if _, err := c.Conn.Write(b.Bytes()); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

// Next returns the next data message (text or binary), answering pings on the way. A close
// frame ends the connection with a *CloseError; a message that has not come within within is
// a timeout error.
func (c *WSConn) Next(within time.Duration) ([]byte, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(within))
	var msg []byte
	for {
		h, err := ws.ReadHeader(c.rd)
		if err != nil {
			return nil, err
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(c.rd, p); err != nil {
			return nil, err
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		switch h.OpCode {
		case ws.OpPing:
			_ = ws.WriteFrame(c.Conn, ws.MaskFrame(ws.NewPongFrame(p)))
			continue
		case ws.OpPong:
			continue
		case ws.OpClose:
			e := &CloseError{}
			if len(p) >= 2 {
				e.Code, e.Reason = binary.BigEndian.Uint16(p), string(p[2:])
			}
			return nil, e
		}
		msg = append(msg, p...)
		if h.Fin {
			return msg, nil
		}
	}
}

// patience is how long the methods that fail a test wait for what they expect: long enough
// for a loaded machine, short enough for a failing test to end.
const patience = 10 * time.Second

// Read returns the next data message, failing the test when none comes within patience.
func (c *WSConn) Read() []byte {
	c.t.Helper()
	b, err := c.Next(patience)
	if err != nil {
		c.t.Fatalf("ws read: %v", err)
	}
	return b
}

// Msg reads the next message as one of the JSON protocol, failing the test when none comes
// within patience or it is not JSON.
func (c *WSConn) Msg() Msg {
	c.t.Helper()
	b := c.Read()
	var m Msg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("ws message %q: %v", b, err)
	}
	return m
}

// Op reads messages of the JSON protocol until one with op comes, and fails the test on an
// error or disconnect on the way (unless that is op) or after patience.
func (c *WSConn) Op(op string) Msg {
	c.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		b, err := c.Next(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for op %s: %v", op, err)
		}
		var m Msg
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("ws message %q: %v", b, err)
		}
		if m.Op == op {
			return m
		}
		if m.Op == "error" || m.Op == "disconnect" {
			c.t.Fatalf("want %s, got %s %s: %s", op, m.Op, m.Code, m.Reason)
		}
	}
}

// Until reads messages until one containing s comes, and returns it; it fails the test after
// within.
func (c *WSConn) Until(s string, within time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, err := c.Next(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for %q: %v", s, err)
		}
		if strings.Contains(string(b), s) {
			return string(b)
		}
	}
}

// Closed reads until the server closes the connection and returns everything it said on the
// way, one message a line, and its close frame (nil when it closed without one). It fails the
// test when the connection is still open after within.
func (c *WSConn) Closed(within time.Duration) (string, *CloseError) {
	c.t.Helper()
	var said []string
	deadline := time.Now().Add(within)
	for {
		b, err := c.Next(time.Until(deadline))
		if err == nil {
			said = append(said, string(b))
			continue
		}
		var ce *CloseError
		switch {
		case errors.As(err, &ce):
			return strings.Join(said, "\n"), ce
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
			return strings.Join(said, "\n"), nil
		}
		c.t.Fatalf("waiting for the server to close: %v (it said %q)", err, said)
	}
}

// WSURL turns an http:// base URL and a path into the ws:// URL.
func WSURL(base, path string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base + path
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	return u.String() + path
}

// JSON makes an HTTP request with d's headers, decodes the JSON answer into v (when not nil)
// and returns the status. It fails the test when the server does not answer or the answer is
// not JSON.
func (d Dialer) JSON(t testing.TB, method, url, body string, v any) int {
	t.Helper()
	code, b := d.Call(t, method, url, body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v in %q", method, url, err, b)
		}
	}
	return code
}

// Get does GET url and decodes the JSON answer into v (when not nil); it returns the status.
func Get(t testing.TB, url string, v any) int {
	t.Helper()
	return Dialer{}.JSON(t, "GET", url, "", v)
}

// Post does POST url with body and decodes the JSON answer into v (when not nil); it returns
// the status.
func Post(t testing.TB, url, body string, v any) int {
	t.Helper()
	return Dialer{}.JSON(t, "POST", url, body, v)
}
