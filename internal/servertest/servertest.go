// Package servertest runs the rtlab binary as a real process for tests that must see it from
// outside: its memory from /proc, a SIGKILL and restart, limits that only a separate process
// shows honestly. It also offers a bystander, a well-behaved client that keeps publishing and
// receiving on the same server while a test misbehaves, so a test can show that a refusal did
// not cost anyone else a message.
package servertest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/procstat"
)

// Build builds ./cmd/rtlab into dir and returns the binary's path. $RTLAB_BIN names a prebuilt
// binary to use instead. Tests call it once from TestMain or share it through a sync.Once.
func Build(dir string) (string, error) {
	if bin := os.Getenv("RTLAB_BIN"); bin != "" {
		return bin, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "rtlab")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rtlab")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/rtlab: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory holding go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Proc is one rtlab serve process on a loopback address of its own. Restart keeps the address
// and the data directory, so clients find the restarted server where they left the old one.
type Proc struct {
	t    testing.TB
	bin  string
	args []string
	log  io.Writer // also gets the output, when set
	Addr string    // host:port it listens on
	// DataDir is its --data-dir; empty keeps all history in memory. A test may change it
	// before a Restart.
	DataDir string

	mu  sync.Mutex
	cmd *exec.Cmd
	out *bytes.Buffer // stdout and stderr of every run, kept for the failure message
}

// Options are how StartWith runs a server.
type Options struct {
	Args []string // flags after --addr, --data-dir and --shutdown-timeout
	// Memory runs it without a data directory: all history in memory, nothing durable.
	Memory bool
	// Log also gets everything the process prints, with a line where each run starts and ends
	// (a file kept beside a test's other artefacts, say).
	Log io.Writer
}

// Start runs `rtlab serve` with args on a data directory of its own and waits until /healthz
// answers. The process is stopped when the test ends; its output is logged if the test
// failed.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	return StartWith(t, bin, Options{Args: args})
}

// StartWith is Start with options.
func StartWith(t testing.TB, bin string, o Options) *Proc {
	t.Helper()
	p := &Proc{t: t, bin: bin, args: o.Args, log: o.Log, Addr: FreeAddr(t), out: new(bytes.Buffer)}
	if !o.Memory {
		p.DataDir = t.TempDir()
	}
	p.start()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("rtlab serve output:\n%s", p.Output())
		}
	})
	return p
}

func (p *Proc) start() {
	p.t.Helper()
	argv := append([]string{"serve", "--addr", p.Addr, "--data-dir=" + p.DataDir, "--shutdown-timeout", "2s"}, p.args...)
	cmd := exec.Command(p.bin, argv...)
	w := &lockedWriter{p: p}
	fmt.Fprintf(w, "---- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start rtlab: %v", err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	p.Await("/healthz", http.StatusOK, 15*time.Second)
}

type lockedWriter struct{ p *Proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if w.p.log != nil {
		_, _ = w.p.log.Write(b)
	}
	return w.p.out.Write(b)
}

// Output is everything the process has printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// URL is the server's base URL, e.g. http://127.0.0.1:40123.
func (p *Proc) URL() string { return "http://" + p.Addr }

// WS is the WebSocket URL of path, e.g. ws://127.0.0.1:40123/api/ws.
func (p *Proc) WS(path string) string { return "ws://" + p.Addr + path }

// PID is the running process's id.
func (p *Proc) PID() int {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		p.t.Fatalf("rtlab on %s is not running", p.Addr)
	}
	return p.cmd.Process.Pid
}

// Await waits until GET path answers want, failing the test after within.
func (p *Proc) Await(path string, want int, within time.Duration) {
	p.t.Helper()
	var last string
	if eventually.Within(within, func() bool {
		res, err := http.Get(p.URL() + path)
		if err != nil {
			last = err.Error()
			return false
		}
		res.Body.Close()
		last = res.Status
		return res.StatusCode == want
	}) {
		return
	}
	p.t.Fatalf("rtlab on %s did not answer %d to %s within %v (last: %s)\n%s", p.Addr, want, path, within, last, p.Output())
}

