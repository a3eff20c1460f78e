package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rtlab/rtlab/internal/results"
)

// bestOf marks the runs holding the best value of m. It marks nothing when the figure has no
// better direction, when fewer than two runs measured it, or when most runs share the best value:
// a column of zeros with one red cell has no winner worth pointing at.
func bestOf(m metric, runs []*results.Run) []bool {
	marks := make([]bool, len(runs))
	if m.better == neutral {
		return marks
	}
	var vals []float64
	idx := make([]int, 0, len(runs))
	for i, r := range runs {
		if v, ok := m.value(r); ok {
			vals = append(vals, v)
			idx = append(idx, i)
		}
	}
	if len(vals) < 2 {
		return marks
	}
	lo, hi := slices.Min(vals), slices.Max(vals)
	if lo == hi {
		return marks
	}
	target := lo
	if m.better == higherBetter {
		target = hi
	}
	var winners []int
	for j, v := range vals {
		if v == target {
			winners = append(winners, idx[j])
		}
	}
	if len(winners) > max(1, len(vals)/2) {
		return marks // most runs share the value: it is the norm, not a distinction
	}
	if len(winners) == 1 && !clearlyBest(m, runs, winners[0]) {
		return marks
	}
	for _, i := range winners {
		marks[i] = true
	}
	return marks
}

// clearlyBest reports whether runs[best] is apart from the runner-up by more than their own
// spread, for figures that have a per-second series (latency, server CPU); others always are.
func clearlyBest(m metric, runs []*results.Run, best int) bool {
	if perSecond(m, runs[best]) == nil {
		return true
	}
	figs := cellFigures(m, []*results.Run{runs[best]})
	if len(figs) == 0 {
		return true
	}
	b := figs[0]
	for i, r := range runs {
		if i == best {
			continue
		}
		for _, f := range cellFigures(m, []*results.Run{r}) {
			if !apart(b, f) {
				return false
			}
		}
	}
	return true
}

// failsThreshold says why a run fails the bar every transport must clear (empty when it does
// not). These are the rows the report flags red.
func failsThreshold(r *results.Run) []string {
	var why []string
	if r.Delivery.Ratio < MinRatio {
		why = append(why, "delivered "+fmtRatio(r.Delivery.Ratio)+" % < 99.9 %")
	}
	if r.Connections.Failed > 0 {
		why = append(why, fmtInt(r.Connections.Failed)+" failed connections")
	}
	if r.Publish.Failed > 0 {
		why = append(why, fmtInt(r.Publish.Failed)+" publishes refused or failed")
	}
	if r.GeneratorSaturated {
		why = append(why, "generator saturated")
	}
	for _, c := range crossed(r) {
		why = append(why, "threshold "+c+" crossed")
	}
	return why
}

// label is a run's transport as a reader says it.
func label(r *results.Run) string { return transportLabel(r.Key()) }

// nothingExpected reports whether no run expected any delivery, and says why: the users'
// connections failed, or too few stayed long enough.
func nothingExpected(runs []*results.Run) (bool, string) {
	connFailed, why := int64(0), ""
	for _, r := range runs {
		if r.Delivery.Expected != 0 {
			return false, ""
		}
		connFailed += r.Connections.Failed
		if why == "" && r.Connections.Failed > 0 && len(r.Connections.Errors) > 0 {
			why = ": " + r.Connections.Errors[0].Label
		}
	}
	if connFailed > 0 {
		// Not "too few users": the users were there, the server refused them.
		return true, fmt.Sprintf("no publication was expected anywhere: %d connections failed%s, so there is no delivery ratio", connFailed, why)
	}
	return true, "no publication was expected anywhere (no receiver stayed --grace after one: too few users or too short a run), so there is no delivery ratio"
}

