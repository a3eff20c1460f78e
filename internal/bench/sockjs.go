package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/peers"
)

// The sockjs transport is a SockJS session as sockjs-client runs xhr-streaming in a browser
// (what it falls back to when a proxy refuses WebSocket), carrying the STOMP client's frames:
// POST {path}/{server}/{session}/xhr_streaming opens the session and streams the server's
// frames one per line ('o' open, 'h' heart-beat, 'a[…]' messages, 'c[code,"reason"]' close),
// and each message of the client goes in a POST …/xhr_send whose body is a JSON array of
// strings. The server ends a streaming response after 128 KiB; the next one is opened on the
// same connection, as sockjs-client does, and the session goes on.

// sockjsSendIdle is how long the xhr_send connection may sit idle before the next message goes
// on a new one: well inside the server's keep-alive timeout (--http-idle-timeout, 30 s by
// default), so a message never meets a connection the server is closing.
const sockjsSendIdle = 10 * time.Second

// sockjsConn is one SockJS session. It is the activity's connection (a Write is one xhr_send,
// deadlines reach the streaming socket, Close both sockets) and the STOMP client's stompStream
// (next returns one message at a time). Only the activity's goroutine reads.
type sockjsConn struct {
	c          *cell
	ctx        context.Context
	v          *vu
	host       string // the node the session lives on: its streams and sends all go there
	streamPath []byte // {path}/{server}/{session}/xhr_streaming
	sendPath   []byte // {path}/{server}/{session}/xhr_send

	// The receiving side, used by the reading goroutine only.
	stream  net.Conn
	raw     *bufio.Reader // stream's bytes: response heads and chunk framing
	body    *bufio.Reader // the current streaming response's body
	chunked bool          // the current response is chunked (trailers follow its end)
	keep    bool          // the stream connection stays open after the current response
	long    []byte        // a frame longer than body's buffer
	msgs    []byte        // the messages of the last 'a' frame, one after another
	ends    []int         // where each of them ends in msgs
	nextMsg int           // index in ends of the next message next returns
	pending []byte        // what Read has not returned yet

	sendMu sync.Mutex // guards the sending side (writes come under the activity's lock anyway)
	send   *httpConn  // keep-alive connection for xhr_send; nil until the first write
	sentAt time.Time  // when send was last used
	out    []byte     // the JSON body being sent
	req    []byte     // the request being sent
	closed bool
}

// openSockJS opens a SockJS session for a's user on its node and makes it a's connection,
// counting the attempt: the streaming request is answered and the open frame read. ok is false
// when it failed or was abandoned; otherwise the caller ends it with a.clearConn.
func (c *cell) openSockJS(a *activity) (s *sockjsConn, start time.Time, ok bool) {
	return c.openSockJSAt(a, peers.SockJSPath)
}

// openSockJSAt is openSockJS on the SockJS endpoint at path (a profile's).
func (c *cell) openSockJSAt(a *activity, path string) (s *sockjsConn, start time.Time, ok bool) {
	v := a.v
	c.connTried(v)
	start = time.Now()
	conn, err := c.dial(a.ctx, v)
	if err != nil {
		c.connFailed(a, fmt.Errorf("sockjs: %w", err))
		return nil, start, false
	}
	s = newSockJSConn(c, a.ctx, v, conn, path)
	if !a.setConn(s) {
		_ = conn.Close()
		c.connAbandoned(v)
		return nil, start, false
	}
	if err := s.open(); err != nil {
		a.clearConn()
		c.connFailed(a, fmt.Errorf("sockjs: %w", err))
		return nil, start, false
	}
	a.noDeadline()
	return s, start, true
}

