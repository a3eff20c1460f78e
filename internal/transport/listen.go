package transport

import (
	"bytes"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Listener wraps ln so that every TCP connection, plain HTTP requests' keep-alive ones
// included, counts toward the per-address cap: at most MaxConnsPerIP from one address (an
// IPv6 /64). All of them together are held below the process's open-file limit, and one
// address (unless unlimited) to half of what that leaves, so connections from one address
// cannot take the descriptors the others need. (MaxConns, which counts streaming connections, is admit's.) A
// connection over a cap is answered 429 or 503 at once and closed, before a request is read.
func (s *Server) Listener(ln net.Listener) net.Listener {
	total, perAddr := -1, s.lim.MaxConnsPerIP
	if files := openFileLimit(); files > 0 {
		total = max(16, files-64) // the store, the broker, logs
		if perAddr > total/2 {    // -1 (unlimited, a load test's) stays so
			perAddr = max(1, total/2)
		}
	}
	return &capListener{Listener: ln, s: s, total: total, perAddr: perAddr, count: make(map[string]int), refusing: make(chan struct{}, 64)}
}

// openFileLimit is the process's soft limit on open files, or 0 when unknown.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}

type capListener struct {
	net.Listener
	s              *Server
	total, perAddr int // -1: unlimited

	refusing chan struct{} // refusals being answered

	mu    sync.Mutex
	open  int            // guarded by mu
	count map[string]int // open connections per address key; guarded by mu
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := c.RemoteAddr().String()
		proxy := false // a --trusted-proxies peer carries many clients: only the file bound holds it
		if host, _, err := net.SplitHostPort(key); err == nil {
			key = addrKey(host)
			if a, err := netip.ParseAddr(host); err == nil {
				proxy = l.s.proxies.trusts(a.Unmap())
			}
		}
		l.mu.Lock()
		switch {
		case l.total >= 0 && l.open >= l.total:
			l.mu.Unlock()
			l.refuse(c, 503, "server_full", "at most "+strconv.Itoa(l.total)+" connections (the open-file limit)")
			continue
		case !proxy && l.perAddr >= 0 && l.count[key] >= l.perAddr:
			n := l.count[key]
			l.mu.Unlock()
			l.refuse(c, 429, "too_many_connections", "too many connections: "+strconv.Itoa(n)+" connections from "+key+", at most "+strconv.Itoa(l.perAddr)+" per address (--max-conns-per-ip)")
			continue
		}
		l.open++
		l.count[key]++
		l.mu.Unlock()
		return &capConn{Conn: c, l: l, key: key}, nil
	}
}

// refuse answers a connection over a cap with a short HTTP error and closes it. The answer
// follows the request's head (read for a second at most, in a goroutine of its own: HTTP
// clients take an answer before their request for a broken connection); past 64 refusals at
// once a connection is closed unanswered, so refusing costs neither descriptors nor goroutines
// without bound.
func (l *capListener) refuse(c net.Conn, status int, code, reason string) {
	if l.s.m != nil {
		l.s.m.Refused.WithLabelValues("http", code).Inc()
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		for n := 0; n < len(buf); {
			m, err := c.Read(buf[n:])
			n += m
			if err != nil || bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
				break
			}
		}
		body := `{"error":"` + code + `","reason":"` + reason + `"}`
		text := "Too Many Requests"
		if status == 503 {
			text = "Service Unavailable"
		}
		_, _ = c.Write([]byte("HTTP/1.1 " + strconv.Itoa(status) + " " + text + "\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	}()
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	l.open--
	if l.count[key]--; l.count[key] <= 0 {
		delete(l.count, key)
	}
	l.mu.Unlock()
}

// capConn gives its place back once, when closed (net/http and hijackers both close it).
type capConn struct {
	net.Conn
	l    *capListener
	key  string
	once sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() { c.l.release(c.key) })
	return c.Conn.Close()
}
