package report

import (
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

// spreadRun is a run at 100 users for n seconds whose per-second p99 and server CPU alternate
// around p99 and cpu by ±jitter; its run-wide p99 and CPU are p99 and cpu.
func spreadRun(transport string, n int, p99, cpu, jitter float64) *results.Run {
	r := &results.Run{Transport: transport, Peak: 100,
		Delivery: results.Delivery{Ratio: 1, Expected: 1, Received: 1, Latency: results.Latencies{Count: 1, P99: p99}},
		Server:   results.Usage{Available: true, CPUPercentAvg: cpu}}
	for i := range n {
		sign := float64(1 - 2*(i%2))
		r.Series.Users = append(r.Series.Users, 100)
		r.Series.Received = append(r.Series.Received, 300)
		r.Series.LatencyP99 = append(r.Series.LatencyP99, p99+sign*jitter)
		r.Series.ServerCPU = append(r.Series.ServerCPU, cpu+sign*jitter)
	}
	return r
}

// TestVerdictWithinSpread checks that the verdict ranks two transports only when they differ by
// more than their own spread from second to second, and says there is no clear difference
// otherwise, or when a run is too short to tell.
func TestVerdictWithinSpread(t *testing.T) {
	for _, tt := range []struct {
		name      string
		runs      []*results.Run
		want, not []string
	}{
		{"apart", []*results.Run{spreadRun("ws", 30, 5, 10, 0.5), spreadRun("sse", 30, 8, 20, 0.5)},
			[]string{"WebSocket had the lower p99 (5.00 ms vs 8.00 ms, 1.6× the lowest)", "SSE cost the most server CPU (20.0 % avg), WebSocket the least (10.0 %, 2.0× lower)"}, nil},
		{"within the spread", []*results.Run{spreadRun("ws", 30, 5.75, 1.25, 2), spreadRun("sse", 30, 4.94, 1.2, 2)},
			[]string{"no clear difference in p99 (4.94 ms to 5.75 ms: within the runs' own spread (up to 4.00 ms between seconds at the peak))",
				"no clear difference in server CPU (1.2 % to 1.2 % avg: within the runs' own spread (up to 4.0 % between seconds at the peak))"},
			[]string{"had the lower p99", "cost the most"}},
		{"too short", []*results.Run{spreadRun("ws", 4, 5, 10, 0), spreadRun("sse", 4, 8, 20, 0)},
			[]string{"no clear difference in p99 (5.00 ms to 8.00 ms: under 2× apart, and 4 and 4 seconds at the peak are too few (5 needed) to tell that from noise)"},
			[]string{"had the lower p99"}},
		// 2× apart with seconds that do not overlap is a difference however short the run.
		{"short but 2× apart", []*results.Run{spreadRun("ws", 3, 5, 10, 1), spreadRun("sse", 3, 12, 30, 1)},
			[]string{"WebSocket had the lower p99 (5.00 ms vs 12.0 ms, 2.4× the lowest)", "SSE cost the most server CPU (30.0 % avg), WebSocket the least (10.0 %, 3.0× lower)"},
			[]string{"no clear difference", "too few"}},
		{"short, 2× apart, overlapping", []*results.Run{spreadRun("ws", 3, 5, 10, 4), spreadRun("sse", 3, 12, 30, 4)},
			[]string{"no clear difference in p99 (5.00 ms to 12.0 ms: their seconds at the peak overlap (1.00–9.00 and 8.00–16.0 ms), and 3 and 3 seconds are too few to tell more)"},
			[]string{"had the lower p99"}},
		{"no seconds at the peak", []*results.Run{spreadRun("ws", 0, 5, 10, 0), spreadRun("sse", 0, 50, 30, 0)},
			[]string{"no clear difference in p99 (5.00 ms to 50.0 ms: too few seconds at the peak to tell a difference from noise)"}, nil},
	} {
		got := verdict(100, tt.runs)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: verdict lacks %q:\n%s", tt.name, w, got)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: verdict says %q:\n%s", tt.name, w, got)
			}
		}
	}
	// The ★ of the HTML table follows the same rule.
	if marks := bestOf(mP99, []*results.Run{spreadRun("ws", 30, 5.75, 1, 2), spreadRun("sse", 30, 4.94, 1, 2)}); marks[0] || marks[1] {
		t.Errorf("best p99 marked within the spread: %v", marks)
	}
	if marks := bestOf(mP99, []*results.Run{spreadRun("ws", 30, 5, 1, 0.5), spreadRun("sse", 30, 8, 1, 0.5)}); !marks[0] || marks[1] {
		t.Errorf("best p99 marks = %v, want WebSocket's", marks)
	}
}

// TestVerdictMachineSaturation checks that the verdict says whose CPU saturated the machine.
func TestVerdictMachineSaturation(t *testing.T) {
	r := spreadRun("ws", 30, 5, 3, 0.1)
	r.Saturated = &results.Saturation{Seconds: 40, Machine: 196, Server: 3, Generator: 2.5, Others: 190.5}
	got := verdict(100, []*results.Run{r})
	want := "the machine's CPU was saturated during WebSocket (40 s, mostly other processes on the machine: 190.5 % of 196.0 %)"
	if !strings.Contains(got, want) {
		t.Errorf("verdict lacks %q:\n%s", want, got)
	}
}
