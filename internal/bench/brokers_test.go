package bench_test

import (
	"bytes"
	"context"
	"strings"
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
