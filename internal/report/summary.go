package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/results"
)

// flagMark follows a terminal figure that fails a threshold; the terminal has no red.
const flagMark = "!"

// Summary writes the terminal summary of one results file: a table per user level, the verdict
// line under it, then the warnings a reader must not miss.
func Summary(w io.Writer, r *results.Results) {
	fmt.Fprintln(w, headline(r))
	if m := machineLine(r); m != "" {
		fmt.Fprintln(w, m)
	}
	flagged := false
	for _, l := range levelsOf(r) {
		if summaryLevel(w, l) {
			flagged = true
		}
	}
	if flagged {
		fmt.Fprintf(w, "\n%s marks a failed check: delivered < 99.9 %%, failed connections, refused or failed publishes, or a crossed --threshold\n", flagMark)
	}
	if n := r.ThresholdsCrossed(); n > 0 {
		fmt.Fprintf(w, "\nthresholds (%s): crossed in %d check%s\n", r.Config.Thresholds, n, plural(n))
	} else if checked(runsOf(r)) {
		fmt.Fprintf(w, "\nthresholds (%s): every run passed\n", r.Config.Thresholds)
	}
	if ns := notRun(r); len(ns) > 0 {
		fmt.Fprintln(w, "\nnot run:")
		for _, s := range ns {
			fmt.Fprintln(w, "  -", s)
		}
	}
	if ws := warnings(r); len(ws) > 0 {
		fmt.Fprintln(w, "\nwarnings:")
		for _, s := range ws {
			fmt.Fprintln(w, "  !", s)
		}
	}
}

// summaryColumns are the optional columns of a level's table: shown when any run has them.
type summaryColumns struct {
	brokers    bool // the broker server's CPU was measured
	steal      bool // the hypervisor took CPU for other machines: it explains a p99 the run did not cause
	thresholds bool // --threshold was checked
}

// summaryLevel writes one user level: its table, the lines under it and its verdict. It
// reports whether a figure was flagged.
func summaryLevel(w io.Writer, l level) (flagged bool) {
	fmt.Fprintf(w, "\n%s\n", fmtUsers(l.users))
	rows := [][]string{{"transport", "users", "conns", "reconn", "failed", "ratio %", "pub fail", "dups", "ooo", "p50 ms", "p99 ms", "max ms", "msgs/s", "srv CPU%", "µs/msg", "srv RSS", "KiB/user", "gen CPU%"}}
	cols := summaryColumns{
		brokers:    slices.ContainsFunc(l.runs, func(r *results.Run) bool { return r.BrokerServer.Available }),
		steal:      slices.ContainsFunc(l.runs, func(r *results.Run) bool { return r.StealSeconds > 0 }),
		thresholds: checked(l.runs),
	}
	if cols.brokers {
		rows[0] = append(rows[0], "brk CPU%")
	}
	if cols.steal {
		rows[0] = append(rows[0], "steal s")
	}
	if cols.thresholds {
		rows[0] = append(rows[0], "thresholds")
	}
	for _, run := range l.runs {
		row, f := summaryRow(run, cols)
		rows = append(rows, row)
		flagged = flagged || f
	}
	writeTable(w, rows, 1, false)
	for _, run := range l.runs {
		if f := failedPublishes(run); f != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", flagMark, label(run), f)
		}
		if c := crossed(run); len(c) > 0 {
			fmt.Fprintf(w, "  %s %s crossed %s\n", flagMark, label(run), joinNames(c))
		}
		if l := latencySet(run); l != "" {
			fmt.Fprintf(w, "  · %s: %s\n", label(run), l)
		}
		if p := processesLine(run); p != "" {
			fmt.Fprintf(w, "  · %s CPU: %s\n", label(run), p)
		}
		for _, f := range run.Faults {
			mark := "·"
			if faultFlagged(f) {
				mark, flagged = flagMark, true
			}
			fmt.Fprintf(w, "  %s %s %s\n", mark, label(run), faultLine(f))
		}
	}
	fmt.Fprintln(w, "verdict:", verdict(l.users, l.runs))
	return flagged
}

