package socketio

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// Servers that are not Socket.IO, or misbehave, on real loopback sockets: the client fails
// with an error that says what went wrong, and never panics or hangs.

const openPacket = `0{"sid":"s1","upgrades":[],"pingInterval":100,"pingTimeout":100,"maxPayload":1000000}`

func dialErr(t *testing.T, o Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := Dial(ctx, o)
	if err == nil {
		_ = c.Close()
		t.Fatalf("dial %s (%s): no error", o.URL, o.Transport)
	}
	return err
}

// TestNotSocketIO dials an HTTP server that is not Socket.IO, and a port that speaks SSH.
func TestNotSocketIO(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	hello := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>hello</html>"))
	}))
	defer hello.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
			_ = c.Close()
		}
	}()
	for _, tc := range []struct{ url, transport, want string }{
		{notFound.URL, "polling", "socketio: polling handshake: server answered 404 Not Found"},
		{notFound.URL, "websocket", "404"},
		{hello.URL, "polling", "not an Engine.IO v4 server"},
		{hello.URL, "websocket", "200"},
		{"http://" + ln.Addr().String(), "polling", "handshake"},
		{"http://" + ln.Addr().String(), "websocket", "websocket"},
		{"ftp://" + ln.Addr().String(), "", "scheme"},
	} {
		err := dialErr(t, Options{URL: tc.url, Transport: tc.transport})
		t.Logf("%s over %q: %v", tc.url, tc.transport, err)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dial %s over %s: %v, want %q", tc.url, tc.transport, err, tc.want)
		}
	}
}

// fakeWS is an Engine.IO server over WebSocket that opens the session with pingInterval and
// pingTimeout of 100 ms, accepts CONNECT, sends then and goes silent.
func fakeWS(t *testing.T, then func(net.Conn)) string {
	t.Helper()
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_ = wsutil.WriteServerText(conn, []byte(openPacket))
		if p, err := wsutil.ReadClientText(conn); err != nil || string(p) != "40" {
			return
		}
		_ = wsutil.WriteServerText(conn, []byte(`40{"sid":"x"}`))
		then(conn)
		<-done
	}))
	t.Cleanup(func() {
		close(done)
		s.Close()
	})
	return s.URL
}

func readErr(t *testing.T, url string, o Options) error {
	t.Helper()
	o.URL, o.Transport = url, "websocket"
	c := dial(t, o)
	for {
		_, _, err := c.Read()
		if err != nil {
			if _, _, again := c.Read(); again == nil {
				t.Fatal("a Read after a failure succeeded")
			}
			return err
		}
	}
}

// TestMissedPing: a server that stops pinging is given up after pingInterval+pingTimeout.
func TestMissedPing(t *testing.T) {
	url := fakeWS(t, func(net.Conn) {})
	if err := readErr(t, url, Options{}); !strings.Contains(err.Error(), "no ping from the server") {
		t.Fatalf("read: %v, want a missed ping", err)
	}
}

// TestBadPackets: each malformed or unsupported packet from the server fails Read.
func TestBadPackets(t *testing.T) {
	text := func(s string) func(net.Conn) {
		return func(c net.Conn) { _ = wsutil.WriteServerText(c, []byte(s)) }
	}
	for _, tc := range []struct {
		name string
		send func(net.Conn)
		want string
	}{
		{"unknown engine type", text("x"), "unexpected Engine.IO packet"},
		{"second open", text(openPacket), "unexpected Engine.IO packet"},
		{"empty message", text(""), "empty Engine.IO packet"},
		{"unknown socket.io type", text("49"), "unknown packet type"},
		{"empty socket.io packet", text("4"), "empty packet"},
		{"data not JSON", text(`42["location",{]`), "not JSON"},
		{"event not an array", text(`42{"a":1}`), "not a non-empty array"},
		{"event name not a string", text(`42[1]`), "not a string"},
		{"ack not an array", text(`430{}`), "not an array"},
		{"binary event", text(`451-["a",{"_placeholder":true,"num":0}]`), "binary"},
		{"binary message", func(c net.Conn) { _ = wsutil.WriteServerBinary(c, []byte{4, 1}) }, "binary"},
		{"reserved opcode", func(c net.Conn) {
			_ = ws.WriteFrame(c, ws.NewFrame(ws.OpCode(3), true, []byte("42[\"a\"]")))
		}, "opcode 3"},
		{"fragmented", func(c net.Conn) {
			_ = ws.WriteFrame(c, ws.NewFrame(ws.OpText, false, []byte(`42["a",`)))
			_ = ws.WriteFrame(c, ws.NewPingFrame([]byte("p")))
			_ = ws.WriteFrame(c, ws.NewFrame(ws.OpContinuation, true, []byte(`1]`)))
			_ = wsutil.WriteServerText(c, []byte("x"))
		}, "unexpected Engine.IO packet"},
		{"too large", text("42[\"a\",\"" + strings.Repeat("x", 4096) + "\"]"), "over 1024 bytes"},
		{"disconnect", text("41"), "disconnected by the server"},
		{"close", text("1"), "closed the session"},
		{"close frame", func(c net.Conn) {
			_ = ws.WriteFrame(c, ws.NewCloseFrame(ws.NewCloseFrameBody(ws.StatusGoingAway, "bye")))
		}, "closed by server: 1001 bye"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fakeWS(t, tc.send)
			err := readErr(t, url, Options{MaxPayload: 1024})
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read: %v, want %q", err, tc.want)
			}
		})
	}
}

