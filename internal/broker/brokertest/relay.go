package brokertest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay forwards TCP connections to a broker server and can cut them: a network partition
// between one node and the broker, while other nodes stay connected. The bytes are the real
// server's; the relay only copies them.
type Relay struct {
	// Addr is where nodes connect instead of the server (host:port on loopback).
	Addr string

	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{} // both ends of every relayed connection
}

// StartRelay listens on a free loopback port and relays each connection to target. It stops
// when the test ends.
func StartRelay(tb testing.TB, target string) *Relay {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("relay: %v", err)
	}
	r := &Relay{Addr: ln.Addr().String(), target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	go r.accept()
	tb.Cleanup(func() {
		_ = ln.Close()
		r.Cut()
	})
	return r
}

// Cut closes every relayed connection and refuses new ones (they are accepted and closed at
// once, as a broker that went away would), until Heal.
func (r *Relay) Cut() {
	r.mu.Lock()
	r.cut = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
}

// Heal lets connections through again.
func (r *Relay) Heal() {
	r.mu.Lock()
	r.cut = false
	r.mu.Unlock()
}

func (r *Relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // listener closed at the end of the test
		}
		go r.relay(c)
	}
}

func (r *Relay) relay(c net.Conn) {
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = c.Close()
		return
	}
	r.mu.Lock()
	if r.cut {
		r.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	r.conns[c], r.conns[s] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done // either side ending ends both
	_ = c.Close()
	_ = s.Close()
	<-done
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, s)
	r.mu.Unlock()
}
