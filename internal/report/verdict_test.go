package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

func TestVerdict(t *testing.T) {
	all := []string{"shortpoll", "longpoll", "sse", "ws", "stomp"}
	r := fixture(fixtureOptions{transports: all, levels: []int{1000}, seconds: 10, slower: 1})
	l := levelsOf(r)[0]
	got := verdict(l.users, l.runs)
	for _, want := range []string{
		"At 1,000 users short polling delivered only 99.80 %, the others ≥99.9 %",
		"WebSocket had the lowest p99 (12.6 ms), short polling the highest (50.4 ms, 4.0× the lowest)",
		"short polling cost the most server CPU (88.0 % avg), WebSocket the least (22.0 %, 4.0× lower)",
		"failed connections: short polling 12",
		"the generator was saturated during WebSocket",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict lacks %q:\n%s", want, got)
		}
	}

	one := []*results.Run{l.runs[3]}
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
	runs := func(p99s ...float64) []*results.Run {
		var rs []*results.Run
		for _, v := range p99s {
			rs = append(rs, &results.Run{Delivery: results.Delivery{Latency: results.Latencies{Count: 1, P99: v}}})
		}
		return rs
	}
	tests := []struct {
		name string
		runs []*results.Run
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
	run := func(broker string, p99 float64) *results.Run {
		return &results.Run{Transport: "ws", Broker: broker, Nodes: 2,
			Delivery: results.Delivery{Ratio: 1, Latency: results.Latencies{Count: 1, P99: p99}}}
	}
	runs := []*results.Run{run("memory", 3), run("redis", 5.1), run("nats", 6), run("amqp", 12)}
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
	run := func(broker string, p99 float64, quiet *results.QuietLatency) *results.Run {
		return &results.Run{Transport: "ws", Broker: broker, Nodes: 2,
			Delivery: results.Delivery{Ratio: 1, Latency: results.Latencies{Count: 1, P99: p99}, Quiet: quiet}}
	}
	quiet := func(p99 float64) *results.QuietLatency {
		return &results.QuietLatency{Seconds: 50, LeftOut: 10, Latency: results.Latencies{Count: 1, P99: p99}}
	}
	// Memory was hit (9 ms; 3 ms without), Redis was not, NATS was (40 ms; 7.5 without).
	runs := []*results.Run{run("memory", 9, quiet(3)), run("redis", 6, nil), run("nats", 40, quiet(7.5))}
	got := verdict(5000, runs)
	for _, want := range []string{
		"WebSocket p99 against memory's: Redis 0.67× and NATS 4.4×",
		"WebSocket p99 on seconds free of steal against memory's: Redis 2.0× and NATS 2.5×",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict lacks %q:\n%s", want, got)
		}
	}
	// Without steal in any run, the verdict says nothing of it.
	runs = []*results.Run{run("memory", 9, nil), run("redis", 6, nil)}
	if got := verdict(5000, runs); strings.Contains(got, "steal") {
		t.Errorf("verdict of runs without steal = %q", got)
	}
}

