package rtlabjs_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// bin is the rtlab binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) { servertest.Main(m, &bin) }

// TestNode runs the package's own tests (test/*.test.mjs, node's test runner) against a real
// server, against the same server behind a proxy that refuses WebSocket upgrades, and against
// a server that checks tokens. They need
// node and the package's dev dependencies (npm ci here); without them the test skips, unless
// RTLAB_REQUIRE_INTEROP is set (CI), where it fails.
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
	srv := servertest.StartWith(t, bin, servertest.Options{Memory: true, Args: []string{
		"--api-key", apiKey, "--history-size", strconv.Itoa(history), "--presence-refresh", "1s", "--msg-rate", "-1"}})
	// A second server checks tokens (HS256): the tests mint short-lived ones for it.
	const secret = "node-test-secret-0123456789"
	authed := servertest.StartWith(t, bin, servertest.Options{Memory: true, Args: []string{"--auth-secret", secret}})
	proxy := httptest.NewServer(servertest.NoUpgrades(srv.URL()))
	t.Cleanup(proxy.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "test/")
	cmd.Env = append(os.Environ(), "RTLAB_URL="+srv.URL(), "RTLAB_NOWS_URL="+proxy.URL,
		"RTLAB_API_KEY="+apiKey, "RTLAB_HISTORY="+strconv.Itoa(history),
		"RTLAB_AUTH_URL="+authed.URL(), "RTLAB_AUTH_SECRET="+secret)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}
