package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// tlsFront terminates TLS with a fresh self-signed certificate for 127.0.0.1 and copies every
// connection to backend, as a load balancer in front of a server does. It records the request
// line that opens each connection. caFile is the certificate, as --ca-file takes it.
type tlsFront struct {
	addr, caFile string
	mu           sync.Mutex
	first        []string
}

func startTLSFront(t *testing.T, backend string) *tlsFront {
	t.Helper()
	dir := t.TempDir()
	f := &tlsFront{caFile: filepath.Join(dir, "cert.pem")}
	keyFile := filepath.Join(dir, "key.pem")
	servertest.WriteCert(t, f.caFile, keyFile, "rtlab-bench-test")
	cert, err := tls.LoadX509KeyPair(f.caFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	f.addr = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.relay(c, backend)
		}
	}()
	return f
}

func (f *tlsFront) relay(c net.Conn, backend string) {
	defer c.Close()
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return // a handshake that failed (the probe without the CA)
	}
	f.mu.Lock()
	f.first = append(f.first, strings.TrimSpace(line))
	f.mu.Unlock()
	b, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer b.Close()
	go func() {
		_, _ = io.Copy(b, io.MultiReader(strings.NewReader(line), br))
		_ = b.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, b)
}

// lines returns the request lines seen so far.
func (f *tlsFront) lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.first...)
}

func shortTargetRun(target string, transports ...string) *Options {
	return &Options{
		Users: []int{20}, Stages: "2s:PEAK,2s:PEAK,1s:0", Interval: 500 * time.Millisecond,
		Seed: 3, Target: target, Transports: transports,
	}
}

// An https:// target works with its CA given or with --insecure, and fails the probe, naming
// the certificate, with neither; the target's query string reaches the server on every request.
func TestTargetOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server and runs for about 20 s")
	}
	p := servertest.StartWith(t, buildRTLab(t), servertest.Options{Memory: true})
	front := startTLSFront(t, p.Addr)
	target := "https://" + front.addr + "?tenant=t1"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	o := shortTargetRun(target, "sse", "ws", "shortpoll")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	err := Probe(ctx, o)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "--ca-file") {
		t.Fatalf("probe without the CA: %v; want a usage error naming the certificate and --ca-file", err)
	}

	o = shortTargetRun(target, "sse", "ws", "shortpoll")
	o.Insecure = true
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, o); err != nil {
		t.Fatalf("probe with --insecure: %v", err)
	}

	o = shortTargetRun(target, "sse", "ws", "shortpoll")
	o.CAFile = front.caFile
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, o); err != nil {
		t.Fatalf("probe with --ca-file: %v", err)
	}
	// A STOMP target over wss:// (rtlab's own endpoint) opens its session through the same TLS.
	so := &Options{Target: "wss://" + front.addr + "/api/stomp?tenant=t1", TargetKind: "stomp", CAFile: front.caFile, Transports: []string{"stomp"}}
	if err := so.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, so); err != nil {
		t.Fatalf("STOMP probe over wss://: %v", err)
	}
	got := executeJSON(ctx, t, o)
	if len(got.Runs) != 3 {
		t.Fatalf("%d runs, warnings %v", len(got.Runs), got.Warnings)
	}
	for _, r := range got.Runs {
		if r.Connections.Opened == 0 || r.Connections.Failed != 0 || r.Publish.Failed != 0 || r.Delivery.Received == 0 {
			t.Errorf("%s over TLS: connections %+v, publish failed %d, received %d", r.Transport, r.Connections, r.Publish.Failed, r.Delivery.Received)
		}
		if c := r.Connections; c.Tried != c.Opened+c.Failed+c.Abandoned {
			t.Errorf("%s: tried %d != opened %d + failed %d + abandoned %d", r.Transport, c.Tried, c.Opened, c.Failed, c.Abandoned)
		}
		if !r.Server.Available || r.Server.RSSMaxBytes == 0 {
			t.Errorf("%s: the target's /metrics over TLS gave no cost: %+v", r.Transport, r.Server)
		}
	}
	for _, l := range front.lines() {
		if !strings.Contains(l, "tenant=t1") {
			t.Errorf("request %q lacks the target's query string", l)
		}
	}
}

// --target-pid samples the target's process as a spawned server is sampled; --target-metrics
// reads its Prometheus endpoint. Both give the summary its CPU and memory figures.
func TestTargetCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server and runs for about 15 s")
	}
	p := servertest.StartWith(t, buildRTLab(t), servertest.Options{Memory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		set     func(o *Options)
		threads bool
	}{
		{"pid", func(o *Options) { o.TargetPIDs = []string{strconv.Itoa(p.PID())} }, true},
		{"metrics", func(o *Options) { o.TargetMetrics = p.URL() + "/metrics" }, false},
	} {
		o := shortTargetRun(p.URL(), "ws")
		tc.set(o)
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		got := executeJSON(ctx, t, o)
		if len(got.Runs) != 1 {
			t.Fatalf("%s: %d runs, warnings %v", tc.name, len(got.Runs), got.Warnings)
		}
		s := got.Runs[0].Server
		if !s.Available || s.RSSMaxBytes == 0 || s.CPUSeconds <= 0 || s.BytesPerUser < 0 {
			t.Errorf("%s: server usage %+v; want CPU and memory", tc.name, s)
		}
		if !slices.ContainsFunc(got.Runs[0].Notes, func(n string) bool { return strings.HasPrefix(n, "the target's cost is") }) {
			t.Errorf("%s: notes %q do not say where the target's cost came from", tc.name, got.Runs[0].Notes)
		}
		if tc.threads && s.ThreadsMax == 0 {
			t.Errorf("%s: no threads counted: %+v", tc.name, s)
		}
	}
}

