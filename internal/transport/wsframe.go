package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gobwas/ws"
)

// errFrameTooLarge is returned by readMessage when a message exceeds the frame limit.
var errFrameTooLarge = errors.New("frame too large")

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

// wsReader reads client messages: it unmasks, reassembles fragments, answers control frames
// through pong, and enforces the size limit before reading a payload.
type wsReader struct {
	br   *bufio.Reader
	max  int
	pong func(payload []byte) // queues a pong; called for each ping
}

// readMessage returns the next data message (text or binary). It returns io.EOF on a close
// frame.
func (r *wsReader) readMessage() (ws.OpCode, []byte, error) {
	var (
		msg []byte
		op  ws.OpCode
	)
	for {
		h, err := ws.ReadHeader(r.br)
		if err != nil {
			return 0, nil, err
		}
		if h.Length > int64(r.max) || int64(len(msg))+h.Length > int64(r.max) {
			return 0, nil, fmt.Errorf("%w: more than %d bytes", errFrameTooLarge, r.max)
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(r.br, payload); err != nil {
			return 0, nil, err
		}
		if h.Masked {
			ws.Cipher(payload, h.Mask, 0)
		}
		switch h.OpCode {
		case ws.OpPing:
			r.pong(payload)
			continue
		case ws.OpPong:
			continue
		case ws.OpClose:
			return 0, nil, io.EOF
		case ws.OpContinuation:
			if msg == nil && op == 0 {
				return 0, nil, errors.New("continuation frame without a first frame")
			}
			msg = append(msg, payload...)
		case ws.OpText, ws.OpBinary:
			if op != 0 {
				return 0, nil, errors.New("new message inside a fragmented one")
			}
			op = h.OpCode
			if h.Fin {
				return op, payload, nil
			}
			msg = payload
		default:
			return 0, nil, fmt.Errorf("unknown opcode %d", h.OpCode)
		}
		if h.Fin {
			return op, msg, nil
		}
	}
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
