// Package peers starts the servers the load lab measures side by side, each run on fresh
// processes: rtlab itself, and its peers Centrifugo, RabbitMQ (Web-STOMP, a private node) and
// the Spring STOMP peer (built once from the sources in the binary). A Server is one such
// process: where clients dial it, its process id for sampling, and Stop.
package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// readyTimeout bounds how long a spawned server may take to answer /readyz: a node on a
// RabbitMQ broker replays the log first, for up to 60 s.
const readyTimeout = 70 * time.Second

// Server is a server process the lab started: rtlab, or a peer (Centrifugo, RabbitMQ, the
// Spring peer). Every run cell gets fresh ones, so memory per connection is measured from a
// clean baseline.
type Server struct {
	Kind    string // results.KindRTLab, KindCentrifugo, …
	Addr    string // 127.0.0.1:port the clients dial
	STOMP   string // rtlab: 127.0.0.1:port of its STOMP over TCP listener (--stomp-addr)
	Metrics string // host:port whose /metrics has go_goroutines; "" when the server has none
	PID     string
	cmd     *exec.Cmd
	dir     string // working directory, removed after the process ends
	exited  chan struct{}
	err     error // exit status; valid once exited is closed
	log     *tailBuffer
	cleanup []func()  // after the process has ended (a private epmd, say)
	l       launch    // how it was started, to start it again (Restarted)
	logw    io.Writer // where its output goes
}

// launch is how to start one server process and know it is ready.
type launch struct {
	kind  string
	bin   string
	args  []string
	env   []string // the whole environment; nil inherits the lab's
	dir   string   // working directory, made by the caller; removed when the server stops
	addr  string   // what clients dial
	ready func(ctx context.Context, s *Server) error
	// readyTimeout bounds the start; zero means readyTimeout.
	readyTimeout time.Duration
	cleanup      []func()
}

// start starts l's process in its own process group, its output going to logw (if not nil)
// and into a small tail for error messages, and waits until l.ready says it is ready.
func (l launch) start(ctx context.Context, logw io.Writer) (*Server, error) {
	cmd := exec.Command(l.bin, l.args...)
	cmd.Dir = l.dir
	cmd.Env = l.env
	// Own process group: a Ctrl-C in the terminal reaches only the bench, which then stops the
	// server itself after writing what it measured; stop signals the whole group, so a start
	// script's children go too. Pdeathsig kills the server if the bench dies without cleaning up.
	cmd.SysProcAttr = ownGroup()
	tail := &tailBuffer{max: 4096}
	var out io.Writer = tail
	if logw != nil {
		out = io.MultiWriter(tail, logw)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(l.dir)
		for _, f := range l.cleanup {
			f()
		}
		return nil, fmt.Errorf("starting %s: %w", l.bin, err)
	}
	s := &Server{Kind: l.kind, cmd: cmd, Addr: l.addr, dir: l.dir, PID: strconv.Itoa(cmd.Process.Pid),
		exited: make(chan struct{}), log: tail, cleanup: l.cleanup, l: l, logw: logw}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	timeout := l.readyTimeout
	if timeout == 0 {
		timeout = readyTimeout
	}
	if err := s.waitReady(ctx, timeout, l.ready); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// SockJSPath is where every rtlab server the lab starts serves SockJS (--sockjs-path).
const SockJSPath = "/sockjs"

// StartRTLab starts `bin serve --addr 127.0.0.1:<free port> --broker broker extra...` and
// waits until it answers GET /readyz with 200. Its output goes to logw (if not nil) and is
// kept in a small tail for error messages.
func StartRTLab(ctx context.Context, bin, broker string, extra []string, secret string, logw io.Writer) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	sport, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	stompAddr := "127.0.0.1:" + strconv.Itoa(sport)
	extra = append([]string{"--sockjs-path", SockJSPath}, extra...) // the sockjs transport's endpoint
	// The lab opens up to 10,000 connections from a few loopback addresses and publishes over
	// HTTP from them: the server's connection caps and HTTP publish rate, meant for clients
	// on the internet, are lifted (flags in extra come later and win).
	args := append([]string{"serve", "--addr", addr, "--broker", broker,
		"--max-conns", "-1", "--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--max-conns-per-user", "-1", "--http-pub-rate", "-1", "--user-msg-rate", "-1", "--stomp-addr", stompAddr}, extra...)
	// The server may keep files in its working directory (durable history under ./data): each
	// one gets an empty temporary directory, so it starts clean and leaves nothing behind.
	dir, err := os.MkdirTemp("", "rtlab-bench-server-")
	if err != nil {
		return nil, fmt.Errorf("creating the server's working directory: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	// The secret goes through the environment, not the command line (where ps shows it); an
	// RTLAB_AUTH_SECRET the bench inherited is not passed on, so the server's mode is the
	// bench's --auth-secret alone.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "RTLAB_AUTH_SECRET=") {
			env = append(env, e)
		}
	}
	if secret != "" {
		env = append(env, "RTLAB_AUTH_SECRET="+secret)
	}
	s, err := launch{kind: results.KindRTLab, bin: bin, args: args, env: env, dir: dir, addr: addr,
		ready: func(ctx context.Context, s *Server) error { return ProbeReady(ctx, s.Addr) }}.start(ctx, logw)
	if s != nil {
		s.Metrics, s.STOMP = s.Addr, stompAddr
	}
	return s, err
}

// AfterStop has f run once the server's process has ended (a log file to close, say).
func (s *Server) AfterStop(f func()) { s.cleanup = append(s.cleanup, f) }

// waitReady polls ready until it reports nil.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration, ready func(context.Context, *Server) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited before it was ready (%v): %s", results.KindLabel(s.Kind), s.err, s.log.firstLine())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if last = ready(ctx, s); last == nil {
			return nil
		}
	}
	return fmt.Errorf("%s at %s not ready after %s: %v; output: %s", results.KindLabel(s.Kind), s.Addr, timeout, last, s.log.firstLine())
}

// Stop sends SIGTERM to the server's process group, waits for a graceful exit and kills the
// group after 10 s.
func (s *Server) Stop() {
	defer func() {
		_ = os.RemoveAll(s.dir)
		for _, f := range s.cleanup {
			f()
		}
	}()
	pgid := s.cmd.Process.Pid
	select {
	case <-s.exited:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.exited
		}
	}
	// A start script may end before the process it started (RabbitMQ's Erlang VM): make sure
	// the group is gone.
	for i := 0; i < 100 && syscall.Kill(-pgid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// ProbeReady asks GET /readyz once and wants 200.
func ProbeReady(ctx context.Context, addr string) error { return ProbeStatus(ctx, addr, "/readyz") }

// ProbeStatus asks GET path of addr once, within 2 s, and wants 200.
func ProbeStatus(ctx context.Context, addr, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// FreePort returns a TCP port of 127.0.0.1 nobody listens on now.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// firstLine returns the first non-empty line kept: usually the reason a server refused to
// start, before its usage text.
func (t *tailBuffer) firstLine() string {
	for _, l := range strings.Split(t.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(no output)"
}
