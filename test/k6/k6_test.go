// Package k6 runs the seed compatibility suite: the k6 scripts in this directory send exactly
// what the teams' existing scripts send, against a real rtlab process, and fail (k6 exits
// non-zero on a crossed threshold) on any message a member should have received and did not.
package k6

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// k6Version is the k6 the suite is written for; .ci/run builds it into .cache/.
const k6Version = "v1.8.1"

// bin is the rtlab binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) { servertest.Main(m, &bin) }

// k6Binary finds k6: $RTLAB_K6, .cache/k6-v1.8.1/k6 in the checkout, or k6 on PATH. Without
// one the suite is skipped, or fails when $RTLAB_REQUIRE_K6 is set (CI).
func k6Binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RTLAB_K6"); p != "" {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", "..", ".cache", "k6-"+k6Version, "k6")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("k6"); err == nil {
		return p
	}
	const how = "GOBIN=$PWD/.cache/k6-" + k6Version + " go install go.k6.io/k6@" + k6Version
	if os.Getenv("RTLAB_REQUIRE_K6") != "" {
		t.Fatalf("k6 not found and RTLAB_REQUIRE_K6 is set; build it with: %s", how)
	}
	t.Skipf("k6 not found (set RTLAB_K6, or build it with: %s)", how)
	return ""
}

// script is one seed script and the server it runs against.
type script struct {
	file  string
	serve []string // rtlab serve flags
	env   []string // k6 -e NAME=VALUE
}

var scripts = []script{
	// Room 8's whole history stays readable, for the observers.
	{file: "stomp_chat.js", serve: []string{"--durable-history", "100000"}},
	{file: "raw_chat.js", serve: []string{"--durable-history", "100000"}},
	{file: "location_shortpoll.js"},
	{file: "location_longpoll.js"},
	// Streams of 10 s instead of 30: several per user within the run, each reconnect resuming.
	{file: "location_sse.js", serve: []string{"--seed-sse-timeout", "10s"}, env: []string{"SSE_TIMEOUT_S=10"}},
	{file: "location_ws.js"},
	{file: "location_stomp.js"},
}

// TestSeedScripts runs every script at a small peak (200 users by default, $RTLAB_K6_PEAK),
// ramping up for 5 s, holding 10 s, ramping down for 5 s; two at a time.
func TestSeedScripts(t *testing.T) {
	k6 := k6Binary(t)
	if testing.Short() {
		t.Skip("-short: the k6 suite takes a minute or two")
	}
	peak := os.Getenv("RTLAB_K6_PEAK")
	if peak == "" {
		peak = "200"
	}
	slots := make(chan struct{}, 2)
	for _, sc := range scripts {
		t.Run(strings.TrimSuffix(sc.file, ".js"), func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			// A few hundred users from one loopback address: over the server's caps per address
			// (connections, publishes), which are for clients on the internet.
			p := servertest.Start(t, bin, append([]string{"--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--http-pub-rate", "-1", "--user-msg-rate", "-1"}, sc.serve...)...)
			args := []string{"run", "--no-usage-report", "--quiet", "--no-color", "-e", "BASE=" + p.URL(), "-e", "PEAK=" + peak}
			for _, e := range sc.env {
				args = append(args, "-e", e)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, k6, append(args, sc.file)...)
			cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			if err != nil {
				var ee *exec.ExitError
				why := err.Error()
				if errors.As(err, &ee) && ee.ExitCode() == 99 {
					why = "thresholds crossed: members missed messages or got errors"
				}
				t.Fatalf("k6 run %s: %s\n%s", sc.file, why, excerpt(out.String()))
			}
			t.Logf("%s passed in %s:\n%s", sc.file, time.Since(start).Round(time.Second), summary(out.String()))
		})
	}
}

var summaryLine = regexp.MustCompile(`^\s*(delivered|ordered|peak_checks|received|checks_succeeded)\.*:|observer:`)

// summary keeps the lines of k6's output that say what was delivered.
func summary(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if summaryLine.MatchString(line) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// excerpt is k6's output for a failure message: its first distinct errors and the summary.
func excerpt(out string) string {
	var errs []string
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		if !strings.Contains(line, "level=error") && !strings.Contains(line, "level=warning") {
			continue
		}
		msg := line
		if i := strings.Index(line, "msg="); i >= 0 {
			msg = line[i:]
		}
		if !seen[msg] && len(errs) < 20 {
			seen[msg] = true
			errs = append(errs, strings.TrimRight(line, "\n"))
		}
	}
	tail := out
	if i := strings.Index(out, "THRESHOLDS"); i >= 0 {
		tail = out[i:]
	} else if len(out) > 8000 {
		tail = out[len(out)-8000:]
	}
	return strings.Join(errs, "\n") + "\n" + tail
}
