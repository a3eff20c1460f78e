package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBrowserFallback runs rtlab.js in Chromium (test/browser/fallback.mjs) behind a proxy that
// refuses WebSocket upgrades: the client falls back to SSE while 200 messages are published and
// receives all of them once, in order; a subscription to a trimmed history gets a gap event. It
// logs the time from the blocked WebSocket to the first message over SSE.
func TestBrowserFallback(t *testing.T) {
	env := newBrowserEnv(t)
	srv := &server{t: t, bin: env.bin, addr: freeAddr(t), logPath: filepath.Join(env.out, "fallback-server.log"),
		args: []string{"--history-size", "250"}}
	srv.start()
	t.Cleanup(srv.stop)
	base := "http://" + srv.addr
	proxy := httptest.NewServer(noUpgrades(base))
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

// noUpgrades is a reverse proxy to target that answers 403 to every WebSocket upgrade, as some
// corporate proxies do, and passes everything else on, event streams unbuffered.
func noUpgrades(target string) http.Handler {
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
