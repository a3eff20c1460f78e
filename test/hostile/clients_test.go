package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// The attacks come from loopback addresses of their own, so that the per-address limits they
// run into are not the bystander's (which connects from 127.0.0.1).
const (
	attacker  = "127.0.0.2"
	attacker2 = "127.0.0.3"
)

// dialerFrom dials TCP from the loopback address from.
func dialerFrom(from string) *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
}

// httpFrom is an HTTP client whose connections come from the loopback address from.
func httpFrom(from string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialerFrom(from).DialContext, MaxIdleConnsPerHost: 4}}
}

// wsClient is a WebSocket client connection as a test drives it.
type wsClient struct {
	t    testing.TB
	conn net.Conn
	rw   io.ReadWriter // reads through the handshake's buffer; answers pings on conn
}

// dialWS opens a WebSocket from the loopback address from, with extra request headers. It
// fails the test unless the upgrade succeeds.
func dialWS(t testing.TB, url, from string, hdr http.Header) *wsClient {
	t.Helper()
	c, status, err := tryWS(url, from, hdr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v (status %d)", url, from, err, status)
	}
	t.Cleanup(func() { c.conn.Close() })
	c.t = t
	return c
}

// tryWS opens a WebSocket; on a refused upgrade it returns the HTTP status and the body.
func tryWS(url, from string, hdr http.Header) (*wsClient, int, error) {
	var status int
	var body []byte
	d := ws.Dialer{
		Timeout: 5 * time.Second,
		Header:  ws.HandshakeHeaderHTTP(hdr),
		NetDial: dialerFrom(from).DialContext,
		OnStatusError: func(st int, _ []byte, r io.Reader) {
			// r is the whole answer: read it as a response, so that the body ends at its
			// Content-Length instead of when the server closes.
			status = st
			res, err := http.ReadResponse(bufio.NewReader(r), nil)
			if err != nil {
				return
			}
			body, _ = io.ReadAll(io.LimitReader(res.Body, 4096))
			if ra := res.Header.Get("Retry-After"); ra != "" {
				body = append(body, " Retry-After: "+ra...)
			}
		},
	}
	if strings.Contains(url, "stomp") || strings.HasSuffix(url, "/location") {
		d.Protocols = []string{"v12.stomp"}
	}
	conn, br, _, err := d.Dial(context.Background(), url)
	if err != nil {
		if status != 0 {
			return nil, status, fmt.Errorf("%w: %s", err, bytes.TrimSpace(body))
		}
		return nil, 0, err
	}
	c := &wsClient{conn: conn, rw: struct {
		io.Reader
		io.Writer
	}{conn, conn}}
	if br != nil {
		c.rw = struct {
			io.Reader
			io.Writer
		}{io.MultiReader(br, conn), conn}
	}
	return c, http.StatusSwitchingProtocols, nil
}

func (c *wsClient) sendText(s string) {
	c.t.Helper()
	if err := wsutil.WriteClientText(c.conn, []byte(s)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *wsClient) sendBinary(b []byte) {
	c.t.Helper()
	if err := wsutil.WriteClientBinary(c.conn, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// read returns the next data message, or the close frame's code and reason as an error of
// type closed.
func (c *wsClient) read(within time.Duration) ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(within))
	for {
		h, err := ws.ReadHeader(c.rw)
		if err != nil {
			return nil, err
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(c.rw, p); err != nil {
			return nil, err
		}
		switch h.OpCode {
		case ws.OpPing:
			_ = ws.WriteFrame(c.conn, ws.MaskFrame(ws.NewPongFrame(p)))
		case ws.OpClose:
			cl := closed{}
			if len(p) >= 2 {
				cl.code, cl.reason = binary.BigEndian.Uint16(p), string(p[2:])
			}
			return nil, cl
		case ws.OpText, ws.OpBinary:
			return p, nil
		}
	}
}

// closed is the server's close frame.
type closed struct {
	code   uint16
	reason string
}

func (c closed) Error() string { return fmt.Sprintf("closed %d %q", c.code, c.reason) }

// expectClose reads until the server closes, failing unless it closes with code. It returns
// what the server sent before closing, joined.
func (c *wsClient) expectClose(code uint16) string {
	c.t.Helper()
	var before []string
	for {
		msg, err := c.read(15 * time.Second)
		if err == nil {
			before = append(before, string(msg))
			continue
		}
		cl, ok := err.(closed)
		if !ok {
			c.t.Fatalf("waiting for close %d: %v (after %q)", code, err, before)
		}
		if cl.code != code {
			c.t.Fatalf("closed %d %q, want code %d (after %q)", cl.code, cl.reason, code, before)
		}
		return strings.Join(before, "\n")
	}
}

// op reads native-protocol messages until one with the given op.
func (c *wsClient) op(want string) map[string]any {
	c.t.Helper()
	for {
		msg, err := c.read(15 * time.Second)
		if err != nil {
			c.t.Fatalf("waiting for op %q: %v", want, err)
		}
		var m map[string]any
		if err := json.Unmarshal(msg, &m); err != nil {
			c.t.Fatalf("%q is not JSON: %v", msg, err)
		}
		if m["op"] == want {
			return m
		}
	}
}

// stompFrame reads STOMP frames until one with the given command (any, when empty),
// skipping heart-beats.
func (c *wsClient) stompFrame(command string) string {
	c.t.Helper()
	for {
		msg, err := c.read(15 * time.Second)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", command, err)
		}
		f := strings.TrimLeft(string(msg), "\r\n")
		if f != "" && (command == "" || strings.HasPrefix(f, command+"\n")) {
			return f
		}
	}
}

// writeClientText writes a text frame, returning the error: the server may have closed.
func writeClientText(c *wsClient, s string) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return wsutil.WriteClientText(c.conn, []byte(s))
}

// rawFrame writes one client frame built by hand, rules broken as the test likes.
func (c *wsClient) rawFrame(h ws.Header, payload []byte) {
	c.t.Helper()
	h.Length = int64(len(payload))
	p := append([]byte(nil), payload...)
	if h.Masked {
		ws.Cipher(p, h.Mask, 0)
	}
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, h)
	b.Write(p)
	if _, err := c.conn.Write(b.Bytes()); err != nil {
		c.t.Fatalf("write frame: %v", err)
	}
}

// post sends body to url from the client's address and returns status, headers and body.
func post(t testing.TB, hc *http.Client, url string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	res, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// get fetches url from the client's address and returns status, headers and body.
func get(t testing.TB, hc *http.Client, url string) (int, http.Header, []byte) {
	t.Helper()
	res, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// refusal decodes a JSON error answer.
func refusal(t testing.TB, body []byte) (code, reason string) {
	t.Helper()
	var e struct{ Error, Reason string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || e.Reason == "" {
		t.Fatalf("answer %q is not {\"error\",\"reason\"}", body)
	}
	return e.Error, e.Reason
}

// padded is a JSON object of about n bytes with the given fields first.
func padded(n int, fields string) []byte {
	pad := strings.Repeat("x", max(0, n-len(fields)-16))
	return []byte(fmt.Sprintf(`{%s,"pad":"%s"}`, fields, pad))
}

// rawConn is a TCP connection from the loopback address from, for attacks below HTTP.
func rawConn(t testing.TB, addr, from string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := dialerFrom(from).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

const mib = 1 << 20
