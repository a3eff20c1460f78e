// Package faultproxy is a TCP proxy for tests that does to connections what real networks do:
// it black-holes traffic (nothing forwarded, no FIN, no RST, until the network is back),
// buffers streaming responses' bodies or whole responses as some corporate proxies do,
// refuses or hangs WebSocket upgrades, and resets connections. It works on real sockets
// between a real client and a real server, looking at the bytes only as much as a proxy must.
package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Mode is what the proxy does to traffic.
type Mode string

// The modes. Pass forwards everything. BlackHole holds every byte in both directions, of open
// connections and new ones, until the mode changes. The others apply to what passes while they
// are set: BufferBodies forwards a text/event-stream response's head and holds its body,
// BufferHeaders holds such a response whole, RefuseUpgrades answers a WebSocket upgrade with
// 403, HangUpgrades takes an upgrade request and never answers it. Down resets every new
// connection at once, as a host whose server is restarting does.
const (
	Pass           Mode = "pass"
	BlackHole      Mode = "blackhole"
	BufferBodies   Mode = "buffer-bodies"
	BufferHeaders  Mode = "buffer-headers"
	RefuseUpgrades Mode = "refuse-upgrades"
	HangUpgrades   Mode = "hang-upgrades"
	Down           Mode = "down"
)

// Modes are all the modes but Pass.
var Modes = []Mode{BlackHole, BufferBodies, BufferHeaders, RefuseUpgrades, HangUpgrades, Down}

// maxHeld bounds what one held connection keeps; beyond it the proxy drops bytes, as a
// buffering proxy that ran out of buffer would stall.
const maxHeld = 1 << 20

// Proxy forwards connections from its listener to one upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string
	raw      bool // any TCP protocol: the upstream is dialled at once, bytes never looked at

	mu     sync.Mutex
	cond   *sync.Cond // broadcast when mode changes or the proxy closes
	mode   Mode
	delay  time.Duration // added to every chunk forwarded while set (SetDelay)
	closed bool
	conns  map[net.Conn]struct{} // both ends of every open pair, for Reset and Close
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to upstream (host:port).
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, mode: Pass, conns: make(map[net.Conn]struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// StartTCP is Start for any TCP protocol, one whose server may speak first (NATS, AMQP,
// Redis): it connects upstream as soon as a client connects and never looks at the bytes, so
// only Pass, BlackHole, Down, Reset and delays apply.
func StartTCP(upstream string) (*Proxy, error) {
	p, err := Start(upstream)
	if err == nil {
		p.mu.Lock()
		p.raw = true
		p.mu.Unlock()
	}
	return p, err
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	p.mode = m
	p.cond.Broadcast()
	p.mu.Unlock()
}

// SetDelay holds every chunk forwarded from now on for d before it goes on, in both
// directions, as a slow link does (0 restores). Order and throughput are kept: chunks wait in
// a line, not behind each other.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// currentDelay is the delay in force.
func (p *Proxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Reset ends every open connection with a TCP RST and returns how many ends it reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST
		}
		_ = c.Close()
		n++
	}
	return n
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Reset()
	p.wg.Wait()
}

// Handler controls proxies by name over HTTP: POST {prefix}/{name}/fault/{mode} sets a mode
// (pass restores), POST {prefix}/{name}/reset resets every connection.
func Handler(proxies map[string]*Proxy) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{name}/fault/{mode}", func(w http.ResponseWriter, r *http.Request) {
		p, m := proxies[r.PathValue("name")], Mode(r.PathValue("mode"))
		if p == nil || (m != Pass && !validMode(m)) {
			http.Error(w, "no such proxy or mode", http.StatusNotFound)
			return
		}
		p.Set(m)
		fmt.Fprintf(w, "%s\n", m)
	})
	mux.HandleFunc("POST /{name}/reset", func(w http.ResponseWriter, r *http.Request) {
		p := proxies[r.PathValue("name")]
		if p == nil {
			http.Error(w, "no such proxy", http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, "%d\n", p.Reset())
	})
	return mux
}

