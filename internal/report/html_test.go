package report

import (
	"bytes"
	"encoding/json"
	"html"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

func renderHTML(t *testing.T, rs ...*results.Results) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rs...); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return buf.String()
}

// externalRef finds anything that would make the page fetch from the network.
var externalRef = regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//|@import|url\(\s*["']?(https?:)?//|<link\b`)

func TestWriteHTMLSelfContained(t *testing.T) {
	page := renderHTML(t, testResults())

	if m := externalRef.FindString(page); m != "" {
		t.Errorf("page references the network: %q", m)
	}
	uplot, err := assets.ReadFile("assets/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, strings.TrimSpace(string(uplot))[:2000]) || !strings.Contains(page, "var uPlot=function") {
		t.Error("uPlot is not inlined")
	}
	if !strings.Contains(page, ".uplot") {
		t.Error("uPlot CSS is not inlined")
	}
	// Three scripts (data, uPlot, report.js), each closed exactly once: nothing broke out early.
	if got := strings.Count(page, "<script"); got != 3 {
		t.Errorf("%d <script> tags, want 3", got)
	}
	if got := strings.Count(page, "</script>"); got != 3 {
		t.Errorf("%d </script> tags, want 3", got)
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
		t.Error("page is not a whole HTML document")
	}
}

func TestWriteHTMLContent(t *testing.T) {
	r := testResults()
	page := renderHTML(t, r)

	for _, want := range []string{
		// Header.
		"rtlab load report: location scenario",
		"20s:300,30s:PEAK,10s:0", "lab-1 (8 CPUs, linux/amd64, 16.0 GiB RAM)", "memory broker, 1 node",
		"rtlab bench (Go, one process), GOMAXPROCS 4", "up to 64 per node", "25s",
		// Warnings, prominent.
		`class="warnings"`,
		"generator saturated: latency figures for WebSocket at 1,000 users may be the generator&#39;s, not the server&#39;s",
		// Every transport by identifier and by name.
		"shortpoll", "ws", "short polling", "WebSocket",
		// The verdict of each level.
		"At 100 users every transport delivered ≥99.9 %; WebSocket had the lower p99 (4.50 ms vs 18.0 ms, 4.0× the lowest)",
		"At 1,000 users short polling delivered only 99.80 %, the others ≥99.9 %",
		// Flags: the failing ratio and failed connections in red, a best value marked.
		`<td class="bad" title="fails the threshold">99.80 %`,
		`<td class="bad" title="fails the threshold">12`,
		`class="best"`,
		// Details: notes and connection errors.
		"generator CPU reached 97 % of its budget",
		"dial tcp: connect: connection refused",
		"history gaps", "Connect time (ms)", "Publish latency, send → ack (ms)",
		// Formatting.
		"14,510", "MiB", "KiB",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	r := testResults()
	r.Config.Scenario = `</script><img src=x onerror=alert(1)>`
	r.Runs[0].Transport = `ws</script><img src=x onerror=alert(2)>` // reaches the inlined chart JSON too
	page := renderHTML(t, r)
	if strings.Contains(page, "<img src=x") || strings.Contains(page, "<script>alert(") {
		t.Error("results text reached the page unescaped")
	}
	// The connection error label in the fixture holds a script tag: it must arrive as text.
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt; timeout") {
		t.Error("connection error label not HTML-escaped")
	}
	if got := strings.Count(page, "</script>"); got != 3 {
		t.Errorf("%d </script> tags, want 3: data broke out of its script element", got)
	}
}

