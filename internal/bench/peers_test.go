package bench

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
)

// The peers' integration tests spawn each server the lab compares rtlab with, at small scale,
// and check that every expected message arrives once and in order. A peer that is not installed
// skips its test with the reason; with RTLAB_REQUIRE_PEERS set (CI, after `make peers`) that is
// a failure instead.

// peerMissing skips the test, or fails it when RTLAB_REQUIRE_PEERS is set.
func peerMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("RTLAB_REQUIRE_PEERS") != "" {
		t.Fatalf(format+" (and RTLAB_REQUIRE_PEERS is set)", args...)
	}
	t.Skipf(format, args...)
}

// moduleRoot is the repository's root: `make peers` installs into its .cache.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// peerOptions returns Options whose peer lookups go where `make peers` puts them.
func peerOptions(t *testing.T) Options {
	return Options{PeerCache: filepath.Join(moduleRoot(t), ".cache")}
}

// centrifugoOrSkip returns the centrifugo binary, or skips.
func centrifugoOrSkip(t *testing.T) string {
	t.Helper()
	o := peerOptions(t)
	bin, err := o.centrifugoBinary()
	if err != nil {
		peerMissing(t, "centrifugo not installed: %v", err)
	}
	return bin
}

// peerOrSkip checks that the server of kind can run here.
func peerOrSkip(t *testing.T, kind string) {
	t.Helper()
	switch kind {
	case results.KindCentrifugo:
		centrifugoOrSkip(t)
	case results.KindRabbitMQ:
		if _, _, _, err := rabbitBinaries(); err != nil {
			peerMissing(t, "%v", err)
		}
	case results.KindSpring:
		if _, err := exec.LookPath("java"); err != nil {
			peerMissing(t, "java not installed (apt-get install openjdk-17-jdk-headless)")
		}
		o := peerOptions(t)
		if _, err := o.springJar(context.Background(), os.Stderr); err != nil {
			var ue *UsageError
			if errors.As(err, &ue) {
				peerMissing(t, "the Spring peer cannot be built: %v", err)
			}
			t.Fatal(err)
		}
	}
}

// checkDelivered asserts what a user would check of a run: everybody connected, every
// publication accepted, every expected message received once and in order.
func checkDelivered(t *testing.T, r results.Run, users int64) {
	t.Helper()
	d := r.Delivery
	if c := r.Connections; r.ServerKind != "" && r.ServerKind != results.KindRTLab && c.Dropped > 0 && c.Dropped <= 2 && c.Failed == 0 &&
		c.Opened <= users+c.Dropped && d.Ratio >= 0.99 && d.Duplicates == 0 && d.OutOfOrder == 0 {
		// A peer that closes a connection now and then (Spring with 1002 on a busy machine)
		// loses what was in flight on it: the lab counted the drop and the loss, as it must.
		t.Logf("%s: the peer dropped %d connection(s): %d of %d delivered", r.Key(), c.Dropped, d.Received, d.Expected)
		return
	}
	if d.Expected == 0 || d.Ratio != 1 || d.Received != d.Expected || d.Duplicates != 0 || d.OutOfOrder != 0 || d.Gaps != 0 {
		t.Errorf("%s: delivery %+v; want every expected message once, in order", r.Key(), d)
	}
	if d.Latency.Count == 0 || d.Latency.P50 <= 0 {
		t.Errorf("%s: delivery latency %+v", r.Key(), d.Latency)
	}
	if c := r.Connections; c.Opened != users || c.Failed != 0 || c.Dropped != 0 {
		t.Errorf("%s: connections %+v", r.Key(), c)
	}
	if p := r.Publish; p.Sent == 0 || p.Failed != 0 || p.Latency.Count == 0 {
		t.Errorf("%s: publish %+v", r.Key(), p)
	}
}

// checkMeasured asserts that the server was sampled like any other: CPU time, memory, threads.
func checkMeasured(t *testing.T, r results.Run) {
	t.Helper()
	if s := r.Server; !s.Available || s.CPUSeconds <= 0 || s.RSSMaxBytes == 0 || s.ThreadsMax == 0 || len(r.Series.ServerThreads) != len(r.Series.Sent) {
		t.Errorf("%s: server usage %+v, %d thread samples for %d seconds", r.Key(), s, len(r.Series.ServerThreads), len(r.Series.Sent))
	}
}

