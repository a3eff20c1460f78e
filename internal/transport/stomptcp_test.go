package transport_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// tcpSTOMP is a STOMP client on a plain TCP connection.
type tcpSTOMP struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	p    *stomp.Parser
}

func listenSTOMP(t *testing.T, s *tt.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Transport.ServeSTOMP(ln) }()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

func dialTCPSTOMP(t *testing.T, addr string) *tcpSTOMP {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &tcpSTOMP{t: t, conn: conn, br: bufio.NewReader(conn), p: stomp.NewParser(stomp.Limits{MaxFrame: 1 << 20})}
}

func (c *tcpSTOMP) send(raw string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(raw)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// next returns the next frame, skipping heart-beats, or the error that ended the read.
func (c *tcpSTOMP) next(within time.Duration) (stomp.Frame, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(within))
	var buf [4096]byte
	for {
		if f, ok, err := c.p.Next(); err != nil || ok {
			return f, err
		}
		n, err := c.br.Read(buf[:])
		if err != nil {
			return stomp.Frame{}, err
		}
		c.p.Feed(buf[:n])
	}
}

func (c *tcpSTOMP) expect(cmd string) stomp.Frame {
	c.t.Helper()
	f, err := c.next(5 * time.Second)
	if err != nil || f.Command != cmd {
		c.t.Fatalf("want %s, got %s %+v %q (%v)", cmd, f.Command, f.Headers, f.Body, err)
	}
	return f
}

// TestSTOMPOverTCP: the sessions of /api/stomp on a TCP listener: CONNECT, SUBSCRIBE with
// since (a replay), SEND with a receipt, the MESSAGE to another client over WebSocket; bad
// input gets an ERROR and the end of the connection while a bystander is still served.
func TestSTOMPOverTCP(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	addr := listenSTOMP(t, s)
	s.Publish(t, "room", `{"n":1}`)
	s.Publish(t, "room", `{"n":2}`)

	c := dialTCPSTOMP(t, addr)
	c.send("CONNECT\naccept-version:1.2\nhost:x\nheart-beat:0,0\n\n\x00")
	if f := c.expect("CONNECTED"); tt.Header(f, "version") != "1.2" || tt.Header(f, "heart-beat") != "0,0" {
		t.Fatalf("CONNECTED %+v", f.Headers)
	} else if _, ok := f.Get("user-name"); ok {
		t.Fatalf("anonymous CONNECTED names a user: %+v", f.Headers)
	}
	c.send("SUBSCRIBE\nid:s1\ndestination:/topic/room\nsince:1\nreceipt:r1\n\n\x00")
	c.expect("RECEIPT")
	if m := c.expect("MESSAGE"); string(m.Body) != `{"n":2}` || tt.Header(m, "offset") != "2" {
		t.Fatalf("replay: %+v %q", m.Headers, m.Body)
	}
	ws := tt.DialSTOMP(t, s.WS("/api/stomp"))
	ws.Connect("")
	ws.Send("SUBSCRIBE\nid:w\ndestination:/topic/room\nreceipt:w\n\n\x00")
	ws.Expect("RECEIPT")

	c.send("SEND\ndestination:/topic/room\nreceipt:p\n\n{\"n\":3}\x00\n")
	var got int
	for got < 2 {
		f := c.expect2()
		switch f.Command {
		case "RECEIPT":
			if tt.Header(f, "offset") != "3" {
				t.Fatalf("receipt %+v", f.Headers)
			}
			got++
		case "MESSAGE":
			if string(f.Body) != `{"n":3}` {
				t.Fatalf("MESSAGE %q", f.Body)
			}
			// The time header's colons are escaped, so a strict reader gets the time back.
			if tm := tt.Header(f, "time"); !strings.Contains(tm, ":") {
				t.Fatalf("time %q", tm)
			}
			got++
		}
	}
	if m := ws.Expect("MESSAGE"); string(m.Body) != `{"n":3}` {
		t.Fatalf("WebSocket subscriber got %q", m.Body)
	}

	bad := dialTCPSTOMP(t, addr)
	bad.send("CONNECT\naccept-version:1.2\n\n\x00")
	bad.expect("CONNECTED")
	bad.send("FLY\n\n\x00")
	if f := bad.expect("ERROR"); tt.Header(f, "message") == "" {
		t.Fatalf("ERROR without message: %+v", f.Headers)
	}
	if _, err := bad.next(3 * time.Second); err == nil {
		t.Fatal("connection open after ERROR")
	}
	s.Publish(t, "room", `{"n":4}`)
	if m := c.expect("MESSAGE"); string(m.Body) != `{"n":4}` {
		t.Fatalf("bystander got %q", m.Body)
	}
}

