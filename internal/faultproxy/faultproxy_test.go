package faultproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// echo is an upstream that answers each line with the same line.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T, upstream string) *Proxy {
	p, err := Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestBlackHoleHoldsThenDelivers(t *testing.T) {
	p := start(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	_, _ = io.WriteString(c, "one\n")
	if l, _ := r.ReadString('\n'); l != "one\n" {
		t.Fatalf("before: %q", l)
	}
	p.Set(BlackHole)
	_, _ = io.WriteString(c, "two\n")
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("a black hole let %q through", l)
	}
	p.Set(Pass)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := r.ReadString('\n'); l != "two\n" {
		t.Fatalf("after the black hole: %q, %v", l, err)
	}
}

func TestUpgradesRefusedAndReset(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p := start(t, strings.TrimPrefix(srv.URL, "http://"))
	p.Set(RefuseUpgrades)
	req, _ := http.NewRequest("GET", "http://"+p.Addr()+"/", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	res.Body.Close()
	p.Set(Pass)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(c)
	if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, "HTTP/1.1 200") {
		t.Fatalf("plain request: %q", l)
	}
	if n := p.Reset(); n < 2 {
		t.Fatalf("reset %d ends, want the open pair", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(r); err == nil {
		t.Fatal("the connection ended cleanly after a reset, want an error")
	}
}

// TestDelayHoldsEveryChunk checks that a delay holds data at least that long and keeps order;
// it asserts only the lower bound, which no machine speed can break.
func TestDelayHoldsEveryChunk(t *testing.T) {
	p := start(t, echo(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	_, _ = io.WriteString(c, "zero\n") // the connection's first bytes go straight on
	if l, _ := r.ReadString('\n'); l != "zero\n" {
		t.Fatalf("before: %q", l)
	}
	p.SetDelay(100 * time.Millisecond)
	began := time.Now()
	for _, l := range []string{"one\n", "two\n", "three\n"} {
		_, _ = io.WriteString(c, l)
	}
	var got []string
	for range 3 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if took := time.Since(began); took < 200*time.Millisecond { // 100 ms each way
		t.Errorf("echoed after %s through a 100 ms delay each way", took)
	}
	if strings.Join(got, "") != "one\ntwo\nthree\n" {
		t.Errorf("order: %q", got)
	}
	p.SetDelay(0)
	_, _ = io.WriteString(c, "four\n")
	if l, _ := r.ReadString('\n'); l != "four\n" {
		t.Errorf("after the delay: %q", l)
	}
}

// TestTCPServerSpeaksFirst checks that StartTCP carries a protocol whose server speaks first
// (NATS's INFO, say), and black-holes it like the HTTP proxy.
func TestTCPServerSpeaksFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.WriteString(c, "INFO {}\n"); _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := StartTCP(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if l, err := r.ReadString('\n'); l != "INFO {}\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	p.Set(BlackHole)
	_, _ = io.WriteString(c, "PING\n")
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("a black hole let %q through", l)
	}
	p.Set(Pass)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if l, err := r.ReadString('\n'); l != "PING\n" {
		t.Fatalf("after the black hole: %q, %v", l, err)
	}
}