// chartJSON extracts and decodes the chart data inlined in the page.
func chartJSON(t *testing.T, page string) chartsData {
	t.Helper()
	const open = `<script type="application/json" id="rtlab-data">`
	i := strings.Index(page, open)
	if i < 0 {
		t.Fatal("no chart data block")
	}
	rest := page[i+len(open):]
	j := strings.Index(rest, "</script>")
	var raw struct {
		Compare bool `json:"compare"`
		Levels  []struct {
			Users  int    `json:"users"`
			Label  string `json:"label"`
			Charts []struct {
				ID     string        `json:"id"`
				Unit   string        `json:"unit"`
				X      string        `json:"x"`
				Series []chartSeries `json:"series"`
				Data   [][]*float64  `json:"data"`
			} `json:"charts"`
		} `json:"levels"`
	}
	if err := json.Unmarshal([]byte(rest[:j]), &raw); err != nil {
		t.Fatalf("chart data is not valid JSON: %v", err)
	}
	var cd chartsData
	cd.Compare = raw.Compare
	for _, l := range raw.Levels {
		cl := chartLevel{Users: l.Users, Label: l.Label}
		for _, c := range l.Charts {
			spec := chartSpec{ID: c.ID, Unit: c.Unit, X: c.X, Series: c.Series}
			for _, col := range c.Data {
				var out []jsNum
				for _, v := range col {
					if v == nil {
						out = append(out, jsNum(-1)) // tests read -1 as null
						continue
					}
					out = append(out, jsNum(*v))
				}
				spec.Data = append(spec.Data, out)
			}
			cl.Charts = append(cl.Charts, spec)
		}
		cd.Levels = append(cd.Levels, cl)
	}
	return cd
}

func TestWriteHTMLChartData(t *testing.T) {
	cd := chartJSON(t, renderHTML(t, testResults()))
	if len(cd.Levels) != 2 || cd.Levels[0].Users != 100 || cd.Levels[1].Users != 1000 {
		t.Fatalf("chart levels = %+v, want 100 and 1,000 users", cd.Levels)
	}
	for _, l := range cd.Levels {
		ids := map[string]bool{}
		for _, c := range l.Charts {
			ids[c.ID] = true
			if len(c.Series) != 2 {
				t.Errorf("%d users, chart %s: %d series, want both transports", l.Users, c.ID, len(c.Series))
			}
			if len(c.Data) != 1+len(c.Series) {
				t.Fatalf("chart %s: %d columns for %d series", c.ID, len(c.Data), len(c.Series))
			}
			for _, col := range c.Data {
				if c.X == "" && len(col) != 60 {
					t.Errorf("chart %s: %d points, want 60", c.ID, len(col))
				}
			}
			if c.ID == "latdist" {
				checkDistribution(t, c)
			}
		}
		// The errors chart is there with or without errors: none is a finding too.
		for _, want := range []string{"users", "p50", "p99", "latdist", "msgs", "errors", "srvcpu", "srvrss", "gencpu"} {
			if !ids[want] {
				t.Errorf("%d users: no %s chart", l.Users, want)
			}
		}
		if l.Users == 100 && ids["pubfailed"] {
			t.Error("refused publishes chart drawn for a level without any")
		}
		if l.Users == 1000 && !ids["pubfailed"] {
			t.Error("no refused publishes chart for a level with some")
		}
	}
	// Second 0 has no users and no deliveries: its latency is a gap (null), not zero.
	for _, c := range cd.Levels[0].Charts {
		if c.ID == "p99" && c.Data[1][0] != -1 {
			t.Errorf("latency with no deliveries = %v, want null", c.Data[1][0])
		}
	}
}

// checkDistribution checks a latency distribution chart: latency buckets across, ascending, and
// each series' shares adding up to 100 %.
func checkDistribution(t *testing.T, c chartSpec) {
	t.Helper()
	if c.X != "latency" || c.Unit != "pct" {
		t.Errorf("distribution chart: x %q, unit %q; want latency and pct", c.X, c.Unit)
	}
	for i := 1; i < len(c.Data[0]); i++ {
		if c.Data[0][i] <= c.Data[0][i-1] {
			t.Errorf("distribution chart: buckets not ascending: %v", c.Data[0])
		}
	}
	for i, col := range c.Data[1:] {
		sum := 0.0
		for _, v := range col {
			if v > 0 {
				sum += float64(v)
			}
		}
		if math.Abs(sum-100) > 0.01 {
			t.Errorf("distribution chart, %s: shares add up to %.3f %%, want 100", c.Series[i].Label, sum)
		}
	}
}

