package k6

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/servertest"
)

// secondOpinion is the workload both generators run: 1,000 users ($RTLAB_K6_USERS), a short
// ramp and a hold.
func secondOpinion() []string {
	users := os.Getenv("RTLAB_K6_USERS")
	if users == "" {
		users = "1000"
	}
	return []string{"--users", users, "--stages", "3s:PEAK,20s:PEAK,2s:0", "--interval", "3s", "--group-size", "10"}
}

// TestSecondOpinion runs the scripts rtlab bench --export-k6 writes for WebSocket and STOMP with
// k6, and the bench itself on the same workload, each against a fresh server: what the two
// expected and received must agree within 1 % (k6 on the same two cores starts some
// iterations late, and its VUs count a publication only once they run again), and the bench's p50 and p99 must not be above
// k6's (a generator can only add delay to what the server does).
func TestSecondOpinion(t *testing.T) {
	k6 := k6Binary(t)
	if testing.Short() {
		t.Skip("-short: a minute and a half of load")
	}
	dir := t.TempDir()
	export := exec.Command(bin, append([]string{"bench", "--export-k6", dir, "--transport", "ws,stomp"}, secondOpinion()...)...)
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	for _, transport := range []string{"ws", "stomp"} {
		t.Run(transport, func(t *testing.T) {
			k := runK6(t, k6, dir, transport)
			lab := runLab(t, transport)
			d := lab.Delivery
			t.Logf("%s: k6 expected %d received %d p50 %.2f p99 %.2f ms; bench expected %d received %d p50 %.2f p99 %.2f ms",
				transport, k.expected, k.received, k.p50, k.p99, d.Expected, d.Received, d.Latency.P50, d.Latency.P99)
			// A k6 short of CPU measures its own delay and, since a receipt counts only once its
			// VU runs again, expects less: say so beside a failure.
			why := ""
			if k.p50 > 50 && k.p50 > 10*d.Latency.P50 {
				why = fmt.Sprintf(" (k6's p50 of %.0f ms says k6 was short of CPU: was the machine shared?)", k.p50)
			}
			for _, c := range []struct {
				what    string
				k6, lab int64
			}{{"expected", k.expected, d.Expected}, {"received", k.received, d.Received}} {
				if off := math.Abs(float64(c.k6-c.lab)) / float64(max(c.lab, 1)); off > 0.01 {
					t.Errorf("%s: k6 %d, bench %d: %.2f %% apart, want ≤ 1 %%%s", c.what, c.k6, c.lab, off*100, why)
				}
			}
			if d.Latency.P50 > k.p50 || d.Latency.P99 > k.p99 {
				t.Errorf("bench p50 %.2f / p99 %.2f ms above k6's %.2f / %.2f ms", d.Latency.P50, d.Latency.P99, k.p50, k.p99)
			}
		})
	}
}

// k6Figures are what the comparison reads from k6's summary.
type k6Figures struct {
	expected, received, lost, dup, errors int64
	p50, p99                              float64
}

// runK6 runs transport's exported script against a fresh server and reads its summary.
func runK6(t *testing.T, k6, dir, transport string) k6Figures {
	t.Helper()
	p := servertest.Start(t, bin, "--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--http-pub-rate", "-1", "--user-msg-rate", "-1")
	return runK6At(t, k6, dir, transport, p.URL())
}

// runK6At runs transport's exported script against the server at base and reads its summary.
func runK6At(t *testing.T, k6, dir, transport, base string) k6Figures {
	t.Helper()
	sum := filepath.Join(t.TempDir(), "summary.json")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// P99_MS is high: this compares figures, the shared CI machine decides no threshold.
	cmd := exec.CommandContext(ctx, k6, "run", "--no-usage-report", "--quiet", "--no-color",
		"--summary-trend-stats", "med,p(99),max", "--summary-export", sum,
		"-e", "BASE="+base, "-e", "P99_MS=60000", transport+".js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Exit status 99 is a crossed threshold (delivered < 99.9 %): the figures still compare.
	var ee *exec.ExitError
	if err := cmd.Run(); err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 99) {
		t.Fatalf("k6 run %s.js: %v\n%s", transport, err, excerpt(out.String()))
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.js"))
	peak := append(regexp.MustCompile(`"peak":(\d+)`).FindSubmatch(cfg), nil)
	logUsage(t, "k6", cmd.ProcessState, string(peak[min(1, len(peak)-1)]))
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Metrics map[string]map[string]any `json:"metrics"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("k6 summary: %v", err)
	}
	num := func(metric, stat string) float64 {
		v, _ := s.Metrics[metric][stat].(float64)
		return v
	}
	return k6Figures{
		expected: int64(num("deliveries_expected", "count")), received: int64(num("deliveries_received", "count")),
		lost: int64(num("deliveries_lost", "count")), dup: int64(num("deliveries_duplicate", "count")), errors: int64(num("protocol_errors", "count")),
		p50: num("delivery_latency", "med"), p99: num("delivery_latency", "p(99)"),
	}
}

// runLab runs the bench on the same workload against a fresh server.
func runLab(t *testing.T, transport string) *results.Run {
	t.Helper()
	p := servertest.Start(t, bin, "--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--http-pub-rate", "-1", "--user-msg-rate", "-1")
	return runLabAt(t, p.URL(), append([]string{"--transport", transport}, secondOpinion()...))
}

// runLabAt runs the bench with args against the server at base.
func runLabAt(t *testing.T, base string, args []string) *results.Run {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lab")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--target", base, "--out", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rtlab bench: %v\n%s", err, b)
	}
	logUsage(t, "rtlab bench", cmd.ProcessState, args[slices.Index(args, "--users")+1])
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil || len(r.Runs) != 1 {
		t.Fatalf("results: %v, %d runs", err, len(r.Runs))
	}
	return &r.Runs[0]
}

// logUsage logs a generator's CPU time and peak RSS per user, for docs/bench.md ("Beyond one
// machine").
func logUsage(t *testing.T, who string, ps *os.ProcessState, peak string) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	users, err := strconv.Atoi(peak)
	if !ok || err != nil {
		return
	}
	cpu := ps.UserTime() + ps.SystemTime()
	t.Logf("%s: CPU %.1f s (%.2f ms per user), peak RSS %.0f MiB (%.0f KiB per user)",
		who, cpu.Seconds(), cpu.Seconds()*1000/float64(users), float64(ru.Maxrss)/1024, float64(ru.Maxrss)/float64(users))
}