// verdict sums up one user level in one sentence built from the figures, so the reader gets the
// answer before the tables: did every transport deliver, which was fastest, which cost most.
func verdict(users int, runs []*results.Run) string {
	if len(runs) == 0 {
		return ""
	}
	var parts []string

	var bad []*results.Run
	for _, r := range runs {
		if r.Delivery.Ratio < MinRatio {
			bad = append(bad, r)
		}
	}
	ratioList := func(rs []*results.Run) string {
		var s []string
		for _, r := range rs {
			s = append(s, label(r)+" "+fmtRatio(r.Delivery.Ratio)+" %")
		}
		return joinNames(s)
	}
	var refused []string
	for _, r := range runs {
		if f := failedPublishes(r); f != "" {
			refused = append(refused, label(r)+": "+f)
		}
	}
	accepted := ""
	if len(refused) > 0 {
		accepted = " of the publications the server accepted"
	}
	nothing, why := nothingExpected(runs)
	switch {
	case nothing:
		parts = append(parts, why)
	case len(runs) == 1:
		parts = append(parts, fmt.Sprintf("%s delivered %s %%%s", label(runs[0]), fmtRatio(runs[0].Delivery.Ratio), accepted))
	case len(bad) == 0:
		parts = append(parts, "every transport delivered ≥99.9 %"+accepted)
	case len(bad) == len(runs):
		parts = append(parts, "no transport reached 99.9 % delivery ("+ratioList(bad)+")")
	case len(bad) == 1:
		parts = append(parts, fmt.Sprintf("%s delivered only %s %%, the others ≥99.9 %%", label(bad[0]), fmtRatio(bad[0].Delivery.Ratio)))
	default:
		parts = append(parts, "below 99.9 % delivery: "+ratioList(bad))
	}

	if len(refused) > 0 {
		// Refused publishes are losses the ratio does not count: the publisher was told, the
		// receivers never got them.
		parts = append(parts, "but publishes were refused or failed: "+strings.Join(refused, "; "))
	}

	if p := rankText(mP99, runs, "p99", "had the lower", "had the lowest", "the highest"); p != "" {
		parts = append(parts, p)
	}

	parts = append(parts, againstRTLab(runs)...)
	parts = append(parts, againstMemory(runs, mP99, "")...)
	if slices.ContainsFunc(runs, func(r *results.Run) bool { return r.Delivery.Quiet != nil }) {
		// The same question with the machine's neighbours taken out: on a shared virtual
		// machine their bursts can decide a p99 on their own.
		parts = append(parts, againstMemory(runs, mQuietP99, " on seconds free of steal")...)
	}

	if p := cpuText(runs); p != "" {
		parts = append(parts, p)
	}

	var failed []string
	for _, r := range runs {
		if r.Connections.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s %s", label(r), fmtInt(r.Connections.Failed)))
		}
	}
	if len(failed) > 0 {
		parts = append(parts, "failed connections: "+joinNames(failed))
	}

	var sat []string
	for _, r := range runs {
		if r.GeneratorSaturated {
			sat = append(sat, label(r))
		}
	}
	if len(sat) > 0 {
		parts = append(parts, "the generator was saturated during "+joinNames(sat)+", so that latency may be the generator's")
	}
	if m := machineSaturation(runs); m != "" {
		parts = append(parts, m)
	}
	if t := thresholdVerdict(runs); t != "" {
		parts = append(parts, t)
	}
	return "At " + fmtUsers(users) + " " + strings.Join(parts, "; ") + "."
}

// rankText says which cell had the lowest and the highest of m, but only when they are apart
// by more than their own spread; else that there is no clear difference.
func rankText(m metric, runs []*results.Run, what, lower, lowest, highest string) string {
	figs := cellFigures(m, runs)
	if len(figs) == 0 {
		return ""
	}
	over := ""
	if figs[0].rounds > 1 {
		over = fmt.Sprintf(", medians over %d rounds", figs[0].rounds)
	}
	lo, hi := lowHigh(figs)
	switch {
	case len(figs) == 1:
		return what + " " + m.formatWithUnit(lo.v) + strings.TrimPrefix(over, ",")
	case lo.v == hi.v:
		return "every transport had the same " + what + " (" + m.formatWithUnit(lo.v) + over + ")"
	case !apart(lo, hi):
		return fmt.Sprintf("no clear difference in %s (%s to %s%s: %s)", what, m.formatWithUnit(lo.v), m.formatWithUnit(hi.v), over, spreadText(m, lo, hi))
	case len(figs) == 2:
		return fmt.Sprintf("%s %s %s (%s vs %s, %s%s)", lo.name, lower, what, m.formatWithUnit(lo.v), m.formatWithUnit(hi.v), timesText(lo.v, hi.v), over)
	}
	return fmt.Sprintf("%s %s %s (%s), %s %s (%s, %s%s)", lo.name, lowest, what, m.formatWithUnit(lo.v), hi.name, highest, m.formatWithUnit(hi.v), timesText(lo.v, hi.v), over)
}