// micrometer is the exposition of a Spring Boot application's /actuator/prometheus, cut to the
// process and JVM memory families (as Micrometer 1.x writes them).
const micrometer = `# HELP process_cpu_usage The "recent cpu usage" for the Java Virtual Machine process
# TYPE process_cpu_usage gauge
process_cpu_usage{application="location"} 0.25
# HELP system_cpu_count The number of processors available to the Java virtual machine
# TYPE system_cpu_count gauge
system_cpu_count{application="location"} 4.0
# HELP jvm_memory_used_bytes The amount of used memory
# TYPE jvm_memory_used_bytes gauge
jvm_memory_used_bytes{application="location",area="heap",id="G1 Eden Space"} 4.194304E7
jvm_memory_used_bytes{application="location",area="heap",id="G1 Old Gen"} 2.097152E7
jvm_memory_used_bytes{application="location",area="nonheap",id="Metaspace"} 1.048576E7
# HELP http_server_requests_seconds  
# TYPE http_server_requests_seconds summary
http_server_requests_seconds_count{method="GET",outcome="SUCCESS",status="200",uri="/actuator/prometheus"} 3
http_server_requests_seconds_sum{method="GET",outcome="SUCCESS",status="200",uri="/actuator/prometheus"} 0.05
`

// Micrometer's CPU is a ratio of all cores: 0.25 of 4 cores is one core busy, 100 % of one.
// Its memory is the JVM's areas summed.
func TestTargetMetricsMicrometer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, micrometer)
	}))
	defer srv.Close()
	o := &Options{TargetMetrics: srv.URL + "/actuator/prometheus"}
	tc := newTargetCost(o, "stomp")
	t0 := time.Now()
	for i := range 3 {
		cpu, rss, _, _, ok := tc.sample(context.Background(), t0.Add(time.Duration(i)*time.Second))
		if !ok || rss != 4194304*10+2097152*10+1048576*10 {
			t.Fatalf("sample %d: ok %v, rss %d", i, ok, rss)
		}
		if want := float64(min(i, 1)) * 100; cpu < want-0.01 || cpu > want+0.01 {
			t.Errorf("sample %d: cpu %.2f %%, want %.0f %%", i, cpu, want)
		}
	}
	if got := tc.total(); got != 2*time.Second {
		t.Errorf("CPU over 2 s at one core: %v, want 2s", got)
	}
	if n := tc.note(); !strings.Contains(n, "jvm_memory_used_bytes") {
		t.Errorf("note %q does not say the memory is the JVM's", n)
	}
}

// A target that refuses the users (here rtlab requiring tokens the bench does not have) shows
// as failed connections on every transport, and --threshold failed==0 catches it.
func TestTargetRefusalsCountAsFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server and runs for about 30 s")
	}
	p := servertest.StartWith(t, buildRTLab(t), servertest.Options{Memory: true, Args: []string{"--auth-secret", "target-refusals-test-secret-0123456789"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := shortTargetRun(p.URL(), "shortpoll", "longpoll", "sse", "ws", "stomp")
	o.Users = []int{10}
	o.Thresholds = "failed==0"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Probe(ctx, o); err != nil {
		t.Fatal(err)
	}
	got := executeJSON(ctx, t, o)
	if len(got.Runs) != len(o.Transports) {
		t.Fatalf("%d runs, warnings %v", len(got.Runs), got.Warnings)
	}
	for _, r := range got.Runs {
		c := r.Connections
		if c.Failed == 0 || len(c.Errors) == 0 {
			t.Errorf("%s: connections %+v; want the refusals (401) counted as failed", r.Transport, c)
		}
		if c.Tried != c.Opened+c.Failed+c.Abandoned {
			t.Errorf("%s: tried %d != opened %d + failed %d + abandoned %d", r.Transport, c.Tried, c.Opened, c.Failed, c.Abandoned)
		}
		if len(r.Thresholds) != 1 || r.Thresholds[0].Pass {
			t.Errorf("%s: thresholds %+v; want failed==0 crossed", r.Transport, r.Thresholds)
		}
	}
}

// The target URL's port defaults by scheme, and its query string goes after a request's own.
func TestTargetURL(t *testing.T) {
	for _, tc := range []struct{ target, host, query string }{
		{"https://rt.example.com?key=k1", "rt.example.com:443", "key=k1"},
		{"http://10.0.0.5", "10.0.0.5:80", ""},
		{"http://10.0.0.5:8080/?a=1&b=2", "10.0.0.5:8080", "a=1&b=2"},
	} {
		o := &Options{Target: tc.target, Insecure: strings.HasPrefix(tc.target, "https")}
		if err := o.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		if o.targetHost != tc.host || o.targetQuery != tc.query {
			t.Errorf("%s: host %q, query %q; want %q, %q", tc.target, o.targetHost, o.targetQuery, tc.host, tc.query)
		}
	}
	o := &Options{targetQuery: "key=k1"}
	if got := string(o.withQuery([]byte("/api/poll/loc/1?since=3"))); got != "/api/poll/loc/1?since=3&key=k1" {
		t.Errorf("withQuery after a query: %q", got)
	}
	if got := o.wsURL("h:1", "/api/ws"); got != "ws://h:1/api/ws?key=k1" {
		t.Errorf("wsURL: %q", got)
	}
}