// newSockJSConn makes a new session of v's on conn, a connection to v's node.
func newSockJSConn(c *cell, ctx context.Context, v *vu, conn net.Conn, path string) *sockjsConn {
	// Server ids are three digits; the session id is new for every session, since the server
	// keeps a session whose streaming request ended for a few seconds.
	base := append(make([]byte, 0, 64), path+"/"...)
	base = strconv.AppendInt(base, int64(100+v.id%900), 10)
	base = append(base, '/')
	base = strconv.AppendUint(base, rand.Uint64(), 36)
	return &sockjsConn{c: c, ctx: ctx, v: v, host: c.nodes[v.at()], stream: conn,
		streamPath: append(base[:len(base):len(base)], "/xhr_streaming"...),
		sendPath:   append(base[:len(base):len(base)], "/xhr_send"...),
		raw:        bufio.NewReaderSize(conn, streamBufSize),
		body:       bufio.NewReaderSize(nil, streamBufSize),
	}
}

// open sends the streaming request and reads up to the open frame.
func (s *sockjsConn) open() error {
	_ = s.stream.SetDeadline(time.Now().Add(requestTimeout))
	if err := s.receive(); err != nil {
		return err
	}
	for {
		f, err := s.frame()
		if err != nil {
			return fmt.Errorf("waiting for the open frame: %w", err)
		}
		switch {
		case len(f) == 0 || f[0] == 'h':
		case f[0] == 'o':
			return nil
		case f[0] == 'c':
			return sockjsClosed(f)
		default:
			return fmt.Errorf("%w: SockJS frame %.80q before the open frame", errBadResponse, f)
		}
	}
}

// receive sends POST …/xhr_streaming on the stream connection and reads the answer's head.
func (s *sockjsConn) receive() error {
	bp := bufPool.Get().(*[]byte)
	req := appendRequest((*bp)[:0], "POST", s.host, s.streamPath, "", []byte{})
	_ = s.stream.SetWriteDeadline(time.Now().Add(requestTimeout))
	_, err := s.stream.Write(req)
	*bp = req
	bufPool.Put(bp)
	var head respHead
	if err == nil {
		head, err = readHead(s.raw)
	}
	if err != nil {
		return fmt.Errorf("xhr_streaming: %w", err)
	}
	if head.status != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(s.raw, 200))
		return fmt.Errorf("xhr_streaming: %w", &StatusError{Code: head.status, Body: string(msg)})
	}
	switch {
	case head.chunked:
		s.body.Reset(httputil.NewChunkedReader(s.raw))
	case head.length >= 0:
		s.body.Reset(io.LimitReader(s.raw, head.length))
	default: // the body ends with the connection
		s.body.Reset(s.raw)
	}
	s.chunked = head.chunked
	s.keep = !head.close && (head.chunked || head.length >= 0)
	return nil
}

