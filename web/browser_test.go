package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/servertest"
	"github.com/rtlab/rtlab/web"
)

// TestBrowser drives the page in two headless Chromium browsers over every transport against
// the real binary (test/browser/run.mjs), restarting the server under them once per transport.
// See newBrowserEnv for what it needs.
func TestBrowser(t *testing.T) {
	env := newBrowserEnv(t)
	out := env.out
	// The first server keeps everything in memory; every later one keeps chat history in a
	// data dir (the default --durable chat/). So the first restart loses the chat's history
	// and the others must resume it without a gap; location/ is always in memory and is lost
	// on every restart.
	srv := env.server(t, "server.log")

	base := srv.URL()
	if !servesPage(base) {
		// The page is not routed at / in this build yet: serve it in front of the binary.
		front := httptest.NewServer(frontHandler(base))
		t.Cleanup(front.Close)
		t.Logf("GET %s/ does not serve the page: testing through a front at %s", base, front.URL)
		base = front.URL
	}

	start := time.Now()
	cmd, stdin, sc := env.script(t, 150*time.Second, "run.mjs", "--base", base, "--out", out)
	passed, restarts := false, 0
	durableDir := filepath.Join(t.TempDir(), "data")
	for sc.Scan() {
		line := sc.Text()
		t.Logf("run.mjs: %s", line)
		switch {
		case strings.HasPrefix(line, "RESTART"):
			// Alternate a crash (SIGKILL) and a graceful stop (SIGTERM: clients are told to
			// reconnect): the page must come back from both.
			chat := "kept"
			if srv.DataDir == "" {
				chat = "lost"
			}
			srv.DataDir = durableDir
			crash := restarts%2 == 0
			t.Logf("restarting the server (crash: %v)", crash)
			srv.RestartAfter(crash, 300*time.Millisecond) // clients notice and back off before the server is back
			restarts++
			if _, err := io.WriteString(stdin, "RESTARTED chat="+chat+"\n"); err != nil {
				t.Errorf("telling run.mjs: %v", err)
			}
		case line == "PASS":
			passed = true
		}
	}
	err := cmd.Wait()
	t.Logf("browser test took %s, %d restarts; screenshots and server.log in %s", time.Since(start).Round(time.Millisecond), restarts, out)
	if err != nil || !passed {
		t.Fatalf("browser test failed (%v); see the log above and %s", err, out)
	}
}

// TestBrowserLiveGap drives the page (test/browser/gap.mjs) on one of two nodes sharing Redis,
// with a history of 5, on each streaming transport. The page's node is cut off from Redis while
// carol moves 20 times on the other node; when it returns, history no longer holds what the
// page missed. The page must say so ("History gone on location/demo") and then show carol's
// latest position. It needs redis-server besides what newBrowserEnv finds.
func TestBrowserLiveGap(t *testing.T) {
	env := newBrowserEnv(t)
	redis := brokertest.StartRedis(t)
	relay := brokertest.StartRelay(t, redis.Addr)
	node := func(name, url string) *servertest.Proc {
		return env.server(t, name+".log", "--broker", url, "--history-size", "5")
	}
	other := node("node-other", redis.URL)
	cut := node("node-cut", strings.Replace(redis.URL, redis.Addr, relay.Addr, 1))
	other.Await("/readyz", http.StatusOK, 30*time.Second)
	cut.Await("/readyz", http.StatusOK, 30*time.Second)
	x := 0
	move := func() string { // carol moves, on the node that stays connected
		t.Helper()
		x++
		body := fmt.Sprintf(`{"member":"carol","x":%d,"y":%d}`, x, 100-x)
		res, err := http.Post(other.URL()+"/api/publish/location/demo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish: %s", res.Status)
		}
		return fmt.Sprintf("%d.0, %d.0", x, 100-x)
	}

	for _, transport := range []string{"ws", "sse", "stomp"} {
		t.Run(transport, func(t *testing.T) {
			cmd, stdin, sc := env.script(t, 90*time.Second, "gap.mjs", "--base", cut.URL(), "--out", env.out, "--transport", transport)
			say := func(line string) {
				if _, err := io.WriteString(stdin, line+"\n"); err != nil {
					t.Errorf("telling gap.mjs: %v", err)
				}
			}
			passed := false
			for sc.Scan() {
				line := sc.Text()
				t.Logf("gap.mjs: %s", line)
				switch line {
				case "READY":
					say("SEE " + move())
				case "SAW":
					relay.Cut()
					cut.Await("/readyz", http.StatusServiceUnavailable, 30*time.Second)
					for range 20 {
						move()
					}
					relay.Heal()
					cut.Await("/readyz", http.StatusOK, 30*time.Second)
					say("GAP " + move())
				case "PASS":
					passed = true
				}
			}
			if err := cmd.Wait(); err != nil || !passed {
				t.Fatalf("gap.mjs failed (%v); see the log above and %s", err, env.out)
			}
		})
	}
}

