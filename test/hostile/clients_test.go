package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
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
func httpFrom(from string) *http.Client { return tt.Dialer{From: from}.HTTP() }

// dialer opens connections from the loopback address from, with extra request headers, and
// offers STOMP's subprotocol on the STOMP routes.
func dialer(url, from string, hdr http.Header) tt.Dialer {
	d := tt.Dialer{From: from, Header: hdr}
	if strings.Contains(url, "stomp") || strings.HasSuffix(url, "/location") {
		d.Protocols = []string{"v12.stomp"}
	}
	return d
}

// dialWS opens a WebSocket from the loopback address from, with extra request headers. It
// fails the test unless the upgrade succeeds.
func dialWS(t testing.TB, url, from string, hdr http.Header) *tt.WSConn {
	t.Helper()
	return dialer(url, from, hdr).WS(t, url)
}

// tryWS opens a WebSocket; on a refused upgrade it returns the HTTP status, and the error
// carries the answer's body.
func tryWS(url, from string, hdr http.Header) (*tt.WSConn, int, error) {
	c, err := dialer(url, from, hdr).TryWS(context.Background(), url)
	var refused *tt.StatusError
	switch {
	case err == nil:
		return c, http.StatusSwitchingProtocols, nil
	case errors.As(err, &refused):
		return nil, refused.Status, err
	}
	return nil, 0, err
}

// expectClose reads until the server closes, failing unless it closes with code. It returns
// what the server sent before closing, one message a line.
func expectClose(t testing.TB, c *tt.WSConn, code uint16) string {
	t.Helper()
	said, cl := c.Closed(15 * time.Second)
	if cl == nil || cl.Code != code {
		t.Fatalf("closed with %v, want code %d (after %q)", cl, code, said)
	}
	return said
}

// stompFrame reads STOMP frames, as text, until one with the given command (any, when empty),
// skipping heart-beats.
func stompFrame(t testing.TB, c *tt.WSConn, command string) string {
	t.Helper()
	for {
		msg, err := c.Next(15 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", command, err)
		}
		f := strings.TrimLeft(string(msg), "\r\n")
		if f != "" && (command == "" || strings.HasPrefix(f, command+"\n")) {
			return f
		}
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

// smallSendBuffer gives an attacker's connection a small send buffer. The kernel grows a
// loopback socket's to MiBs, and an attacker writing small messages into it burns its own CPU
// for many seconds before the server's back-pressure stops it: CPU that, on the measuring
// machine, is the bystander's and the server's too. An attacker elsewhere spends its own
// machine's; here its flood is paced by the server from the start.
func smallSendBuffer(c *tt.WSConn) {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
}
