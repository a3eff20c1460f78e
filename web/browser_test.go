package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rtlab/rtlab/web"
)

// TestBrowser drives the page in two headless Chromium browsers over every transport against
// the real binary (test/browser/run.mjs), restarting the server under them once per transport.
// It needs node, test/browser/node_modules (npm ci there) and Debian's chromium; without them
// it skips, unless RTLAB_REQUIRE_BROWSER=1 (CI), where it fails. Screenshots go to
// $RTLAB_BROWSER_OUT when set, else to a temporary folder that is removed afterwards.
// $RTLAB_BIN names a prebuilt rtlab to test instead of building ./cmd/rtlab.
func TestBrowser(t *testing.T) {
	required := os.Getenv("RTLAB_REQUIRE_BROWSER") == "1"
	missing := func(what string) {
		t.Helper()
		if required {
			t.Fatalf("RTLAB_REQUIRE_BROWSER=1 but %s", what)
		}
		t.Skipf("skipping the browser test: %s", what)
	}
	if testing.Short() && !required {
		t.Skip("skipping the browser test in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing(chromium + " is missing (apt-get install chromium)")
	}
	dir, err := filepath.Abs("../test/browser")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		missing("playwright-core is not installed (npm ci in " + dir + ")")
	}
	out := os.Getenv("RTLAB_BROWSER_OUT")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	bin := os.Getenv("RTLAB_BIN") // a prebuilt binary, else the tree's
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "rtlab")
		build := exec.Command("go", "build", "-o", bin, "../cmd/rtlab")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
	}
	// The first server keeps everything in memory; every later one keeps chat history in a
	// data dir (the default --durable chat/). So the first restart loses the chat's history
	// and the others must resume it without a gap; location/ is always in memory and is lost
	// on every restart.
	srv := &server{t: t, bin: bin, addr: freeAddr(t), logPath: filepath.Join(out, "server.log"), dataDir: ""}
	srv.start()
	t.Cleanup(srv.stop)

	base := "http://" + srv.addr
	if !servesPage(base) {
		// The page is not routed at / in this build yet: serve it in front of the binary.
		front := httptest.NewServer(frontHandler(base))
		t.Cleanup(front.Close)
		t.Logf("GET %s/ does not serve the page: testing through a front at %s", base, front.URL)
		base = front.URL
	}

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "run.mjs", "--base", base, "--out", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	cmd.Stderr = &testWriter{t: t, prefix: "run.mjs! "}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	passed, restarts := false, 0
	durableDir := filepath.Join(t.TempDir(), "data")
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		t.Logf("run.mjs: %s", line)
		switch {
		case strings.HasPrefix(line, "RESTART"):
			// Alternate a crash (SIGKILL) and a graceful stop (SIGTERM: clients are told to
			// reconnect): the page must come back from both.
			chat := "kept"
			if srv.dataDir == "" {
				chat = "lost"
			}
			srv.dataDir = durableDir
			srv.restart(restarts%2 == 0)
			restarts++
			if _, err := io.WriteString(stdin, "RESTARTED chat="+chat+"\n"); err != nil {
				t.Errorf("telling run.mjs: %v", err)
			}
		case line == "PASS":
			passed = true
		}
	}
	err = cmd.Wait()
	t.Logf("browser test took %s, %d restarts; screenshots and server.log in %s", time.Since(start).Round(time.Millisecond), restarts, out)
	if err != nil || !passed {
		t.Fatalf("browser test failed (%v); see the log above and %s", err, out)
	}
}

// server runs the rtlab binary on a fixed address, so a restarted server is found where the
// pages left the old one.
type server struct {
	t       *testing.T
	bin     string
	addr    string
	logPath string
	dataDir string // --data-dir: empty keeps all history in memory
	cmd     *exec.Cmd
	log     *os.File
}

func (s *server) start() {
	s.t.Helper()
	if s.log == nil {
		f, err := os.Create(s.logPath)
		if err != nil {
			s.t.Fatal(err)
		}
		s.log = f
	}
	fmt.Fprintf(s.log, "---- start %s\n", time.Now().Format(time.RFC3339Nano))
	s.cmd = exec.Command(s.bin, "serve", "--addr", s.addr, "--data-dir="+s.dataDir, "--shutdown-timeout", "2s", "--log-level", "info")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting rtlab: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("rtlab did not answer /healthz on %s within 10 s; see %s", s.addr, s.logPath)
}

// restart stops the server, by SIGKILL when crash is set, else by SIGTERM, and starts it again.
func (s *server) restart(crash bool) {
	s.t.Helper()
	sig, how := syscall.SIGTERM, "SIGTERM"
	if crash {
		sig, how = syscall.SIGKILL, "SIGKILL"
	}
	fmt.Fprintf(s.log, "---- %s %s\n", how, time.Now().Format(time.RFC3339Nano))
	s.t.Logf("restarting the server (%s)", how)
	_ = s.cmd.Process.Signal(sig)
	_ = s.cmd.Wait()
	time.Sleep(300 * time.Millisecond) // clients notice and back off before the server is back
	s.start()
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	if s.log != nil {
		s.log.Close()
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// servesPage reports whether the server answers GET / with this package's page.
func servesPage(base string) bool {
	res, err := http.Get(base + "/")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	return res.StatusCode == http.StatusOK && strings.Contains(string(b), `name="rtlab-page"`)
}

// frontHandler serves the page itself and passes everything else to the server at base,
// WebSocket upgrades and event streams included.
func frontHandler(base string) http.Handler {
	u, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, `{"error":"unavailable","reason":%q}`, err.Error())
	}
	h := web.Handler("")
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", h)
	mux.Handle("GET /static/", h)
	mux.Handle("GET /lab", h)
	mux.Handle("GET /lab/", h)
	mux.Handle("/", proxy)
	return mux
}

// testWriter logs each line written to it.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}
