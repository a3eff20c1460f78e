package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// Errors of the WebSocket frame readers; each closes the connection with its own code.
var (
	errFrameTooLarge = errors.New("frame too large")                 // 1009
	errProtocol      = errors.New("WebSocket protocol error")        // 1002
	errInvalidUTF8   = errors.New("text message is not valid UTF-8") // 1007
	// errCloseFrame is the client's close frame; it wraps io.EOF, as the end of the stream.
	errCloseFrame = fmt.Errorf("close frame: %w", io.EOF)
)

// wsReadCloseReason is how a connection closes after its reader failed with err, and whether
// the error is the client's fault (counted as a refusal) rather than a plain disconnect.
func wsReadCloseReason(err error, max int) (Reason, bool) {
	switch {
	case errors.Is(err, errFrameTooLarge):
		return reasonTooLarge.with(fmt.Sprintf("message over %d bytes", max)), true
	case errors.Is(err, errInvalidUTF8):
		return reasonInvalidUTF8, true
	case errors.Is(err, errProtocol):
		return reasonProtocol.with(err.Error()), true
	case errors.Is(err, io.EOF):
		return ReasonClientClosed, false
	}
	return Reason{}, false
}

// closeAfterRead closes w as its reader's failure err calls for (wsReadCloseReason), counting a
// refusal; it reports whether err was one that closes.
func (s *Server) closeAfterRead(w *writer, err error) bool {
	r, refused := wsReadCloseReason(err, s.lim.MaxFrame)
	if r.Code == "" {
		return false
	}
	if refused {
		s.m.Refused.WithLabelValues(w.stats.transport, r.Code).Inc()
	}
	w.close(r, false)
	return true
}

// appendWSHeader appends an unmasked (server to client) frame header.
func appendWSHeader(dst []byte, op ws.OpCode, n int) []byte {
	b0 := 0x80 | byte(op)
	switch {
	case n < 126:
		return append(dst, b0, byte(n))
	case n <= 0xffff:
		return append(dst, b0, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, b0, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(n))
	}
}

// appendWSText appends a whole text frame.
func appendWSText(dst, payload []byte) []byte {
	return append(appendWSHeader(dst, ws.OpText, len(payload)), payload...)
}

// wsClose returns a close frame with code and reason (reason cut to fit a control frame).
func wsClose(code uint16, reason string) []byte {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	p := make([]byte, 0, 4+len(reason))
	p = binary.BigEndian.AppendUint16(p, code)
	p = append(p, reason...)
	return append(appendWSHeader(make([]byte, 0, 4+len(p)), ws.OpClose, len(p)), p...)
}

var wsPing = appendWSHeader(nil, ws.OpPing, 0)

// wsPong returns the pong frame answering a ping with payload.
func wsPong(payload []byte) []byte {
	return append(appendWSHeader(make([]byte, 0, 2+len(payload)), ws.OpPong, len(payload)), payload...)
}

// messageReader reads whole client messages. Two implementations exist, this package's own
// wsReader and gobwas/ws's wsutil.Reader (wsLibReader); BenchmarkWSReaders compares them and
// newMessageReader picks one.
type messageReader interface {
	// readMessage returns the next data message (text or binary), answering pings on the way.
	// It returns io.EOF on a close frame, and errProtocol, errInvalidUTF8 or errFrameTooLarge
	// for input that breaks RFC 6455 or the size limit.
	readMessage() (ws.OpCode, []byte, error)
}

// newMessageReader returns the reader connections use. touch, when not nil, is called after
// every frame, control frames included, so that a connection extends its read deadline for a
// client that only answers pings. keep, when not nil, says whether the connection's last
// message was a publication (see readMessage).
func newMessageReader(br *bufio.Reader, max int, pong func([]byte), touch func(), keep *bool) messageReader {
	return &wsReader{br: br, max: max, pong: pong, touch: touch, keep: keep}
}

// wsReader reads client messages: it checks each header against RFC 6455 with gobwas/ws's own
// checker (masked, no RSV bits, control frames final and at most 125 bytes, continuations
// only inside a fragmented message), enforces the size limit before reading a payload,
// unmasks, reassembles fragments, answers pings through pong and checks that text is UTF-8.
type wsReader struct {
	br    *bufio.Reader
	max   int
	pong  func(payload []byte) // queues a pong; called for each ping
	touch func()               // called after each frame; may be nil
	keep  *bool                // the connection publishes: wait keeping the stack; may be nil
	hdr   [ws.MaxHeaderSize - 2]byte
	// touched is when touch was last called: a read deadline moved at most every touchEvery
	// (a runtime lock and timer update each) keeps a frame flood from paying one per frame.
	touched time.Time
}