// timesLower says how many times lower lo is than hi ("4.0× lower"), or "none" when lo is 0.
func timesLower(lo, hi float64) string {
	if lo <= 0 {
		return "none"
	}
	return fmtTimes(hi/lo) + " lower"
}

// timesText says how many times hi is lo ("575× the lowest"), or "lowest 0" when lo is 0.
func timesText(lo, hi float64) string {
	if lo <= 0 {
		return "against 0"
	}
	return fmtTimes(hi/lo) + " the lowest"
}

// cpuText says which cell cost the most server CPU and which the least, when that is clear.
func cpuText(runs []*results.Run) string {
	figs := cellFigures(mSrvCPU, runs)
	if len(figs) == 0 {
		return ""
	}
	lo, hi := lowHigh(figs)
	switch {
	case len(figs) == 1:
		return "server CPU " + mSrvCPU.format(lo.v) + " avg"
	case lo.v == hi.v:
		return ""
	case !apart(lo, hi):
		return fmt.Sprintf("no clear difference in server CPU (%s to %s avg: %s)", mSrvCPU.format(lo.v), mSrvCPU.format(hi.v), spreadText(mSrvCPU, lo, hi))
	}
	return fmt.Sprintf("%s cost the most server CPU (%s avg), %s the least (%s, %s)", hi.name, mSrvCPU.format(hi.v), lo.name, mSrvCPU.format(lo.v), timesLower(lo.v, hi.v))
}

// machineSaturation says during which runs the whole machine's CPU was saturated and whose CPU
// it mostly was, since that decides whether the latency is the server's.
func machineSaturation(runs []*results.Run) string {
	var parts []string
	for _, r := range runs {
		s := r.Saturated
		if s == nil {
			continue
		}
		who, v := "other processes on the machine", s.Others
		for _, c := range []struct {
			name string
			v    float64
		}{{"the server", s.Server}, {"the generator", s.Generator}, {"the broker server", s.Broker}, {"other machines on the host (steal)", s.Steal}} {
			if c.v > v {
				who, v = c.name, c.v
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%d s, mostly %s: %s of %s)", label(r), s.Seconds, who, fmtCPU(v)+" %", fmtCPU(s.Machine)+" %"))
	}
	if len(parts) == 0 {
		return ""
	}
	return "the machine's CPU was saturated during " + joinNames(parts) + ", so latency there includes that contention"
}

// againstMemory puts each broker's p99 against the memory broker's on the same transport, when
// the runs compare brokers: "is a shared broker worth its latency" is the question such a run
// asks, and a ratio answers it more directly than two figures apart. With several rounds a
// broker is put against memory's run of its own round, and the verdict gives the median of
// those ratios with their range: one round's ratio says little on a noisy machine. p99 is the
// figure compared (mP99, or mQuietP99); where says which seconds it covers.
func againstMemory(runs []*results.Run, p99 metric, where string) []string {
	type cell struct{ transport, kind, broker string }
	ratios := map[cell][]float64{}
	var cells []cell
	baselines := map[string]int{} // per transport: memory runs that measured a p99
	multi := false                // the runs come from several rounds
	for _, base := range runs {
		if base.Broker != "memory" {
			continue
		}
		baseV, ok := p99.value(base)
		if !ok || baseV <= 0 {
			continue
		}
		baselines[base.Transport+"~"+base.ServerKind]++
		multi = multi || base.Round > 0
		for _, r := range runs {
			if r.Broker == "" || r.Broker == "memory" || r.Transport != base.Transport || r.Round != base.Round || r.ServerKind != base.ServerKind {
				continue
			}
			if v, ok := p99.value(r); ok {
				c := cell{r.Transport, r.ServerKind, r.Broker}
				if ratios[c] == nil {
					cells = append(cells, c)
				}
				ratios[c] = append(ratios[c], v/baseV)
			}
		}
	}
	var parts []string
	for i := 0; i < len(cells); {
		t, kind := cells[i].transport, cells[i].kind
		b := baselines[t+"~"+kind]
		var rs []string
		for ; i < len(cells) && cells[i].transport == t && cells[i].kind == kind; i++ {
			xs := ratios[cells[i]]
			s := brokerLabel(cells[i].broker) + " " + fmtTimes(median(xs))
			var notes []string
			if len(xs) > 1 {
				notes = append(notes, strings.TrimSuffix(fmtTimes(slices.Min(xs)), "×")+"–"+fmtTimes(slices.Max(xs)))
			}
			if multi && len(xs) < b { // a round where this broker measured nothing
				notes = append(notes, fmt.Sprintf("%d round%s", len(xs), plural(len(xs))))
			}
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, ", ") + ")"
			}
			rs = append(rs, s)
		}
		name := transportLabel(t)
		if kind != "" {
			name = transportLabel(t + "~" + kind)
		}
		if multi {
			parts = append(parts, fmt.Sprintf("%s p99%s against memory's in the same round, median over %d round%s: %s", name, where, b, plural(b), joinNames(rs)))
		} else {
			parts = append(parts, fmt.Sprintf("%s p99%s against memory's: %s", name, where, joinNames(rs)))
		}
	}
	return parts
}