// summaryRow is one run's row of a level's table; flagged reports a figure that failed a check.
func summaryRow(run *results.Run, cols summaryColumns) (row []string, flagged bool) {
	mark := func(cell string, bad bool) string {
		if bad {
			flagged = true
			return cell + flagMark
		}
		return cell
	}
	ratio := fmtRatio(run.Delivery.Ratio)
	if run.Delivery.Expected == 0 {
		ratio = none // nothing was expected: no ratio, not 100 %
	}
	ratio = mark(ratio, run.Delivery.Ratio < MinRatio)
	failed := mark(fmtInt(run.Connections.Failed), run.Connections.Failed > 0)
	pubFail := mark(fmtInt(run.Publish.Failed), run.Publish.Failed > 0)
	name := label(run)
	if run.GeneratorSaturated {
		name += " (gen sat.)"
	}
	srvCPU, srvRSS, perUser, genCPU := none, none, none, none
	if run.Server.Available {
		srvCPU = fmtCPU(run.Server.CPUPercentAvg)
		srvRSS = fmtBytes(float64(run.Server.RSSMaxBytes))
		perUser = fmtKiB(run.Server.BytesPerUser)
	}
	if run.Generator.Available {
		genCPU = fmtCPU(run.Generator.CPUPercentAvg)
	}
	row = []string{
		name, fmtInt(int64(run.Peak)), fmtInt(run.Connections.Opened), fmtInt(run.Connections.Reconnects),
		failed, ratio, pubFail, fmtInt(run.Delivery.Duplicates), fmtInt(run.Delivery.OutOfOrder),
		mP50.cell(run), mP99.cell(run), mMax.cell(run), fmtRate(run.Traffic.MessagesPerSec),
		srvCPU, mCPUMsg.cell(run), srvRSS, perUser, genCPU,
	}
	if cols.brokers {
		brkCPU := none
		if run.BrokerServer.Available {
			brkCPU = fmtCPU(run.BrokerServer.CPUPercentAvg)
		}
		row = append(row, brkCPU)
	}
	if cols.steal {
		row = append(row, fmtInt(int64(run.StealSeconds)))
	}
	if cols.thresholds {
		th := "pass"
		if c := crossed(run); len(c) > 0 {
			th = mark(fmt.Sprintf("CROSSED %d", len(c)), true)
		}
		row = append(row, th)
	}
	return row, flagged
}

// Compare writes the terminal comparison of two results files, a then b: per user level and
// transport, each headline figure in a and b with the change and whether it is better or worse.
func Compare(w io.Writer, a, b *results.Results) {
	fmt.Fprintln(w, "a:", headline(a))
	fmt.Fprintln(w, "b:", headline(b))
	for _, lp := range pairLevels(a, b) {
		fmt.Fprintf(w, "\n%s\n", lp.title())
		rows := [][]string{{"transport", "figure", "a", "b", "change", "%", ""}}
		for _, p := range lp.pairs {
			name := transportLabel(p.transport)
			switch {
			case p.a == nil:
				rows = append(rows, []string{name, "", "not run", "", "", "", "only in b"})
				continue
			case p.b == nil:
				rows = append(rows, []string{name, "", "", "not run", "", "", "only in a"})
				continue
			}
			for i, m := range headlineMetrics() {
				if i > 0 {
					name = ""
				}
				c := m.compare(p.a, p.b)
				mark, delta, pct := "", none, ""
				if c.ok {
					delta, pct = c.deltaTxt, c.pctTxt
					switch c.verdict {
					case 1:
						mark = "better"
					case -1:
						mark = "worse"
					}
					if m.fails(c.b) && !m.fails(c.a) {
						mark = "worse " + flagMark
					}
				}
				rows = append(rows, []string{name, m.label, m.cell(p.a), m.cell(p.b), delta, pct, mark})
			}
		}
		writeTable(w, rows, 2, true)
		fmt.Fprintln(w, "verdict:", compareVerdict(lp))
	}
	for _, side := range []struct {
		name string
		r    *results.Results
	}{{"a", a}, {"b", b}} {
		if ws := warnings(side.r); len(ws) > 0 {
			fmt.Fprintf(w, "\nwarnings in %s:\n", side.name)
			for _, s := range ws {
				fmt.Fprintln(w, "  !", s)
			}
		}
	}
}

// writeTable aligns rows with a tabwriter: the first left columns are left-aligned (padded here,
// since tabwriter aligns every column the same way), numbers right-aligned, and when lastFree is
// set the last column is left ragged after the grid. AlignRight's padding also indents the table.
func writeTable(w io.Writer, rows [][]string, left int, lastFree bool) {
	widths := make([]int, left)
	for _, row := range rows {
		for i := 0; i < left && i < len(row); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(row[i]))
		}
	}
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i < left {
				cell += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			}
			if lastFree && i == len(row)-1 {
				if cell != "" {
					b.WriteString("  " + cell) // AlignRight pads on the left, so the free cell needs its own gap
				}
				break
			}
			b.WriteString(cell)
			b.WriteByte('\t')
		}
		b.WriteByte('\n')
		io.WriteString(tw, b.String())
	}
	tw.Flush()
	// Empty right-aligned cells at the end of a line leave padding nobody wants to copy.
	for _, line := range strings.SplitAfter(out.String(), "\n") {
		if line != "" {
			io.WriteString(w, strings.TrimRight(line, " \n")+"\n")
		}
	}
}

// headline is one line naming the run: scenario, matrix, when and how long.
func headline(r *results.Results) string {
	parts := []string{nonEmpty(r.Config.Scenario, "unnamed") + " scenario"}
	ls := levelsOf(r)
	transports, brokers, kinds := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, run := range r.Runs {
		transports[run.Transport] = true
		if run.Broker != "" {
			brokers[run.Broker] = true
		}
		if run.ServerKind != "" {
			kinds[run.ServerKind] = true
		}
	}
	matrix := fmt.Sprintf("%d transport%s", len(transports), plural(len(transports)))
	if len(kinds) > 1 {
		matrix += fmt.Sprintf(" × %d servers", len(kinds))
	}
	if len(brokers) > 1 {
		matrix += fmt.Sprintf(" × %d brokers", len(brokers))
	}
	parts = append(parts, fmt.Sprintf("%s × %d user level%s", matrix, len(ls), plural(len(ls))))
	if !r.Started.IsZero() {
		parts = append(parts, "started "+r.Started.Format("2006-01-02 15:04:05 MST"))
	}
	if d := runTime(r); d > 0 {
		parts = append(parts, "took "+d.String())
	}
	if r.Stopped {
		parts = append(parts, "STOPPED")
	}
	return strings.Join(parts, " · ")
}

