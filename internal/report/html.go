package report

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/transports"
)

// assets holds the page template, its CSS and JS, and uPlot (MIT, see assets/uPlot.LICENSE),
// all inlined into every report so it opens offline, years later, from an e-mail attachment.
//
//go:embed assets
var assets embed.FS

// pageTemplate is parsed once; html/template is safe for concurrent Execute and is never
// modified after init.
var pageTemplate = template.Must(template.New("report.html.tmpl").ParseFS(assets, "assets/report.html.tmpl"))

// WriteHTML renders a self-contained report.html: one results file gives a report, two give a
// comparison of a (the first) against b (the second). Any other count is an error.
func WriteHTML(w io.Writer, rs ...*results.Results) error {
	for i, r := range rs {
		if r == nil {
			return fmt.Errorf("report: results %d is nil", i+1)
		}
	}
	var p *page
	switch len(rs) {
	case 1:
		p = singlePage(rs[0])
	case 2:
		p = comparePage(rs[0], rs[1])
	default:
		return fmt.Errorf("report: WriteHTML takes one results (report) or two (comparison), got %d", len(rs))
	}
	var err error
	if p.Assets, err = loadAssets(); err != nil {
		return err
	}
	if err := pageTemplate.Execute(w, p); err != nil {
		return fmt.Errorf("report: rendering HTML: %w", err)
	}
	return nil
}

// pageAssets are the inlined scripts and styles. They are typed as trusted JS/CSS because they
// are our own embedded files, not data; everything from results.json stays untyped and escaped.
type pageAssets struct {
	UPlotJS  template.JS
	UPlotCSS template.CSS
	JS       template.JS
	CSS      template.CSS
}

// errAssetClose guards the one way an inlined asset could break out of its <script> or <style>
// element and take the rest of the page with it.
var errAssetClose = errors.New("report: embedded asset contains a closing </script> or </style>")

// loadAssets reads the embedded scripts and styles for one page, refusing any that would close
// its element early.
func loadAssets() (pageAssets, error) {
	read := func(name string) (string, error) {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			return "", fmt.Errorf("report: embedded asset: %w", err)
		}
		if strings.Contains(strings.ToLower(string(b)), "</script") || strings.Contains(strings.ToLower(string(b)), "</style") {
			return "", fmt.Errorf("%w: %s", errAssetClose, name)
		}
		return string(b), nil
	}
	var a pageAssets
	var s [4]string
	for i, name := range []string{"uPlot.iife.min.js", "uPlot.min.css", "report.js", "report.css"} {
		var err error
		if s[i], err = read(name); err != nil {
			return a, err
		}
	}
	a.UPlotJS, a.UPlotCSS, a.JS, a.CSS = template.JS(s[0]), template.CSS(s[1]), template.JS(s[2]), template.CSS(s[3])
	return a, nil
}

// page is everything the template shows, formatted: the template only lays it out.
type page struct {
	Title     string
	Subtitle  string
	Compare   bool
	Sides     []sideView
	Warnings  []sideText
	Levels    []levelView
	Charts    chartsData
	Generated string
	Assets    pageAssets
}

// sideView describes one results file in the header.
type sideView struct {
	Name  string // "a" or "b" in a comparison, else empty
	Facts []fact
}

// fact is one header line; Differs marks, in a comparison, a value the other side does not share.
type fact struct {
	Label, Value string
	Differs      bool
}

// sideText is a line of text that belongs to one side of a comparison (Side empty otherwise).
type sideText struct{ Side, Text string }

// levelView is one user level: the verdict, the headline table and every figure.
type levelView struct {
	ID       string
	Users    string
	Verdicts []sideText
	Head     []headCell
	Rows     []rowView
	Matrix   matrixView
}

type headCell struct{ Text, Title string }

type badge struct{ Text, Class, Title string }

// rowView is one transport: a row of the headline table, a column head of the matrix.
type rowView struct {
	Label  string
	Color  string
	Badges []badge
	Bad    bool
	Cells  []cellView
}

// cellView is one figure; in a comparison it shows b, with the change and a's figure beneath.
type cellView struct {
	Text       string
	Class      string // "best", "bad", "na" (not measured)
	Title      string
	Delta      string // change from a (comparison only)
	DeltaClass string // "better", "worse" or ""
	Was        string // a's figure (comparison only, when it differs)
}

