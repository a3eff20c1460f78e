package ops

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// outsideHost is a test host of the test's own: a network namespace joined to this one by a
// veth pair. Its connections reach a server listening on 0.0.0.0 from a non-loopback address,
// as another machine's would, while every packet stays inside this machine.
type outsideHost struct {
	ns       string // the namespace's name under /var/run/netns
	ServerIP string // this namespace's end of the pair: what the outside host dials
	ClientIP string // the outside host's own address, as the server sees it
}

// newOutsideHost makes the namespace and removes it when the test ends. It needs root and
// iproute2's ip; without them the test skips, unless RTLAB_REQUIRE_TOUR says it must run.
func newOutsideHost(t *testing.T) *outsideHost {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil || os.Geteuid() != 0 {
		msg := "a network namespace needs root and iproute2's ip (apt-get install iproute2)"
		if os.Getenv("RTLAB_REQUIRE_TOUR") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	id := os.Getpid() % 100000
	sub := id % 250
	h := &outsideHost{
		ns:       fmt.Sprintf("rtlab-ops-%d", id),
		ServerIP: fmt.Sprintf("10.254.%d.1", sub),
		ClientIP: fmt.Sprintf("10.254.%d.2", sub),
	}
	here, there := fmt.Sprintf("rtoh%d", id), fmt.Sprintf("rton%d", id)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command(ip, "netns", "del", h.ns).Run() // a namespace left by a killed run
	run("netns", "add", h.ns)
	t.Cleanup(func() {
		_ = exec.Command(ip, "netns", "del", h.ns).Run()
		_ = exec.Command(ip, "link", "del", here).Run()
	})
	run("link", "add", here, "type", "veth", "peer", "name", there)
	run("link", "set", there, "netns", h.ns)
	run("addr", "add", h.ServerIP+"/30", "dev", here)
	run("link", "set", here, "up")
	run("-n", h.ns, "addr", "add", h.ClientIP+"/30", "dev", there)
	run("-n", h.ns, "link", "set", there, "up")
	run("-n", h.ns, "link", "set", "lo", "up")
	return h
}

// Client is an HTTP client whose connections are made inside the outside host.
func (h *outsideHost) Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: h.dial, DisableKeepAlives: true}}
}

// dial makes the socket on a thread moved into the namespace: a socket belongs to the
// namespace it was made in for its whole life, so the thread can move back right after.
func (h *outsideHost) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // left locked if the move back fails: the thread then ends with this goroutine
		c, err, back := h.dialInside(ctx, network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

func (h *outsideHost) dialInside(ctx context.Context, network, addr string) (c net.Conn, err error, back bool) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("outside host: %w", err), true
	}
	defer self.Close()
	ns, err := os.Open("/var/run/netns/" + h.ns)
	if err != nil {
		return nil, fmt.Errorf("outside host: %w", err), true
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("outside host: setns: %w", err), true
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err = d.DialContext(ctx, network, addr)
	return c, err, unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil
}
