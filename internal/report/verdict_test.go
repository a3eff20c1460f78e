package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/bench"
)

func TestVerdict(t *testing.T) {
	all := []string{"shortpoll", "longpoll", "sse", "ws", "stomp"}
	r := fixture(fixtureOptions{transports: all, levels: []int{1000}, seconds: 10, slower: 1})
	l := levelsOf(r)[0]
	got := verdict(l.users, l.runs)
	for _, want := range []string{
		"At 1,000 users short polling delivered only 99.80 %, the others ≥99.9 %",
		"WebSocket had the lowest p99 (12.6 ms), short polling the highest (50.4 ms)",
		"short polling cost the most server CPU (88.0 % avg), WebSocket the least (22.0 %)",
		"failed connections: short polling 12",
		"the generator was saturated during WebSocket",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict lacks %q:\n%s", want, got)
		}
	}

	one := []*bench.Run{l.runs[3]}
	if got := verdict(1000, one); !strings.HasPrefix(got, "At 1,000 users WebSocket delivered 100 %; p99 12.6 ms; server CPU 22.0 % avg") {
		t.Errorf("single-transport verdict = %q", got)
	}

	for _, run := range l.runs {
		run.Delivery.Ratio = 0.9
	}
	if got := verdict(1000, l.runs); !strings.Contains(got, "no transport reached 99.9 % delivery (short polling 90.00 %,") {
		t.Errorf("all-failing verdict = %q", got)
	}
}

func TestLevelOrder(t *testing.T) {
	r := fixture(fixtureOptions{transports: []string{"ws", "shortpoll"}, levels: []int{5000, 100}, seconds: 5, slower: 1})
	ls := levelsOf(r)
	if len(ls) != 2 || ls[0].users != 100 || ls[1].users != 5000 {
		t.Fatalf("levels not ascending: %+v", ls)
	}
	// Transports keep the order the run was asked for, not alphabetical.
	if ls[0].runs[0].Transport != "ws" || ls[0].runs[1].Transport != "shortpoll" {
		t.Errorf("transport order = %s, %s", ls[0].runs[0].Transport, ls[0].runs[1].Transport)
	}
}

func TestBestOf(t *testing.T) {
	runs := func(p99s ...float64) []*bench.Run {
		var rs []*bench.Run
		for _, v := range p99s {
			rs = append(rs, &bench.Run{Delivery: bench.Delivery{Latency: bench.Latencies{Count: 1, P99: v}}})
		}
		return rs
	}
	tests := []struct {
		name string
		runs []*bench.Run
		want []bool
	}{
		{"one winner", runs(10, 5, 20), []bool{false, true, false}},
		{"all equal", runs(5, 5, 5), []bool{false, false, false}},
		{"most tie", runs(5, 5, 5, 9), []bool{false, false, false, false}},
		{"two tie of five", runs(5, 5, 7, 8, 9), []bool{true, true, false, false, false}},
		{"alone", runs(5), []bool{false}},
	}
	for _, tt := range tests {
		if got := bestOf(mP99, tt.runs); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
	// A figure that was not measured never wins.
	rs := runs(10, 5)
	rs[1].Delivery.Latency.Count = 0
	if got := bestOf(mP99, rs); got[1] {
		t.Error("an unmeasured figure was marked best")
	}
}

func TestVerdictAgainstMemory(t *testing.T) {
	run := func(broker string, p99 float64) *bench.Run {
		return &bench.Run{Transport: "ws", Broker: broker, Nodes: 2,
			Delivery: bench.Delivery{Ratio: 1, Latency: bench.Latencies{Count: 1, P99: p99}}}
	}
	runs := []*bench.Run{run("memory", 3), run("redis", 5.1), run("nats", 6), run("amqp", 12)}
	want := "WebSocket p99 against memory's: Redis 1.7×, NATS 2.0× and RabbitMQ 4.0×"
	if got := verdict(5000, runs); !strings.Contains(got, want) {
		t.Errorf("verdict lacks %q:\n%s", want, got)
	}
	// Without a memory run, or with one broker only, there is nothing to hold the others against.
	if got := verdict(5000, runs[1:]); strings.Contains(got, "against memory") {
		t.Errorf("verdict without a memory run = %q", got)
	}
	if got := verdict(5000, runs[:1]); strings.Contains(got, "against memory") {
		t.Errorf("verdict of a memory run alone = %q", got)
	}
}

// TestVerdictAgainstMemoryWithoutSteal checks that when the hypervisor took CPU in some seconds
// of a run, the verdict also holds each broker against memory on the seconds free of it, and
// that a run with nothing left out counts whole there.
func TestVerdictAgainstMemoryWithoutSteal(t *testing.T) {
	run := func(broker string, p99 float64, quiet *bench.QuietLatency) *bench.Run {
		return &bench.Run{Transport: "ws", Broker: broker, Nodes: 2,
			Delivery: bench.Delivery{Ratio: 1, Latency: bench.Latencies{Count: 1, P99: p99}, Quiet: quiet}}
	}
	quiet := func(p99 float64) *bench.QuietLatency {
		return &bench.QuietLatency{Seconds: 50, LeftOut: 10, Latency: bench.Latencies{Count: 1, P99: p99}}
	}
	// Memory was hit (9 ms; 3 ms without), Redis was not, NATS was (40 ms; 7.5 without).
	runs := []*bench.Run{run("memory", 9, quiet(3)), run("redis", 6, nil), run("nats", 40, quiet(7.5))}
	got := verdict(5000, runs)
	for _, want := range []string{
		"WebSocket p99 against memory's: Redis 0.7× and NATS 4.4×",
		"WebSocket p99 on seconds free of steal against memory's: Redis 2.0× and NATS 2.5×",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict lacks %q:\n%s", want, got)
		}
	}
	// Without steal in any run, the verdict says nothing of it.
	runs = []*bench.Run{run("memory", 9, nil), run("redis", 6, nil)}
	if got := verdict(5000, runs); strings.Contains(got, "steal") {
		t.Errorf("verdict of runs without steal = %q", got)
	}
}