// TestBrowserOlderMessages: a room holds 300 messages, more than a page (50) and than the
// node's live window (100; the rest is in the embedded archive). Scrolled to the top, the page
// loads older messages until the room's beginning, each message once, in order.
func TestBrowserOlderMessages(t *testing.T) {
	env := newBrowserEnv(t)
	// 301 publications as fast as the machine sends them: over the default HTTP publish rate
	// on a fast machine, which is not what this test is about.
	s := env.durableServer(t, "node-older.log", "--durable-history", "100", "--msg-rate", "-1", "--http-pub-rate", "-1")
	const room, count = "archive", 300
	publish := func(typ, body string) {
		t.Helper()
		res, err := http.Post(s.URL()+"/api/publish/chat/"+room+"?type="+typ, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("publish %s: %s", typ, res.Status)
		}
	}
	publish("ENTER", `{"sender":"bob"}`)
	for i := range count {
		publish("TALK", fmt.Sprintf(`{"sender":"bob","message":"m%d"}`, i))
	}
	cmd, _, sc := env.script(t, 90*time.Second, "older.mjs", "--base", s.URL(), "--out", env.out,
		"--room", room, "--count", strconv.Itoa(count))
	passed := false
	for sc.Scan() {
		t.Logf("older.mjs: %s", sc.Text())
		passed = passed || sc.Text() == "PASS"
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("older.mjs failed (%v); see the log above and %s", err, env.out)
	}
}

// browserEnv is what a browser test needs: node, Chromium, the scripts' folder with
// playwright-core installed, a folder for screenshots and logs, and the rtlab binary.
type browserEnv struct {
	node, chromium, dir, out, bin string
}

// newBrowserEnv finds or builds what a browser test needs. Without node, Chromium or
// playwright-core the test skips, unless RTLAB_REQUIRE_BROWSER=1 (CI), where it fails.
// Screenshots go to $RTLAB_BROWSER_OUT when set, else to a temporary folder. $RTLAB_BIN names a
// prebuilt rtlab to test instead of building ./cmd/rtlab.
func newBrowserEnv(t *testing.T) browserEnv {
	t.Helper()
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
	var env browserEnv
	var err error
	if env.node, err = exec.LookPath("node"); err != nil {
		missing("node is not installed")
	}
	if env.chromium = os.Getenv("CHROMIUM"); env.chromium == "" {
		env.chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(env.chromium); err != nil {
		missing(env.chromium + " is missing (apt-get install chromium)")
	}
	if env.dir, err = filepath.Abs("../test/browser"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(env.dir, "node_modules", "playwright-core")); err != nil {
		missing("playwright-core is not installed (npm ci in " + env.dir + ")")
	}
	if env.out = os.Getenv("RTLAB_BROWSER_OUT"); env.out == "" {
		env.out = t.TempDir()
	} else if err := os.MkdirAll(env.out, 0o755); err != nil {
		t.Fatal(err)
	}
	if env.bin, err = servertest.Build(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return env
}

// server runs the rtlab binary with flags and all history in memory, its output in logName
// beside the screenshots. Restarts keep its address, so pages find it where they left it.
func (env browserEnv) server(t *testing.T, logName string, flags ...string) *servertest.Proc {
	t.Helper()
	return env.start(t, logName, servertest.Options{Memory: true, Args: flags})
}

// durableServer is server with a data directory: chat/ history is durable.
func (env browserEnv) durableServer(t *testing.T, logName string, flags ...string) *servertest.Proc {
	t.Helper()
	return env.start(t, logName, servertest.Options{Args: flags})
}

func (env browserEnv) start(t *testing.T, logName string, o servertest.Options) *servertest.Proc {
	t.Helper()
	f, err := os.Create(filepath.Join(env.out, logName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the server stops: cleanups run last first
	o.Log = f
	o.Args = append([]string{"--log-level", "info"}, o.Args...)
	return servertest.StartWith(t, env.bin, o)
}

// script starts the browser script name (in test/browser) with args, killed after timeout,
// and returns it with its stdin and its stdout line by line. Its stderr goes to the test log.
func (env browserEnv) script(t *testing.T, timeout time.Duration, name string, args ...string) (*exec.Cmd, io.Writer, *bufio.Scanner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, env.node, append([]string{name}, args...)...)
	cmd.Dir = env.dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+env.chromium)
	cmd.Stderr = &testWriter{t: t, prefix: name + "! "}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, bufio.NewScanner(stdout)
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
