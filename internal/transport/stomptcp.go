package transport

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/metrics"
	"github.com/rtlab/rtlab/internal/stomp"
)

// ServeSTOMP serves STOMP over plain TCP (or TLS, when ln is a TLS listener) on ln: the same
// sessions as /api/stomp, with the same limits, identities and resume, but frames on the
// stream as they are. It returns when ln is closed; the sessions end with Shutdown.
func (s *Server) ServeSTOMP(ln net.Listener) error {
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() { // out of descriptors and the like: back off
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("stomp listener: %w", err)
		}
		delay = 0
		s.acceptSTOMP(conn)
	}
}

// acceptSTOMP admits one TCP connection and starts its session. A refused one is told why in
// an ERROR frame, as STOMP clients expect.
func (s *Server) acceptSTOMP(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		// Without heart-beats a dead peer is found by TCP keep-alive probes.
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: s.lim.PingInterval, Interval: s.lim.PingInterval / 3, Count: 3})
	}
	host, _, err := net.SplitHostPort(conn.RemoteAddr().String())
	if err != nil {
		host = conn.RemoteAddr().String()
	}
	release, err := s.admitAddr(addrKey(host), "")
	if err != nil {
		code, _ := errorCode(err)
		s.m.Refused.WithLabelValues(metrics.STOMPTCP, code).Inc()
		f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{{Key: "message", Value: err.Error()}}}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(stomp.AppendFrame(nil, &f))
		_ = conn.Close()
		return
	}
	s.startBareSTOMP(conn, metrics.STOMPTCP, release)
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
