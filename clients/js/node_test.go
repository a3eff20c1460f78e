package rtlabjs_test

import (
	"context"
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

	"github.com/rtlab/rtlab/internal/app"
	"github.com/rtlab/rtlab/internal/transport"
)

// TestNode runs the package's own tests (test/*.test.mjs, node's test runner) against a real
// server on a loopback port, and against the same server behind a proxy that refuses WebSocket
// upgrades. They need node and the package's dev dependencies (npm ci here); without them the
// test skips, unless RTLAB_REQUIRE_INTEROP is set (CI), where it fails.
func TestNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node_modules", "ws"))
	}
	if err != nil {
		if os.Getenv("RTLAB_REQUIRE_INTEROP") != "" {
			t.Fatalf("node or the package's dev dependencies are missing (npm ci in clients/js): %v", err)
		}
		t.Skipf("node or the package's dev dependencies are missing (npm ci in clients/js): %v", err)
	}
	const apiKey, history = "test-key", 250 // 200 published during the fallback are all retained
	srv := startServer(t, app.Config{APIKey: apiKey, HistorySize: history, PresenceRefresh: time.Second})
	proxy := httptest.NewServer(NoUpgrades(srv.URL))
	t.Cleanup(proxy.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "test/")
	cmd.Env = append(os.Environ(), "RTLAB_URL="+srv.URL, "RTLAB_NOWS_URL="+proxy.URL,
		"RTLAB_API_KEY="+apiKey, "RTLAB_HISTORY="+strconv.Itoa(history))
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}

// startServer runs an App with cfg on a loopback port until the test ends.
func startServer(t *testing.T, cfg app.Config) *httptest.Server {
	t.Helper()
	cfg.Limits = transport.Limits{MsgRate: -1}
	a, err := app.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = a.Shutdown(sctx)
		srv.Close()
		cancel()
	})
	return srv
}

// NoUpgrades is a reverse proxy to target that answers 403 to every WebSocket upgrade, as
// some corporate proxies do, and passes everything else on, event streams unbuffered.
func NoUpgrades(target string) http.Handler {
	u, _ := url.Parse(target)
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "WebSocket is not allowed through this proxy", http.StatusForbidden)
			return
		}
		p.ServeHTTP(w, r)
	})
}
