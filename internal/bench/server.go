package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds how long a spawned server may take to answer /readyz: a node on a
// RabbitMQ broker replays the log first, for up to 60 s.
const readyTimeout = 70 * time.Second

// server is an rtlab server process the bench started. Every run cell gets fresh ones, so
// memory per connection is measured from a clean baseline.
type server struct {
	cmd    *exec.Cmd
	addr   string // 127.0.0.1:port
	dir    string // working directory, removed after the process ends
	pid    string
	exited chan struct{}
	err    error // exit status; valid once exited is closed
	log    *tailBuffer
}

// startServer starts `bin serve --addr 127.0.0.1:<free port> --broker broker extra...` and
// waits until it answers GET /readyz with 200. Its output goes to logw (if not nil) and is
// kept in a small tail for error messages.
func startServer(ctx context.Context, bin, broker string, extra []string, secret string, logw io.Writer) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// The lab opens up to 10,000 connections from a few loopback addresses and publishes over
	// HTTP from them: the server's connection caps and HTTP publish rate, meant for clients
	// on the internet, are lifted (flags in extra come later and win).
	args := append([]string{"serve", "--addr", addr, "--broker", broker,
		"--max-conns", "-1", "--max-conns-per-ip", "-1", "--http-pub-rate", "-1"}, extra...)
	// The server may keep files in its working directory (durable history under ./data): each
	// one gets an empty temporary directory, so it starts clean and leaves nothing behind.
	dir, err := os.MkdirTemp("", "rtlab-bench-server-")
	if err != nil {
		return nil, fmt.Errorf("creating the server's working directory: %w", err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// The secret goes through the environment, not the command line (where ps shows it); an
	// RTLAB_AUTH_SECRET the bench inherited is not passed on, so the server's mode is the
	// bench's --auth-secret alone.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "RTLAB_AUTH_SECRET=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	if secret != "" {
		cmd.Env = append(cmd.Env, "RTLAB_AUTH_SECRET="+secret)
	}
	// Own process group: a Ctrl-C in the terminal reaches only the bench, which then stops the
	// server itself after writing what it measured. Pdeathsig kills the server if the bench
	// dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	tail := &tailBuffer{max: 4096}
	var out io.Writer = tail
	if logw != nil {
		out = io.MultiWriter(tail, logw)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s := &server{cmd: cmd, addr: addr, dir: dir, pid: strconv.Itoa(cmd.Process.Pid), exited: make(chan struct{}), log: tail}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls /readyz until it answers 200.
func (s *server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("server exited before it was ready (%v): %s", s.err, s.log.firstLine())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if last = probeReady(ctx, s.addr); last == nil {
			return nil
		}
	}
	return fmt.Errorf("server at %s not ready after %s: %v; output: %s", s.addr, readyTimeout, last, s.log.firstLine())
}

// stop sends SIGTERM, waits for a graceful exit and kills the process after 10 s.
func (s *server) stop() {
	defer os.RemoveAll(s.dir)
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// probeReady asks GET /readyz once and wants 200.
func probeReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	hc := newHTTPConn(conn, addr, false)
	defer hc.close()
	dl, _ := ctx.Deadline()
	req := appendRequest(nil, "GET", addr, []byte("/readyz"), "Connection: close\r\n", nil)
	err = hc.roundTrip(req, dl, func(status int, body []byte) error {
		if status != 200 {
			return &StatusError{Code: status, Body: string(bytes.TrimSpace(body[:min(len(body), 200)]))}
		}
		return nil
	})
	if errors.Is(err, errConnClose) {
		var se *StatusError
		if errors.As(err, &se) {
			return se
		}
		return nil
	}
	return err
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// serverBinary returns the executable to spawn.
func (o *Options) serverBinary() (string, error) {
	if o.ServerBinary != "" {
		return o.ServerBinary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the rtlab executable to start the server: %w", err)
	}
	return exe, nil
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
