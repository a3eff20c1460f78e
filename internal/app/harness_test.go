package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transport"
)

// testServer is a real rtlab server on a loopback port.
type testServer struct {
	*httptest.Server
	app *App
}

func startServer(t testing.TB, mod func(*Config)) *testServer {
	t.Helper()
	cfg := Config{Limits: transport.Limits{MsgRate: -1}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = a.Shutdown(sctx)
		srv.Close()
		cancel()
	})
	return &testServer{Server: srv, app: a}
}

func (s *testServer) ws(path string) string { return "ws" + strings.TrimPrefix(s.URL, "http") + path }

// get does an HTTP GET and decodes JSON into v (if non-nil), returning the status.
func (s *testServer) get(t testing.TB, path string, v any) int {
	t.Helper()
	return s.call(t, "GET", path, "", v)
}

func (s *testServer) post(t testing.TB, path, body string, v any) int {
	t.Helper()
	return s.call(t, "POST", path, body, v)
}

func (s *testServer) call(t testing.TB, method, path, body string, v any) int {
	t.Helper()
	code, b := do(t, s, method, path, "", body)
	if v != nil {
		if err := json.Unmarshal([]byte(b), v); err != nil {
			t.Fatalf("%s %s: %v in %q", method, path, err, b)
		}
	}
	return code
}

// pubMsg is a publication (or any server message) as clients decode it.
type pubMsg struct {
	Op        string          `json:"op"`
	Topic     string          `json:"topic"`
	Offset    uint64          `json:"offset"`
	Epoch     string          `json:"epoch"`
	Time      string          `json:"time"`
	Sender    string          `json:"sender"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Recovered *bool           `json:"recovered"`
	Reason    string          `json:"reason"`
	Code      string          `json:"code"`
	ID        json.RawMessage `json:"id"`
	Reconnect bool            `json:"reconnect"`
}

type pollAnswer struct {
	Topic        string   `json:"topic"`
	Epoch        string   `json:"epoch"`
	Offset       uint64   `json:"offset"`
	Recovered    bool     `json:"recovered"`
	Reason       string   `json:"reason"`
	Publications []pubMsg `json:"publications"`
}

// wsClient is a WebSocket client over a real socket.
type wsClient struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

func dialWS(t testing.TB, url string, protocols ...string) *wsClient {
	t.Helper()
	return dialWSWith(t, ws.Dialer{Protocols: protocols, Timeout: 5 * time.Second}, url)
}

// dialWSSmallBuffer dials with a tiny socket receive buffer, so a client that stops reading
// makes the server's writes block quickly instead of after megabytes of kernel buffering.
func dialWSSmallBuffer(t testing.TB, url string) *wsClient {
	t.Helper()
	nd := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return dialWSWith(t, ws.Dialer{Timeout: 5 * time.Second, NetDial: nd.DialContext}, url)
}

func dialWSWith(t testing.TB, d ws.Dialer, url string) *wsClient {
	t.Helper()
	conn, br, _, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close() })
	if br == nil {
		br = bufio.NewReader(conn)
	}
	return &wsClient{t: t, conn: conn, br: br}
}

func (c *wsClient) send(s string) {
	c.t.Helper()
	if err := wsutil.WriteClientText(c.conn, []byte(s)); err != nil {
		c.t.Fatalf("ws write: %v", err)
	}
}

// read returns the next data message, failing after timeout.
func (c *wsClient) read(timeout time.Duration) ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	rw := struct {
		io.Reader
		io.Writer
	}{c.br, c.conn}
	for {
		msgs, err := wsutil.ReadServerMessage(rw, nil)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.OpCode == ws.OpText || m.OpCode == ws.OpBinary {
				return m.Payload, nil
			}
			if m.OpCode == ws.OpClose {
				return m.Payload, io.EOF
			}
		}
	}
}

func (c *wsClient) readJSON(timeout time.Duration) pubMsg {
	c.t.Helper()
	b, err := c.read(timeout)
	if err != nil {
		c.t.Fatalf("ws read: %v", err)
	}
	var m pubMsg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("ws message %q: %v", b, err)
	}
	return m
}

// expectOp reads messages until one with op arrives (skipping others listed in skip).
func (c *wsClient) expectOp(op string) pubMsg {
	c.t.Helper()
	for {
		m := c.readJSON(5 * time.Second)
		if m.Op == op {
			return m
		}
		if m.Op == "error" || m.Op == "disconnect" {
			c.t.Fatalf("want %s, got %s %s: %s", op, m.Op, m.Code, m.Reason)
		}
	}
}

// stompClient speaks STOMP over WebSocket with the project's codec.
type stompClient struct {
	*wsClient
	p *stomp.Parser
}

func dialSTOMP(t testing.TB, url string) *stompClient {
	return &stompClient{wsClient: dialWS(t, url, "v12.stomp"), p: stomp.NewParser(stomp.Limits{MaxFrame: 1 << 20})}
}

func (c *stompClient) sendFrame(raw string) { c.send(raw) }

func (c *stompClient) frame(timeout time.Duration) stomp.Frame {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f, ok, err := c.p.Next()
		if err != nil {
			c.t.Fatalf("stomp parse: %v", err)
		}
		if ok {
			return f
		}
		b, err := c.read(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("stomp read: %v", err)
		}
		c.p.Feed(b)
	}
}

// expect reads frames until one with command cmd arrives.
func (c *stompClient) expect(cmd string) stomp.Frame {
	c.t.Helper()
	for {
		f := c.frame(5 * time.Second)
		if f.Command == cmd {
			return f
		}
		if f.Command == "ERROR" {
			msg, _ := f.Get("message")
			c.t.Fatalf("want %s, got ERROR %s", cmd, msg)
		}
	}
}

// sseClient reads a Server-Sent Events stream.
type sseClient struct {
	t    testing.TB
	resp *http.Response
	br   *bufio.Reader
}

type sseEvent struct {
	ID, Event, Data string
}

func dialSSE(t testing.TB, url string, header map[string]string) *sseClient {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("SSE %s: %d %s", url, resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseClient{t: t, resp: resp, br: bufio.NewReader(resp.Body)}
}

// next returns the next event (comments are skipped).
func (c *sseClient) next(timeout time.Duration) sseEvent {
	c.t.Helper()
	type res struct {
		ev  sseEvent
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var ev sseEvent
		for {
			line, err := c.br.ReadString('\n')
			if err != nil {
				ch <- res{err: err}
				return
			}
			if ev.add(strings.TrimRight(line, "\n")) {
				ch <- res{ev: ev}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			c.t.Fatalf("sse read: %v", r.err)
		}
		return r.ev
	case <-time.After(timeout):
		c.t.Fatalf("sse: no event within %s", timeout)
	}
	return sseEvent{}
}

// add folds one line of a stream into ev (comments and retry: are skipped) and reports
// whether the line completed the event.
func (ev *sseEvent) add(line string) bool {
	switch {
	case line == "":
		return ev.Data != "" || ev.Event != ""
	case strings.HasPrefix(line, "id: "):
		ev.ID = line[4:]
	case strings.HasPrefix(line, "event: "):
		ev.Event = line[7:]
	case strings.HasPrefix(line, "data: "):
		ev.Data += line[6:]
	}
	return false
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