// TestVerdictAgainstMemoryOverRounds checks that with --rounds each broker is held against
// memory's run of the same round, and that the verdict gives the median ratio and its range.
func TestVerdictAgainstMemoryOverRounds(t *testing.T) {
	run := func(round int, broker string, p99 float64) *bench.Run {
		return &bench.Run{Transport: "ws", Broker: broker, Nodes: 2, Round: round,
			Delivery: bench.Delivery{Ratio: 1, Latency: bench.Latencies{Count: 1, P99: p99}}}
	}
	runs := []*bench.Run{
		run(1, "memory", 2), run(1, "nats", 3), run(1, "amqp", 9),
		run(2, "memory", 10), run(2, "nats", 30), run(2, "amqp", 10),
		run(3, "memory", 4), run(3, "nats", 4), run(3, "amqp", 8),
	}
	// NATS: 1.5, 3.0, 1.0 → 1.5; RabbitMQ: 4.5, 1.0, 2.0 → 2.0. Against memory's median
	// p99 (4 ms) instead, NATS would read 1.0× and RabbitMQ 2.3×.
	want := "WebSocket p99 against memory's in the same round, median over 3 rounds: NATS 1.5× (1.0–3.0×) and RabbitMQ 2.0× (1.0–4.5×)"
	got := verdict(5000, runs)
	if !strings.Contains(got, want) {
		t.Errorf("verdict lacks %q:\n%s", want, got)
	}
	if !strings.Contains(got, "WebSocket · memory · round 1 had the lowest p99 (2.00 ms)") {
		t.Errorf("verdict does not name runs with their round:\n%s", got)
	}
	// A round whose memory run measured nothing puts nobody against it; a broker that measured
	// nothing in a round says in how many it did.
	runs[3].Delivery.Latency = bench.Latencies{}
	runs[8].Delivery.Latency = bench.Latencies{}
	want = "median over 2 rounds: NATS 1.2× (1.0–1.5×) and RabbitMQ 4.5× (1 round)"
	if got := verdict(5000, runs); !strings.Contains(got, want) {
		t.Errorf("verdict with round 2's memory and round 3's RabbitMQ unmeasured lacks %q:\n%s", want, got)
	}
}