func TestWriteHTMLDeterministic(t *testing.T) {
	a, b := renderHTML(t, testResults()), renderHTML(t, testResults())
	if a != b {
		t.Error("two renderings of the same results differ")
	}
}

func TestWriteHTMLCompare(t *testing.T) {
	a := testResults()
	b := fixture(fixtureOptions{transports: []string{"shortpoll", "ws", "sse"}, levels: []int{100, 1000}, seconds: 60, slower: 0.8})
	page := renderHTML(t, a, b)
	if m := externalRef.FindString(page); m != "" {
		t.Errorf("page references the network: %q", m)
	}
	for _, want := range []string{
		"rtlab comparison: location scenario, a vs b",
		`data-side="a"`, `data-side="b"`, "b vs a",
		"At 1,000 users, b against a: better: short polling p99 50.4 ms → 40.3 ms (-20.0 %)",
		"only in b: SSE",
		`<span class="delta better">-20.0 %</span><span class="was">a: 50.4</span>`,
		`class="differs"`, // transports differ between the two runs
		"short polling", "WebSocket", "SSE",
		"a &amp; b", // a warning both share is said once
	} {
		if !strings.Contains(page, want) {
			t.Errorf("comparison lacks %q", want)
		}
	}
	cd := chartJSON(t, page)
	if !cd.Compare {
		t.Error("chart data not marked as a comparison")
	}
	var dashed, solid int
	for _, s := range cd.Levels[0].Charts[0].Series {
		if s.Dash {
			dashed++
		} else {
			solid++
		}
	}
	if dashed != 2 || solid != 3 {
		t.Errorf("users chart: %d dashed (a) and %d solid (b) lines, want 2 and 3", dashed, solid)
	}
}

func TestWriteHTMLArgs(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf); err == nil {
		t.Error("no results: want an error")
	}
	r := testResults()
	if err := WriteHTML(&buf, r, r, r); err == nil {
		t.Error("three results: want an error")
	}
	if err := WriteHTML(&buf, r, nil); err == nil {
		t.Error("nil results: want an error")
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	r := testResults()
	r.Runs = nil
	page := renderHTML(t, r)
	if !strings.Contains(page, "the results hold no runs") {
		t.Error("an empty results file is not called out")
	}
}

// TestWriteSample renders a five-transport, three-level report to $RTLAB_REPORT_SAMPLE (and a
// comparison next to it) for looking at in a browser; it is skipped when the variable is unset.
func TestWriteSample(t *testing.T) {
	path := os.Getenv("RTLAB_REPORT_SAMPLE")
	if path == "" {
		t.Skip("RTLAB_REPORT_SAMPLE not set")
	}
	all := []string{"shortpoll", "longpoll", "sse", "ws", "stomp"}
	a := fixture(fixtureOptions{transports: all, levels: []int{100, 1000, 5000}, seconds: 120, slower: 1})
	b := fixture(fixtureOptions{transports: all, levels: []int{100, 1000, 5000}, seconds: 120, slower: 0.85})
	for name, rs := range map[string][]*results.Results{path: {a}, strings.TrimSuffix(path, ".html") + "-compare.html": {a, b}} {
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(f, rs...); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote", name)
	}
}

func TestWriteHTMLUnmeasured(t *testing.T) {
	r := testResults()
	for i := range r.Runs {
		r.Runs[i].Server.Available = false // as with --target
	}
	page := renderHTML(t, r)
	if !strings.Contains(page, `<td class="na" title="not measured">—</td>`) {
		t.Error("unmeasured server figures are not shown as —")
	}
	for _, l := range chartJSON(t, page).Levels {
		for _, c := range l.Charts {
			if c.ID == "srvcpu" || c.ID == "srvrss" {
				t.Errorf("%d users: %s chart drawn without server measurements", l.Users, c.ID)
			}
		}
	}
}

