package web_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/faultproxy"
)

// TestBrowserFaults runs rtlab.js in Chromium (test/browser/faults.mjs) behind fault proxies:
// a WebSocket black-holed for 4 s is noticed within maxSilence + 5 s and every publication
// arrives once, in order, when the network is back; an SSE stream that a proxy buffers is a
// failed attempt and the client falls back to long polling; 50 topics on long polling use at
// most 2 requests in flight, and a publish on any of them arrives quickly (p99 measured in the
// page, logged).
func TestBrowserFaults(t *testing.T) {
	env := newBrowserEnv(t)
	srv := env.server(t, "faults-server.log", "--history-size", "2000", "--http-pub-rate", "-1", "--msg-rate", "-1",
		"--ping-interval", "1s", "--sse-heartbeat", "500ms")
	host := strings.TrimPrefix(srv.URL(), "http://")
	proxies := map[string]*faultproxy.Proxy{}
	urls := map[string]string{}
	for _, name := range []string{"ws", "sse", "poll"} {
		p, err := faultproxy.Start(host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[name], urls[name] = p, "http://"+p.Addr()
	}
	ctl := httptest.NewServer(faultproxy.Handler(proxies))
	t.Cleanup(ctl.Close)
	b, _ := json.Marshal(urls)
	cmd, _, sc := env.script(t, 150*time.Second, "faults.mjs", "--api", srv.URL(), "--ctl", ctl.URL,
		"--proxies", string(b), "--out", env.out)
	passed := false
	for sc.Scan() {
		line := sc.Text()
		t.Logf("faults.mjs: %s", line)
		passed = passed || line == "PASS"
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("faults.mjs failed (%v); see the log above and %s", err, env.out)
	}
}