func validMode(m Mode) bool {
	for _, v := range Modes {
		if v == m {
			return true
		}
	}
	return false
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// track registers c for Reset; false when the proxy is closing.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// gate waits while the network is a black hole and returns the mode then in force; false
// when the proxy closed.
func (p *Proxy) gate() (Mode, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == BlackHole && !p.closed {
		p.cond.Wait()
	}
	return p.mode, !p.closed
}

func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	if m, _ := p.gate(); m == Down {
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return
	}
	p.mu.Lock()
	raw := p.raw
	p.mu.Unlock()
	var head []byte
	mode := Pass
	if !raw {
		buf := make([]byte, 32<<10)
		n, err := client.Read(buf)
		m, ok := p.gate()
		if err != nil || !ok {
			return
		}
		head, mode = buf[:n], m
	}
	if bytes.Contains(bytes.ToLower(head), []byte("upgrade: websocket")) {
		switch mode {
		case RefuseUpgrades:
			_, _ = io.WriteString(client, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 18\r\nConnection: close\r\n\r\nupgrade refused!!\n")
			return
		case HangUpgrades:
			_, _ = io.Copy(io.Discard, client) // until the client gives up
			return
		}
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil || !p.track(up) {
		return
	}
	defer p.untrack(up)
	if len(head) > 0 {
		if _, err := up.Write(head); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() { p.pump(up, client, false); done <- struct{}{} }()
	go func() { p.pump(client, up, true); done <- struct{}{} }()
	<-done // one direction ended (and its FIN was passed on); the other ends by itself
	<-done
}

// pump copies src to dst through the gate; responses (server to client) are looked at for
// event streams to hold.
func (p *Proxy) pump(dst, src net.Conn, responses bool) {
	halfClosed := false
	defer func() {
		if !halfClosed { // a failed write or read ends both directions
			_ = dst.Close()
			_ = src.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	var held []byte
	holding := false
	line := &delayLine{}
	defer line.close()
	for {
		n, err := src.Read(buf)
		mode, ok := p.gate()
		if !ok {
			return
		}
		chunk := buf[:n]
		if responses && !holding && (mode == BufferBodies || mode == BufferHeaders) && bytes.Contains(chunk, []byte("text/event-stream")) {
			holding = true
			if mode == BufferBodies {
				if i := bytes.Index(chunk, []byte("\r\n\r\n")); i >= 0 {
					if _, werr := dst.Write(chunk[:i+4]); werr != nil {
						return
					}
					chunk = chunk[i+4:]
				}
			}
		}
		if holding {
			if len(held)+len(chunk) <= maxHeld {
				held = append(held, chunk...)
			}
			chunk = nil
			if err != nil {
				_, _ = dst.Write(held) // the response ended: a buffering proxy lets it go
				return
			}
			continue
		}
		if len(chunk) > 0 {
			if werr := line.write(dst, chunk, p.currentDelay()); werr != nil {
				return
			}
		}
		if err != nil {
			if line.flush() != nil {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite() // pass the FIN on, keep the other direction
				halfClosed = true
			}
			return
		}
	}
}

// delayLine writes chunks to their destination d after they were read, from a goroutine of its
// own started at the first delayed chunk, so that a delay adds latency without cutting
// throughput. Without a delay (and nothing in line) a chunk is written at once.
type delayLine struct {
	ch   chan delayed
	errc chan error // the writer's first error; closed when it ends
	err  error
}

type delayed struct {
	due  time.Time
	data []byte
}

func (l *delayLine) write(dst net.Conn, chunk []byte, d time.Duration) error {
	if l.err != nil {
		return l.err
	}
	if d <= 0 && l.ch == nil {
		_, err := dst.Write(chunk)
		return err
	}
	if l.ch == nil {
		l.ch, l.errc = make(chan delayed, 1024), make(chan error, 1)
		go l.run(dst)
	}
	select {
	case l.ch <- delayed{time.Now().Add(d), append([]byte(nil), chunk...)}:
		return nil
	case err := <-l.errc:
		l.err = err
		return err
	}
}

func (l *delayLine) run(dst net.Conn) {
	defer close(l.errc)
	for c := range l.ch {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			l.errc <- err
			for range l.ch { // drop the rest; the reader side stops at its next write
			}
			return
		}
	}
}

// flush waits until every chunk in line is written.
func (l *delayLine) flush() error {
	if l.ch == nil || l.err != nil {
		return l.err
	}
	close(l.ch)
	if err := <-l.errc; err != nil {
		l.err = err
	}
	l.ch = nil
	return l.err
}

func (l *delayLine) close() { _ = l.flush() }