// RSS is the process's resident set size in bytes, from /proc/PID/status.
func (p *Proc) RSS() int64 {
	p.t.Helper()
	_, rss, err := procstat.Read(strconv.Itoa(p.PID()))
	if err != nil || rss == 0 {
		p.t.Fatalf("read memory of rtlab: rss %d, %v", rss, err)
	}
	return int64(rss)
}

// Restart stops the process (SIGKILL when crash, else SIGTERM) and starts it again with the
// same address, data directory and flags.
func (p *Proc) Restart(crash bool) { p.RestartAfter(crash, 0) }

// RestartAfter is Restart with the server down for down in between: an outage long enough for
// its clients to notice and back off.
func (p *Proc) RestartAfter(crash bool, down time.Duration) {
	p.t.Helper()
	p.signalAndWait(crash)
	time.Sleep(down) // the outage's length, not a wait for anything
	p.start()
}

// Kill ends the process with SIGKILL, as a crash would, and leaves it stopped.
func (p *Proc) Kill() { p.signalAndWait(true) }

// Stop ends the process with SIGTERM, then SIGKILL after 5 s. Stopping twice is fine.
func (p *Proc) Stop() { p.signalAndWait(false) }

func (p *Proc) signalAndWait(crash bool) {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	fmt.Fprintf(&lockedWriter{p: p}, "---- %v %s\n", sig, time.Now().Format(time.RFC3339Nano))
	stopCmd(cmd, sig, 5*time.Second)
}

// stopCmd sends cmd sig, kills it if it has not ended within grace, and waits for it.
func stopCmd(cmd *exec.Cmd, sig os.Signal, grace time.Duration) {
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// FreeAddr returns a loopback address nobody listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// NoUpgrades is a reverse proxy to target that answers 403 to every WebSocket upgrade, as
// some corporate proxies do, and passes everything else on, event streams unbuffered.
func NoUpgrades(target string) http.Handler {
	u, _ := url.Parse(target)
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	direct := p.Director
	p.Director = func(r *http.Request) {
		direct(r)
		// It adds no X-Forwarded-For: to the server under test (open dev mode, which serves
		// only requests straight from loopback) it is the client itself.
		r.Header["X-Forwarded-For"] = nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "WebSocket is not allowed through this proxy", http.StatusForbidden)
			return
		}
		p.ServeHTTP(w, r)
	})
}

// Main builds the rtlab binary into a temporary directory, sets *bin to it, runs the package's
// tests and exits; a TestMain of packages that start servers calls it.
func Main(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "rtlab-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin, err = Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// StartUntil starts cmd and returns once a line of its stderr contains marker (the server's
// "rtlab serving", say), with that line. It fails the test when the process exits first or
// takes longer than within; its output is logged when the test fails. The caller stops it
// (Interrupt).
func StartUntil(t testing.TB, cmd *exec.Cmd, marker string, within time.Duration) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		var seen []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				select {
				case found <- sc.Text(): // the first one; found holds one
				default:
				}
			}
			seen = append(seen, sc.Text())
		}
		close(found)
		if t.Failed() && len(seen) > 0 {
			t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), strings.Join(seen, "\n"))
		}
	}()
	select {
	case line, ok := <-found:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("%s exited before %q", strings.Join(cmd.Args, " "), marker)
		}
		return line
	case <-time.After(within):
		Interrupt(cmd)
		t.Fatalf("%s: no %q within %v", strings.Join(cmd.Args, " "), marker, within)
	}
	return ""
}

// Interrupt stops cmd as Ctrl-C would (SIGINT), kills it after 10 s, and waits for it.
func Interrupt(cmd *exec.Cmd) { stopCmd(cmd, os.Interrupt, 10*time.Second) }