// matrixView is every figure of every transport at one user level: figures down, transports
// across, so "which one dropped connections" is answered along a row.
type matrixView struct {
	Head []rowView // the transports: Label, Color, and in a comparison "only in a/b" badges
	Cols int       // table columns: the label plus one per transport
	// Tables hold the figure groups in two tables, counts and usage then latencies, set side by
	// side on a wide screen so the section is half as long.
	Tables [][]matrixGroup
	Extras []extraView // notes and connection errors of the transports that have any
}

type matrixGroup struct {
	Title string
	Rows  []matrixRow
}

type matrixRow struct {
	Label string
	Cells []cellView
}

// extraView is the free text of one transport: notes and the most frequent connection errors.
type extraView struct {
	ID     string
	Label  string
	Color  string
	Notes  []sideText
	Errors []errorRow
}

type errorRow struct {
	Side  string
	Label string
	N     string
}

// generatedAt dates the page by the newest run it shows, not by the clock, so re-rendering a
// results file gives the same page byte for byte.
func generatedAt(rs ...*results.Results) string {
	var t time.Time
	for _, r := range rs {
		if r.Finished.After(t) {
			t = r.Finished
		}
	}
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04 MST")
}

// singlePage builds the report of one results file.
func singlePage(r *results.Results) *page {
	p := &page{
		Title:     "rtlab load report: " + nonEmpty(r.Config.Scenario, "unnamed") + " scenario",
		Subtitle:  subtitle(r),
		Sides:     []sideView{{Facts: facts(r)}},
		Generated: generatedAt(r),
	}
	for _, w := range warnings(r) {
		p.Warnings = append(p.Warnings, sideText{Text: w})
	}
	var cls []chartLevel
	for _, l := range levelsOf(r) {
		pairs := make([]pair, len(l.runs))
		for i, run := range l.runs {
			pairs[i] = pair{transport: run.Key(), b: run}
		}
		colors := palette(transportsOf(pairs))
		lv := buildLevel(l.users, pairs, colors, false)
		lv.Verdicts = []sideText{{Text: verdict(l.users, l.runs)}}
		p.Levels = append(p.Levels, lv)
		cls = append(cls, chartLevelOf(l.users, l.runs, nil, colors))
	}
	p.Charts = chartsData{Levels: cls}
	return p
}

// comparePage builds the comparison of a against b.
func comparePage(a, b *results.Results) *page {
	fa, fb := facts(a), facts(b)
	markDifferences(fa, fb)
	p := &page{
		Title:     "rtlab comparison: " + scenarioPair(a, b),
		Subtitle:  "a: " + subtitle(a) + "  ·  b: " + subtitle(b),
		Compare:   true,
		Sides:     []sideView{{Name: "a", Facts: fa}, {Name: "b", Facts: fb}},
		Generated: generatedAt(a, b),
	}
	wa, wb := warnings(a), warnings(b)
	for _, w := range wa {
		side := "a"
		if slices.Contains(wb, w) {
			side = "a & b" // said once, not twice
		}
		p.Warnings = append(p.Warnings, sideText{Side: side, Text: w})
	}
	for _, w := range wb {
		if !slices.Contains(wa, w) {
			p.Warnings = append(p.Warnings, sideText{Side: "b", Text: w})
		}
	}
	var cls []chartLevel
	for _, lp := range pairLevels(a, b) {
		colors := palette(transportsOf(lp.pairs))
		lv := buildLevel(lp.users, lp.pairs, colors, true)
		lv.Users = lp.title()
		lv.Verdicts = append(lv.Verdicts, sideText{Side: "b vs a", Text: compareVerdict(lp)})
		ra, rb := lp.sides(false), lp.sides(true)
		if len(ra) > 0 {
			lv.Verdicts = append(lv.Verdicts, sideText{Side: "a", Text: verdict(cmp.Or(lp.usersA, lp.users), ra)})
		}
		if len(rb) > 0 {
			lv.Verdicts = append(lv.Verdicts, sideText{Side: "b", Text: verdict(lp.users, rb)})
		}
		p.Levels = append(p.Levels, lv)
		cl := chartLevelOf(lp.users, rb, ra, colors)
		cl.Label = lp.title()
		cls = append(cls, cl)
	}
	p.Charts = chartsData{Levels: cls, Compare: true}
	return p
}

