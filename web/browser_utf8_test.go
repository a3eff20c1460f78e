package web_test

import (
	"strings"
	"testing"
	"time"
)

// TestBrowserInvalidUTF8 drives test/browser/utf8.mjs: from inside the page, publishes of
// text that is not UTF-8 over HTTP, the WebSocket protocol and STOMP are each refused with a
// reason, nothing is stored, and the page stays live on ws, SSE and STOMP and keeps receiving.
func TestBrowserInvalidUTF8(t *testing.T) {
	env := newBrowserEnv(t)
	srv := env.server(t, "utf8-server.log")
	cmd, _, sc := env.script(t, 150*time.Second, "utf8.mjs", "--base", srv.URL(), "--out", env.out)
	passed := false
	for sc.Scan() {
		line := sc.Text()
		t.Logf("utf8.mjs: %s", line)
		passed = passed || strings.TrimSpace(line) == "PASS"
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("browser test failed (%v); see the log above and %s", err, env.out)
	}
}
