package socketio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gobwas/ws"
)

// wsReadBuffer is the read buffer of a WebSocket connection: a frame header and, usually, a
// whole small message; larger ones are read past it.
const wsReadBuffer = 1024

// websocket is Engine.IO's WebSocket transport: one packet per text message.
type websocket struct {
	conn       net.Conn
	br         *bufio.Reader // owned by the reader
	maxPayload int64
	timeout    time.Duration // bounds a write

	mu sync.Mutex // serializes writes: the reader's pongs and the senders' packets
}

// dialWebSocket opens the WebSocket at url (ws:// or wss://).
func dialWebSocket(ctx context.Context, o *Options, url string) (*websocket, error) {
	d := ws.Dialer{
		ReadBufferSize:  512,
		WriteBufferSize: 512,
		Header:          ws.HandshakeHeaderHTTP(o.Header),
		TLSConfig:       o.TLSConfig,
		NetDial:         o.dial,
	}
	conn, br, _, err := d.Dial(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("socketio: websocket %s: %w", url, err)
	}
	var rd io.Reader = conn
	if br != nil { // the server wrote right after its answer (the open packet): keep those bytes
		pre := make([]byte, br.Buffered())
		_, _ = br.Read(pre)
		ws.PutReader(br)
		rd = io.MultiReader(bytes.NewReader(pre), conn)
	}
	return &websocket{
		conn:       conn,
		br:         bufio.NewReaderSize(rd, wsReadBuffer),
		maxPayload: o.maxPayload(),
		timeout:    o.writeTimeout(),
	}, nil
}

func (w *websocket) name() string { return "websocket" }

// recv returns the next data message; pings are answered, a close frame ends the stream.
func (w *websocket) recv(_ context.Context, deadline time.Time) ([][]byte, error) {
	if err := w.conn.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("socketio: websocket deadline: %w", err)
	}
	var msg []byte
	for {
		h, err := ws.ReadHeader(w.br)
		if err != nil {
			return nil, fmt.Errorf("socketio: websocket read: %w", err)
		}
		if h.Length > w.maxPayload || int64(len(msg))+h.Length > w.maxPayload {
			return nil, fmt.Errorf("socketio: websocket message over %d bytes", w.maxPayload)
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(w.br, p); err != nil {
			return nil, fmt.Errorf("socketio: websocket read: %w", err)
		}
		if h.Masked {
			ws.Cipher(p, h.Mask, 0)
		}
		if h.OpCode.IsControl() {
			if err := w.control(h.OpCode, p); err != nil {
				return nil, err
			}
			continue
		}
		switch {
		case h.OpCode == ws.OpBinary:
			return nil, ErrBinary
		case h.Rsv != 0 || (h.OpCode != ws.OpText && h.OpCode != ws.OpContinuation):
			return nil, fmt.Errorf("socketio: websocket frame with opcode %d, reserved bits %d", h.OpCode, h.Rsv)
		case h.Fin && msg == nil:
			return [][]byte{p}, nil
		}
		msg = append(msg, p...)
		if h.Fin {
			return [][]byte{msg}, nil
		}
	}
}

// control handles a control frame: a ping is answered, a close ends the stream.
func (w *websocket) control(op ws.OpCode, p []byte) error {
	switch op {
	case ws.OpPing:
		return w.write(ws.OpPong, p)
	case ws.OpClose:
		code, reason := ws.ParseCloseFrameData(p)
		return fmt.Errorf("socketio: websocket closed by server: %d %s", code, reason)
	}
	return nil
}

func (w *websocket) send(_ context.Context, pkts ...[]byte) error {
	for _, p := range pkts {
		if err := w.write(ws.OpText, p); err != nil {
			return err
		}
	}
	return nil
}

// write sends one masked frame, as a client must, without changing p.
func (w *websocket) write(op ws.OpCode, p []byte) error {
	h := ws.Header{Fin: true, OpCode: op, Length: int64(len(p)), Masked: true, Mask: ws.NewMask()}
	b := bytes.NewBuffer(make([]byte, 0, ws.MaxHeaderSize+len(p)))
	_ = ws.WriteHeader(b, h) // a bytes.Buffer does not fail
	start := b.Len()
	b.Write(p)
	ws.Cipher(b.Bytes()[start:], h.Mask, 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return fmt.Errorf("socketio: websocket deadline: %w", err)
	}
	if _, err := w.conn.Write(b.Bytes()); err != nil {
		return fmt.Errorf("socketio: websocket write: %w", err)
	}
	return nil
}

func (w *websocket) close() { _ = w.conn.Close() }