const touchEvery = 10 * time.Millisecond

// readMessage waits for input, then reads. Where it waits decides what the reader goroutine's
// stack costs: the runtime halves a parked goroutine's stack at a GC only while less than a
// quarter of it is in use (2 KiB of 8, of which it counts 800 bytes as reserve). A message's
// handling grows the stack to 8 KiB (JSON decoding, a subscribe, a publication's fan-out).
//   - A connection that only listens waits in a small frame, so an idle reader gives the
//     grown stack back and keeps 4 KiB.
//   - One whose last message was a publication waits deeper, keeping the 8 KiB it publishes
//     with: given back, it would be grown again by its next publication, and a server of busy
//     publishers then holds more memory (stacks of both sizes in its pools) and copies stacks
//     after every GC (BENCHMARKS.md, idle connections).
func (r *wsReader) readMessage() (ws.OpCode, []byte, error) {
	var err error
	if r.keep != nil && *r.keep {
		err = r.waitKeepingStack()
	} else {
		_, err = r.br.Peek(1)
	}
	if err != nil {
		return 0, nil, err
	}
	return r.read()
}

// waitKeepingStack waits for input with stackPad bytes of its frame below it: parked at least
// that deep, the reader keeps an 8 KiB stack.
//
//go:noinline
func (r *wsReader) waitKeepingStack() error {
	var pad [stackPad]byte
	_, err := r.br.Peek(1)
	touchPad(pad[:])
	return err
}

const stackPad = 1536

// touchPad keeps pad, and with it the frame's size, from being optimised away.
//
//go:noinline
func touchPad(pad []byte) { _ = pad[len(pad)-1] }

func (r *wsReader) read() (ws.OpCode, []byte, error) {
	var (
		msg []byte
		op  ws.OpCode // of the message being reassembled; 0 between messages
	)
	for {
		h, err := ws.ReadHeaderBuffer(r.br, r.hdr[:])
		if err != nil {
			if errors.Is(err, ws.ErrHeaderLengthMSB) || errors.Is(err, ws.ErrHeaderLengthUnexpected) {
				return 0, nil, fmt.Errorf("%w: %v", errProtocol, err)
			}
			return 0, nil, err
		}
		state := ws.StateServerSide
		if op != 0 {
			state |= ws.StateFragmented
		}
		if err := ws.CheckHeader(h, state); err != nil {
			return 0, nil, fmt.Errorf("%w: %v", errProtocol, err)
		}
		if h.Length > int64(r.max) || int64(len(msg))+h.Length > int64(r.max) {
			return 0, nil, fmt.Errorf("%w: more than %d bytes", errFrameTooLarge, r.max)
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(r.br, payload); err != nil {
			return 0, nil, err
		}
		ws.Cipher(payload, h.Mask, 0)
		if now := time.Now(); r.touch != nil && now.Sub(r.touched) >= touchEvery {
			r.touched = now
			r.touch()
		}
		switch h.OpCode {
		case ws.OpPing:
			r.pong(payload)
			continue
		case ws.OpPong:
			continue
		case ws.OpClose:
			return 0, nil, checkClose(payload)
		case ws.OpContinuation:
			msg = append(msg, payload...)
		default: // text or binary: CheckHeader refused the reserved codes
			op, msg = h.OpCode, payload
		}
		if h.Fin {
			if op == ws.OpText && !utf8.Valid(msg) {
				return 0, nil, errInvalidUTF8
			}
			return op, msg, nil
		}
	}
}

// checkClose returns errCloseFrame for a well-formed close frame and errProtocol for one with a
// malformed body (one byte, a code no endpoint may send, a reason that is not UTF-8).
func checkClose(payload []byte) error {
	if len(payload) == 0 {
		return errCloseFrame
	}
	if len(payload) == 1 {
		return fmt.Errorf("%w: close frame of one byte", errProtocol)
	}
	code, reason := ws.ParseCloseFrameData(payload)
	if err := ws.CheckCloseFrameData(code, reason); err != nil {
		return fmt.Errorf("%w: %v", errProtocol, err)
	}
	return errCloseFrame
}

// wsLibReader reads client messages with gobwas/ws's wsutil.Reader, which does the same
// checks as wsReader.
type wsLibReader struct {
	rd   wsutil.Reader
	pong func(payload []byte)
	ctl  [ws.MaxControlFramePayloadSize]byte
}

func newWSLibReader(br *bufio.Reader, max int, pong func([]byte)) *wsLibReader {
	r := &wsLibReader{pong: pong}
	r.rd = wsutil.Reader{Source: br, State: ws.StateServerSide, CheckUTF8: true, MaxMessageSize: int64(max)}
	r.rd.OnIntermediate = r.control
	return r
}

// control handles a control frame whose unmasked body is body.
func (r *wsLibReader) control(h ws.Header, body io.Reader) error {
	p := r.ctl[:h.Length]
	if _, err := io.ReadFull(body, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // a bare io.EOF from Read would read as the message's end
		}
		return err
	}
	switch h.OpCode {
	case ws.OpPing:
		r.pong(p)
	case ws.OpClose:
		return checkClose(p)
	}
	return nil
}