// badPolling is an Engine.IO polling server whose first payload after CONNECT ends in a
// malformed packet.
var badPolling = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost:
		_, _ = w.Write([]byte("ok"))
	case r.URL.Query().Get("sid") == "":
		_, _ = w.Write([]byte(openPacket))
	default:
		_, _ = w.Write([]byte("40{\"sid\":\"x\"}\x1e42[\"a\",1]\x1e42[\"b\""))
	}
})

// TestBadPollingPayload: a malformed polling payload fails Read, the packets before it read.
func TestBadPollingPayload(t *testing.T) {
	s := httptest.NewServer(badPolling)
	defer s.Close()
	c := dial(t, Options{URL: s.URL, Transport: "polling"})
	name, args, err := c.Read()
	if err != nil || name != "a" || len(args) != 1 || string(args[0]) != "1" {
		t.Fatalf("read: %q %s %v, want a [1]", name, args, err)
	}
	if _, _, err := c.Read(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("read: %v, want not JSON", err)
	}
	if err := c.Emit("x", json.RawMessage("1")); err == nil {
		t.Fatal("emit after a failed read: no error")
	}
}

// TestDialCanceled: a server that accepts the WebSocket and says nothing holds Dial only
// until its context ends.
func TestDialCanceled(t *testing.T) {
	done := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, _, err := ws.UpgradeHTTP(r, w); err == nil {
			<-done
			_ = conn.Close()
		}
	}))
	defer s.Close()
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Dial(ctx, Options{URL: s.URL, Transport: "websocket"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("dial: %v, want context.Canceled", err)
	}
}

// TestTLS: https and wss URLs are dialed through Options.Dial, with TLS from TLSConfig.
func TestTLS(t *testing.T) {
	s := httptest.NewTLSServer(badPolling)
	defer s.Close()
	roots := s.Client().Transport.(*http.Transport).TLSClientConfig
	c := dial(t, Options{URL: s.URL, Transport: "polling", TLSConfig: roots})
	if name, _, err := c.Read(); err != nil || name != "a" {
		t.Fatalf("read over https: %q %v", name, err)
	}
	wss := httptest.NewUnstartedServer(nil)
	wss.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		_ = wsutil.WriteServerText(conn, []byte(openPacket))
		_, _ = wsutil.ReadClientText(conn)
		_ = wsutil.WriteServerText(conn, []byte(`40{"sid":"x"}`))
		_ = wsutil.WriteServerText(conn, []byte(`42["b",2]`))
		_, _ = wsutil.ReadClientText(conn) // until the client leaves
		_ = conn.Close()
	})
	wss.StartTLS()
	defer wss.Close()
	roots = wss.Client().Transport.(*http.Transport).TLSClientConfig
	c = dial(t, Options{URL: strings.Replace(wss.URL, "https", "wss", 1), Transport: "websocket", TLSConfig: roots})
	if name, _, err := c.Read(); err != nil || name != "b" {
		t.Fatalf("read over wss: %q %v", name, err)
	}
}
