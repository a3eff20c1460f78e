package amqp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// connCounter relays TCP connections to a server and counts those open; cut closes them all.
type connCounter struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
	addr  string
}

func startCounter(t *testing.T, target string) *connCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c := &connCounter{conns: make(map[net.Conn]bool), addr: ln.Addr().String()}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			c.mu.Lock()
			c.conns[in] = true
			c.mu.Unlock()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
			go func() {
				<-done
				_ = in.Close()
				_ = out.Close()
				c.mu.Lock()
				delete(c.conns, in)
				c.mu.Unlock()
			}()
		}
	}()
	return c
}

func (c *connCounter) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

func (c *connCounter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for in := range c.conns {
		_ = in.Close()
	}
}

// TestOpenSharesOneConnection: Open gives the broker and its state store one connection to
// RabbitMQ, and both come back on one after it is cut. An Open that cannot connect is one
// error, with neither broker nor store.
func TestOpenSharesOneConnection(t *testing.T) {
	srv := brokertest.StartRabbit(t)
	c := startCounter(t, srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opened, err := amqp.Open(ctx, strings.Replace(srv.URL, srv.Addr, c.addr, 1), broker.Options{State: true, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	b, st := opened.Broker, opened.State
	if err := b.Run(ctx, brokertest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	use := func(i int) error {
		if _, err := st.Put(ctx, "room", fmt.Sprintf("r%d", i), []byte(`{}`), 0); err != nil {
			return fmt.Errorf("state: %w", err)
		}
		if _, err := b.Publish(ctx, hub.PublishRequest{Topic: "chat/shared", Data: json.RawMessage(`{}`)}); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		return nil
	}
	if err := use(1); err != nil {
		t.Fatal(err)
	}
	if n := c.open(); n != 1 {
		t.Fatalf("%d connections open to RabbitMQ, want 1 for the broker and its store", n)
	}
	c.cut()
	eventually.Nil(t, 30*time.Second, func() error { return use(2) })
	eventually.Nil(t, 10*time.Second, func() error {
		if n := c.open(); n != 1 {
			return fmt.Errorf("%d connections open after a cut, want 1", n)
		}
		return nil
	})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.Nil(t, 10*time.Second, func() error {
		if n := c.open(); n != 0 {
			return fmt.Errorf("%d connections open after Close", n)
		}
		return nil
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	failed, err := amqp.Open(ctx, "amqp://guest:guest@"+closed+"/", broker.Options{State: true})
	if err == nil || failed.Broker != nil || failed.State != nil {
		t.Fatalf("Open of a closed port: %+v, %v; want an error alone", failed, err)
	}
	t.Log(err)
}