// reopen opens the next streaming response after the server ended one.
func (s *sockjsConn) reopen() error {
	if !s.keep {
		return fmt.Errorf("xhr_streaming: %w", io.ErrUnexpectedEOF)
	}
	if s.chunked {
		for { // trailers, then the empty line
			line, err := s.raw.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("xhr_streaming: reading trailer: %w", err)
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
	}
	return s.receive()
}

// sockjsHeartbeat stands for the prelude: 2 KiB of 'h' before the first frame of a streaming
// response, which make browsers hand the stream to the page. Skipped, not kept.
var sockjsHeartbeat = []byte("h")

// frame returns the next frame of the streaming response, without its line end; io.EOF when
// the response has ended.
func (s *sockjsConn) frame() ([]byte, error) {
	line, err := s.body.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		if line[0] == 'h' {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = s.body.ReadSlice('\n')
			}
			return sockjsHeartbeat, err
		}
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.body.ReadSlice('\n')
			s.long = append(s.long, line...)
			if len(s.long) > maxMessage {
				return nil, fmt.Errorf("sockjs: frame over %d bytes", maxMessage)
			}
		}
		line = s.long
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, fmt.Errorf("%w: the streaming response ended within a frame", errBadResponse)
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// next returns the session's next message: a STOMP frame, or part of one.
func (s *sockjsConn) next(func([]byte) error) ([]byte, error) {
	for {
		if s.nextMsg < len(s.ends) {
			from := 0
			if s.nextMsg > 0 {
				from = s.ends[s.nextMsg-1]
			}
			to := s.ends[s.nextMsg]
			s.nextMsg++
			return s.msgs[from:to], nil
		}
		f, err := s.frame()
		if errors.Is(err, io.EOF) {
			err = s.reopen()
			if err == nil {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if len(f) == 0 {
			return nil, fmt.Errorf("%w: empty SockJS frame", errBadResponse)
		}
		switch f[0] {
		case 'h':
		case 'a':
			s.msgs, s.ends, err = appendSockJSArray(s.msgs[:0], s.ends[:0], f[1:])
			s.nextMsg = 0
		case 'm': // one message, a JSON string
			var rest []byte
			s.msgs, rest, err = appendJSONString(s.msgs[:0], f[1:])
			s.ends, s.nextMsg = append(s.ends[:0], len(s.msgs)), 0
			if err == nil && len(skipJSONSpace(rest)) > 0 {
				err = fmt.Errorf("%w: %.20q after a SockJS message", errBadResponse, rest)
			}
		case 'c':
			err = sockjsClosed(f)
		default:
			err = fmt.Errorf("%w: SockJS frame %.80q", errBadResponse, f)
		}
		if err != nil {
			s.ends = s.ends[:0]
			return nil, err
		}
	}
}

// sockjsClosed is the error of a close frame, c[code,"reason"].
func sockjsClosed(f []byte) error {
	return fmt.Errorf("sockjs: closed by the server: %.80s", f[1:])
}

// Read returns the session's messages as one stream of bytes, for net.Conn; the STOMP client
// reads with next.
func (s *sockjsConn) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		m, err := s.next(nil)
		if err != nil {
			return 0, err
		}
		s.pending = m
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Write sends p as one message, POST …/xhr_send, and waits for the server's answer, as one
// XMLHttpRequest of sockjs-client does.
func (s *sockjsConn) Write(p []byte) (int, error) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.closed {
		return 0, net.ErrClosed
	}
	if s.send != nil && time.Since(s.sentAt) > sockjsSendIdle {
		s.send.close()
		s.send = nil
	}
	host := s.host
	if s.send == nil {
		conn, err := s.c.dialNode(s.ctx, s.v, host)
		if err != nil {
			return 0, fmt.Errorf("sockjs: xhr_send: %w", err)
		}
		s.send = newHTTPConn(conn, host, false)
	}
	s.out = appendSockJSSend(s.out[:0], p)
	s.req = appendRequest(s.req[:0], "POST", host, s.sendPath, "", s.out)
	err := s.send.roundTrip(s.req, time.Now().Add(requestTimeout), func(status int, body []byte) error {
		if status/100 != 2 {
			return &StatusError{Code: status, Body: string(body[:min(len(body), 200)])}
		}
		return nil
	})
	s.sentAt = time.Now()
	if err != nil {
		// The message was taken when only the keep-alive ended; the next one dials again.
		s.send.close()
		s.send = nil
		var se *StatusError
		if !errors.Is(err, errConnClose) || errors.As(err, &se) {
			return 0, fmt.Errorf("sockjs: xhr_send: %w", err)
		}
	}
	return len(p), nil
}

// Close ends the session from the client's side: both sockets close, and the server ends the
// session once no streaming request has come back for a few seconds.
func (s *sockjsConn) Close() error {
	err := s.stream.Close()
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.closed = true
	if s.send != nil {
		s.send.close()
		s.send = nil
	}
	return err
}

func (s *sockjsConn) LocalAddr() net.Addr                { return s.stream.LocalAddr() }
func (s *sockjsConn) RemoteAddr() net.Addr               { return s.stream.RemoteAddr() }
func (s *sockjsConn) SetDeadline(t time.Time) error      { return s.stream.SetDeadline(t) }
func (s *sockjsConn) SetReadDeadline(t time.Time) error  { return s.stream.SetReadDeadline(t) }
func (s *sockjsConn) SetWriteDeadline(t time.Time) error { return s.stream.SetWriteDeadline(t) }

// appendSockJSSend appends the body of an xhr_send carrying msg: a JSON array of one string.
func appendSockJSSend(dst, msg []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `["`...)
	for len(msg) > 0 {
		i := 0
		for i < len(msg) && msg[i] >= 0x20 && msg[i] != '"' && msg[i] != '\\' {
			i++
		}
		dst = append(dst, msg[:i]...)
		if i == len(msg) {
			break
		}
		switch b := msg[i]; b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
		}
		msg = msg[i+1:]
	}
	return append(dst, `"]`...)
}

