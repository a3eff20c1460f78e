package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// allowUserPublish takes n of the publish tokens the connection's user shares with all its
// WebSocket and STOMP connections (--user-msg-rate), or when anonymous those of its address:
// without it, one tenant's connections together publish --msg-rate times their number. An
// anonymous connection of no known address (behind a trusted proxy) has its own rate only.
// It runs on the reader goroutine, which owns ident.
func (c *conn) allowUserPublish(n int) error {
	if c.s.lim.UserMsgRate < 0 {
		return nil // no key to build: a load test's publishes cost nothing here
	}
	key := "u:" + c.ident.User
	if c.ident.User == "" {
		if c.addr == "" {
			return nil
		}
		key = "a:" + c.addr
	}
	if ok, _ := c.s.userPubRate.allowN(key, time.Now(), n); ok {
		return nil
	}
	who := "user " + c.ident.User // named only in a refusal: the publish path builds one string, the key
	if c.ident.User == "" {
		who = "address " + c.addr
	}
	return fmt.Errorf("%w: at most %g publishes per second per %s, across its connections (--user-msg-rate)", ErrRateLimited, c.s.lim.UserMsgRate, who)
}

// allowSend takes a SEND's tokens of the connection's rate (--msg-rate) and of its user's
// (--user-msg-rate); paid says a committed transaction took them already.
func (c *stompConn) allowSend(paid bool) error {
	if paid {
		return nil
	}
	if !c.rl.allow(time.Now()) {
		return c.s.errRateLimited()
	}
	return c.allowUserPublish(1)
}

// bareAddr is the client address, as limits key it, of a STOMP session whose frames come bare
// on conn: SockJS carries its request's, STOMP over TCP its peer's, unknown behind a trusted
// proxy.
func (s *Server) bareAddr(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(sockjsAddr); ok {
		return addrKey(string(a))
	}
	key, proxy, _ := s.peerKey(conn)
	if proxy {
		return ""
	}
	return key
}

// paceQuantum is how often at most a connection sending faster than its op rate is woken: it
// then handles the messages whose tokens refilled meanwhile back to back, so their answers
// leave in one write and the flood costs a wake-up and a syscall per quantum, not per message.
// Meanwhile its socket is not read, and TCP's back-pressure slows the sender.
const paceQuantum = 50 * time.Millisecond

// slowedReadBuffer is the receive buffer of a connection found sending faster than its op
// rate. The kernel grows a loopback or fast link's buffer to tens of MiB, which a flood of
// small messages takes seconds of its sender's CPU to fill, all of it parked in the server's
// kernel memory; a small one stops the sender at once, and still carries a client that only
// bursts now and then.
const slowedReadBuffer = 64 << 10

// pace takes a token for a message read from conn, waiting for one when there is none (see
// wait). The first wait shrinks conn's receive buffer, so that TCP's back-pressure reaches a
// flooding sender within a few messages.
func (r *rateLimiter) pace(ctx context.Context, conn net.Conn) bool {
	if r.allow(time.Now()) {
		return true
	}
	if !r.slowed {
		r.slowed = true
		setReadBuffer(conn, slowedReadBuffer)
	}
	return r.wait(ctx)
}

// setReadBuffer sets the receive buffer of the TCP connection under c's wrappers.
func setReadBuffer(c net.Conn, n int) {
	if tc := tcpConn(c); tc != nil {
		_ = tc.SetReadBuffer(n)
	}
}

// refill is how long until the bucket holds a quantum's worth of tokens (at least one, at most
// the burst).
func (r *rateLimiter) refill() time.Duration {
	need := min(r.burst, max(1, r.rate*paceQuantum.Seconds()))
	return time.Duration((need - r.tokens) / r.rate * float64(time.Second))
}

// pongPaced answers a WebSocket ping frame once the op rate allows (a control frame is a
// message like any other: a ping flood is read no faster than --op-rate). It runs on the
// reader goroutine, which owns ops; the wait is at most a quantum, so it needs no context.
func (c *wsConn) pongPaced(payload []byte) {
	c.ops.pace(context.Background(), c.w.conn)
	c.w.sendPong(payload)
}

// pongPaced is wsConn.pongPaced for STOMP over WebSocket.
func (c *stompConn) pongPaced(payload []byte) {
	c.ops.pace(context.Background(), c.w.conn)
	c.w.sendPong(payload)
}

// pongMessage is the answer to {"op":"ping"}: {"id":ID,"op":"pong"} as a WebSocket text
// frame, the bytes json.Marshal writes for that map, without its reflection (pings are what
// an op flood sends most).
func pongMessage(id json.RawMessage) []byte {
	b := make([]byte, 0, 32+len(id))
	b = append(b, `{"id":`...)
	if len(id) == 0 {
		b = append(b, "null"...)
	} else {
		var compact, escaped bytes.Buffer
		if json.Compact(&compact, id) != nil {
			return nil
		}
		json.HTMLEscape(&escaped, compact.Bytes())
		b = append(b, escaped.Bytes()...)
	}
	b = append(b, `,"op":"pong"}`...)
	return appendWSText(make([]byte, 0, len(b)+4), b)
}
