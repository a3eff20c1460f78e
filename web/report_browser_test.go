package web_test

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// TestReportBrowser renders a report with `rtlab report` from results that have everything the
// report charts (latency distributions, errors, refused publishes, thresholds), opens it from
// disk in Chromium (test/browser/report.mjs) and checks that the new charts drew, with a line
// per transport: the latency distribution, errors over time and refused publishes over time.
// Screenshots of the page and of each chart are left in the output directory.
func TestReportBrowser(t *testing.T) {
	env := newBrowserEnv(t)
	dir := t.TempDir()
	b, err := json.MarshalIndent(reportResults(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(dir, "results.json")
	if err := os.WriteFile(results, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(env.bin, "report", results).CombinedOutput()
	if err != nil {
		t.Fatalf("rtlab report: %v\n%s", err, out)
	}
	page := filepath.Join(dir, "report.html")

	cmd, _, sc := env.script(t, 120*time.Second, "report.mjs", "--file", page, "--out", env.out,
		"--charts", "p99,latdist,errors,pubfailed", "--series", "WebSocket,SSE")
	titles := map[string]string{}
	passed := false
	for sc.Scan() {
		line := sc.Text()
		t.Logf("report.mjs: %s", line)
		if rest, ok := strings.CutPrefix(line, "CHART "); ok {
			id, title, _ := strings.Cut(rest, " ")
			titles[id] = title
		}
		passed = passed || line == "PASS"
	}
	if err := cmd.Wait(); err != nil || !passed {
		t.Fatalf("report.mjs failed (%v); screenshots in %s", err, env.out)
	}
	for id, want := range map[string]string{
		"latdist":   "Delivery latency distribution (% of deliveries per latency bucket)",
		"errors":    "Errors per second",
		"pubfailed": "Publishes refused or failed per second",
	} {
		if !strings.HasPrefix(titles[id], want) {
			t.Errorf("chart %s titled %q, want %q", id, titles[id], want)
		}
	}
	t.Logf("screenshots of report.html and its charts in %s", env.out)
}

// reportResults is a run of WebSocket and SSE at 200 users for 30 s whose WebSocket cell had
// publishes refused for 4 s, checked against two thresholds.
func reportResults() *results.Results {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := &results.Results{
		Schema: results.SchemaVersion, Version: "test", Started: start, Finished: start.Add(time.Minute),
		Config: results.Config{Scenario: "location", Transports: []string{"ws", "sse"}, Users: []int{200},
			Stages: "5s:PEAK,20s:PEAK,5s:0", GroupSize: 10, Interval: results.Duration(3 * time.Second),
			Broker: "memory", Nodes: 1, Thresholds: "p99<250ms,pubfailed==0"},
		Machine: results.Machine{Hostname: "lab", CPUs: 2, GoOS: "linux", GoArch: "amd64"},
	}
	for k, t := range []string{"ws", "sse"} {
		run := results.Run{Transport: t, Peak: 200, Started: start.Add(time.Duration(k) * 30 * time.Second), Duration: results.Duration(30 * time.Second)}
		s := &run.Series
		var received int64
		for i := range 30 {
			users := 200
			if i < 5 {
				users = 40 * i
			} else if i >= 25 {
				users = 40 * (29 - i)
			}
			recv := int64(users * 3)
			received += recv
			p99 := 4 + float64(k) + math.Sin(float64(i)/3)
			s.Users = append(s.Users, users)
			s.Sent = append(s.Sent, int64(users/3))
			s.Received = append(s.Received, recv)
			s.LatencyP50 = append(s.LatencyP50, p99/4)
			s.LatencyP99 = append(s.LatencyP99, p99)
			s.Errors = append(s.Errors, 0)
			s.PublishFailed = append(s.PublishFailed, 0)
			s.ServerCPU = append(s.ServerCPU, float64(users)/20)
			s.ServerRSS = append(s.ServerRSS, uint64(30<<20+users*20<<10))
			s.GeneratorCPU = append(s.GeneratorCPU, float64(users)/25)
			s.GeneratorRSS = append(s.GeneratorRSS, 40<<20)
		}
		if t == "ws" {
			for i := 12; i < 16; i++ {
				s.Errors[i], s.PublishFailed[i] = 30, 30
			}
			run.Publish.Failed = 120
		}
		run.Publish.Sent = 2000
		run.Delivery = results.Delivery{Expected: received, Received: received, Ratio: 1,
			Latency: results.Latencies{Count: received, P50: 1 + float64(k), P99: 5 + float64(k), Max: 20}}
		for j, share := range []float64{0.02, 0.1, 0.3, 0.35, 0.15, 0.05, 0.03} {
			upTo := math.Round(math.Pow(10, float64(27+j+k)/10)) / 1000
			run.Delivery.Histogram = append(run.Delivery.Histogram, results.Bucket{UpToMs: upTo, Count: int64(share * float64(received))})
		}
		run.Server = results.Usage{Available: true, CPUPercentAvg: 8, RSSMaxBytes: 34 << 20}
		run.Generator = results.Usage{Available: true, CPUPercentAvg: 6}
		run.Thresholds = []results.ThresholdResult{
			{Expr: "p99<250ms", Value: run.Delivery.Latency.P99, Measured: true, Pass: true},
			{Expr: "pubfailed==0", Value: float64(run.Publish.Failed), Measured: true, Pass: run.Publish.Failed == 0},
		}
		r.Runs = append(r.Runs, run)
	}
	return r
}
