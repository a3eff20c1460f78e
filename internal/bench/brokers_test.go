package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/report"
)

// TestBenchComparesBrokers runs one short bench on the memory broker, on two nodes sharing a
// real Redis, and on two more sharing another database of it under a label (as two servers of
// one kind are compared), and checks that the results and the report put them side by side.
func TestBenchComparesBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and Redis")
	}
	redis := brokertest.StartRedis(t)
	bin := bench.BuildRTLab(t)
	var status bytes.Buffer
	o := &bench.Options{
		Transports: []string{"ws"}, Users: []int{40}, Stages: "2s:PEAK,2s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 3, ServerBinary: bin, Status: &status,
		Brokers: []string{"memory", redis.URL, strings.TrimSuffix(redis.URL, "/0") + "/1#redis-b"}, Nodes: 2,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := bench.Probe(ctx, o); err != nil {
		t.Fatal(err)
	}
	res, err := bench.Execute(ctx, o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 || len(res.Warnings) > 0 {
		t.Fatalf("%d runs, warnings %v; want ws on memory, redis and redis-b", len(res.Runs), res.Warnings)
	}
	for i, want := range []struct {
		key   string
		nodes int
	}{{"ws@memory", 1}, {"ws@redis", 2}, {"ws@redis-b", 2}} {
		r := res.Runs[i]
		if r.Key() != want.key || r.Nodes != want.nodes {
			t.Errorf("run %d is %s on %d nodes, want %s on %d", i, r.Key(), r.Nodes, want.key, want.nodes)
		}
		if d := r.Delivery; d.Expected == 0 || d.Ratio != 1 || d.Duplicates != 0 || d.OutOfOrder != 0 {
			t.Errorf("%s: delivery %+v", r.Key(), d)
		}
	}
	// The Redis server listens on loopback: its process is found and measured; memory has none.
	if b := res.Runs[0].BrokerServer; b.Available {
		t.Errorf("memory run reports a broker server: %+v", b)
	}
	for _, r := range res.Runs[1:] {
		if b := r.BrokerServer; !b.Available || b.RSSMaxBytes == 0 || len(r.Series.BrokerCPU) != len(r.Series.Sent) {
			t.Errorf("%s run: broker server %+v, %d CPU samples for %d seconds", r.Key(), b, len(r.Series.BrokerCPU), len(r.Series.Sent))
		}
	}
	if !strings.Contains(status.String(), "bench ws@redis ") || !strings.Contains(status.String(), "bench ws@redis-b ") {
		t.Errorf("status lines do not name the broker: %q", status.String())
	}
	if !strings.Contains(res.Config.Broker, "memory") || !strings.Contains(res.Config.Broker, redis.URL) {
		t.Errorf("config broker %q", res.Config.Broker)
	}

	var sum, page bytes.Buffer
	report.Summary(&sum, res)
	if err := report.WriteHTML(&page, res); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"WebSocket · memory", "WebSocket · Redis", "WebSocket · redis-b"} {
		if !strings.Contains(sum.String(), label) {
			t.Errorf("summary lacks %q:\n%s", label, sum.String())
		}
		if !strings.Contains(page.String(), label) {
			t.Errorf("report.html lacks %q", label)
		}
	}
	if strings.Contains(page.String(), "WebSocket, WebSocket ·") {
		t.Error("report.html names the transport alone besides its broker rows")
	}
	if !strings.Contains(sum.String(), "brk CPU%") {
		t.Errorf("summary lacks the broker server's CPU:\n%s", sum.String())
	}
	if !strings.Contains(sum.String(), "against memory's: Redis") || !strings.Contains(sum.String(), "redis-b") {
		t.Errorf("verdict does not put both Redis runs against memory:\n%s", sum.String())
	}
	if !strings.Contains(sum.String(), "1 transport × 3 brokers") {
		t.Errorf("summary headline does not count the brokers:\n%s", sum.String())
	}
}

