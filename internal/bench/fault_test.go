package bench_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/results"
)

func TestParseFaults(t *testing.T) {
	fs, err := bench.ParseFaults("30s:kill-node=1,45s:restart-broker,60s:partition-node=2:15s,80s:delay-broker=200ms:20s,90s:kill-node=1:5s")
	if err != nil {
		t.Fatal(err)
	}
	want := []bench.FaultSpec{
		{At: 30 * time.Second, Kind: bench.FaultKillNode, Node: 1},
		{At: 45 * time.Second, Kind: bench.FaultRestartBroker},
		{At: 60 * time.Second, Kind: bench.FaultPartitionNode, Node: 2, For: 15 * time.Second},
		{At: 80 * time.Second, Kind: bench.FaultDelayBroker, Delay: 200 * time.Millisecond, For: 20 * time.Second},
		{At: 90 * time.Second, Kind: bench.FaultKillNode, Node: 1, For: 5 * time.Second},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %+v", fs)
	}
	for i := range want {
		if fs[i] != want[i] {
			t.Errorf("fault %d: got %+v, want %+v", i, fs[i], want[i])
		}
	}
	for _, bad := range []string{"kill-node=1", "1s:kill-node", "1s:kill-node=0", "1s:partition-node=1", "1s:delay-broker=0s:1s",
		"1s:delay-broker=1s", "1s:restart-broker:x", "-1s:kill-node=1", "1s:kill-node=1:1s:2s"} {
		if _, err := bench.ParseFaults(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// faultMatrix is the schedule the CI fault matrix injects on every broker: a broker restart, a
// 10 s partition of node 1 from its broker, then the kill of node 2, whose users fail over to
// node 1. A receiver must get every accepted publication of a window or be told of a gap.
const faultMatrix = "8s:restart-broker,20s:partition-node=1:10s,34s:kill-node=2"

// recoveryBound is the documented bound (docs/bench.md) on a fault's recovery in the matrix.
const recoveryBound = 15 * time.Second

// TestFaultMatrix runs the fault matrix on a Redis (without persistence), NATS and RabbitMQ the
// lab starts, under 40 WebSocket users on durable topics, two nodes: each fault is recorded,
// none loses a publication silently, and each recovers within recoveryBound. On Redis a delay
// comes first and the killed node starts again, to show their accounting too.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and brokers")
	}
	bin := bench.BuildRTLab(t)
	for _, broker := range []string{"redis", "nats", "amqp"} {
		t.Run(broker, func(t *testing.T) {
			schedule := faultMatrix
			if broker == "redis" { // and a killed node started again
				schedule = "5s:delay-broker=200ms:2s," + strings.Replace(schedule, "kill-node=2", "kill-node=2:3s", 1)
			}
			run := faultRun(t, bin, broker, schedule)
			checkFaults(t, run, schedule)
			if broker == "redis" {
				checkRedisRestartTold(t, run)
			}
		})
	}
}

// faultRun runs the location scenario with schedule on a broker the lab starts.
func faultRun(t *testing.T, bin, broker, schedule string) *results.Run {
	t.Helper()
	if _, err := exec.LookPath(map[string]string{"redis": "redis-server", "nats": "nats-server", "amqp": "epmd"}[broker]); err != nil {
		t.Skipf("%s is not installed", broker)
	}
	o := &bench.Options{
		Transports: []string{"ws"}, Users: []int{40}, Groups: 4, Stages: "2s:PEAK,42s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Seed: 3, ServerBinary: bin, Status: &lockedBuffer{},
		Brokers: []string{broker}, Nodes: 2, Faults: schedule,
		ServerArgs: []string{"--durable", "location/"},
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := bench.Execute(ctx, o, t.TempDir())
	var ue *bench.UsageError
	if errors.As(err, &ue) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 1 {
		t.Fatalf("%d runs; warnings %q", len(res.Runs), res.Warnings)
	}
	if res.Config.Faults != schedule {
		t.Errorf("results record --fault %q, want %q", res.Config.Faults, schedule)
	}
	d := res.Runs[0].Delivery
	t.Logf("the whole run: %d deliveries due, %d received, %d gaps", d.Expected, d.Received, d.Gaps)
	return &res.Runs[0]
}

// checkFaults asserts the accounting of each fault of schedule in run.
func checkFaults(t *testing.T, run *results.Run, schedule string) {
	t.Helper()
	specs, _ := bench.ParseFaults(schedule)
	if len(run.Faults) != len(specs) {
		t.Fatalf("%d faults recorded, want %d: %+v", len(run.Faults), len(specs), run.Faults)
	}
	for i, f := range run.Faults {
		rec := "none"
		if f.Recovery != nil {
			rec = f.Recovery.String()
		}
		t.Logf("%s node %d at %s: expected %d, delivered %d, told %d, silently lost %d, gaps %d, dups %d, reordered %d, refused %d, recovery %s %s",
			f.Kind, f.Node, f.At, f.Expected, f.Delivered, f.Told, f.SilentlyLost, f.Gaps, f.Duplicates, f.Reordered, f.PublishFailed, rec, f.Error)
		if f.Kind != specs[i].Kind || time.Duration(f.At) != specs[i].At || f.Node != specs[i].Node || time.Duration(f.For) != specs[i].For || f.Error != "" {
			t.Errorf("fault %d recorded as %+v, want %+v", i, f, specs[i])
		}
		if f.Expected == 0 || f.Delivered+f.Told+f.SilentlyLost != f.Expected {
			t.Errorf("%s: expected %d = delivered %d + told %d + silently lost %d does not hold", f.Kind, f.Expected, f.Delivered, f.Told, f.SilentlyLost)
		}
		if f.SilentlyLost != 0 {
			t.Errorf("%s: %d deliveries silently lost", f.Kind, f.SilentlyLost)
		}
		if f.Recovery == nil || time.Duration(*f.Recovery) > recoveryBound {
			t.Errorf("%s: recovery %s, want at most %s", f.Kind, rec, recoveryBound)
		}
	}
}

// checkRedisRestartTold asserts that a restart of a Redis without persistence, which loses
// every topic's history, is told to the subscribers.
func checkRedisRestartTold(t *testing.T, run *results.Run) {
	t.Helper()
	for _, f := range run.Faults {
		if f.Kind == bench.FaultRestartBroker && f.Gaps == 0 {
			t.Errorf("restart-broker on Redis without persistence: no subscriber told of a gap")
		}
	}
}
