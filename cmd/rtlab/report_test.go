package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// writeResultsFile writes a small results file with one WebSocket run at users.
func writeResultsFile(t *testing.T, dir string, users int) string {
	t.Helper()
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := results.Results{Schema: results.SchemaVersion, Started: start, Finished: start.Add(time.Minute),
		Config: results.Config{Scenario: "location", Transports: []string{"ws"}, Users: []int{users}},
		Runs: []results.Run{{Transport: "ws", Peak: users, Delivery: results.Delivery{Expected: 10, Received: 10, Ratio: 1,
			Latency: results.Latencies{Count: 10, P99: 3}}}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "results.json")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReportBadInput checks the exact line each bad use of rtlab report gets, with exit 2.
func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	a := writeResultsFile(t, filepath.Join(dir, "a"), 1000)
	missing := filepath.Join(dir, "missing.json")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "0 results files given; want one (a report) or two (a comparison) (rtlab report -h)"},
		{[]string{a, a, a}, "3 results files given; want one (a report) or two (a comparison) (rtlab report -h)"},
		{[]string{a, "--out", a}, `--out "` + a + `": it is the results file; want another file for the page`},
		{[]string{a, "--out"}, "--out needs a value (rtlab report -h says what it takes)"},
		{[]string{"--open", a}, "unknown flag --open (rtlab report -h lists the flags)"},
		{[]string{missing}, "open " + missing + ": no such file or directory"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"report"}, tt.args...), &stdout, &stderr)
		if want := "rtlab report: " + tt.want + "\n"; code != 2 || stderr.String() != want {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, stderr.String(), want)
		}
	}
}

// TestReportCompareNearest checks rtlab report a.json b.json on runs at different user levels:
// they are compared level to nearest level, and the page is written where --out says, even
// when --out comes after the files.
func TestReportCompareNearest(t *testing.T) {
	dir := t.TempDir()
	a := writeResultsFile(t, filepath.Join(dir, "a"), 1000)
	b := writeResultsFile(t, filepath.Join(dir, "b"), 1200)
	page := filepath.Join(dir, "cmp.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", a, b, "--out", page}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"\n1,200 users (a: 1,000)\n", "verdict: At 1,200 users (a: 1,000), b against a:", "\nreport: " + page + "\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("1,200 users (a: 1,000)")) {
		t.Errorf("page %s: %v", page, err)
	}
}