// appendSockJSArray appends the strings of p, the JSON array of an 'a' frame, to dst one after
// another, and where each ends to ends. Strings are unescaped as encoding/json does.
func appendSockJSArray(dst []byte, ends []int, p []byte) ([]byte, []int, error) {
	p = skipJSONSpace(p)
	if len(p) == 0 || p[0] != '[' {
		return dst, ends, fmt.Errorf("%w: SockJS messages %.80q are not a JSON array", errBadResponse, p)
	}
	p = skipJSONSpace(p[1:])
	if len(p) > 0 && p[0] == ']' {
		p = p[1:]
	} else {
		for {
			var err error
			if dst, p, err = appendJSONString(dst, p); err != nil {
				return dst, ends, err
			}
			ends = append(ends, len(dst))
			p = skipJSONSpace(p)
			if len(p) == 0 {
				return dst, ends, fmt.Errorf("%w: SockJS messages end within the array", errBadResponse)
			}
			if p[0] == ']' {
				p = p[1:]
				break
			}
			if p[0] != ',' {
				return dst, ends, fmt.Errorf("%w: %.20q in SockJS messages", errBadResponse, p)
			}
			p = skipJSONSpace(p[1:])
		}
	}
	if len(skipJSONSpace(p)) > 0 {
		return dst, ends, fmt.Errorf("%w: %.20q after SockJS messages", errBadResponse, p)
	}
	return dst, ends, nil
}

func skipJSONSpace(p []byte) []byte {
	for len(p) > 0 && (p[0] == ' ' || p[0] == '\t' || p[0] == '\r' || p[0] == '\n') {
		p = p[1:]
	}
	return p
}

// appendJSONString appends the JSON string at the start of p, unescaped, to dst and returns
// what follows it.
func appendJSONString(dst, p []byte) (out, rest []byte, err error) {
	bad := func(what string) ([]byte, []byte, error) {
		return dst, nil, fmt.Errorf("%w: %s in a SockJS message", errBadResponse, what)
	}
	if len(p) == 0 || p[0] != '"' {
		return bad("no string")
	}
	p = p[1:]
	for {
		i := 0
		for i < len(p) && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\' {
			i++
		}
		dst = append(dst, p[:i]...)
		switch {
		case i == len(p):
			return bad("an unterminated string")
		case p[i] == '"':
			return dst, p[i+1:], nil
		case p[i] < 0x20:
			return bad("a control character")
		}
		p = p[i:] // at a backslash
		if len(p) < 2 {
			return bad("an unterminated escape")
		}
		switch c := p[1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(p[2:])
			if r < 0 {
				return bad("a bad \\u escape")
			}
			p = p[6:]
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD, as encoding/json has it.
				if len(p) >= 6 && p[0] == '\\' && p[1] == 'u' {
					if d := utf16.DecodeRune(r, hex4(p[2:])); d != unicode.ReplacementChar {
						r = d
						p = p[6:]
					} else {
						r = unicode.ReplacementChar
					}
				} else {
					r = unicode.ReplacementChar
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return bad("a bad escape")
		}
		p = p[2:]
	}
}

// hex4 is the value of the four hex digits at the start of p, or -1.
func hex4(p []byte) rune {
	if len(p) < 4 {
		return -1
	}
	var r rune
	for _, c := range p[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