// peerFigures are what the verdict compares between rtlab and a peer: what a delivery costs in
// CPU, what a connection costs in memory, and what users feel.
func peerFigures() []struct {
	name string
	m    metric
} {
	return []struct {
		name string
		m    metric
	}{
		{"CPU per delivered message", mCPUMsg},
		{"RSS per connection", mPerUsr},
		{"p99", mP99},
	}
}

// againstRTLab puts rtlab's runs against each peer's (another server measured in the same
// results: Centrifugo, RabbitMQ, Spring) on the same transport, broker and round, as rtlab's
// figure over the peer's: CPU per delivered message, RSS per connection and p99, the form the
// targets are set in ("rtlab ≤ 0.5× Centrifugo's CPU per delivered message"). A peer that is
// its own broker (no broker in its run) meets rtlab on memory. With several rounds each ratio is
// the median of the rounds' ratios, with their range.
func againstRTLab(runs []*results.Run) []string {
	type cell struct{ transport, kind, broker string }
	ratios := map[cell][][]float64{} // per figure, one ratio per round
	var cells []cell
	rounds := map[cell]int{}
	for _, base := range runs {
		if base.ServerKind != results.KindRTLab {
			continue
		}
		for _, r := range runs {
			if r.ServerKind == "" || r.ServerKind == results.KindRTLab || r.Transport != base.Transport || r.Round != base.Round {
				continue
			}
			if r.Broker != base.Broker && !(r.Broker == "" && base.Broker == "memory") {
				continue
			}
			c := cell{r.Transport, r.ServerKind, base.Broker}
			if ratios[c] == nil {
				cells = append(cells, c)
				ratios[c] = make([][]float64, len(peerFigures()))
			}
			rounds[c]++
			for i, f := range peerFigures() {
				ours, ok1 := f.m.value(base)
				theirs, ok2 := f.m.value(r)
				if ok1 && ok2 && theirs > 0 {
					ratios[c][i] = append(ratios[c][i], ours/theirs)
				}
			}
		}
	}
	var parts []string
	for _, c := range cells {
		var fs []string
		for i, f := range peerFigures() {
			xs := ratios[c][i]
			if len(xs) == 0 {
				continue
			}
			s := f.name + " " + fmtTimes(median(xs))
			if len(xs) > 1 {
				s += " (" + strings.TrimSuffix(fmtTimes(slices.Min(xs)), "×") + "–" + fmtTimes(slices.Max(xs)) + ")"
			}
			fs = append(fs, s)
		}
		if len(fs) == 0 {
			continue
		}
		where := transportLabel(c.transport)
		if c.broker != "" && c.broker != "memory" {
			where += " on " + brokerLabel(c.broker)
		}
		head := fmt.Sprintf("%s, rtlab against %s", where, results.KindLabel(c.kind))
		if n := rounds[c]; n > 1 {
			head += fmt.Sprintf(" in the same round, median over %d rounds", n)
		}
		parts = append(parts, head+": "+joinNames(fs))
	}
	return parts
}

// median is the middle of xs (the mean of the two middle values when there are an even
// number); xs is not changed.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else if n > 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return 0
}

