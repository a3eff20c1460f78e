package transport

import (
	"bytes"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transports"
)

// door is the admission every listener of a Server shares (HTTP, the admin address, STOMP over
// TCP): every TCP connection counts toward the per-address cap, at most MaxConnsPerIP from one
// address (an IPv6 /64), and all of them together are held below the process's open-file
// limit, one address (unless unlimited) to half of what that leaves, so connections from one
// address cannot take the descriptors the others need, whichever port they come in by.
// (MaxConns, which counts streaming connections, is admit's.)
type door struct {
	total, perAddr int           // -1: unlimited
	refusing       chan struct{} // refusals being answered

	mu    sync.Mutex
	open  int            // guarded by mu
	count map[string]int // open connections per address key; guarded by mu
}

// fileReserve is what the fd budget leaves of the open-file limit: the store, the broker, logs,
// and the refusals being answered.
const fileReserve = 64

func newDoor(perAddr int) *door {
	total := -1
	if files := openFileLimit(); files > 0 {
		total = max(16, files-fileReserve)
		if perAddr > total/2 { // -1 (unlimited, a load test's) stays so
			perAddr = max(1, total/2)
		}
	}
	return &door{total: total, perAddr: perAddr, count: make(map[string]int), refusing: make(chan struct{}, fileReserve)}
}

// openFileLimit is the process's soft limit on open files, or 0 when unknown.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}

// Admission says how a listener's refusals are told and whom it lets in besides the shared caps.
type Admission struct {
	// STOMP answers refusals with a STOMP ERROR frame (STOMP over TCP) instead of HTTP.
	STOMP bool
	// LoopbackOnly refuses peers other than this machine's: open dev mode without --dev on a
	// listener with no route of its own to answer probes.
	LoopbackOnly bool
}

// Listener wraps the HTTP listener ln in the server's admission (Admit).
func (s *Server) Listener(ln net.Listener) net.Listener { return s.Admit(ln, Admission{}) }

// Admit wraps ln so that its connections pass the admission all listeners share (door): a
// connection over a cap, or refused by a, is answered 429, 503 or 403 (an ERROR frame for
// STOMP) at once and closed, before anything of it is handled.
func (s *Server) Admit(ln net.Listener, a Admission) net.Listener {
	return &capListener{Listener: ln, s: s, d: s.door, a: a}
}

type capListener struct {
	net.Listener
	s *Server
	d *door
	a Admission
}

// peerKey is what the caps key a connection on: its peer's address (an IPv6 /64), and whether
// that peer is a --trusted-proxies one, which carries many clients: only the file bound holds it.
func (s *Server) peerKey(c net.Conn) (key string, proxy bool, peer netip.Addr) {
	key = c.RemoteAddr().String()
	if ap, err := netip.ParseAddrPort(key); err == nil {
		peer = ap.Addr().Unmap()
		return addrKey(peer.String()), s.proxies.trusts(peer), peer
	}
	return key, false, peer
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, proxy, peer := l.s.peerKey(c)
		if l.a.LoopbackOnly && !peer.IsLoopback() {
			l.refuse(c, 403, "forbidden", "open dev mode serves only clients on this machine; configure auth (--auth-secret, --auth-public-key or --auth-jwks), or start the server with --dev to let other machines in")
			continue
		}
		d := l.d
		d.mu.Lock()
		switch {
		case d.total >= 0 && d.open >= d.total:
			d.mu.Unlock()
			l.refuse(c, 503, "server_full", "at most "+strconv.Itoa(d.total)+" connections (the open-file limit less "+strconv.Itoa(fileReserve)+")")
			continue
		case !proxy && d.perAddr >= 0 && d.count[key] >= d.perAddr:
			n := d.count[key]
			d.mu.Unlock()
			l.refuse(c, 429, "too_many_connections", "too many connections: "+strconv.Itoa(n)+" connections from "+key+", at most "+strconv.Itoa(d.perAddr)+" per address (--max-conns-per-ip)")
			continue
		}
		d.open++
		d.count[key]++
		d.mu.Unlock()
		return &capConn{Conn: c, d: d, key: key, proxy: proxy}, nil
	}
}

// refuse answers a connection over a cap with a short error and closes it. The answer follows
// the request's head or the STOMP frame (read for a second at most, in a goroutine of its own:
// clients take an answer before their request for a broken connection, and unread input would
// turn the close into a reset that eats the answer); past fileReserve refusals at once a
// connection is closed unanswered, so refusing costs neither descriptors nor goroutines without
// bound.
func (l *capListener) refuse(c net.Conn, status int, code, reason string) {
	if l.s.m != nil {
		l.s.m.Refused.WithLabelValues(l.transport(), code).Inc()
	}
	select {
	case l.d.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.d.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		end := []byte("\r\n\r\n")
		if l.a.STOMP {
			end = []byte{0}
		}
		buf := make([]byte, 4096)
		for n := 0; n < len(buf); {
			m, err := c.Read(buf[n:])
			n += m
			if err != nil || bytes.Contains(buf[:n], end) {
				break
			}
		}
		_, _ = c.Write(l.refusal(status, code, reason))
	}()
}

func (l *capListener) transport() string {
	if l.a.STOMP {
		return transports.STOMPTCP
	}
	return "http"
}

// refusal is the answer to a refused connection: an HTTP error with a JSON reason, or a STOMP
// ERROR frame.
func (l *capListener) refusal(status int, code, reason string) []byte {
	if l.a.STOMP {
		f := stomp.Frame{Command: stomp.CmdError, Headers: []stomp.Header{{Key: "message", Value: code + ": " + reason}}}
		return stomp.AppendFrame(nil, &f)
	}
	body := `{"error":"` + code + `","reason":"` + reason + `"}`
	text := map[int]string{403: "Forbidden", 429: "Too Many Requests", 503: "Service Unavailable"}[status]
	retry := "Retry-After: 5\r\n"
	if status == 403 {
		retry = ""
	}
	return []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + text + "\r\nContent-Type: application/json\r\n" + retry + "Connection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

func (d *door) release(key string) {
	d.mu.Lock()
	d.open--
	if d.count[key]--; d.count[key] <= 0 {
		delete(d.count, key)
	}
	d.mu.Unlock()
}

// capConn gives its place back once, when closed (net/http and hijackers both close it).
type capConn struct {
	net.Conn
	d     *door
	key   string
	proxy bool // the peer is a --trusted-proxies one
	once  sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() { c.d.release(c.key) })
	return c.Conn.Close()
}

// tcpConn is the TCP connection under c's wrappers, or nil.
func tcpConn(c net.Conn) *net.TCPConn {
	for {
		switch x := c.(type) {
		case *net.TCPConn:
			return x
		case *capConn:
			c = x.Conn
		case *prefixConn:
			c = x.Conn
		case *tls.Conn:
			c = x.NetConn()
		default:
			return nil
		}
	}
}