// smallRun is the scale of the peers' tests: 50 users in groups of 10 for 9 s, a position every
// half second, expected where the receiver stays 4 s after it: a JVM compiling its code on a
// machine busy with other tests can hold deliveries up for seconds without losing any.
func smallRun(t *testing.T, o Options) *results.Results {
	t.Helper()
	o.Users = []int{50}
	o.Stages = "2s:PEAK,6s:PEAK,1s:0"
	o.Interval = 500 * time.Millisecond
	o.Grace = 4 * time.Second
	o.Seed = 11
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	t.Cleanup(func() { logServers(t, dir) }) // before the directory goes
	res, err := Execute(ctx, &o, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped || len(res.Warnings) > 0 {
		t.Fatalf("stopped %v, warnings %v", res.Stopped, res.Warnings)
	}
	return res
}

// logServers logs the end of each server's output in dir when t failed: a peer that closes a
// connection says why in its own log (Spring: the frame it refused), not to the client.
func logServers(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "server-*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		// A Java stack trace buries the line that names the cause: keep the lines that report
		// a problem, then the end.
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var told []string
		for _, l := range lines {
			if len(told) < 40 && (strings.Contains(l, "ERROR") || strings.Contains(l, "WARN") || strings.Contains(l, "Exception") || strings.Contains(l, "Caused by")) {
				told = append(told, l)
			}
		}
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("%s: problems:\n%s\nlast lines:\n%s", filepath.Base(name), strings.Join(told, "\n"), strings.Join(lines, "\n"))
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// probeTCP reports whether addr accepts connections.
func probeTCP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err
}

// TestPeers runs each peer beside rtlab, on the transports it offers, and checks that both
// delivered everything and were measured alike.
func TestPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Centrifugo, RabbitMQ and the Spring peer")
	}
	bin := buildRTLab(t)
	for _, tt := range []struct {
		kind       string
		transports []string
	}{
		{results.KindCentrifugo, []string{"ws", "sse"}},
		{results.KindRabbitMQ, []string{"stomp"}},
		{results.KindSpring, []string{"stomp"}},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			peerOrSkip(t, tt.kind)
			o := peerOptions(t)
			o.Servers, o.Transports, o.ServerBinary = []string{results.KindRTLab, tt.kind}, tt.transports, bin
			res := smallRun(t, o)
			if len(res.Runs) != 2*len(tt.transports) {
				t.Fatalf("%d runs; want rtlab and %s on %v", len(res.Runs), tt.kind, tt.transports)
			}
			var keys []string
			for _, r := range res.Runs {
				keys = append(keys, r.Key())
				checkDelivered(t, r, 50)
				checkMeasured(t, r)
			}
			var want []string
			for _, tr := range tt.transports {
				want = append(want, tr+"~rtlab", tr+"~"+tt.kind)
			}
			if strings.Join(keys, " ") != strings.Join(want, " ") {
				t.Errorf("runs %v, want %v", keys, want)
			}
			if res.Config.Servers != "rtlab,"+tt.kind || !strings.Contains(res.Config.ServerVersions[tt.kind], results.KindLabel(tt.kind)) {
				t.Errorf("config servers %q, versions %v", res.Config.Servers, res.Config.ServerVersions)
			}
		})
	}
}

// TestCentrifugoOnRedis runs rtlab and Centrifugo on two nodes each, sharing one Redis: users
// on one node receive what users on the other publish, on both servers.
func TestCentrifugoOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Centrifugo and Redis")
	}
	peerOrSkip(t, results.KindCentrifugo)
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		peerMissing(t, "redis-server not installed (apt-get install redis-server)")
	}
	port, err := peers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(redis, "--port", itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := "redis://127.0.0.1:" + itoa(port) + "/0"
	deadline := time.Now().Add(10 * time.Second)
	for probeTCP("127.0.0.1:"+itoa(port)) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := peerOptions(t)
	o.Servers, o.Transports, o.ServerBinary = []string{results.KindRTLab, results.KindCentrifugo}, []string{"ws"}, buildRTLab(t)
	o.Brokers, o.Nodes = []string{url}, 2
	res := smallRun(t, o)
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	for _, r := range res.Runs {
		checkDelivered(t, r, 50)
		checkMeasured(t, r)
		if !r.BrokerServer.Available {
			t.Errorf("%s: Redis not measured: %+v", r.Key(), r.BrokerServer)
		}
	}
}

// TestTargets drives servers the bench did not start: a Centrifugo (--target-kind centrifugo,
// with tokens and the API key) and RabbitMQ's Web-STOMP as any STOMP server (--target-kind
// stomp with destinations and a login).
func TestTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Centrifugo and RabbitMQ")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Run("centrifugo", func(t *testing.T) {
		peerOrSkip(t, results.KindCentrifugo)
		spawn := peerOptions(t)
		spawn.Servers, spawn.AuthSecret, spawn.CentrifugoAPIKey = []string{results.KindCentrifugo}, "target-secret", "target-key"
		if err := spawn.Validate(); err != nil {
			t.Fatal(err)
		}
		s, err := spawn.startCentrifugo(ctx, "memory", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		o := Options{Target: "http://" + s.Addr, TargetKind: results.KindCentrifugo, AuthSecret: "target-secret", CentrifugoAPIKey: "target-key", Transports: []string{"ws", "sse"}}
		res := smallRun(t, o)
		if len(res.Runs) != 2 || res.Config.TargetKind != results.KindCentrifugo {
			t.Fatalf("%d runs, target kind %q", len(res.Runs), res.Config.TargetKind)
		}
		for _, r := range res.Runs {
			checkDelivered(t, r, 50)
			if !r.Server.Available || r.Server.RSSMaxBytes == 0 { // from Centrifugo's /metrics
				t.Errorf("%s: server usage %+v", r.Key(), r.Server)
			}
		}
		bad := o
		bad.AuthSecret = "wrong"
		if err := bad.Validate(); err != nil {
			t.Fatal(err)
		}
		var ue *UsageError
		if err := Probe(ctx, &bad); !errors.As(err, &ue) || !strings.Contains(err.Error(), "invalid token") {
			t.Errorf("probe with a wrong secret: %v; want a usage error naming the invalid token", err)
		}
	})
	t.Run("stomp", func(t *testing.T) {
		peerOrSkip(t, results.KindRabbitMQ)
		s, err := startRabbit(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		o := Options{Target: "ws://" + s.Addr + "/ws", TargetKind: results.KindSTOMP, StompPub: "/topic/location.{group}", StompLogin: "guest:guest"}
		res := smallRun(t, o)
		if len(res.Runs) != 1 || res.Runs[0].Key() != "stomp~stomp" {
			t.Fatalf("runs %+v", res.Runs)
		}
		checkDelivered(t, res.Runs[0], 50)
		if res.Runs[0].Server.Available {
			t.Errorf("a STOMP target's usage reported: %+v", res.Runs[0].Server)
		}
	})
}