// TestWriteHTMLRagged feeds series of unequal length, as a run stopped mid-second might write:
// shorter series are padded with gaps, and nothing panics.
func TestWriteHTMLRagged(t *testing.T) {
	r := testResults()
	s := &r.Runs[0].Series
	s.Received = s.Received[:10]
	s.LatencyP99 = s.LatencyP99[:30]
	s.ServerRSS = nil
	r.Runs[1].Series = results.Series{}
	cd := chartJSON(t, renderHTML(t, r))
	for _, c := range cd.Levels[0].Charts {
		for _, col := range c.Data {
			if len(col) != len(c.Data[0]) {
				t.Errorf("chart %s: columns of unequal length", c.ID)
			}
		}
	}
}

// TestWriteHTMLServers checks a report of several servers: rows and subtitle name them, the
// header says which versions ran and what was not run, and the summary agrees.
func TestWriteHTMLServers(t *testing.T) {
	r := fixture(fixtureOptions{transports: []string{"ws", "stomp"}, levels: []int{100}, seconds: 10, slower: 1})
	var runs []results.Run
	for _, run := range r.Runs {
		peer := run
		run.ServerKind, peer.ServerKind = "rtlab", "centrifugo"
		if run.Transport == "stomp" {
			peer.ServerKind = "rabbitmq"
		}
		peer.Server.CPUSeconds *= 2
		runs = append(runs, run, peer)
	}
	r.Runs = runs
	r.Config.Servers = "rtlab,centrifugo,rabbitmq"
	r.Config.ServerVersions = map[string]string{"rtlab": "rtlab v0.1.0-test", "centrifugo": "Centrifugo 6.9.1", "rabbitmq": "RabbitMQ 3.10.8 (rabbitmq_web_stomp)"}
	r.Skipped = []results.Skip{{ServerKind: "centrifugo", Transport: "stomp", Reason: "no STOMP"}, {ServerKind: "rabbitmq", Transport: "ws", Reason: "STOMP only"}}
	var page, sum bytes.Buffer
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	Summary(&sum, r)
	for _, want := range []string{"WebSocket · rtlab", "WebSocket · Centrifugo", "STOMP · RabbitMQ", "Centrifugo 6.9.1",
		"STOMP on Centrifugo: no STOMP", "WebSocket on RabbitMQ: STOMP only", "rtlab against Centrifugo: CPU per delivered message 0.50×"} {
		if !strings.Contains(page.String(), want) && !strings.Contains(page.String(), html.EscapeString(want)) {
			t.Errorf("report.html lacks %q", want)
		}
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	if strings.Contains(page.String(), "WebSocket, WebSocket ·") || strings.Contains(sum.String(), "ws~") {
		t.Error("a run named by its key, or a transport named alone beside its server rows")
	}
}

// TestWriteHTMLLatencyGaps: a second without a latency (no deliveries, or deliveries but no
// sample: the bench writes 0) is a gap in the latency lines (null, drawn without joining its
// neighbours), never a point at 0 ms; the seconds around it keep their values.
func TestWriteHTMLLatencyGaps(t *testing.T) {
	rs := testResults()
	s := &rs.Runs[0].Series
	s.LatencyP50[10], s.LatencyP99[10] = 0, 0 // deliveries, none measured
	s.Received[11] = 0                        // no deliveries
	page := renderHTML(t, rs)
	if !strings.Contains(page, "spanGaps: false") {
		t.Error("latency lines join across gaps")
	}
	cd := chartJSON(t, page)
	for _, c := range cd.Levels[0].Charts {
		if c.ID != "p50" && c.ID != "p99" {
			continue
		}
		col := c.Data[1]
		if col[10] != -1 || col[11] != -1 {
			t.Errorf("%s at seconds 10, 11 = %v, %v; want gaps (null)", c.ID, col[10], col[11])
		}
		if col[9] <= 0 || col[12] <= 0 {
			t.Errorf("%s at seconds 9, 12 = %v, %v; want their latencies", c.ID, col[9], col[12])
		}
	}
}
