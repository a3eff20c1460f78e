package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// serveOn starts rtlab serve on 0.0.0.0 with args, returns its port and the first line that
// contains marker.
func serveOn(t *testing.T, marker string, args ...string) (port, line string) {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	ln.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "0.0.0.0:" + port, "--data-dir", ""}, args...)...)
	line = servertest.StartUntil(t, cmd, marker, 30*time.Second)
	t.Cleanup(func() { servertest.Interrupt(cmd) })
	return port, line
}

// from is an HTTP client whose connections come from the address ip.
func from(ip string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// call makes one request and returns its status and body.
func call(t *testing.T, c *http.Client, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"user":"mallory"}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestProtectedByDefault starts the server on every address of the machine without auth: a
// client from another address is refused with a reason naming --dev (its login too), this
// machine's are served; with --dev the other address is served, and said loudly at start.
// /metrics and /lab answer only requests straight from loopback either way.
func TestProtectedByDefault(t *testing.T) {
	host := newOutsideHost(t)
	out := host.ServerIP
	local, remote := from("127.0.0.1"), host.Client(10*time.Second)
	t.Run("without --dev", func(t *testing.T) {
		port, warn := serveOn(t, "only requests straight from this machine are served")
		if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "--dev") {
			t.Errorf("start line %q: want a warning naming --dev", warn)
		}
		url := "http://" + out + ":" + port
		code, body := call(t, remote, "POST", url+"/api/login", nil)
		var e struct{ Error, Reason string }
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusForbidden || e.Error != "forbidden" || !strings.Contains(e.Reason, "--dev") {
			t.Errorf("login from %s: %d %s; want 403 with a reason naming --dev", out, code, body)
		}
		for _, path := range []string{"/api/ws", "/api/sse?topic=t", "/api/poll/t"} {
			if code, body := call(t, remote, "GET", url+path, nil); code != http.StatusForbidden {
				t.Errorf("GET %s from %s: %d %s; want 403", path, out, code, body)
			}
		}
		if code, _ := call(t, remote, "GET", url+"/healthz", nil); code != http.StatusOK {
			t.Errorf("/healthz from %s: %d; want 200 (probes are answered)", out, code)
		}
		// This machine's clients, even through the address other machines would use.
		if code, body := call(t, local, "POST", "http://127.0.0.1:"+port+"/api/login", nil); code != http.StatusOK {
			t.Errorf("login from loopback: %d %s", code, body)
		}
		checkAdmin(t, local, remote, url, port)
	})
	t.Run("with --dev", func(t *testing.T) {
		port, warn := serveOn(t, "OPEN DEV MODE", "--dev")
		if !strings.Contains(warn, "level=WARN") {
			t.Errorf("start line %q: want a warning", warn)
		}
		url := "http://" + out + ":" + port
		if code, body := call(t, remote, "POST", url+"/api/login", nil); code != http.StatusOK || !strings.Contains(body, "token") {
			t.Errorf("login from %s with --dev: %d %s; want 200 and a token", out, code, body)
		}
		checkAdmin(t, local, remote, url, port)
	})
	t.Run("--dev with auth", func(t *testing.T) {
		cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", "", "--dev", "--auth-secret", "0123456789abcdef0123")
		b, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(string(b), "--dev") {
			t.Errorf("--dev with --auth-secret: exit %d, %s; want exit 2 naming --dev", code, b)
		}
	})
}

// checkAdmin: /metrics and /lab answer a loopback client, not another address, nor a proxy on
// loopback relaying a request (X-Forwarded-For).
func checkAdmin(t *testing.T, local, remote *http.Client, url, port string) {
	t.Helper()
	for _, path := range []string{"/metrics", "/lab"} {
		if code, _ := call(t, local, "GET", "http://127.0.0.1:"+port+path, nil); code != http.StatusOK {
			t.Errorf("GET %s from loopback: %d, want 200", path, code)
		}
		if code, _ := call(t, local, "GET", "http://127.0.0.1:"+port+path, map[string]string{"X-Forwarded-For": "198.51.100.7"}); code != http.StatusForbidden {
			t.Errorf("GET %s from loopback through a proxy: %d, want 403", path, code)
		}
		if code, _ := call(t, remote, "GET", url+path, nil); code != http.StatusForbidden {
			t.Errorf("GET %s from another address: %d, want 403", path, code)
		}
	}
}

