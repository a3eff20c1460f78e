package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interopDir holds the third-party clients (installed by `npm ci` there, which .ci/run does).
func interopDir(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../../test/interop")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@stomp", "stompjs")); err != nil {
		if os.Getenv("RTLAB_REQUIRE_INTEROP") != "" {
			t.Fatalf("interop clients not installed: run npm ci in %s", dir)
		}
		t.Skipf("interop clients not installed (npm ci in %s)", dir)
	}
	return dir
}

// TestInteropStompJS drives @stomp/stompjs, the STOMP client browsers use, against the server.
func TestInteropStompJS(t *testing.T) {
	dir := interopDir(t)
	s := startServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "stompjs.mjs", s.ws(""))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("stompjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("stompjs interop failed: %v", err)
	}
}
