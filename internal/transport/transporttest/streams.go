package transporttest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/stomp"
)

// STOMPConn is a STOMP session over a WebSocket, framed with the project's own codec.
type STOMPConn struct {
	*WSConn
	p *stomp.Parser
}

// STOMP opens a STOMP connection (subprotocol v12.stomp) to url; see WS.
func (d Dialer) STOMP(t testing.TB, url string) *STOMPConn {
	t.Helper()
	d.Protocols = []string{"v12.stomp"}
	return &STOMPConn{WSConn: d.WS(t, url), p: newParser()}
}

// DialSTOMP opens a STOMP connection to url.
func DialSTOMP(t testing.TB, url string) *STOMPConn {
	t.Helper()
	return Dialer{}.STOMP(t, url)
}

func newParser() *stomp.Parser { return stomp.NewParser(stomp.Limits{MaxFrame: 1 << 20}) }

// NextFrame returns the next frame (heart-beats are skipped), or the error that ended the
// connection, or a timeout after within.
func (c *STOMPConn) NextFrame(within time.Duration) (stomp.Frame, error) {
	deadline := time.Now().Add(within)
	for {
		f, ok, err := c.p.Next()
		if err != nil || ok {
			return f, err
		}
		b, err := c.Next(time.Until(deadline))
		if err != nil {
			return stomp.Frame{}, err
		}
		c.p.Feed(b)
	}
}

// Frame returns the next frame, failing the test when none comes within within.
func (c *STOMPConn) Frame(within time.Duration) stomp.Frame {
	c.t.Helper()
	f, err := c.NextFrame(within)
	if err != nil {
		c.t.Fatalf("stomp read: %v", err)
	}
	return f
}

// Expect reads frames until one with command cmd comes, and fails the test on an ERROR on the
// way (unless that is cmd) or after patience.
func (c *STOMPConn) Expect(cmd string) stomp.Frame {
	c.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		f := c.Frame(time.Until(deadline))
		if f.Command == cmd {
			return f
		}
		if f.Command == stomp.CmdError {
			msg, _ := f.Get("message")
			c.t.Fatalf("want %s, got ERROR %s", cmd, msg)
		}
	}
}

// Connect sends CONNECT (STOMP 1.2, with the extra header lines given, each ending in a
// newline) and waits for CONNECTED.
func (c *STOMPConn) Connect(headers string) stomp.Frame {
	c.t.Helper()
	c.Send("CONNECT\naccept-version:1.2\n" + headers + "\n\x00")
	return c.Expect(stomp.CmdConnected)
}

// Header is a frame's header, empty when it has none.
func Header(f stomp.Frame, key string) string {
	v, _ := f.Get(key)
	return v
}

// SSEEvent is one event of a Server-Sent Events stream.
type SSEEvent struct {
	ID, Event, Data string
}

// add folds one line of a stream into ev (comments and retry: are skipped) and reports
// whether the line completed the event.
func (ev *SSEEvent) add(line string) bool {
	if line == "" {
		return ev.Data != "" || ev.Event != ""
	}
	field, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "id":
		ev.ID = value
	case "event":
		ev.Event = value
	case "data":
		ev.Data += value
	}
	return false
}

// SSEStream is an event stream read line by line over its own connection, so that reads can
// time out without losing the stream.
type SSEStream struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	body io.Reader
}

// SSE opens an event stream of url (with Last-Event-ID when lastEventID is set) and fails the
// test unless the server answers 200. The stream is closed when the test ends.
func (d Dialer) SSE(t testing.TB, url, lastEventID string) *SSEStream {
	t.Helper()
	s, err := d.TrySSE(context.Background(), url, lastEventID)
	if err != nil {
		t.Fatalf("SSE %s: %v", url, err)
	}
	s.t = t
	t.Cleanup(func() { s.Close() })
	return s
}

// OpenSSE opens an event stream of url; see Dialer.SSE.
func OpenSSE(t testing.TB, url string) *SSEStream {
	t.Helper()
	return Dialer{}.SSE(t, url, "")
}

// TrySSE opens an event stream of rawURL. A refusal is a *StatusError with the answer. The
// caller closes the stream.
func (d Dialer) TrySSE(ctx context.Context, rawURL, lastEventID string) (*SSEStream, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", rawURL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	conn, err := d.net().DialContext(ctx, "tcp", hostPort(req.URL))
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		cfg := d.TLS.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = req.URL.Hostname()
		}
		conn = tls.Client(conn, cfg)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	err = req.Write(conn)
	var res *http.Response
	if err == nil {
		res, err = http.ReadResponse(br, req)
	}
	if err == nil && res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		err = &StatusError{Status: res.StatusCode, Body: string(b), RetryAfter: res.Header.Get("Retry-After")}
	}
	stop()
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	context.AfterFunc(ctx, func() { conn.Close() })
	return &SSEStream{conn: conn, br: bufio.NewReader(res.Body), body: res.Body}, nil
}

func hostPort(u *url.URL) string {
	switch {
	case u.Port() != "":
		return u.Host
	case u.Scheme == "https":
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// Close closes the stream's connection.
func (s *SSEStream) Close() { s.conn.Close() }

// NextEvent returns the next event (comments are skipped), or the error that ended the
// stream, or a timeout after within.
func (s *SSEStream) NextEvent(within time.Duration) (SSEEvent, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(within))
	var ev SSEEvent
	for {
		line, err := s.ReadLine()
		if err != nil {
			return ev, err
		}
		if ev.add(line) {
			return ev, nil
		}
	}
}

// Line returns the stream's next line without its end, failing after within.
func (s *SSEStream) Line(within time.Duration) (string, error) {
	_ = s.conn.SetReadDeadline(time.Now().Add(within))
	return s.ReadLine()
}

// ReadLine returns the stream's next line without its end; what deadline applies is the
// caller's (see NextEvent).
func (s *SSEStream) ReadLine() (string, error) {
	line, err := s.br.ReadString('\n')
	if err != nil {
		if line != "" && errors.Is(err, io.EOF) {
			return strings.TrimRight(line, "\r\n"), nil
		}
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// Next returns the next event, failing the test when none comes within within.
func (s *SSEStream) Next(within time.Duration) SSEEvent {
	s.t.Helper()
	ev, err := s.NextEvent(within)
	if err != nil {
		s.t.Fatalf("sse read: %v", err)
	}
	return ev
}

// Rest reads the stream to its end (the server closes it within within) and returns the events
// and the last line that was not blank.
func (s *SSEStream) Rest(within time.Duration) (events []SSEEvent, lastLine string) {
	s.t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(within))
	var ev SSEEvent
	for {
		line, err := s.ReadLine()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.t.Fatalf("the stream did not end cleanly: %v", err)
			}
			return events, lastLine
		}
		if line != "" {
			lastLine = line
		}
		if ev.add(line) {
			events = append(events, ev)
			ev = SSEEvent{}
		}
	}
}

// String shows an event as the stream carried it.
func (ev SSEEvent) String() string {
	return fmt.Sprintf("id=%q event=%q data=%q", ev.ID, ev.Event, ev.Data)
}

// AsSTOMP reads a WebSocket opened with the v12.stomp subprotocol as a STOMP session.
func AsSTOMP(c *WSConn) *STOMPConn { return &STOMPConn{WSConn: c, p: newParser()} }
