package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// behindNginx starts rtlab with args and, in front of it, nginx running docs/deploy.md's
// configuration as written, but for its ports, under a prefix of its own. It returns nginx's
// base URL. Without nginx the test skips, unless RTLAB_REQUIRE_NGINX is set.
func behindNginx(t *testing.T, args ...string) string {
	t.Helper()
	ngx, err := exec.LookPath("nginx")
	if err != nil {
		if ngx, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			if os.Getenv("RTLAB_REQUIRE_NGINX") != "" {
				t.Fatal("nginx not installed (apt-get install nginx), and RTLAB_REQUIRE_NGINX is set")
			}
			t.Skip("nginx not installed")
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```nginx\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/deploy.md has no ```nginx block")
	}
	conf := string(m[1])
	if !strings.Contains(conf, "server 127.0.0.1:8080;") || !strings.Contains(conf, "listen 80;") {
		t.Fatal("docs/deploy.md's nginx block no longer has `server 127.0.0.1:8080;` and `listen 80;` for the test to replace")
	}
	p := servertest.Start(t, bin, args...)
	addr := servertest.FreeAddr(t)
	conf = strings.Replace(conf, "server 127.0.0.1:8080;", "server "+p.Addr+";", 1)
	conf = strings.Replace(conf, "listen 80;", "listen "+addr+";", 1)
	prefix := t.TempDir()
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/rtlab.conf;
}
`, prefix)
	for name, text := range map[string]string{"nginx.conf": main, "rtlab.conf": conf} {
		if err := os.WriteFile(filepath.Join(prefix, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(ngx, "-p", prefix, "-c", filepath.Join(prefix, "nginx.conf"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		servertest.Interrupt(cmd)
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", out, log)
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not answer /healthz within 10s:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBehindNginx runs every transport through docs/deploy.md's nginx: a numbered stream
// arrives whole and in order on each (WebSocket and STOMP through upgrades), a single
// publication arrives at once on SSE (nothing buffered), and a long poll waits past nginx's
// default 60 s read timeout and still gets its publication.
func TestBehindNginx(t *testing.T) {
	base := behindNginx(t, "--dev", "--trusted-proxies", "127.0.0.1", "--long-poll-max", "90s")
	long := make(chan error, 1)
	go func() { long <- longPollPast60s(base) }()

	const topic, n = "deploy/numbers", 100
	clients := map[tt.Kind]tt.Client{}
	for _, k := range tt.Kinds {
		o := tt.Options{Nodes: []string{base}}
		if k == tt.STOMP {
			o.Dialer.Protocols = []string{"v12.stomp"}
		}
		c := tt.New(t, k, o)
		c.Subscribe(topic, nil)
		tt.AwaitUp(t, c)
		clients[k] = c
	}
	hc := (tt.Dialer{}).HTTP()
	publish := func(i int) {
		if _, err := tt.PublishHTTP(context.Background(), hc, tt.Dialer{}, base, topic, fmt.Sprintf(`{"n":%d}`, i)); err != nil {
			t.Fatalf("publish %d through nginx: %v", i, err)
		}
	}
	publish(0)
	for _, k := range tt.Kinds { // one publication, alone: a buffering proxy would hold it
		if _, err := tt.Collect(clients[k], 1, 3*time.Second); err != nil {
			t.Errorf("through nginx: %v", err)
		}
	}
	for i := 1; i <= n; i++ {
		publish(i)
	}
	for _, k := range tt.Kinds {
		got, err := tt.Collect(clients[k], n, 20*time.Second)
		if err != nil {
			t.Errorf("through nginx: %v", err)
			continue
		}
		for i, p := range got {
			var v struct{ N int }
			if json.Unmarshal(p.Data, &v) != nil || v.N != i+1 {
				t.Errorf("%s through nginx: publication %d is %s, want n=%d", k, i, p.Data, i+1)
				break
			}
		}
	}
	if err := <-long; err != nil {
		t.Error(err)
	}
}

// longPollPast60s waits in a long poll through base for 75 s, publishes after 65 s, and
// checks the poll got the publication (not nginx's 504 at 60 s).
func longPollPast60s(base string) error {
	const topic = "deploy/long"
	hc := &http.Client{Timeout: 2 * time.Minute}
	get := func(url string) (tt.PollAnswer, error) {
		var ans tt.PollAnswer
		resp, err := hc.Get(url)
		if err != nil {
			return ans, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return ans, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
		}
		return ans, json.Unmarshal(b, &ans)
	}
	top, err := get(base + "/api/poll/" + topic)
	if err != nil {
		return err
	}
	go func() {
		time.Sleep(65 * time.Second)
		_, _ = tt.PublishHTTP(context.Background(), hc, tt.Dialer{}, base, topic, `{"late":true}`)
	}()
	start := time.Now()
	ans, err := get(fmt.Sprintf("%s/api/poll/%s?since=%d&epoch=%s&wait=75s", base, topic, top.Offset, top.Epoch))
	if err != nil {
		return fmt.Errorf("long poll through nginx after %v: %w", time.Since(start).Round(time.Second), err)
	}
	if took := time.Since(start); len(ans.Publications) != 1 || took < 60*time.Second {
		return fmt.Errorf("long poll through nginx: %d publications after %v; want the one published at 65s", len(ans.Publications), took.Round(time.Second))
	}
	return nil
}

// TestNginxBrowser loads a page through docs/deploy.md's nginx, listening on a port other than
// 80, in Chromium (test/browser/nginx.mjs): every transport must answer it. The browser's
// Origin carries the port, so a Host rewritten without it gets each upgrade refused.
func TestNginxBrowser(t *testing.T) {
	node, dir := browserTools(t)
	base := behindNginx(t, "--dev", "--trusted-proxies", "127.0.0.1", "--sockjs-path", "/ws")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "nginx.mjs", "--base", base, "--sockjs", "/ws")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("nginx.mjs:\n%s", out)
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "PASS") {
		t.Fatalf("a browser through nginx on %s: %v", base, err)
	}
}

// browserTools returns node and test/browser, with Chromium, playwright-core and the SockJS
// and STOMP clients (test/interop) installed; the test skips without them unless
// RTLAB_REQUIRE_BROWSER or RTLAB_REQUIRE_NGINX is set.
func browserTools(t *testing.T) (node, dir string) {
	t.Helper()
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	dir = filepath.Join(root, "test", "browser")
	node, err := exec.LookPath("node")
	for _, need := range []string{chromium, filepath.Join(dir, "node_modules", "playwright-core"),
		filepath.Join(root, "test", "interop", "node_modules", "sockjs-client")} {
		if _, serr := os.Stat(need); err == nil && serr != nil {
			err = serr
		}
	}
	if err != nil {
		if os.Getenv("RTLAB_REQUIRE_BROWSER") != "" || os.Getenv("RTLAB_REQUIRE_NGINX") != "" {
			t.Fatalf("a browser through nginx needs node, Chromium and `make test-deps`: %v", err)
		}
		t.Skipf("no browser: %v", err)
	}
	return node, dir
}

// TestNginxClientAddress: behind nginx, the per-address connection limit counts the address
// nginx received the request from (the last in X-Forwarded-For) only with --trusted-proxies;
// without it every client is nginx's address.
func TestNginxClientAddress(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			args := []string{"--dev", "--max-conns-per-ip", "1"}
			if trusted {
				args = append(args, "--trusted-proxies", "127.0.0.1")
			}
			base := behindNginx(t, args...)
			// Two clients on loopback addresses of their own; nginx sees and forwards those.
			first, status, _ := sseFrom(t, base, "127.0.0.2")
			if status != http.StatusOK {
				t.Fatalf("first client: %d", status)
			}
			defer first.Close()
			second, status, body := sseFrom(t, base, "127.0.0.3")
			if second != nil {
				defer second.Close()
			}
			switch {
			case trusted && status != http.StatusOK:
				t.Errorf("a second client from another address: %d %s; want 200 (its own limit)", status, body)
			case !trusted && (status != http.StatusTooManyRequests || !strings.Contains(body, "127.0.0.1")):
				t.Errorf("a second client without --trusted-proxies: %d %s; want 429 naming nginx's 127.0.0.1", status, body)
			}
		})
	}
}

// sseFrom opens an SSE stream through base from the loopback address from, claiming to be
// 203.0.113.1 (never believed: nginx appends the real one). It returns the open body, or the
// refusal's status and text.
func sseFrom(t *testing.T, base, from string) (io.ReadCloser, int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", base+"/api/sse?topic=deploy/addr", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, resp.StatusCode, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return nil, resp.StatusCode, string(b)
}
