package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/gobwas/ws"
)

// maxMessage bounds one WebSocket message the generator accepts from the server.
const maxMessage = 1 << 20

// wsCloseError is a close frame from the server.
type wsCloseError struct {
	code   ws.StatusCode
	reason string
}

func (e *wsCloseError) Error() string {
	// The name of a standard code survives errorText, which folds numbers into N.
	return fmt.Sprintf("websocket closed by server: %d (%s) %s", e.code, closeName(e.code), e.reason)
}

// closeName names a WebSocket close code (RFC 6455, section 7.4.1), or its range.
func closeName(c ws.StatusCode) string {
	switch c {
	case 1000:
		return "normal"
	case 1001:
		return "going away"
	case 1002:
		return "protocol error"
	case 1003:
		return "unsupported data"
	case 1007:
		return "invalid data"
	case 1008:
		return "policy violation"
	case 1009:
		return "message too big"
	case 1011:
		return "internal error"
	case 1012:
		return "service restart"
	case 1013:
		return "try again later"
	}
	if c >= 3000 && c < 5000 {
		return "application code"
	}
	return "other"
}

// wsDial opens a WebSocket for v with gobwas/ws's client handshake (its buffers are pooled and
// returned once the handshake is over) and wraps the connection in a small reader of our own.
func (c *cell) wsDial(ctx context.Context, v *vu, path string, protocols []string) (*wsStream, error) {
	return c.wsDialWith(ctx, v, path, protocols, "")
}

// wsDialWith is wsDial with extra handshake header lines (a profile's headers and cookies);
// the server may choose any of protocols.
func (c *cell) wsDialWith(ctx context.Context, v *vu, path string, protocols []string, header string) (*wsStream, error) {
	d := ws.Dialer{
		ReadBufferSize:  1024,
		WriteBufferSize: 1024,
		Timeout:         10 * time.Second,
		Protocols:       protocols,
		NetDial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dial(ctx, v)
		},
	}
	if header != "" {
		d.Header = ws.HandshakeHeaderString(header)
	}
	// The dial is cell.dial's (TLS included), so the handshake's URL stays ws://.
	conn, br, hs, err := d.Dial(ctx, "ws://"+c.nodes[v.at()]+string(c.opts.withQuery([]byte(path))))
	if err != nil {
		return nil, err
	}
	if len(protocols) > 0 && !slices.Contains(protocols, hs.Protocol) {
		_ = conn.Close()
		return nil, fmt.Errorf("websocket: server chose subprotocol %q, want %q", hs.Protocol, protocols[0])
	}
	s := &wsStream{conn: conn}
	var rd = net.Conn(conn)
	if br != nil { // the server wrote right after its answer: keep those bytes
		pre := make([]byte, br.Buffered())
		_, _ = br.Read(pre)
		ws.PutReader(br)
		rd = &prefixConn{Conn: conn, pre: pre}
	}
	s.br = bufio.NewReaderSize(rd, streamBufSize)
	return s, nil
}

// openWS opens a WebSocket for a's user at path (asking for protocols[0] when given) and makes
// it a's connection, counting the attempt. ok is false when it failed or was abandoned;
// otherwise the caller ends it with a.endStream(s). what names the client in errors.
func (c *cell) openWS(a *activity, path string, protocols []string, what string) (s *wsStream, start time.Time, ok bool) {
	return c.openWSWith(a, path, protocols, "", what)
}

// openWSWith is openWS with extra handshake header lines.
func (c *cell) openWSWith(a *activity, path string, protocols []string, header, what string) (s *wsStream, start time.Time, ok bool) {
	v := a.v
	c.connTried(v)
	start = time.Now()
	s, err := c.wsDialWith(a.ctx, v, path, protocols, header)
	if err != nil {
		c.connFailed(a, fmt.Errorf("%s: %w", what, err))
		return nil, start, false
	}
	if !a.setConn(s.conn) {
		_ = s.conn.Close()
		c.connAbandoned(v)
		return nil, start, false
	}
	return s, start, true
}

// prefixConn returns pre before reading from the connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// wsStream reads server messages. A message that fits in the reader's buffer is returned in
// place (valid until the next call); larger or fragmented ones go through a pooled buffer.
type wsStream struct {
	conn net.Conn
	br   *bufio.Reader
	hdr  [ws.MaxHeaderSize - 2]byte
	skip int     // bytes of the last message still in br, discarded on the next call
	big  *[]byte // pooled buffer holding the last large or fragmented message
}

