package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// testServer is a real rtlab server on a loopback port. Tests talk to it with the transports'
// test clients (internal/transport/transporttest).
type testServer struct {
	*httptest.Server
	app *App
}

func startServer(t testing.TB, mod func(*Config)) *testServer {
	t.Helper()
	cfg := Config{Limits: transport.Limits{MsgRate: -1, HTTPPubRate: -1}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
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
	return &testServer{Server: srv, app: a}
}

func (s *testServer) ws(path string) string { return tt.WSURL(s.URL, path) }

// get does an HTTP GET and decodes JSON into v (if non-nil), returning the status.
func (s *testServer) get(t testing.TB, path string, v any) int {
	t.Helper()
	return tt.Get(t, s.URL+path, v)
}

func (s *testServer) post(t testing.TB, path, body string, v any) int {
	t.Helper()
	return tt.Post(t, s.URL+path, body, v)
}

// do sends a request with an optional bearer token and returns status and body.
func do(t testing.TB, s *testServer, method, path, token, body string) (int, string) {
	t.Helper()
	d := tt.Dialer{}
	if token != "" {
		d = d.Bearer(token)
	}
	code, b := d.Call(t, method, s.URL+path, body)
	return code, string(b)
}

// subscriptions counts the hub's subscriptions. The server holds some of its own, so tests
// compare with a count taken before their clients joined.
func subscriptions(s *testServer) int64 { return s.app.hub.Stats().Subscriptions.Load() }

// subscriptionsReach waits until the hub holds n subscriptions (a client has joined).
func subscriptionsReach(t *testing.T, s *testServer, n int64) {
	t.Helper()
	eventually.True(t, 5*time.Second, fmt.Sprintf("%d subscriptions", n), func() bool { return subscriptions(s) == n })
}

// metricValue reads one sample from /metrics (0 when absent).
func metricValue(t testing.TB, s *testServer, series string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
