package peers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProbeStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := ProbeReady(context.Background(), addr); err != nil {
		t.Errorf("ProbeReady: %v", err)
	}
	if err := ProbeStatus(context.Background(), addr, "/health"); err == nil || !strings.Contains(err.Error(), "HTTP 503 not ready") {
		t.Errorf("ProbeStatus of a 503 = %v", err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := ProbeReady(context.Background(), "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		t.Error("ProbeReady of a port nobody listens on succeeded")
	}
}

// TestLaunch starts real processes: one that gets ready and is stopped with its whole process
// group, and one that exits before it is ready, whose first line of output is the error.
func TestLaunch(t *testing.T) {
	dir := t.TempDir() + "/server"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cleaned := false
	ready := func(context.Context, *Server) error { return nil }
	s, err := launch{kind: "rtlab", bin: "/bin/sh", args: []string{"-c", "sleep 60 & sleep 60"}, dir: dir, addr: "127.0.0.1:1",
		ready: ready, cleanup: []func(){func() { cleaned = true }}}.start(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pgid := s.cmd.Process.Pid
	start := time.Now()
	s.Stop()
	if time.Since(start) > 5*time.Second {
		t.Errorf("Stop took %s", time.Since(start))
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group still there after Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || !cleaned {
		t.Errorf("working directory left (%v) or cleanup not run (%v)", err, cleaned)
	}

	notReady := func(context.Context, *Server) error { return errors.New("not yet") }
	_, err = launch{kind: "centrifugo", bin: "/bin/sh", args: []string{"-c", "echo 'bad flag --x'; echo usage; exit 2"}, dir: t.TempDir(),
		ready: notReady}.start(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "Centrifugo exited before it was ready") || !strings.Contains(err.Error(), "bad flag --x") {
		t.Errorf("a server that exits: %v", err)
	}
}
