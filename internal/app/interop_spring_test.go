package app

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/appproxy"
)

// springTableBackend answers the Spring rows of docs/spring.md: /app/chat.send publishes on
// public, /app/init answers its subscriber, anything else is refused.
func springTableBackend(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req appproxy.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		user := req.User
		if user == "" {
			user = "anonymous"
		}
		var ans any
		switch {
		case req.Command == "SUBSCRIBE" && req.Destination == "/app/init":
			ans = map[string]any{"reply": map[string]string{"hello": user}}
		case req.Command == "SEND" && req.Destination == "/app/chat.send":
			ans = map[string]any{"publish": []map[string]any{{"topic": "public", "data": req.Data}}}
		default:
			ans = map[string]any{"error": map[string]string{"reason": "no handler for " + req.Destination}}
		}
		_ = json.NewEncoder(w).Encode(ans)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// springServers starts an open dev mode server and one with auth, both behind the backend and
// serving STOMP over TCP too; it returns them and their TCP addresses.
func springServers(t *testing.T) (open, authed *testServer, openTCP, authedTCP string) {
	backend := springTableBackend(t)
	open = startServer(t, func(c *Config) { c.AppProxy = backend.URL })
	authed = startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.AppProxy = backend.URL })
	tcp := func(s *testServer) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() { _ = s.app.tr.ServeSTOMP(ln) }()
		return ln.Addr().String()
	}
	return open, authed, tcp(open), tcp(authed)
}

// runInterop runs a client script in test/interop and fails unless it says PASS.
func runInterop(t *testing.T, name string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = interopDir(t)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", args[0], out)
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("%s failed: %v", args[0], err)
	}
}

// TestInteropSpringStompJS checks docs/spring.md's table with @stomp/stompjs.
func TestInteropSpringStompJS(t *testing.T) {
	interopDir(t)
	open, authed, _, _ := springServers(t)
	runInterop(t, "node", "spring.mjs", open.ws(""), authed.ws(""), tokenFor(t, "ann", time.Hour))
}

// TestInteropSpringStompPy checks docs/spring.md's table with stomp.py over TCP.
func TestInteropSpringStompPy(t *testing.T) {
	py := pyjwtPython(t)
	_, _, openTCP, authedTCP := springServers(t)
	oh, op, _ := net.SplitHostPort(openTCP)
	ah, ap, _ := net.SplitHostPort(authedTCP)
	runInterop(t, py, "spring.py", oh, op, ah, ap, tokenFor(t, "ann", time.Hour))
}