func (c *tcpSTOMP) expect2() stomp.Frame {
	c.t.Helper()
	f, err := c.next(5 * time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// TestSTOMPHeartBeatGaps reads the gaps between the server's heart-beats, on WebSocket and on
// TCP: none is longer than the interval the server granted. A TCP client that negotiated 0,0
// and stays silent far past the heart-beat interval is not cut.
func TestSTOMPHeartBeatGaps(t *testing.T) {
	const hb = 2 * time.Second
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{StompHeartbeat: hb}})
	addr := listenSTOMP(t, s)
	silent := dialTCPSTOMP(t, addr)
	silent.send("CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\x00")
	silent.expect("CONNECTED")
	silent.send("SUBSCRIBE\nid:q\ndestination:/topic/quiet\nreceipt:q\n\n\x00")
	silent.expect("RECEIPT")

	check := func(name string, read func() error) {
		last := time.Now()
		for i := range 4 {
			if err := read(); err != nil {
				t.Fatalf("%s: heart-beat %d: %v", name, i, err)
			}
			now := time.Now()
			if gap := now.Sub(last); gap > hb {
				t.Errorf("%s: heart-beat %d came %v after the last, granted %v", name, i, gap, hb)
			}
			last = now
		}
	}
	ws := tt.DialSTOMP(t, s.WS("/api/stomp"))
	ws.Send("CONNECT\naccept-version:1.2\nheart-beat:0,1000\n\n\x00")
	if f := ws.Expect("CONNECTED"); tt.Header(f, "heart-beat") != "2000,0" {
		t.Fatalf("granted %q", tt.Header(f, "heart-beat"))
	}
	check("WebSocket", func() error {
		b, err := ws.Next(2 * hb)
		if err == nil && string(b) != "\n" {
			t.Fatalf("want a heart-beat, got %q", b)
		}
		return err
	})
	tc := dialTCPSTOMP(t, addr)
	tc.send("CONNECT\naccept-version:1.2\nheart-beat:0,2000\n\n\x00")
	tc.expect("CONNECTED")
	check("TCP", func() error {
		_ = tc.conn.SetReadDeadline(time.Now().Add(2 * hb))
		b, err := tc.br.ReadByte()
		if err == nil && b != '\n' {
			t.Fatalf("want a heart-beat, got %q", b)
		}
		return err
	})
	// Silent for four heart-beat intervals and more: still subscribed and served.
	s.Publish(t, "quiet", `{"still":"here"}`)
	if m := silent.expect("MESSAGE"); string(m.Body) != `{"still":"here"}` {
		t.Fatalf("silent client got %q", m.Body)
	}
}

// TestSTOMPOverTCPConnCap: the per-address cap holds on the TCP listener too: the connection
// over it gets an ERROR saying so and is closed; the ones admitted are still served.
func TestSTOMPOverTCPConnCap(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxConnsPerIP: 1}})
	addr := listenSTOMP(t, s)
	c := dialTCPSTOMP(t, addr)
	c.send("CONNECT\naccept-version:1.2\n\n\x00")
	c.expect("CONNECTED")
	c.send("SUBSCRIBE\nid:a\ndestination:/topic/cap\nreceipt:a\n\n\x00")
	c.expect("RECEIPT")
	over := dialTCPSTOMP(t, addr)
	if f := over.expect("ERROR"); !strings.Contains(tt.Header(f, "message"), "--max-conns-per-ip") {
		t.Fatalf("refusal %+v", f.Headers)
	}
	if _, err := over.next(3 * time.Second); err == nil {
		t.Fatal("refused connection left open")
	}
	s.Publish(t, "cap", `{"ok":true}`)
	if m := c.expect("MESSAGE"); string(m.Body) != `{"ok":true}` {
		t.Fatalf("bystander got %q", m.Body)
	}
}

// TestSTOMPOverTCPHeartBeatIn: a TCP client that promised heart-beats and goes silent is told
// so and cut; one that sends them stays.
func TestSTOMPOverTCPHeartBeatIn(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{StompHeartbeat: 200 * time.Millisecond}})
	addr := listenSTOMP(t, s)
	quiet := dialTCPSTOMP(t, addr)
	quiet.send("CONNECT\naccept-version:1.2\nheart-beat:200,0\n\n\x00")
	quiet.expect("CONNECTED")
	beating := dialTCPSTOMP(t, addr)
	beating.send("CONNECT\naccept-version:1.2\nheart-beat:200,0\n\n\x00")
	beating.expect("CONNECTED")
	beating.send("SUBSCRIBE\nid:b\ndestination:/topic/hb\nreceipt:b\n\n\x00")
	beating.expect("RECEIPT")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = beating.conn.Write([]byte{'\n'})
			}
		}
	}()
	if f := quiet.expect("ERROR"); !strings.Contains(tt.Header(f, "message"), "heartbeat_timeout") {
		t.Fatalf("silent client told %+v", f.Headers)
	}
	time.Sleep(time.Second) // twice the interval and more
	s.Publish(t, "hb", `{"alive":1}`)
	if m := beating.expect("MESSAGE"); string(m.Body) != `{"alive":1}` {
		t.Fatalf("beating client got %q", m.Body)
	}
}
