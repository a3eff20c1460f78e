package report

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

// refusedResults is the run: Redis restarted during the WebSocket cell, 526 of 5,824
// publishes refused over 4 s, every accepted one delivered; checked against thresholds.
func refusedResults() *results.Results {
	r := fixture(fixtureOptions{transports: []string{"sse", "ws"}, levels: []int{500}, seconds: 60, slower: 1})
	r.Config.Thresholds = "p99<250ms,ratio>=0.999,pubfailed==0"
	ws := &r.Runs[1]
	ws.Publish.Sent, ws.Publish.Failed = 5824, 526
	for i := 20; i < 24; i++ {
		ws.Series.PublishFailed[i] = 130
		ws.Series.Errors[i] = 130
	}
	ws.Series.PublishFailed[23] = 136
	for i := range r.Runs {
		run := &r.Runs[i]
		run.Thresholds = []results.ThresholdResult{
			{Expr: "p99<250ms", Value: run.Delivery.Latency.P99, Measured: true, Pass: true},
			{Expr: "ratio>=0.999", Value: 1, Measured: true, Pass: true},
			{Expr: "pubfailed==0", Value: float64(run.Publish.Failed), Measured: true, Pass: run.Publish.Failed == 0},
		}
	}
	return r
}

// TestSummaryRefusedPublishes checks that refused publishes are never summarised as if nothing
// happened: counted and flagged in the table, said with their share and when beneath it and in
// the verdict, and the thresholds marked per row and in total.
func TestSummaryRefusedPublishes(t *testing.T) {
	var buf bytes.Buffer
	Summary(&buf, refusedResults())
	out := buf.String()
	row := lineWith(out, "WebSocket", "500")
	for _, want := range []string{"526!", "CROSSED 1!"} {
		if !strings.Contains(row, want) {
			t.Errorf("WebSocket row %q lacks %q", row, want)
		}
	}
	if row := lineWith(out, "SSE", "500"); !strings.HasSuffix(row, "pass") {
		t.Errorf("SSE row %q does not end in pass", row)
	}
	for _, want := range []string{
		"  ! WebSocket: 526 of 5,824 publishes (9.03 %) refused or failed, from 20 s to 24 s into the run\n",
		"  ! WebSocket crossed pubfailed==0 (526)\n",
		"verdict: At 500 users every transport delivered ≥99.9 % of the publications the server accepted; but publishes were refused or failed: WebSocket: 526 of 5,824 publishes (9.03 %) refused or failed, from 20 s to 24 s into the run;",
		"THRESHOLDS CROSSED: WebSocket crossed pubfailed==0 (526).",
		"\nthresholds (p99<250ms,ratio>=0.999,pubfailed==0): crossed in 1 check\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "every transport delivered ≥99.9 %;") {
		t.Errorf("summary says every transport delivered without a word on the refused publishes:\n%s", out)
	}

	// Without a crossing, the summary says every run passed.
	r := refusedResults()
	for i := range r.Runs {
		r.Runs[i].Publish.Failed = 0
		r.Runs[i].Thresholds[2].Pass = true
	}
	buf.Reset()
	Summary(&buf, r)
	if !strings.Contains(buf.String(), "thresholds (p99<250ms,ratio>=0.999,pubfailed==0): every run passed") {
		t.Errorf("summary of passed thresholds:\n%s", buf.String())
	}
}

// TestHTMLRefusedPublishes checks the report's side of it: the column, the badges, the red row,
// the thresholds group of the details.
func TestHTMLRefusedPublishes(t *testing.T) {
	page := renderHTML(t, refusedResults())
	for _, want := range []string{
		`<th title="publishes the server refused or that failed (no answer); any fails: they are losses the ratio does not count">pub failed</th>`,
		`class="badge badge-bad" title="526 of 5,824 publishes (9.03 %) refused or failed, from 20 s to 24 s into the run">publishes refused</span>`,
		`class="badge badge-bad" title="crossed pubfailed==0 (526)">threshold crossed</span>`,
		`>thresholds passed</span>`,
		`<tr class="group"><th colspan="3">Thresholds (--threshold)</th></tr>`,
		`526 ✗`,
		`<dt>thresholds</dt><dd>p99&lt;250ms,ratio&gt;=0.999,pubfailed==0</dd>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// TestCompareNearestLevels checks that two runs at different user levels are compared level to
// nearest level, and say so, instead of every level being "only in a" or "only in b".
func TestCompareNearestLevels(t *testing.T) {
	a := fixture(fixtureOptions{transports: []string{"ws"}, levels: []int{1000, 5000}, seconds: 30, slower: 1})
	b := fixture(fixtureOptions{transports: []string{"ws"}, levels: []int{1200, 20000}, seconds: 30, slower: 0.8})
	var buf bytes.Buffer
	Compare(&buf, a, b)
	out := buf.String()
	for _, want := range []string{
		"\n1,200 users (a: 1,000)\n",
		"verdict: At 1,200 users (a: 1,000), b against a:",
		"\n5,000 users\n", // beyond a factor of two from 20,000: on its own
		"\n20,000 users\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n1,000 users\n") {
		t.Errorf("a's 1,000 users stand alone instead of beside b's 1,200:\n%s", out)
	}
	page := renderHTML(t, a, b)
	if !strings.Contains(page, "<h3>1,200 users (a: 1,000)</h3>") {
		t.Error("page does not title the paired level with both user counts")
	}
}

// TestWriteCSV checks the per-second series as CSV: a header, one row per run and second, the
// run named in every row, and no latency for a second without deliveries.
func TestWriteCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteCSV(&buf, refusedResults()); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*60 {
		t.Fatalf("%d rows, want a header and 120", len(rows))
	}
	head := strings.Join(rows[0], ",")
	if !strings.HasPrefix(head, "transport,server,broker,round,peak_users,second,users,sent,received,errors,publish_failed,latency_p50_ms,latency_p99_ms,") {
		t.Errorf("header %s", head)
	}
	col := func(name string) int {
		for i, h := range rows[0] {
			if h == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	ws21 := rows[1+60+21]
	if ws21[0] != "ws" || ws21[col("peak_users")] != "500" || ws21[col("second")] != "21" || ws21[col("publish_failed")] != "130" {
		t.Errorf("WebSocket second 21: %v", ws21)
	}
	if first := rows[1]; first[col("received")] != "0" || first[col("latency_p99_ms")] != "" {
		t.Errorf("second 0 without deliveries: received %s, p99 %q; want 0 and empty", first[col("received")], first[col("latency_p99_ms")])
	}
}