// transportsOf lists the transports of a level in table order.
func transportsOf(pairs []pair) []string {
	ts := make([]string, len(pairs))
	for i, p := range pairs {
		ts[i] = p.transport
	}
	return ts
}

// buildLevel lays out the tables of one user level. In a report each pair holds only b.
func buildLevel(users int, pairs []pair, colors map[string]string, compare bool) levelView {
	lv := levelView{
		ID:    "u" + strconv.Itoa(users),
		Users: fmtUsers(users),
		Head:  headlineHead(),
	}
	ms := headlineMetrics()
	var best [][]bool
	if !compare {
		runs := make([]*results.Run, len(pairs))
		for i, p := range pairs {
			runs[i] = p.b
		}
		for _, m := range ms {
			best = append(best, bestOf(m, runs))
		}
	}
	lv.Matrix.Cols = 1 + len(pairs)
	for i, p := range pairs {
		row := rowView{Label: transportLabel(p.transport), Color: colors[p.transport], Badges: pairBadges(p, compare)}
		if p.b != nil {
			row.Bad = len(failsThreshold(p.b)) > 0
		}
		for j, m := range ms {
			c := figureCell(m, p, compare)
			if !compare && best[j][i] && c.Class == "" {
				c.Class, c.Title = "best", "best "+m.label+" at this level"
			}
			row.Cells = append(row.Cells, c)
		}
		lv.Rows = append(lv.Rows, row)
		head := rowView{Label: row.Label, Color: row.Color}
		if compare && (p.a == nil || p.b == nil) {
			head.Badges = row.Badges[:1] // "only in a" or "only in b"
		}
		lv.Matrix.Head = append(lv.Matrix.Head, head)
		if x := extrasOf(lv.ID, p, colors[p.transport]); len(x.Notes) > 0 || len(x.Errors) > 0 {
			lv.Matrix.Extras = append(lv.Matrix.Extras, x)
		}
	}
	lv.Matrix.Tables = [][]matrixGroup{
		matrixGroups(detailSections(), pairs, compare),
		matrixGroups(latencySections(), pairs, compare),
	}
	if g := thresholdGroup(pairs, compare); g != nil {
		lv.Matrix.Tables[0] = append([]matrixGroup{*g}, lv.Matrix.Tables[0]...)
	}
	return lv
}

// figureCell formats one figure of one transport, flagged when it fails a threshold. In a
// comparison it shows b with the change from a; a transport one side did not run says so.
func figureCell(m metric, p pair, compare bool) cellView {
	var c cellView
	if p.b == nil {
		c.Text, c.Class = "not run", "na"
	} else {
		c.Text = m.cell(p.b)
		if v, ok := m.value(p.b); !ok {
			c.Class, c.Title = "na", "not measured"
		} else if m.fails(v) {
			c.Class, c.Title = "bad", "fails the threshold"
		}
		if p.b.GeneratorSaturated && (m.key == mGenCPU.key || m.key == "generator.cpuAvg") {
			c.Class, c.Title = "bad", "generator saturated: latency figures may be the generator's"
		}
	}
	if !compare {
		return c
	}
	// A transport only one side ran is badged in its heading; its cells need no "a: not run".
	// An unchanged figure shows nothing beneath it: the legend says so, and the eye goes to what moved.
	if p.a == nil {
		return c
	}
	ch := m.compare(p.a, p.b)
	if !ch.ok {
		if was := m.cell(p.a); was != c.Text {
			c.Was = was
		}
		return c
	}
	if ch.delta == 0 {
		return c
	}
	c.Delta = ch.pctTxt
	if m.unit == unitRatio || m.unit == unitCPU || c.Delta == "" {
		c.Delta = ch.deltaTxt
	}
	c.DeltaClass = verdictClass(ch.verdict)
	c.Was = m.cell(p.a)
	c.Title = strings.TrimSpace(c.Title + " (a " + c.Was + ", change " + ch.deltaTxt + " " + ch.pctTxt + ")")
	return c
}