// TestTrustedProxies: the per-address connection limit counts the address X-Forwarded-For
// gives when the peer is a --trusted-proxies one, and the peer's own address otherwise, so a
// client cannot escape the limit by claiming addresses.
func TestTrustedProxies(t *testing.T) {
	const proxyIP, out = "127.0.0.2", "127.0.0.1" // a proxy on this machine, and a client that is not one
	port, _ := serveOn(t, "rtlab serving", "--dev", "--trusted-proxies", proxyIP+"/32", "--max-conns-per-ip", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// open keeps an SSE stream open and returns its status and, when refused, the body.
	open := func(c *http.Client, host, claimed string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+host+":"+port+"/api/sse?topic=t", nil)
		req.Header.Set("X-Forwarded-For", claimed)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			t.Cleanup(func() { resp.Body.Close() })
			return resp.StatusCode, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stream := func() *http.Client { // no timeout: streams stay open until the test ends
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxyIP)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	}
	proxy := stream()
	if code, body := open(proxy, "127.0.0.1", "198.51.100.1"); code != http.StatusOK {
		t.Fatalf("first client through the trusted proxy: %d %s", code, body)
	}
	if code, body := open(proxy, "127.0.0.1", "198.51.100.2"); code != http.StatusOK {
		t.Fatalf("second client through the trusted proxy: %d %s; want its own limit", code, body)
	}
	if code, body := open(proxy, "127.0.0.1", "198.51.100.1"); code != http.StatusTooManyRequests || !strings.Contains(body, "198.51.100.1") {
		t.Errorf("the first client again: %d %s; want 429 naming 198.51.100.1", code, body)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(out)}}
	untrusted := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	if code, body := open(untrusted, out, "203.0.113.1"); code != http.StatusOK {
		t.Fatalf("a client from %s: %d %s", out, code, body)
	}
	if code, body := open(untrusted, out, "203.0.113.2"); code != http.StatusTooManyRequests || !strings.Contains(body, out) {
		t.Errorf("the same client claiming another address: %d %s; want 429 naming %s (its header is not believed)", code, body, out)
	}
}

// freePort is a port free on every address of the machine.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestProtectedEveryDoor: in open dev mode HTTP refused another machine with 403, while STOMP
// over TCP (--stomp-addr) served it anonymously: it read rooms and published as anyone. Every
// listener now refuses other machines without --dev (STOMP with an ERROR frame naming --dev,
// the admin address with 403) and serves this machine's clients.
func TestProtectedEveryDoor(t *testing.T) {
	host := newOutsideHost(t)
	stompPort, adminPort := freePort(t), freePort(t)
	port, _ := serveOn(t, "rtlab STOMP over TCP", "--stomp-addr", "0.0.0.0:"+stompPort, "--admin-addr", "0.0.0.0:"+adminPort)
	remote, local := host.Client(10*time.Second), from("127.0.0.1")
	if code, body := call(t, remote, "POST", "http://"+host.ServerIP+":"+port+"/api/login", nil); code != http.StatusForbidden {
		t.Errorf("login from %s: %d %s; want 403", host.ClientIP, code, body)
	}
	if code, body := call(t, remote, "GET", "http://"+host.ServerIP+":"+adminPort+"/metrics", nil); code != http.StatusForbidden || !strings.Contains(body, "--dev") {
		t.Errorf("admin /metrics from %s: %d %s; want 403 naming --dev", host.ClientIP, code, body)
	}
	if code, _ := call(t, local, "GET", "http://127.0.0.1:"+adminPort+"/metrics", nil); code != http.StatusOK {
		t.Errorf("admin /metrics from loopback: %d; want 200", code)
	}
	stompConnect := func(dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := dial(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "CONNECT\naccept-version:1.2\nhost:rtlab\n\n\x00")
		f, _ := bufio.NewReader(c).ReadString(0)
		return strings.TrimLeft(f, "\r\n")
	}
	if f := stompConnect(host.dial, host.ServerIP+":"+stompPort); !strings.HasPrefix(f, "ERROR\n") || !strings.Contains(f, "--dev") {
		t.Errorf("STOMP over TCP from %s: %q; want an ERROR naming --dev", host.ClientIP, f)
	}
	var d net.Dialer
	if f := stompConnect(d.DialContext, "127.0.0.1:"+stompPort); !strings.HasPrefix(f, "CONNECTED\n") {
		t.Errorf("STOMP over TCP from loopback: %q; want CONNECTED", f)
	}
}
