package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// TestBrowserFallback runs rtlab.js in Chromium (test/browser/fallback.mjs) behind a proxy that
// refuses WebSocket upgrades: the client falls back to SSE while 200 messages are published and
// receives all of them once, in order; a subscription to a trimmed history gets a gap event. It
// logs the time from the blocked WebSocket to the first message over SSE.
func TestBrowserFallback(t *testing.T) {
	env := newBrowserEnv(t)
	// 460 publishes from one address in a few seconds: over the default HTTP publish rate.
	srv := env.server(t, "fallback-server.log", "--history-size", "250", "--http-pub-rate", "-1")
	base := srv.URL()
	proxy := httptest.NewServer(servertest.NoUpgrades(base))
	t.Cleanup(proxy.Close)

	const topic, trimmed = "fallback/run", "fallback/trimmed"
	for i := range 260 { // more than the 250 kept
		publish(t, base, trimmed, i)
	}
	cmd, _, sc := env.script(t, 90*time.Second, "fallback.mjs", "--base", proxy.URL, "--out", env.out,
		"--topic", topic, "--trimmed", trimmed)
	passed := false
	for sc.Scan() {
		line := sc.Text()
		t.Logf("fallback.mjs: %s", line)
		switch {
		case line == "READY":
			// Published while the client is still finding a transport that works.
			go func() {
				for i := 1; i <= 200; i++ {
					publish(t, base, topic, i)
					time.Sleep(2 * time.Millisecond)
				}
			}()
		case strings.HasPrefix(line, "FALLBACK_MS "):
			ms, _ := strconv.Atoi(strings.TrimPrefix(line, "FALLBACK_MS "))
			t.Logf("first message over the fallback %d ms after the blocked WebSocket attempt", ms)
		case line == "PASS":
			passed = true
		}
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("fallback.mjs failed (%v); see the log above and %s", err, env.out)
	}
}

func publish(t *testing.T, base, topic string, i int) {
	res, err := http.Post(base+"/api/publish/"+topic, "application/json", strings.NewReader(fmt.Sprintf(`{"i":%d}`, i)))
	if err != nil {
		t.Errorf("publish: %v", err)
		return
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("publish: %s", res.Status)
	}
}

// TestBrowserSockJS runs sockjs-client with stompjs in Chromium (test/browser/sockjs.mjs)
// behind a proxy that refuses WebSocket upgrades: SockJS falls back to xhr-streaming and the
// STOMP session on it publishes and receives.
func TestBrowserSockJS(t *testing.T) {
	env := newBrowserEnv(t)
	srv := env.server(t, "sockjs-server.log", "--sockjs-path", "/ws")
	proxy := httptest.NewServer(servertest.NoUpgrades(srv.URL()))
	t.Cleanup(proxy.Close)
	cmd, _, sc := env.script(t, 90*time.Second, "sockjs.mjs", "--base", proxy.URL, "--path", "/ws")
	passed := false
	for sc.Scan() {
		t.Logf("sockjs.mjs: %s", sc.Text())
		passed = passed || sc.Text() == "PASS"
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("sockjs.mjs failed (%v); see the log above and %s", err, env.out)
	}
}