func (r *wsLibReader) readMessage() (ws.OpCode, []byte, error) {
	for {
		h, err := r.rd.NextFrame()
		if err != nil {
			return 0, nil, libReadError(err)
		}
		if h.OpCode.IsControl() {
			if err := r.control(h, &r.rd); err != nil {
				return 0, nil, libReadError(err)
			}
			continue
		}
		msg := make([]byte, 0, max(h.Length, 1))
		for {
			if len(msg) == cap(msg) {
				msg = append(msg, 0)[:len(msg)]
			}
			n, err := r.rd.Read(msg[len(msg):cap(msg)])
			msg = msg[:len(msg)+n]
			if err == io.EOF {
				return h.OpCode, msg, nil
			}
			if err != nil {
				return 0, nil, libReadError(err)
			}
		}
	}
}

// libReadError maps wsutil's errors to this package's.
func libReadError(err error) error {
	var pe ws.ProtocolError
	switch {
	case errors.As(err, &pe), errors.Is(err, wsutil.ErrNoFrameAdvance),
		errors.Is(err, ws.ErrHeaderLengthMSB), errors.Is(err, ws.ErrHeaderLengthUnexpected):
		return fmt.Errorf("%w: %v", errProtocol, err)
	case errors.Is(err, wsutil.ErrInvalidUTF8):
		return errInvalidUTF8
	case errors.Is(err, wsutil.ErrMessageTooLarge), errors.Is(err, wsutil.ErrFrameTooLarge):
		return fmt.Errorf("%w: %v", errFrameTooLarge, err)
	}
	return err
}

// prefixConn replays bytes the HTTP server had already buffered before the handshake finished.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// wsReadBuf is the read buffer per WebSocket connection: small, because most connections are
// mostly idle readers; large client messages bypass it.
const wsReadBuf = 1024

// upgrade performs the WebSocket handshake, choosing a subprotocol with choose (nil accepts
// none). It returns a connection and a reader that owns the bytes buffered during the handshake;
// net/http's own buffers are released.
func upgrade(w http.ResponseWriter, r *http.Request, choose func(string) bool) (net.Conn, *bufio.Reader, string, error) {
	u := ws.HTTPUpgrader{Protocol: choose}
	conn, rw, hs, err := u.Upgrade(r, w)
	if err != nil {
		return nil, nil, "", err
	}
	var c net.Conn = conn
	if n := rw.Reader.Buffered(); n > 0 {
		pre, _ := rw.Reader.Peek(n)
		c = &prefixConn{Conn: conn, pre: append([]byte(nil), pre...)}
	}
	return c, bufio.NewReaderSize(c, wsReadBuf), hs.Protocol, nil
}

// upgradeSocket admits a WebSocket request and upgrades it, offering the subprotocols choose
// accepts (nil: none). The client's identity is checked first (an anonymous one is let
// through when anonymous is set, or when no credentials are required), then its origin and
// the connection caps. On a refusal the client has been answered and ok is false; otherwise
// release gives the admission back once the connection has ended.
func (s *Server) upgradeSocket(w http.ResponseWriter, r *http.Request, anonymous bool, choose func(string) bool) (
	ident Identity, conn net.Conn, br *bufio.Reader, release func(), ok bool) {
	var err error
	if anonymous {
		ident, err = s.policy.Authenticate(r)
	} else {
		ident, err = s.authenticate(r)
	}
	if err == nil {
		err = s.checkOrigin(r)
	}
	if err == nil {
		release, err = s.admit(r, ident.User)
	}
	if err != nil {
		s.WriteError(w, r, err)
		return ident, nil, nil, nil, false
	}
	if conn, br, _, err = upgrade(w, r, choose); err != nil {
		release()
		return ident, nil, nil, nil, false // the upgrader already answered with a 4xx
	}
	return ident, conn, br, release, true
}