// machineLine says where the run happened and against what server.
func machineLine(r *results.Results) string {
	var parts []string
	if m := machine(r.Machine); m != "" {
		parts = append(parts, "machine "+m)
	}
	parts = append(parts, "server "+server(r.Config))
	if r.Version != "" {
		parts = append(parts, "rtlab "+r.Version)
	}
	return strings.Join(parts, " · ")
}

// machine describes the host in one phrase.
func machine(m results.Machine) string {
	var parts []string
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	if m.Affinity != "" {
		parts = append(parts, "bench and servers pinned to CPU "+m.Affinity)
	}
	if m.GoOS != "" {
		parts = append(parts, m.GoOS+"/"+m.GoArch)
	}
	if m.MemTotal > 0 {
		parts = append(parts, fmtBytes(float64(m.MemTotal))+" RAM")
	}
	s := strings.Join(parts, ", ")
	if m.Hostname != "" {
		if s != "" {
			return m.Hostname + " (" + s + ")"
		}
		return m.Hostname
	}
	return s
}

// server describes what the bench measured: its own server with a broker and nodes, or a target.
func server(c results.Config) string {
	var s string
	if c.Target != "" {
		s = c.Target
	} else {
		s = "spawned by the bench"
	}
	var extra []string
	switch {
	case c.Target != "":
		// The bench knows nothing of a target's broker or nodes.
	case strings.Contains(c.Broker, ","):
		extra = append(extra, "brokers "+c.Broker)
		if c.Nodes > 1 {
			extra = append(extra, fmt.Sprintf("%d nodes each, memory on one", c.Nodes))
		}
	default:
		if c.Broker != "" {
			extra = append(extra, c.Broker+" broker")
		}
		if c.Nodes > 0 {
			extra = append(extra, fmt.Sprintf("%d node%s", c.Nodes, plural(c.Nodes)))
		}
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	if vs := serverNames(c); vs != "" {
		s += ": " + vs
	}
	return s
}

// serverNames lists the servers a run compared, with their versions ("rtlab dev, Centrifugo
// 6.9.1, …"), or the kind of a target; "" for rtlab alone.
func serverNames(c results.Config) string {
	if c.TargetKind != "" {
		return results.KindLabel(c.TargetKind)
	}
	if c.Servers == "" {
		return ""
	}
	var names []string
	for _, k := range strings.Split(c.Servers, ",") {
		names = append(names, nonEmpty(c.ServerVersions[k], results.KindLabel(k)))
	}
	return strings.Join(names, ", ")
}

// notRun says which cells of the matrix a server could not run, one line per server and reason:
// "short polling, long polling and STOMP on Centrifugo: Centrifugo offers …".
func notRun(r *results.Results) []string {
	type key struct{ kind, broker, reason string }
	var keys []key
	what := map[key][]string{}
	for _, s := range r.Skipped {
		k := key{s.ServerKind, s.Broker, s.Reason}
		if what[k] == nil {
			keys = append(keys, k)
		}
		if s.Transport != "" {
			what[k] = append(what[k], transportLabel(s.Transport))
		} else {
			what[k] = append(what[k], "")
		}
	}
	var out []string
	for _, k := range keys {
		ts := slices.DeleteFunc(what[k], func(t string) bool { return t == "" })
		line := results.KindLabel(k.kind)
		if len(ts) > 0 {
			line = joinNames(ts) + " on " + line
		}
		if k.broker != "" {
			line += " with --broker " + brokerLabel(k.broker)
		}
		out = append(out, line+": "+k.reason)
	}
	return out
}

// runTime is the wall time of the whole run, rounded to what a reader cares about.
func runTime(r *results.Results) time.Duration {
	if r.Started.IsZero() || r.Finished.Before(r.Started) {
		return 0
	}
	return r.Finished.Sub(r.Started).Round(time.Second)
}

// plural returns the "s" of "2 transports".
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// nonEmpty returns s, or otherwise when s is empty.
func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// runsOf lists every run of r.
func runsOf(r *results.Results) []*results.Run {
	rs := make([]*results.Run, len(r.Runs))
	for i := range r.Runs {
		rs[i] = &r.Runs[i]
	}
	return rs
}

// processesLine is each node's and each broker process's average CPU, when the run measured
// several (results.Run.Processes), else "".
func processesLine(run *results.Run) string {
	parts := make([]string, len(run.Processes))
	for i, p := range run.Processes {
		parts[i] = p.Name + " " + fmtCPU(p.CPUPercentAvg) + "%"
	}
	return strings.Join(parts, ", ")
}
