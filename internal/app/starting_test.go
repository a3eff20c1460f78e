package app

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
)

// TestServeWhileStarting: a node whose broker is not there yet answers at once: /healthz 200,
// /readyz 503 "starting", other routes 503 with a JSON reason; it serves once the broker is
// back. A node stopped while starting returns promptly.
func TestServeWhileStarting(t *testing.T) {
	srv := brokertest.StartRedis(t)
	newApp := func() *App {
		a, err := New(Config{Broker: srv.URL, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	serve := func(a *App) (base string, stop context.CancelFunc, done <-chan error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- a.Serve(ctx, ln) }()
		t.Cleanup(cancel)
		return "http://" + ln.Addr().String(), cancel, errc
	}
	get := func(url string) (int, map[string]string) {
		t.Helper()
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}

	starting, quitting := newApp(), newApp()
	srv.Stop()
	base, stop, done := serve(starting)
	_, stopQuitting, quitDone := serve(quitting)

	if code, _ := get(base + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while starting: %d, want 200", code)
	}
	if code, body := get(base + "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body["reason"], "starting") {
		t.Fatalf("/readyz while starting: %d %v, want 503 starting", code, body)
	}
	if code, body := get(base + "/api/poll/chat/r1?since=0"); code != http.StatusServiceUnavailable || body["error"] != "unavailable" || body["reason"] == "" {
		t.Fatalf("poll while starting: %d %v, want 503 with a reason", code, body)
	}

	stopQuitting()
	select {
	case err := <-quitDone:
		if err != nil {
			t.Fatalf("stopped while starting: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a node stopped while starting did not return within 5 s")
	}

	srv.Start()
	eventually.Nil(t, 15*time.Second, func() error {
		if code, body := get(base + "/readyz"); code != http.StatusOK {
			return &notReady{body["reason"]}
		}
		return nil
	})
	if code, body := get(base + "/api/poll/chat/r1?since=0"); code != http.StatusOK {
		t.Fatalf("poll once ready: %d %v", code, body)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

type notReady struct{ reason string }

func (e *notReady) Error() string { return "not ready: " + e.reason }
