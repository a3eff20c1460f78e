package rtlabjs_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rtlabjs "github.com/rtlab/rtlab/clients/js"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/faultproxy"
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
	faults, faultEnv := startFaults(t, apiKey)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	files, err := filepath.Glob("test/*.test.mjs") // not test/helpers.mjs, which they import
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("RTLAB_NODE_TESTS"); v != "" {
		files = strings.Fields(v) // some of the files, while working on them
	}
	cmd := exec.CommandContext(ctx, node, append([]string{"--expose-gc", "--test", "--test-reporter=spec"}, files...)...)
	cmd.Env = append(os.Environ(), "RTLAB_URL="+srv.URL(), "RTLAB_NOWS_URL="+proxy.URL,
		"RTLAB_API_KEY="+apiKey, "RTLAB_HISTORY="+strconv.Itoa(history),
		"RTLAB_AUTH_URL="+authed.URL(), "RTLAB_AUTH_SECRET="+secret, "RTLAB_FAULT_URL="+faults.URL())
	cmd.Env = append(cmd.Env, faultEnv...)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
}

// startFaults starts the server the fault tests (test/faults.test.mjs) use, with keepalives
// fast enough for their short maxSilence, and one fault proxy per transport in front of it,
// controlled over HTTP (faultproxy.Handler). It returns the server and the tests' environment.
func startFaults(t *testing.T, apiKey string) (*servertest.Proc, []string) {
	srv := servertest.StartWith(t, bin, servertest.Options{Memory: true, Args: []string{
		"--api-key", apiKey, "--history-size", "5000", "--msg-rate", "-1",
		"--ping-interval", "1s", "--sse-heartbeat", "500ms", "--stomp-heartbeat", "500ms"}})
	host := strings.TrimPrefix(srv.URL(), "http://")
	proxies := map[string]*faultproxy.Proxy{}
	urls := map[string]string{}
	for _, tr := range []string{"ws", "stomp", "sse", "longpoll", "shortpoll", "restart"} {
		p, err := faultproxy.Start(host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[tr], urls[tr] = p, "http://"+p.Addr()
	}
	// A server on Redis, whose path to it is the proxy "redis": a black hole there leaves its
	// publishes' outcome unknown.
	redis := brokertest.StartRedis(t)
	rp, err := faultproxy.Start(redis.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rp.Close)
	proxies["redis"] = rp
	onRedis := servertest.StartWith(t, bin, servertest.Options{Memory: true, Args: []string{
		"--broker", "redis://" + rp.Addr(), "--msg-rate", "-1", "--http-pub-rate", "-1"}})
	ctl := httptest.NewServer(faultproxy.Handler(proxies))
	t.Cleanup(ctl.Close)
	b, _ := json.Marshal(urls)
	return srv, []string{"RTLAB_FAULT_CTL=" + ctl.URL, "RTLAB_FAULT_PROXIES=" + string(b), "RTLAB_REDIS_URL=" + onRedis.URL()}
}

// TestPackage packs the npm package (npm pack), installs the tarball in an empty project, and
// loads it both ways, require and import; it also checks that rtlab.cjs is current and that
// the minified rtlab.js the server sends loads as a module.
func TestPackage(t *testing.T) {
	node, err := exec.LookPath("node")
	var npm string
	if err == nil {
		npm, err = exec.LookPath("npm")
	}
	if err != nil {
		if os.Getenv("RTLAB_REQUIRE_INTEROP") != "" {
			t.Fatalf("node and npm are needed: %v", err)
		}
		t.Skipf("node and npm are needed: %v", err)
	}
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(".", node, "build-cjs.mjs", "--check")
	tmp := t.TempDir()
	tgz := run(".", npm, "pack", "--silent", "--pack-destination", tmp)
	proj := filepath.Join(tmp, "app")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"app","version":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run(proj, npm, "install", "--offline", "--no-audit", "--no-fund", "--silent", filepath.Join(tmp, filepath.Base(strings.Split(tgz, "\n")[0])))
	const check = `if (typeof Client !== 'function' || typeof RtlabError !== 'function') throw new Error('exports missing');`
	run(proj, node, "-e", `const { Client, RtlabError } = require('rtlab'); `+check)
	run(proj, node, "--input-type=module", "-e", `import { Client, RtlabError } from 'rtlab'; `+check)
	min := filepath.Join(tmp, "min.mjs")
	if err := os.WriteFile(min, rtlabjs.Minified().Min, 0o644); err != nil {
		t.Fatal(err)
	}
	run(proj, node, "--input-type=module", "-e", `const { Client, RtlabError } = await import('file://`+min+`'); `+check+
		` const c = new Client('http://127.0.0.1:9', { transports: ['shortpoll'] }); c.close();`)
}