// warnings lists what a reader must know before trusting the figures, most general first.
func warnings(r *results.Results) []string {
	var ws []string
	if r.Stopped {
		ws = append(ws, "run stopped before it finished (interrupted): the figures cover only what ran")
	}
	if len(r.Runs) == 0 {
		ws = append(ws, "the results hold no runs")
	}
	ws = append(ws, r.Warnings...)
	unmeasured := false
	for _, l := range levelsOf(r) {
		for _, run := range l.runs {
			where := label(run) + " at " + fmtUsers(l.users)
			if run.GeneratorSaturated {
				ws = append(ws, "generator saturated: latency figures for "+where+" may be the generator's, not the server's")
			}
			if run.Stopped && !r.Stopped {
				ws = append(ws, where+" was stopped early: its figures cover only what ran")
			}
			if run.Delivery.Expected == 0 {
				ws = append(ws, where+" expected no deliveries: its delivery figures are empty")
			}
			if !run.Server.Available {
				unmeasured = true
			}
		}
	}
	if unmeasured {
		ws = append(ws, "server CPU and RSS were not measured for some runs (no /proc access to the server, e.g. with --target)")
	}
	return ws
}

// compareMetrics are the figures the comparison verdict looks at, one per question (delivered?
// connected? fast? cheap?); the tables show the rest.
func compareMetrics() []metric {
	return []metric{mRatio, mFailed, mP99, mSrvCPU, mSrvRSS, mGenCPU}
}

// movement is one notable change between a and b, ranked by how much it should matter.
type movement struct {
	text   string
	better bool
	weight float64
}

// compareVerdict sums up how b differs from a at one user level: threshold crossings first, then
// the largest relative changes beyond run-to-run noise.
func compareVerdict(lp levelPair) string {
	var moves []movement
	var onlyA, onlyB []string
	for _, p := range lp.pairs {
		switch {
		case p.a == nil:
			onlyB = append(onlyB, transportLabel(p.transport))
			continue
		case p.b == nil:
			onlyA = append(onlyA, transportLabel(p.transport))
			continue
		}
		for _, m := range compareMetrics() {
			c := m.compare(p.a, p.b)
			if !c.ok || c.verdict == 0 {
				continue
			}
			w := math.Abs(c.pct)
			if math.IsNaN(w) || math.IsInf(w, 0) {
				w = 100
			}
			w = math.Round(w*10) / 10 // equal changes keep table order, not float noise order
			if m.fails(c.a) != m.fails(c.b) {
				w += 10000 // crossing a threshold outranks any percentage
			}
			if m.unit == unitRatio {
				w = math.Max(w, math.Abs(c.delta)*1e4) // 0.1 pp ranks as 10 %
			}
			text := fmt.Sprintf("%s %s %s → %s", transportLabel(p.transport), strings.TrimSuffix(m.label, " ms"), m.formatWithUnit(c.a), m.formatWithUnit(c.b))
			if c.pctTxt != "" && m.unit != unitRatio {
				text += " (" + c.pctTxt + ")"
			}
			moves = append(moves, movement{text: text, better: c.verdict > 0, weight: w})
		}
	}
	slices.SortStableFunc(moves, func(x, y movement) int { return cmp.Compare(y.weight, x.weight) })
	if len(moves) > 5 {
		moves = moves[:5]
	}
	var better, worse []string
	for _, m := range moves {
		if m.better {
			better = append(better, m.text)
		} else {
			worse = append(worse, m.text)
		}
	}
	var parts []string
	if len(worse) > 0 {
		parts = append(parts, "worse: "+strings.Join(worse, ", "))
	}
	if len(better) > 0 {
		parts = append(parts, "better: "+strings.Join(better, ", "))
	}
	if len(parts) == 0 && len(lp.sides(false)) > 0 && len(lp.sides(true)) > 0 {
		parts = append(parts, fmt.Sprintf("no change beyond %.0f %% in delivery, failed connections, latency or resource use", noiseFraction*100))
	}
	if len(onlyA) > 0 {
		parts = append(parts, "only in a: "+joinNames(onlyA))
	}
	if len(onlyB) > 0 {
		parts = append(parts, "only in b: "+joinNames(onlyB))
	}
	return "At " + lp.title() + ", b against a: " + strings.Join(parts, "; ") + "."
}
