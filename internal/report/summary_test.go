package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// tableBlocks returns the aligned tables of the terminal output: runs of lines indented by
// the tabwriter, which must all be the same width.
func tableBlocks(out string) [][]string {
	var blocks [][]string
	var cur []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "  !") {
			cur = append(cur, line)
			continue
		}
		if len(cur) > 0 {
			blocks = append(blocks, cur)
			cur = nil
		}
	}
	return blocks
}

func TestSummary(t *testing.T) {
	var buf bytes.Buffer
	Summary(&buf, testResults())
	out := buf.String()
	golden(t, "summary.golden", out)

	for _, want := range []string{
		"location scenario · 2 transports × 2 user levels",
		"\n100 users\n", "\n1,000 users\n",
		"transport", "conns", "reconn", "failed", "ratio %", "dups", "ooo", "p50 ms", "p99 ms", "max ms", "msgs/s", "srv CPU%", "srv RSS", "KiB/user", "gen CPU%",
		"verdict: At 100 users every transport delivered ≥99.9 %",
		"verdict: At 1,000 users short polling delivered only 99.80 %",
		"generator saturated: latency figures for WebSocket at 1,000 users may be the generator's, not the server's",
		"! marks a failed check",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	// The short polling row at 1,000 users: 988 opened, 12 failed and 99.80 % both flagged.
	row := lineWith(out, "short polling", "1,000")
	for _, want := range []string{"988", "12!", "99.80!", " 4 ", " 17 ", "11.2", "50.4", "168", "88.0", "70.9 MiB", "48.0", "31.0"} {
		if !strings.Contains(row, want) {
			t.Errorf("short polling at 1,000 users: row %q lacks %q", row, want)
		}
	}
	if row := lineWith(out, "WebSocket", "1,000"); !strings.Contains(row, "gen sat.") {
		t.Errorf("saturated run not marked in its row: %q", row)
	}
	blocks := tableBlocks(out)
	if len(blocks) != 2 {
		t.Fatalf("%d tables, want one per user level", len(blocks))
	}
	for _, b := range blocks {
		if len(b) != 3 {
			t.Errorf("table has %d lines, want a header and two transports", len(b))
		}
		for _, line := range b[1:] {
			if utf8.RuneCountInString(line) != utf8.RuneCountInString(b[0]) {
				t.Errorf("misaligned:\n%s\n%s", b[0], line)
			}
		}
	}
}

func TestSummaryUnmeasured(t *testing.T) {
	r := testResults()
	for i := range r.Runs {
		r.Runs[i].Server.Available = false
	}
	r.Stopped = true
	var buf bytes.Buffer
	Summary(&buf, r)
	out := buf.String()
	for _, want := range []string{"STOPPED", "run stopped before it finished", "server CPU and RSS were not measured", " — "} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

// lineWith returns the first line holding every part.
func lineWith(out string, parts ...string) string {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return line
		}
	}
	return ""
}

func TestCompare(t *testing.T) {
	a := testResults()
	b := fixture(fixtureOptions{transports: []string{"shortpoll", "ws", "sse"}, levels: []int{100, 1000}, seconds: 60, slower: 0.8})
	var buf bytes.Buffer
	Compare(&buf, a, b)
	out := buf.String()
	golden(t, "compare.golden", out)

	for _, want := range []string{
		"a: location scenario", "b: location scenario",
		"figure", "change",
		"only in b",
		"verdict: At 1,000 users, b against a: better: short polling p99 50.4 ms → 40.3 ms (-20.0 %)",
		"warnings in a:", "warnings in b:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	// p99 of short polling at 100 users: 18.0 → 14.4 ms is 20 % better.
	row := lineWith(out, "p99 ms", "18.0", "14.4")
	for _, want := range []string{"-3.60 ms", "-20.0 %", "better"} {
		if !strings.Contains(row, want) {
			t.Errorf("p99 row %q lacks %q", row, want)
		}
	}
	// Unchanged figures say so and are not judged.
	if row := lineWith(out, "msgs/s", "241.8"); !strings.Contains(row, "±0") || strings.Contains(row, "better") || strings.Contains(row, "worse") {
		t.Errorf("unchanged msgs/s row %q", row)
	}
	// A regression is called worse, and crossing a threshold is flagged.
	worse := fixture(fixtureOptions{transports: []string{"shortpoll", "ws"}, levels: []int{100, 1000}, seconds: 60, slower: 1.5})
	worse.Runs[0].Delivery.Ratio = 0.99
	buf.Reset()
	Compare(&buf, a, worse)
	out = buf.String()
	if row := lineWith(out, "delivered", "100 %", "99.00 %"); !strings.Contains(row, "worse !") {
		t.Errorf("threshold crossing not flagged: %q", row)
	}
	if row := lineWith(out, "p99 ms", "18.0", "27.0"); !strings.Contains(row, "+50.0 %") || !strings.Contains(row, "worse") {
		t.Errorf("regression row %q", row)
	}
	if !strings.Contains(out, "verdict: At 100 users, b against a: worse: short polling delivered 100 % → 99.00 %") {
		t.Errorf("threshold crossing does not lead the verdict:\n%s", out)
	}
}

// TestMachinePinned checks that a pinned run says so next to the machine's CPU count.
func TestMachinePinned(t *testing.T) {
	r := testResults()
	r.Machine.Affinity = "0"
	var buf bytes.Buffer
	Summary(&buf, r)
	if want := "lab-1 (8 CPUs, bench and servers pinned to CPU 0, linux/amd64"; !strings.Contains(buf.String(), want) {
		t.Errorf("summary does not say %q:\n%s", want, buf.String())
	}
}

// TestSummaryStealColumn checks that the steal column appears only when the hypervisor took CPU
// in some run, with each run's seconds.
func TestSummaryStealColumn(t *testing.T) {
	r := testResults()
	var buf bytes.Buffer
	Summary(&buf, r)
	if strings.Contains(buf.String(), "steal s") {
		t.Errorf("steal column without any steal:\n%s", buf.String())
	}
	r.Runs[len(r.Runs)-1].StealSeconds = 17
	buf.Reset()
	Summary(&buf, r)
	out := buf.String()
	last := &r.Runs[len(r.Runs)-1]
	row := lineWith(out, "  "+label(last), fmtInt(int64(last.Peak))) // the table row, not the verdict
	if !strings.Contains(out, "steal s") || !strings.HasSuffix(strings.TrimSpace(row), " 17") {
		t.Errorf("steal column missing or wrong; row %q in:\n%s", row, out)
	}
	for _, b := range tableBlocks(out) {
		for _, line := range b[1:] {
			if utf8.RuneCountInString(line) != utf8.RuneCountInString(b[0]) {
				t.Errorf("misaligned:\n%s\n%s", b[0], line)
			}
		}
	}
}