// matrixGroups lays out sections as groups of rows with one cell per transport.
func matrixGroups(sections []section, pairs []pair, compare bool) []matrixGroup {
	var gs []matrixGroup
	for _, s := range sections {
		if !measured(s, pairs) {
			continue // a broker server's figures in a memory run, say
		}
		g := matrixGroup{Title: s.title}
		for _, m := range s.metrics {
			row := matrixRow{Label: m.label}
			for _, p := range pairs {
				row.Cells = append(row.Cells, figureCell(m, p, compare))
			}
			g.Rows = append(g.Rows, row)
		}
		if s.title == "Run" {
			g.Rows = append(g.Rows, startedRow(pairs, compare))
		}
		gs = append(gs, g)
	}
	return gs
}

// measured reports whether any run of pairs has any figure of s.
func measured(s section, pairs []pair) bool {
	for _, m := range s.metrics {
		for _, p := range pairs {
			for _, r := range []*results.Run{p.a, p.b} {
				if r == nil {
					continue
				}
				if _, ok := m.value(r); ok {
					return true
				}
			}
		}
	}
	return false
}

// extrasOf collects the notes and connection errors of one transport, tagged by side in a
// comparison.
func extrasOf(levelID string, p pair, color string) extraView {
	x := extraView{ID: levelID + "-" + p.transport, Label: transportLabel(p.transport), Color: color}
	for _, s := range []struct {
		name string
		r    *results.Run
	}{{"a", p.a}, {"b", p.b}} {
		if s.r == nil {
			continue
		}
		side := s.name
		if p.a == nil { // a report: no sides to tell apart
			side = ""
		}
		for _, n := range s.r.Notes {
			x.Notes = append(x.Notes, sideText{Side: side, Text: n})
		}
		if l := latencySet(s.r); l != "" {
			x.Notes = append(x.Notes, sideText{Side: side, Text: l})
		}
		for _, f := range s.r.Faults {
			x.Notes = append(x.Notes, sideText{Side: side, Text: faultLine(f)})
		}
		for _, e := range s.r.Connections.Errors {
			x.Errors = append(x.Errors, errorRow{Side: side, Label: e.Label, N: fmtInt(e.N)})
		}
	}
	return x
}

// pairBadges flags a transport's state next to its name.
func pairBadges(p pair, compare bool) []badge {
	if !compare {
		return runBadges(p.b, "")
	}
	var bs []badge
	switch {
	case p.a == nil:
		bs = append(bs, badge{Text: "only in b", Class: "info"})
	case p.b == nil:
		bs = append(bs, badge{Text: "only in a", Class: "info"})
	}
	if p.b != nil {
		bs = append(bs, runBadges(p.b, "b: ")...)
	}
	if p.a != nil {
		bs = append(bs, runBadges(p.a, "a: ")...)
	}
	return bs
}

// markDifferences flags the header facts that differ between a and b, so a reader sees at once
// whether the two runs are comparable (same machine, same stages) and what was changed.
func markDifferences(a, b []fact) {
	values := func(fs []fact) map[string]string {
		m := map[string]string{}
		for _, f := range fs {
			m[f.Label] = f.Value
		}
		return m
	}
	va, vb := values(a), values(b)
	for i, f := range a {
		a[i].Differs = vb[f.Label] != f.Value && f.Label != "date"
	}
	for i, f := range b {
		b[i].Differs = va[f.Label] != f.Value && f.Label != "date"
	}
}

// verdictClass is the CSS class of a change: green when better, red when worse.
func verdictClass(v int) string {
	switch v {
	case 1:
		return "better"
	case -1:
		return "worse"
	}
	return ""
}

// scenarioPair names what a comparison compares, once when both ran the same scenario.
func scenarioPair(a, b *results.Results) string {
	sa, sb := nonEmpty(a.Config.Scenario, "unnamed"), nonEmpty(b.Config.Scenario, "unnamed")
	if sa == sb {
		return sa + " scenario, a vs b"
	}
	return sa + " (a) vs " + sb + " (b)"
}

