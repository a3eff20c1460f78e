package transport

import (
	"bufio"
	"context"
	"errors"
	"net"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transports"
)

// ServeSTOMP serves STOMP over plain TCP (or TLS, when ln is a TLS listener) on ln: the same
// sessions as /api/stomp, with the same limits, identities and resume, but frames on the
// stream as they are. ln should be wrapped by Admit, as every listener is. It returns when ln
// is closed; the sessions end with Shutdown.
func (s *Server) ServeSTOMP(ln net.Listener) error {
	var b acceptBackoff
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors (EMFILE, ENFILE), a connection reset before it was
			// accepted and the like pass: back off and try again, as net/http does. The
			// listener never stops for good.
			b.wait(s, ln, err)
			continue
		}
		b.reset(s, ln)
		s.acceptSTOMP(conn)
	}
}

// acceptBackoff is the wait between failed accepts: doubling from 5 ms to 1 s, logged once
// per burst of failures (and once more when accepting works again).
type acceptBackoff struct {
	delay  time.Duration
	failed int
}

func (b *acceptBackoff) wait(s *Server, ln net.Listener, err error) {
	if b.failed == 0 {
		s.log.Warn("STOMP over TCP: accept failed; retrying with back-off", "addr", ln.Addr().String(), "err", err)
	}
	b.failed++
	b.delay = min(max(2*b.delay, 5*time.Millisecond), time.Second)
	time.Sleep(b.delay)
}

func (b *acceptBackoff) reset(s *Server, ln net.Listener) {
	if b.failed > 0 {
		s.log.Info("STOMP over TCP: accepting again", "addr", ln.Addr().String(), "failed_accepts", b.failed)
	}
	b.delay, b.failed = 0, 0
}

// acceptSTOMP admits one TCP connection and starts its session. A refused one is told why in
// an ERROR frame, as STOMP clients expect.
func (s *Server) acceptSTOMP(conn net.Conn) {
	if tc := tcpConn(conn); tc != nil {
		// Without heart-beats a dead peer is found by TCP keep-alive probes.
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: s.lim.PingInterval, Interval: s.lim.PingInterval / 3, Count: 3})
	}
	key, proxy, _ := s.peerKey(conn)
	if proxy {
		key = "" // a trusted proxy's clients share its address: only --max-conns holds them
	}
	release, err := s.admitAddr(key, "")
	if err != nil {
		code, _ := errorCode(err)
		s.m.Refused.WithLabelValues(transports.STOMPTCP, code).Inc()
		f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{{Key: "message", Value: err.Error()}}}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(stomp.AppendFrame(nil, &f))
		_ = conn.Close()
		return
	}
	s.startBareSTOMP(conn, transports.STOMPTCP, release)
}

// beatsPerOp is how many heart-beats (bare EOLs between frames) cost one op beyond the first.
const beatsPerOp = 1024

// paceBeats charges the heart-beats the parser skipped since it counted seen against the op
// rate: a read holding any costs one op, and one more per beatsPerOp, so that a flood of EOLs
// (frames to no one, but bytes to read and scan) is read no faster than --op-rate allows.
func (c *stompConn) paceBeats(ctx context.Context, seen uint64) bool {
	n := c.parser.HeartBeats() - seen
	if n == 0 {
		return true
	}
	for i := uint64(0); i <= n/beatsPerOp; i++ {
		if !c.ops.pace(ctx, c.w.conn) {
			return false
		}
	}
	return true
}

// streamReader hands a byte stream to the STOMP parser in the chunks it arrives in; the
// parser finds the frames. It is STOMP over TCP's messageReader.
type streamReader struct {
	br   *bufio.Reader
	keep *bool // the connection publishes: wait keeping the stack (see wsReader.readMessage)
}

func (r *streamReader) readMessage() (ws.OpCode, []byte, error) {
	var err error
	if *r.keep {
		err = r.waitKeepingStack()
	} else {
		_, err = r.br.Peek(1)
	}
	if err != nil {
		return 0, nil, err
	}
	b, _ := r.br.Peek(r.br.Buffered())
	_, _ = r.br.Discard(len(b)) // the parser copies what it keeps before the next read
	return ws.OpText, b, nil
}

//go:noinline
func (r *streamReader) waitKeepingStack() error {
	var pad [stackPad]byte
	_, err := r.br.Peek(1)
	touchPad(pad[:])
	return err
}
