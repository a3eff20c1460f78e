package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rtlab/rtlab/internal/results"
)

// thresholdFigure formats a run's figure as its threshold reads it: milliseconds for
// latencies, a percentage for the ratio and shares, else a count.
func thresholdFigure(t results.ThresholdResult) string {
	if !t.Measured {
		return "not measured"
	}
	metric := strings.TrimSpace(t.Expr)
	if i := strings.IndexAny(metric, "<>=!"); i > 0 {
		metric = strings.TrimSpace(metric[:i])
	}
	switch metric {
	case "p50", "p90", "p95", "p99", "p999", "max", "mean":
		return fmtMs(t.Value) + " ms"
	case "ratio":
		return fmtRatio(t.Value) + " %"
	case "pubfailed":
		if strings.HasSuffix(t.Expr, "%") {
			return fmtFixed(t.Value*100, 2) + " %"
		}
	}
	return fmtInt(int64(t.Value))
}

// crossed returns the thresholds r crossed, as "p99<250ms (312 ms)".
func crossed(r *results.Run) []string {
	var out []string
	for _, t := range r.Thresholds {
		if !t.Pass {
			out = append(out, t.Expr+" ("+thresholdFigure(t)+")")
		}
	}
	return out
}

// checked reports whether any run was checked against thresholds.
func checked(runs []*results.Run) bool {
	for _, r := range runs {
		if len(r.Thresholds) > 0 {
			return true
		}
	}
	return false
}

// thresholdVerdict says how the runs of a level fared against --threshold: which crossed
// which, or that every one passed.
func thresholdVerdict(runs []*results.Run) string {
	if !checked(runs) {
		return ""
	}
	var bad []string
	exprs := map[string]bool{}
	var all []string
	for _, r := range runs {
		for _, t := range r.Thresholds {
			if !exprs[t.Expr] {
				exprs[t.Expr] = true
				all = append(all, t.Expr)
			}
		}
		if c := crossed(r); len(c) > 0 {
			bad = append(bad, label(r)+" crossed "+joinNames(c))
		}
	}
	if len(bad) == 0 {
		return "every run passed the thresholds (" + strings.Join(all, ", ") + ")"
	}
	return "THRESHOLDS CROSSED: " + strings.Join(bad, "; ")
}

// failedPublishes describes a run's refused or failed publishes: how many of how many, and
// when, "526 of 5,824 publishes (9.0 %) refused or failed, from 12 s to 16 s into the run";
// "" when there were none.
func failedPublishes(r *results.Run) string {
	p := r.Publish
	if p.Failed == 0 {
		return ""
	}
	s := fmt.Sprintf("%s of %s publishes (%s) refused or failed", fmtInt(p.Failed), fmtInt(p.Sent), fmtShare(p.FailedShare()))
	first, last := -1, -1
	for i, n := range r.Series.PublishFailed {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	switch {
	case first < 0:
	case first == last:
		s += fmt.Sprintf(", in second %d of the run", first+1)
	default:
		s += fmt.Sprintf(", from %d s to %d s into the run", first, last+1)
	}
	return s
}

// fmtShare formats a share (0..1) as a percentage with two significant digits at least, so a
// small share never reads as 0.0 %.
func fmtShare(v float64) string {
	p := v * 100
	switch {
	case p == 0:
		return "0 %"
	case p >= 10:
		return fmtFixed(p, 1) + " %"
	case p >= 1:
		return fmtFixed(p, 2) + " %"
	case p < 0.001:
		return "< 0.001 %"
	}
	return strconv.FormatFloat(p, 'g', 2, 64) + " %"
}

// latencySet names the deliveries the latency figures cover when they are not exactly those
// the ratio counts (empty when they are): receipts of publications whose publish failed, or of
// an interrupted run's last seconds, are measured for latency but left out of the ratio.
// Receipts outside the receivers' windows are in neither, and said so.
func latencySet(r *results.Run) string {
	d := r.Delivery
	var s []string
	if d.Unconfirmed > 0 {
		s = append(s, fmt.Sprintf("latency is over %s deliveries: the %s the ratio counts and %s of publications it leaves out (their publish failed, or they were sent in the grace period before an interrupt)",
			fmtInt(d.Latency.Count), fmtInt(d.Received), fmtInt(d.Unconfirmed)))
	}
	if d.Unconfirmed == 0 && d.OutsideWindow == 0 && d.Latency.Count != d.Received && d.Latency.Count > 0 {
		// Results from before the sets were told apart (schema 1).
		s = append(s, fmt.Sprintf("latency is over %s deliveries, the ratio counts %s (this results file does not say which the others were)", fmtInt(d.Latency.Count), fmtInt(d.Received)))
	}
	if d.OutsideWindow > 0 {
		s = append(s, fmt.Sprintf("%s receipts of publications sent while the receiver subscribed or after its cutoff are in neither the ratio nor the latency", fmtInt(d.OutsideWindow)))
	}
	return strings.Join(s, "; ")
}

// failedConnections names the runs whose connection attempts failed, with how many and the
// most frequent error; "" when none did.
func failedConnections(runs []*results.Run) string {
	var s []string
	for _, r := range runs {
		c := r.Connections
		if c.Failed == 0 {
			continue
		}
		f := fmt.Sprintf("%s: %s of %s connection attempts failed", label(r), fmtInt(c.Failed), fmtInt(c.Tried))
		if len(c.Errors) > 0 {
			e := []rune(strings.TrimSpace(c.Errors[0].Label))
			if len(e) > 160 {
				e = append(e[:160], '…')
			}
			f += " (" + string(e) + ")"
		}
		s = append(s, f)
	}
	return strings.Join(s, "; ")
}