// headlineHead is the header row of the verdict table, with what each column means on hover.
func headlineHead() []headCell {
	titles := map[string]string{
		mRatio.key:   "received ÷ expected deliveries, over the publications the server accepted; below 99.9 % fails",
		mPubFail.key: "publishes the server refused or that failed (no answer); any fails: they are losses the ratio does not count",
		mLost.key:    "expected deliveries that never arrived",
		mP50.key:     "median end-to-end delivery latency, publisher's send → receiver",
		mP99.key:     "99th percentile delivery latency",
		mFailed.key:  "connections that could not be opened; any fails",
		mMsgs.key:    "deliveries received per second over the run",
		mSrvCPU.key:  "server CPU, average over the run; 100 % = one core",
		mSrvRSS.key:  "server resident memory, maximum",
		mPerUsr.key:  "(server RSS at peak − RSS before users) ÷ peak users",
		mCPUMsg.key:  "server CPU time over the run (all its processes and nodes) ÷ deliveries received, in µs",
		mGenCPU.key:  "the bench's own CPU; near its budget the latency is the generator's",
	}
	var h []headCell
	for _, m := range headlineMetrics() {
		h = append(h, headCell{Text: m.label, Title: titles[m.key]})
	}
	return h
}

// runBadges flags a run's state next to its name.
func runBadges(r *results.Run, prefix string) []badge {
	var bs []badge
	if c := crossed(r); len(c) > 0 {
		bs = append(bs, badge{Text: prefix + "threshold crossed", Class: "bad", Title: "crossed " + joinNames(c)})
	} else if len(r.Thresholds) > 0 {
		var all []string
		for _, t := range r.Thresholds {
			all = append(all, t.Expr+" ("+thresholdFigure(t)+")")
		}
		bs = append(bs, badge{Text: prefix + "thresholds passed", Class: "ok", Title: "passed " + joinNames(all)})
	}
	if f := failedPublishes(r); f != "" {
		bs = append(bs, badge{Text: prefix + "publishes refused", Class: "bad", Title: f})
	}
	if r.GeneratorSaturated {
		bs = append(bs, badge{Text: prefix + "generator saturated", Class: "bad", Title: "latency figures may be the generator's, not the server's"})
	}
	if r.Stopped {
		bs = append(bs, badge{Text: prefix + "stopped", Class: "warn", Title: "interrupted: figures cover only what ran"})
	}
	return bs
}

// subtitle is the run in one line: transports, user levels, date.
func subtitle(r *results.Results) string {
	var users []string
	for _, l := range levelsOf(r) {
		users = append(users, fmtInt(int64(l.users)))
	}
	var ts []string
	seen := map[string]bool{}
	for _, run := range r.Runs {
		if run.Broker != "" || run.ServerKind != "" {
			seen[run.Transport] = true // named with its broker or server below
		}
	}
	for _, t := range r.Config.Transports {
		if !seen[t] {
			seen[t] = true
			ts = append(ts, transportLabel(t))
		}
	}
	for _, run := range r.Runs {
		if !seen[run.Key()] {
			seen[run.Key()] = true
			ts = append(ts, transportLabel(run.Key()))
		}
	}
	s := joinNames(ts)
	if len(users) > 0 {
		s += " at " + joinNames(users) + " users"
	}
	if !r.Started.IsZero() {
		s += ", " + r.Started.Format("2 Jan 2006 15:04 MST")
	}
	return s
}

// facts are the header's key-value lines: enough to reproduce the run and to judge the machine.
func facts(r *results.Results) []fact {
	c := r.Config
	var fs []fact
	add := func(label, value string) {
		if value != "" {
			fs = append(fs, fact{Label: label, Value: value})
		}
	}
	add("scenario", c.Scenario)
	var ts []string
	for _, t := range c.Transports {
		ts = append(ts, transportLabel(t)+" ("+t+")")
	}
	add("transports", strings.Join(ts, ", "))
	var us []string
	for _, u := range c.Users {
		us = append(us, fmtInt(int64(u)))
	}
	add("users", strings.Join(us, ", "))
	add("stages", c.Stages)
	var groups []string
	if c.GroupSize > 0 {
		groups = append(groups, fmt.Sprintf("%d users per group", c.GroupSize))
	}
	if c.Groups > 0 {
		groups = append(groups, fmt.Sprintf("%d groups", c.Groups))
	}
	add("groups", strings.Join(groups, ", "))
	if c.Interval > 0 {
		add("interval", time.Duration(c.Interval).String())
	}
	if c.LongPollWait > 0 {
		add("long-poll wait", time.Duration(c.LongPollWait).String())
	}
	if c.Grace > 0 {
		add("delivery grace", time.Duration(c.Grace).String())
	}
	add("publish connections", poolFact(r))
	add("thresholds", c.Thresholds)
	if !r.Started.IsZero() {
		d := ""
		if t := runTime(r); t > 0 {
			d = " (took " + t.String() + ")"
		}
		add("date", r.Started.Format("Mon 2 Jan 2006 15:04:05 MST")+d)
	}
	add("machine", machine(r.Machine))
	add("server", server(c))
	add("server args", strings.Join(c.ServerArgs, " "))
	add("not run", strings.Join(notRun(r), "; "))
	gen := r.Generator
	if n := r.Machine.GoMaxProcs; n > 0 {
		if gen != "" {
			gen += ", "
		}
		gen += fmt.Sprintf("GOMAXPROCS %d", n) // its CPU budget, which the saturation rule uses
	}
	add("generator", gen)
	add("rtlab", r.Version)
	if c.Seed != 0 {
		add("seed", strconv.FormatInt(c.Seed, 10))
	}
	add("command", strings.Join(c.Args, " "))
	if r.Stopped {
		add("status", "stopped before it finished")
	}
	return fs
}