// TestVerdictAgainstMemoryOverRounds checks that with --rounds each broker is held against
// memory's run of the same round, and that the verdict gives the median ratio and its range.
func TestVerdictAgainstMemoryOverRounds(t *testing.T) {
	run := func(round int, broker string, p99 float64) *results.Run {
		return &results.Run{Transport: "ws", Broker: broker, Nodes: 2, Round: round,
			Delivery: results.Delivery{Ratio: 1, Latency: results.Latencies{Count: 1, P99: p99}}}
	}
	runs := []*results.Run{
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
	// Rounds of one cell are one figure, their median, and their range is its spread: memory's
	// 2, 10 and 4 ms (median 4, range 8) and RabbitMQ's 9, 10 and 8 ms (median 9) are not apart.
	if want := "no clear difference in p99 (4.00 ms to 9.00 ms, medians over 3 rounds: within the spread over rounds (up to 8.00 ms))"; !strings.Contains(got, want) {
		t.Errorf("verdict lacks %q:\n%s", want, got)
	}
	// A round whose memory run measured nothing puts nobody against it; a broker that measured
	// nothing in a round says in how many it did.
	runs[3].Delivery.Latency = results.Latencies{}
	runs[8].Delivery.Latency = results.Latencies{}
	want = "median over 2 rounds: NATS 1.2× (1.0–1.5×) and RabbitMQ 4.5× (1 round)"
	if got := verdict(5000, runs); !strings.Contains(got, want) {
		t.Errorf("verdict with round 2's memory and round 3's RabbitMQ unmeasured lacks %q:\n%s", want, got)
	}
}

// TestAgainstRTLab checks the verdict on servers compared side by side: rtlab's CPU per
// delivered message, RSS per connection and p99 over each peer's, paired within a round and
// on the same transport, and a peer that is its own broker met on memory.
func TestAgainstRTLab(t *testing.T) {
	run := func(kind, transport, broker string, round int, cpuSec, perUser, p99 float64) *results.Run {
		return &results.Run{
			Transport: transport, ServerKind: kind, Broker: broker, Round: round, Peak: 1000,
			Server:   results.Usage{Available: true, CPUSeconds: cpuSec, BytesPerUser: perUser},
			Delivery: results.Delivery{Ratio: 1, Latency: results.Latencies{Count: 100000, P99: p99}},
		}
	}
	runs := []*results.Run{
		run("rtlab", "ws", "memory", 1, 6, 8000, 18),
		run("centrifugo", "ws", "memory", 1, 10, 30000, 28),
		run("rtlab", "ws", "memory", 2, 7, 8000, 20),
		run("centrifugo", "ws", "memory", 2, 10, 32000, 20),
		run("rtlab", "stomp", "memory", 1, 2, 10000, 10),
		run("rabbitmq", "stomp", "", 1, 20, 100000, 40),
		run("rtlab", "ws", "redis", 1, 9, 9000, 30),
		run("centrifugo", "ws", "redis", 1, 12, 30000, 30),
	}
	got := verdict(1000, runs)
	for _, want := range []string{
		"WebSocket, rtlab against Centrifugo in the same round, median over 2 rounds: CPU per delivered message 0.65× (0.60–0.70×), RSS per connection 0.26× (0.25–0.27×) and p99 0.82× (0.64–1.0×)",
		"STOMP, rtlab against RabbitMQ: CPU per delivered message 0.10×, RSS per connection 0.10× and p99 0.25×",
		"WebSocket on Redis, rtlab against Centrifugo: CPU per delivered message 0.75×, RSS per connection 0.30× and p99 1.0×",
		// Each server against its own memory run.
		"WebSocket · rtlab p99 against memory's in the same round, median over 2 rounds: Redis 1.7× (1 round)",
		"WebSocket · Centrifugo p99 against memory's in the same round, median over 2 rounds: Redis 1.1× (1 round)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict lacks %q:\n%s", want, got)
		}
	}
	for key, want := range map[string]string{
		"ws~centrifugo@redis#2": "WebSocket · Centrifugo · Redis · round 2",
		"stomp~spring":          "STOMP · Spring",
		"stomp~rabbitmq":        "STOMP · RabbitMQ",
		"sse~rtlab":             "SSE · rtlab",
	} {
		if got := transportLabel(key); got != want {
			t.Errorf("label of %s = %q, want %q", key, got, want)
		}
	}
}

func TestNotRun(t *testing.T) {
	r := &results.Results{Skipped: []results.Skip{
		{ServerKind: "centrifugo", Transport: "shortpoll", Reason: "no polling"},
		{ServerKind: "centrifugo", Transport: "stomp", Reason: "no polling"},
		{ServerKind: "centrifugo", Broker: "nats", Reason: "memory and Redis only"},
	}}
	got := strings.Join(notRun(r), " | ")
	if want := "short polling and STOMP on Centrifugo: no polling | Centrifugo with --broker NATS: memory and Redis only"; got != want {
		t.Errorf("not run: %q, want %q", got, want)
	}
}

// TestVerdictNothingExpected: a run in which no publication had a receiver (five users, too
// short) has no delivery ratio: the verdict says so instead of "delivered 100 %", and the
// summary's ratio cell is empty.
func TestVerdictNothingExpected(t *testing.T) {
	r := &results.Run{Transport: "ws", Delivery: results.Delivery{Ratio: 1}}
	v := verdict(5, []*results.Run{r})
	if strings.Contains(v, "delivered 100") || !strings.Contains(v, "no publication was expected") {
		t.Errorf("verdict %q; want it to say nothing was expected", v)
	}
	if c := mRatio.cell(r); c != none {
		t.Errorf("ratio cell %q, want %q", c, none)
	}
}

// TestVerdictRefusedUsers: when nothing was expected because the users' connections failed,
// the verdict says so rather than blaming too few users.
func TestVerdictRefusedUsers(t *testing.T) {
	r := &results.Run{Transport: "sse", Peak: 100}
	r.Connections = results.Connections{Tried: 383, Failed: 383, Errors: []results.Count{{Label: "connect: sse: HTTP N page not found", N: 383}}}
	got := verdict(100, []*results.Run{r})
	if !strings.Contains(got, "383 connections failed: connect: sse: HTTP N page not found") || strings.Contains(got, "too few users") {
		t.Errorf("verdict = %q", got)
	}
}
