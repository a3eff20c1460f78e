package report

import (
	"math"
	"slices"
	"strconv"

	"github.com/rtlab/rtlab/internal/results"
)

// chartsData is inlined into the page as JSON for report.js, which draws it with uPlot.
type chartsData struct {
	Compare bool         `json:"compare"`
	Levels  []chartLevel `json:"levels"`
}

// chartLevel is the chart set of one user level.
type chartLevel struct {
	Users  int          `json:"users"`
	Label  string       `json:"label"`
	Charts []chartSpec  `json:"charts"`
	Faults []chartFault `json:"faults,omitempty"` // marked on the time charts
}

// chartSpec is one chart: every transport on the same axes. Data is uPlot's column layout:
// Data[0] is seconds since the run started, Data[i] the values of Series[i-1].
type chartSpec struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Unit  string `json:"unit"` // count, ms, rate, cpu, bytes, pct: how report.js formats axis and legend
	// X is what the x axis holds: empty for seconds since the run started, "latency" for the
	// upper bounds of latency buckets in ms (a log axis).
	X      string        `json:"x,omitempty"`
	Series []chartSeries `json:"series"`
	Data   [][]jsNum     `json:"data"`
}

type chartSeries struct {
	Label string `json:"label"`
	Color string `json:"color"`
	Dash  bool   `json:"dash,omitempty"`
}

// jsNum is a chart value; NaN marks "no sample" and is written as null, which uPlot draws as a
// gap rather than a drop to zero.
type jsNum float64

// MarshalJSON writes NaN as null and rounds to six significant digits to keep the page small.
func (n jsNum) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 6, 64), nil
}

// chartMetric is one per-second series of a run.
type chartMetric struct {
	id, title, unit string
	get             func(r *results.Run) []jsNum // nil when the run has no such series
}

// chartMetrics lists the charts of a user level, in page order: load, latency, throughput,
// errors, then the cost on both sides.
func chartMetrics() []chartMetric {
	latency := func(f func(s *results.Series) []float64) func(r *results.Run) []jsNum {
		return func(r *results.Run) []jsNum {
			vs := f(&r.Series)
			out := make([]jsNum, len(vs))
			for i, v := range vs {
				out[i] = jsNum(v)
				// A second with no deliveries, or none measured (the bench writes 0 then), has
				// no latency, not a latency of zero: a gap in the line.
				if v <= 0 || i < len(r.Series.Received) && r.Series.Received[i] == 0 {
					out[i] = jsNum(math.NaN())
				}
			}
			return out
		}
	}
	return []chartMetric{
		{"users", "Connected users", "count", func(r *results.Run) []jsNum { return nums(r.Series.Users) }},
		{"p50", "Delivery latency p50 (ms)", "ms", latency(func(s *results.Series) []float64 { return s.LatencyP50 })},
		{"p99", "Delivery latency p99 (ms)", "ms", latency(func(s *results.Series) []float64 { return s.LatencyP99 })},
		{"msgs", "Throughput: deliveries received (msgs/s)", "rate", func(r *results.Run) []jsNum { return nums(r.Series.Received) }},
		{"errors", "Errors per second: failed or dropped connections, refused or failed publishes, failed logins", "count", func(r *results.Run) []jsNum { return nums(r.Series.Errors) }},
		{"pubfailed", "Publishes refused or failed per second", "count", func(r *results.Run) []jsNum {
			if r.Series.PublishFailed == nil {
				return nil
			}
			return nums(r.Series.PublishFailed)
		}},
		{"srvcpu", "Server CPU (%, 100 = one core)", "cpu", func(r *results.Run) []jsNum {
			if !r.Server.Available {
				return nil
			}
			return nums(r.Series.ServerCPU)
		}},
		{"srvrss", "Server RSS", "bytes", func(r *results.Run) []jsNum {
			if !r.Server.Available {
				return nil
			}
			return nums(r.Series.ServerRSS)
		}},
		{"gencpu", "Generator CPU (%, 100 = one core)", "cpu", func(r *results.Run) []jsNum {
			if !r.Generator.Available {
				return nil
			}
			return nums(r.Series.GeneratorCPU)
		}},
		{"brkcpu", "Broker server CPU (%, 100 = one core)", "cpu", func(r *results.Run) []jsNum {
			if !r.BrokerServer.Available {
				return nil
			}
			return nums(r.Series.BrokerCPU)
		}},
		{"steal", "CPU taken by the hypervisor for other machines (steal; %, 100 = one core)", "cpu", func(r *results.Run) []jsNum {
			return nums(r.Series.MachineSteal)
		}},
	}
}

// nums converts a series to chart values.
func nums[T int | int64 | uint64 | float64](vs []T) []jsNum {
	out := make([]jsNum, len(vs))
	for i, v := range vs {
		out[i] = jsNum(v)
	}
	return out
}