// poolFact describes the shared HTTP pool the runs published (or logged in) over, as the runs'
// notes do: its size per node at each user level that used one, and the cap.
func poolFact(r *results.Results) string {
	var sizes []string
	for _, l := range levelsOf(r) {
		n := 0
		for _, run := range l.runs {
			n = max(n, run.PublishConns)
		}
		if n > 0 {
			sizes = append(sizes, fmt.Sprintf("%d at %s", n, fmtUsers(l.users)))
		}
	}
	c := r.Config.PublishConns
	switch {
	case len(sizes) > 0:
		return fmt.Sprintf("per node: %s (one per 8 peak users, at most --publish-conns %d)", strings.Join(sizes, ", "), c)
	case c > 0 && slices.ContainsFunc(r.Runs, func(run results.Run) bool { return run.Transport != transports.WS && run.Transport != transports.STOMP }):
		return fmt.Sprintf("up to %d per node (shared HTTP pool)", c) // results from before the pool size was recorded
	}
	return ""
}

// thresholdGroup is the details' table of the thresholds: one row per threshold, each
// transport's figure and whether it passed; nil when no run was checked.
func thresholdGroup(pairs []pair, compare bool) *matrixGroup {
	var exprs []string
	seen := map[string]bool{}
	for _, p := range pairs {
		for _, r := range []*results.Run{p.a, p.b} {
			if r == nil {
				continue
			}
			for _, t := range r.Thresholds {
				if !seen[t.Expr] {
					seen[t.Expr] = true
					exprs = append(exprs, t.Expr)
				}
			}
		}
	}
	if len(exprs) == 0 {
		return nil
	}
	cell := func(r *results.Run, expr string) cellView {
		if r == nil {
			return cellView{Text: "not run", Class: "na"}
		}
		for _, t := range r.Thresholds {
			if t.Expr != expr {
				continue
			}
			if t.Pass {
				return cellView{Text: thresholdFigure(t) + " ✓", Title: "passed " + expr}
			}
			return cellView{Text: thresholdFigure(t) + " ✗", Class: "bad", Title: "crossed " + expr}
		}
		return cellView{Text: none, Class: "na", Title: "not checked"}
	}
	g := &matrixGroup{Title: "Thresholds (--threshold)"}
	for _, e := range exprs {
		row := matrixRow{Label: e}
		for _, p := range pairs {
			c := cell(p.b, e)
			if compare && p.a != nil {
				if was := cell(p.a, e); was.Text != c.Text {
					c.Was = was.Text
				}
			}
			row.Cells = append(row.Cells, c)
		}
		g.Rows = append(g.Rows, row)
	}
	return g
}

// startedRow says when each run began, the one figure of a run that is a time, not a number.
func startedRow(pairs []pair, compare bool) matrixRow {
	row := matrixRow{Label: "started"}
	for _, p := range pairs {
		c := cellView{Text: "not run", Class: "na"}
		if p.b != nil {
			c = cellView{Text: fmtTime(p.b.Started)}
		}
		if compare && p.a != nil {
			c.Was = fmtTime(p.a.Started)
		}
		row.Cells = append(row.Cells, c)
	}
	return row
}

// fmtTime shows a run's start as a clock time; the date is in the header.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return none
	}
	return t.Format("15:04:05")
}