// TestBenchRounds runs a two-broker matrix twice with --rounds and checks that the rounds
// alternate, are keyed apart, and that the verdict holds each broker against memory's run of
// the same round.
func TestBenchRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and Redis")
	}
	redis := brokertest.StartRedis(t)
	bin := bench.BuildRTLab(t)
	o := &bench.Options{
		Transports: []string{"ws"}, Users: []int{20}, Stages: "1s:PEAK,2s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 5, ServerBinary: bin,
		Brokers: []string{"memory", redis.URL}, Nodes: 2, Rounds: 2,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := bench.Execute(ctx, o, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range res.Runs {
		keys = append(keys, r.Key())
		if d := r.Delivery; d.Expected == 0 || d.Ratio != 1 {
			t.Errorf("%s: delivery %+v", r.Key(), d)
		}
	}
	if got, want := strings.Join(keys, " "), "ws@memory#1 ws@redis#1 ws@memory#2 ws@redis#2"; got != want || len(res.Warnings) > 0 {
		t.Fatalf("runs %s, warnings %v; want %s", got, res.Warnings, want)
	}
	if res.Config.Rounds != 2 {
		t.Errorf("config rounds = %d, want 2", res.Config.Rounds)
	}
	var sum bytes.Buffer
	report.Summary(&sum, res)
	for _, want := range []string{"WebSocket · Redis · round 2", "against memory's in the same round, median over 2 rounds: Redis "} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the bench's status writer and a test reading it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBenchBrokerOutage is the run the summary once hid: two nodes on Redis, Redis stopped in
// the middle of the WebSocket cell until publishes are refused, then started again. The
// publishers were told, so the delivery ratio of what was accepted stays high; the results,
// the summary and the verdict must still say how many publishes were refused, and when.
func TestBenchBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and Redis")
	}
	redis := brokertest.StartRedis(t)
	bin := bench.BuildRTLab(t)
	status := &lockedBuffer{}
	o := &bench.Options{
		Transports: []string{"ws"}, Users: []int{40}, Stages: "2s:PEAK,10s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 7, ServerBinary: bin, Status: status,
		Brokers: []string{redis.URL}, Nodes: 2, Thresholds: "pubfailed==0",
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Stop Redis once the users are all in, and start it again once publishes fail: both
	// seen in the bench's status lines.
	outage := make(chan error, 1)
	go func() {
		wait := func(what string, ok func(s string) bool) error {
			deadline := time.Now().Add(30 * time.Second)
			for !ok(status.String()) {
				if time.Now().After(deadline) {
					return fmt.Errorf("no status line with %s", what)
				}
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		}
		if err := wait("40 users", func(s string) bool { return strings.Contains(s, "| users     40 |") }); err != nil {
			outage <- err
			return
		}
		redis.Stop()
		err := wait("errors", func(s string) bool { return regexp.MustCompile(`errors [1-9]`).MatchString(s) })
		redis.Start()
		outage <- err
	}()
	res, err := bench.Execute(ctx, o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-outage; err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	r := res.Runs[0]
	var perSecond int64
	first := -1
	for i, n := range r.Series.PublishFailed {
		perSecond += n
		if n > 0 && first < 0 {
			first = i
		}
	}
	if r.Publish.Failed == 0 || perSecond != r.Publish.Failed || first < 2 {
		t.Fatalf("publishes failed %d, per second %v: want some, from the peak on, adding up", r.Publish.Failed, r.Series.PublishFailed)
	}
	if len(r.Thresholds) != 1 || r.Thresholds[0].Pass {
		t.Errorf("threshold pubfailed==0: %+v, want crossed", r.Thresholds)
	}
	var sum bytes.Buffer
	report.Summary(&sum, res)
	out := sum.String()
	for _, w := range []string{
		fmt.Sprintf("WebSocket: %s of %s publishes", fmtCount(r.Publish.Failed), fmtCount(r.Publish.Sent)),
		"refused or failed, ",
		"but publishes were refused or failed",
		"THRESHOLDS CROSSED: WebSocket crossed pubfailed==0",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
	if res.ThresholdsCrossed() != 1 {
		t.Errorf("ThresholdsCrossed = %d, want 1", res.ThresholdsCrossed())
	}
}

// fmtCount formats n as the summary does, with thousands separators.
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