// line is one run drawn on a level's charts, with its side in a comparison ("a", "b", or "").
type line struct {
	run  *results.Run
	side string
}

// chartLevelOf builds the charts of one user level with every transport on the same axes. In a
// comparison, runs are b's and prev a's; a's lines are dashed in the same color, next to b's in
// the legend.
func chartLevelOf(users int, runs, prev []*results.Run, colors map[string]string) chartLevel {
	cl := chartLevel{Users: users, Label: fmtUsers(users), Faults: chartFaults(append(slices.Clone(runs), prev...))}
	var lines []line
	if prev == nil {
		for _, r := range runs {
			lines = append(lines, line{r, ""})
		}
	} else {
		order := map[string]int{}
		for _, r := range append(slices.Clone(runs), prev...) {
			if _, ok := order[r.Key()]; !ok {
				order[r.Key()] = len(order)
			}
		}
		for _, r := range prev {
			lines = append(lines, line{r, "a"})
		}
		for _, r := range runs {
			lines = append(lines, line{r, "b"})
		}
		slices.SortStableFunc(lines, func(x, y line) int { return order[x.run.Key()] - order[y.run.Key()] })
	}
	for _, cm := range chartMetrics() {
		spec := chartSpec{ID: cm.id, Title: cm.title, Unit: cm.unit}
		var cols [][]jsNum
		n, drawn := 0, false
		for _, l := range lines {
			vs := cm.get(l.run)
			if vs == nil {
				continue
			}
			name := label(l.run)
			if l.side != "" {
				name += " (" + l.side + ")"
			}
			spec.Series = append(spec.Series, chartSeries{Label: name, Color: colors[l.run.Key()], Dash: l.side == "a"})
			cols = append(cols, vs)
			n = max(n, len(vs))
			for _, v := range vs {
				if v != 0 && !math.IsNaN(float64(v)) {
					drawn = true
				}
			}
		}
		// Skip a chart with nothing to draw, and the publish failures and steal charts when
		// there were none: an empty chart only costs the reader a scroll. The errors chart
		// stays, flat at zero: "no errors" is a finding too.
		if len(cols) == 0 || n == 0 || ((cm.id == "pubfailed" || cm.id == "steal") && !drawn) {
			continue
		}
		x := make([]jsNum, n)
		for i := range x {
			x[i] = jsNum(i)
		}
		spec.Data = append(spec.Data, x)
		for _, c := range cols {
			padded := make([]jsNum, n)
			for i := range padded {
				padded[i] = jsNum(math.NaN())
				if i < len(c) {
					padded[i] = c[i]
				}
			}
			spec.Data = append(spec.Data, padded)
		}
		cl.Charts = append(cl.Charts, spec)
		if cm.id == "p99" {
			if d, ok := distributionChart(lines, colors); ok {
				cl.Charts = append(cl.Charts, d)
			}
		}
	}
	return cl
}

// distributionChart is the latency distribution of every run of a level on one chart: the
// share of its deliveries in each latency bucket (ten per decade), on a log axis of latency.
// ok is false when no run has a histogram (results from before it was recorded).
func distributionChart(lines []line, colors map[string]string) (chartSpec, bool) {
	spec := chartSpec{ID: "latdist", Title: "Delivery latency distribution (% of deliveries per latency bucket)", Unit: "pct", X: "latency"}
	var bounds []float64
	for _, l := range lines {
		for _, b := range l.run.Delivery.Histogram {
			if !slices.Contains(bounds, b.UpToMs) {
				bounds = append(bounds, b.UpToMs)
			}
		}
	}
	if len(bounds) == 0 {
		return spec, false
	}
	slices.Sort(bounds)
	x := make([]jsNum, len(bounds))
	for i, b := range bounds {
		x[i] = jsNum(b)
	}
	spec.Data = append(spec.Data, x)
	for _, l := range lines {
		r := l.run
		if len(r.Delivery.Histogram) == 0 {
			continue
		}
		var total int64
		for _, b := range r.Delivery.Histogram {
			total += b.Count
		}
		col := make([]jsNum, len(bounds))
		first, last := r.Delivery.Histogram[0].UpToMs, r.Delivery.Histogram[len(r.Delivery.Histogram)-1].UpToMs
		for j, ub := range bounds {
			col[j] = jsNum(math.NaN()) // outside the run's own range: nothing to draw
			if ub >= first && ub <= last {
				col[j] = 0
			}
		}
		for _, b := range r.Delivery.Histogram {
			col[slices.Index(bounds, b.UpToMs)] = jsNum(100 * float64(b.Count) / float64(total))
		}
		name := label(r)
		if l.side != "" {
			name += " (" + l.side + ")"
		}
		spec.Series = append(spec.Series, chartSeries{Label: name, Color: colors[r.Key()], Dash: l.side == "a"})
		spec.Data = append(spec.Data, col)
	}
	return spec, true
}