// next returns the next data message. Pings are answered with pong; a close frame ends the
// stream with a *wsCloseError.
func (s *wsStream) next(pong func(payload []byte) error) ([]byte, error) {
	if s.skip > 0 {
		_, _ = s.br.Discard(s.skip)
		s.skip = 0
	}
	if s.big != nil {
		*s.big = (*s.big)[:0]
		bodyPool.Put(s.big)
		s.big = nil
	}
	var frag *[]byte
	for {
		h, err := ws.ReadHeaderBuffer(s.br, s.hdr[:])
		if err != nil {
			return nil, err
		}
		if h.Length > maxMessage || (frag != nil && len(*frag)+int(h.Length) > maxMessage) {
			return nil, fmt.Errorf("websocket: message over %d bytes", maxMessage)
		}
		n := int(h.Length)
		var p []byte
		inPlace := n <= s.br.Size()
		if inPlace {
			if p, err = s.br.Peek(n); err != nil {
				return nil, err
			}
		} else {
			if frag == nil {
				frag = bodyPool.Get().(*[]byte)
			}
			start := len(*frag)
			*frag = append(*frag, make([]byte, n)...)
			p = (*frag)[start:]
			if _, err := ioReadFull(s.br, p); err != nil {
				return nil, err
			}
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		if h.OpCode.IsControl() {
			switch h.OpCode {
			case ws.OpPing:
				err = pong(p)
			case ws.OpClose:
				code, reason := ws.ParseCloseFrameData(p)
				err = &wsCloseError{code: code, reason: reason}
			}
			if inPlace {
				_, _ = s.br.Discard(n)
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		if h.Fin && frag == nil {
			if inPlace {
				s.skip = n
			}
			return p, nil
		}
		// A fragment: collect it.
		if frag == nil {
			frag = bodyPool.Get().(*[]byte)
		}
		if inPlace {
			*frag = append(*frag, p...)
			_, _ = s.br.Discard(n)
		}
		if h.Fin {
			s.big = frag
			return *frag, nil
		}
	}
}

func ioReadFull(br *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := br.Read(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				return n, nil
			}
			return n, err
		}
	}
	return n, nil
}

// appendClientFrame appends one masked, final frame (clients must mask what they send). The
// header is written here rather than with ws.WriteHeader so that header and payload leave in
// a single write.
func appendClientFrame(dst []byte, op ws.OpCode, payload []byte) []byte {
	b0 := 0x80 | byte(op)
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, b0, 0x80|byte(n))
	case n < 1<<16:
		dst = append(dst, b0, 0x80|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, b0, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	var mask [4]byte
	binary.LittleEndian.PutUint32(mask[:], rand.Uint32())
	dst = append(dst, mask[:]...)
	start := len(dst)
	dst = append(dst, payload...)
	ws.Cipher(dst[start:], mask, 0)
	return dst
}

// writeFrame writes one frame on a's connection under its lock.
func (a *activity) writeFrame(op ws.OpCode, payload []byte) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	*bp = appendClientFrame((*bp)[:0], op, payload)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writeLocked(*bp)
}

// writePublication writes frame, publication seq of a's user, on its own connection when the
// user may publish there now (connected and subscribed, not leaving; in a scenario with a greeting, answered) and the
// turn keeps the user's order. A turn that finds it otherwise is skipped, not failed.
func (a *activity) writePublication(seq int, frame []byte) {
	greets := a.v.c.scn.greeting() != ""
	a.mu.Lock()
	if a.conn == nil || !a.ready || a.stopping.Load() || (greets && !a.entered.Load()) || !a.inOrderLocked(&a.wireNext, seq) {
		a.mu.Unlock()
		return
	}
	a.sentLocked(seq)
	_ = a.writeLocked(frame) // a failed write closes the conn; the reader settles the rest
	a.mu.Unlock()
	a.v.sh.update(func(k *counters) { k.pubSent++ })
}

// writeLocked writes b on a.conn; a.mu must be held.
func (a *activity) writeLocked(b []byte) error {
	if a.conn == nil {
		return errNoConn
	}
	_ = a.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := a.conn.Write(b)
	if err != nil {
		_ = a.conn.Close() // the reader sees the failure and reconnects
	}
	return err
}

// wsClose is the close frame a leaving user sends.
var wsClose = appendClientFrame(nil, ws.OpClose, ws.NewCloseFrameBody(ws.StatusNormalClosure, ""))
