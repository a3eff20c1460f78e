package amqp

import (
	"log/slog"
	"net"
	"testing"
	"time"
)

// peer returns a connection to a real TCP server that accepts and then neither reads nor
// writes: a path that went silent.
func peer(t *testing.T) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	t.Cleanup(func() {
		ln.Close()
		if c := <-accepted; c != nil {
			c.Close()
		}
	})
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWatchClosesSilentConn(t *testing.T) {
	w := watch(peer(t), 50*time.Millisecond, slog.New(slog.DiscardHandler))
	defer w.Close()
	select {
	case <-w.dead:
	case <-time.After(time.Minute):
		t.Fatal("a connection silent for a minute was not found dead")
	}
	if _, err := w.Read(make([]byte, 1)); err == nil {
		t.Fatal("read from a connection found dead")
	}
}

func TestWatchFailsStalledWrite(t *testing.T) {
	w := watch(peer(t), 50*time.Millisecond, slog.New(slog.DiscardHandler))
	defer w.Close()
	w.timer.Stop() // only the write's deadline is under test
	buf := make([]byte, 1<<20)
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Write(buf); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case <-errc:
	case <-time.After(time.Minute):
		t.Fatal("writes to a peer that does not read still block after a minute")
	}
	select {
	case <-w.dead:
	default:
		t.Fatal("a stalled write did not mark the connection dead")
	}
}
