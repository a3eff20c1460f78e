package report

import (
	"math"
	"strings"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/transports"
)

// MinRatio is the delivery ratio below which a run fails: a real-time transport that loses more
// than one message in a thousand is not doing its job, whatever its latency.
const MinRatio = 0.999

// unit says how a figure is formatted and how its difference is expressed.
type unit int

const (
	unitCount     unit = iota // an integer count
	unitRatio                 // 0..1, shown as a percentage; differences in percentage points
	unitMs                    // milliseconds
	unitBytes                 // bytes, shown in KiB/MiB/GiB
	unitBytesRate             // bytes per second
	unitRate                  // events per second
	unitCPU                   // percent, 100 = one core
	unitSeconds               // a duration in seconds
	unitMicros                // microseconds (CPU time per message)
	unitCPUTime               // CPU seconds used
)

// direction says which way a figure should move for the change to count as an improvement.
type direction int

const (
	neutral      direction = 0
	lowerBetter  direction = -1
	higherBetter direction = 1
)

// metric is one figure of a run. Every table, the terminal output and the comparison read
// figures through this list, so a figure is formatted and judged the same way everywhere.
type metric struct {
	key    string // stable identifier, used by tests and the comparison
	label  string // as shown in a table row or column header
	unit   unit
	better direction
	// value returns the figure and whether it was measured at all (a latency with no samples,
	// server usage with --target).
	value func(r *results.Run) (float64, bool)
}

// format formats v for a table cell without a unit where the header carries it.
func (m metric) format(v float64) string {
	switch m.unit {
	case unitCount:
		return fmtInt(int64(math.Round(v)))
	case unitRatio:
		return fmtRatio(v) + " %"
	case unitMs:
		return fmtMs(v)
	case unitBytes:
		return fmtBytes(v)
	case unitBytesRate:
		return fmtBytes(v) + "/s"
	case unitRate:
		return fmtRate(v)
	case unitCPU:
		return fmtCPU(v) + " %"
	case unitSeconds:
		return fmtFixed(v, 0) + " s"
	case unitMicros:
		return fmtMs(v)
	case unitCPUTime:
		return fmtMs(v) + " s"
	}
	return fmtFixed(v, 2)
}

// formatWithUnit formats v for prose, where no header says what the number is.
func (m metric) formatWithUnit(v float64) string {
	switch m.unit {
	case unitMs:
		return fmtMs(v) + " ms"
	case unitRate:
		return fmtRate(v) + "/s"
	case unitMicros:
		return fmtMs(v) + " µs"
	}
	return m.format(v)
}

// cell returns the formatted figure of r, or none when it was not measured.
func (m metric) cell(r *results.Run) string {
	if r == nil {
		return none
	}
	v, ok := m.value(r)
	if !ok {
		return none
	}
	return m.format(v)
}

// fails reports whether v breaks a threshold a run must meet; only a few figures have one.
func (m metric) fails(v float64) bool {
	switch m.key {
	case "delivery.ratio":
		return v < MinRatio
	case "conn.failed", "publish.failed":
		return v > 0
	}
	return false
}

// change is the difference between a figure in two runs, a then b.
type change struct {
	a, b     float64
	ok       bool    // both measured
	delta    float64 // b − a
	pct      float64 // relative change in percent; NaN when a is 0
	verdict  int     // +1 better, −1 worse, 0 unchanged or neutral
	deltaTxt string  // "+1.2 ms", "+0.05 pp"
	pctTxt   string  // "+12.0 %", or "" when there is no base
}

// noiseFraction is the relative change below which a difference is called unchanged: run-to-run
// noise on the same machine is a few percent, and flagging it would bury real regressions.
const noiseFraction = 0.05

// compare computes the change of m from a to b. Either run may be nil (the transport or user
// level is missing on that side), which yields ok=false.
func (m metric) compare(a, b *results.Run) change {
	var c change
	if a == nil || b == nil {
		return c
	}
	va, oka := m.value(a)
	vb, okb := m.value(b)
	if !oka || !okb {
		return c
	}
	c = change{a: va, b: vb, ok: true, delta: vb - va, pct: math.NaN()}
	if va != 0 {
		c.pct = (vb - va) / math.Abs(va) * 100
	}
	c.deltaTxt = m.formatDelta(c.delta)
	if !math.IsNaN(c.pct) {
		c.pctTxt = signed(fmtFixed(c.pct, 1)) + " %"
	}
	if c.delta == 0 {
		c.deltaTxt, c.pctTxt = "±0", ""
	}
	if m.better == neutral || c.delta == 0 {
		return c
	}
	significant := false
	switch {
	case m.unit == unitRatio:
		significant = math.Abs(c.delta) >= 0.0001 // 0.01 percentage points
	case m.unit == unitCount:
		// Losses, failures and duplicates matter from the first one.
		significant = va == 0 || math.Abs(c.delta)/math.Abs(va) >= noiseFraction
	case va == 0:
		significant = true
	default:
		significant = math.Abs(c.delta)/math.Abs(va) >= noiseFraction
	}
	if significant && perSecond(m, a) != nil {
		// A figure with a per-second series moved only if it moved beyond both runs' own
		// spread: a p99 that wanders by 3 ms from second to second did not get better by 1.
		fa, fb := cellFigures(m, []*results.Run{a}), cellFigures(m, []*results.Run{b})
		significant = len(fa) == 1 && len(fb) == 1 && apart(fa[0], fb[0])
	}
	if significant {
		if (c.delta > 0) == (m.better == higherBetter) {
			c.verdict = 1
		} else {
			c.verdict = -1
		}
	}
	return c
}

// formatDelta formats a difference with its sign and unit.
func (m metric) formatDelta(d float64) string {
	switch m.unit {
	case unitRatio:
		return signed(fmtFixed(d*100, 2)) + " pp"
	case unitMs:
		return signed(fmtMs(d)) + " ms"
	case unitBytes:
		return signed(fmtBytes(d))
	case unitBytesRate:
		return signed(fmtBytes(d)) + "/s"
	case unitCPU:
		return signed(fmtCPU(d)) + " pp"
	case unitMicros:
		return signed(fmtMs(d)) + " µs"
	}
	return signed(m.format(d))
}

// signed prefixes a non-negative formatted number with "+", so a change always shows its sign.
func signed(s string) string {
	if strings.HasPrefix(s, "-") || s == "0" || strings.Trim(s, "0.,") == "" {
		return s
	}
	return "+" + s
}

// lost is how many expected deliveries never arrived.
func lost(r *results.Run) int64 {
	if n := r.Delivery.Expected - r.Delivery.Received; n > 0 {
		return n
	}
	return 0
}

// usersReached is the most users connected at once, which falls short of Peak when connections
// failed or the run was stopped during the ramp.
func usersReached(r *results.Run) (int, bool) {
	if len(r.Series.Users) == 0 {
		return 0, false
	}
	m := 0
	for _, u := range r.Series.Users {
		m = max(m, u)
	}
	return m, true
}

// count adapts a counter, which is always measured, to metric.value.
func count(f func(r *results.Run) int64) func(r *results.Run) (float64, bool) {
	return func(r *results.Run) (float64, bool) { return float64(f(r)), true }
}

// always adapts a figure that is always measured to metric.value.
// expected reads a delivery figure, which is missing when no publication was expected anywhere
// (no receiver stayed --grace after any): a ratio of nothing is not 100 %.
func expected(f func(r *results.Run) float64) func(r *results.Run) (float64, bool) {
	return func(r *results.Run) (float64, bool) { return f(r), r.Delivery.Expected > 0 }
}

func always(f func(r *results.Run) float64) func(r *results.Run) (float64, bool) {
	return func(r *results.Run) (float64, bool) { return f(r), true }
}

// usage reads a figure of the server's or the generator's resource use, which is missing when
// the bench had no /proc access to the process.
func usage(side func(r *results.Run) *results.Usage, f func(u *results.Usage) float64) func(r *results.Run) (float64, bool) {
	return func(r *results.Run) (float64, bool) {
		u := side(r)
		if !u.Available {
			return 0, false
		}
		return f(u), true
	}
}

// latency reads one statistic of a latency summary, missing when there were no samples.
func latency(l func(r *results.Run) *results.Latencies, f func(l *results.Latencies) float64) func(r *results.Run) (float64, bool) {
	return func(r *results.Run) (float64, bool) {
		s := l(r)
		if s.Count == 0 {
			return 0, false
		}
		return f(s), true
	}
}

// Accessors that pick one part of a run, so metric definitions can share usage and latency.
func serverUsage(r *results.Run) *results.Usage    { return &r.Server }
func generatorUsage(r *results.Run) *results.Usage { return &r.Generator }
func brokerUsage(r *results.Run) *results.Usage    { return &r.BrokerServer }

func connectTime(r *results.Run) *results.Latencies     { return &r.Connections.Connect }
func publishLatency(r *results.Run) *results.Latencies  { return &r.Publish.Latency }
func deliveryLatency(r *results.Run) *results.Latencies { return &r.Delivery.Latency }

// quietLatency is delivery latency on the seconds free of steal: all of it when none was left
// out.
func quietLatency(r *results.Run) *results.Latencies {
	if q := r.Delivery.Quiet; q != nil {
		return &q.Latency
	}
	return &r.Delivery.Latency
}

// Figures used by the verdict table, the terminal and the comparison. They are values, not
// pointers into a shared table, so nothing here is mutable package state.
var (
	mRatio  = metric{key: "delivery.ratio", label: "delivered", unit: unitRatio, better: higherBetter, value: expected(func(r *results.Run) float64 { return r.Delivery.Ratio })}
	mLost   = metric{key: "delivery.lost", label: "lost", unit: unitCount, better: lowerBetter, value: count(lost)}
	mDups   = metric{key: "delivery.duplicates", label: "duplicates", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Delivery.Duplicates })}
	mOOO    = metric{key: "delivery.outOfOrder", label: "out of order", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Delivery.OutOfOrder })}
	mP50    = metric{key: "delivery.p50", label: "p50 ms", unit: unitMs, better: lowerBetter, value: latency(deliveryLatency, func(l *results.Latencies) float64 { return l.P50 })}
	mP99    = metric{key: "delivery.p99", label: "p99 ms", unit: unitMs, better: lowerBetter, value: latency(deliveryLatency, func(l *results.Latencies) float64 { return l.P99 })}
	mMax    = metric{key: "delivery.max", label: "max ms", unit: unitMs, better: lowerBetter, value: latency(deliveryLatency, func(l *results.Latencies) float64 { return l.Max })}
	mOpened = metric{key: "conn.opened", label: "conns opened", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Connections.Opened })}
	mFailed = metric{key: "conn.failed", label: "failed conns", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Connections.Failed })}
	// mPubFail counts the publishes the server refused or that failed: the delivery ratio is
	// over what was accepted, so these are losses it does not show.
	mPubFail = metric{key: "publish.failed", label: "pub failed", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Publish.Failed })}
	mMsgs    = metric{key: "traffic.msgs", label: "msgs/s", unit: unitRate, better: neutral, value: always(func(r *results.Run) float64 { return r.Traffic.MessagesPerSec })}
	mSrvCPU  = metric{key: "server.cpu", label: "server CPU avg", unit: unitCPU, better: lowerBetter, value: usage(serverUsage, func(u *results.Usage) float64 { return u.CPUPercentAvg })}
	mSrvRSS  = metric{key: "server.rss", label: "server RSS max", unit: unitBytes, better: lowerBetter, value: usage(serverUsage, func(u *results.Usage) float64 { return float64(u.RSSMaxBytes) })}
	mPerUsr  = metric{key: "server.bytesPerUser", label: "bytes/user", unit: unitBytes, better: lowerBetter, value: usage(serverUsage, func(u *results.Usage) float64 { return u.BytesPerUser })}
	mGenCPU  = metric{key: "generator.cpu", label: "generator CPU avg", unit: unitCPU, better: lowerBetter, value: usage(generatorUsage, func(u *results.Usage) float64 { return u.CPUPercentAvg })}
	// mCPUMsg is what the server spends per delivery: its CPU time over the run (every process
	// of it, every node) divided by the deliveries the users received. It puts servers that
	// deliver the same traffic side by side, whatever their CPU% at one moment was.
	mCPUMsg = metric{key: "server.cpuPerMessage", label: "CPU µs/msg", unit: unitMicros, better: lowerBetter, value: cpuPerMessage}
)

// cpuPerMessage is the server's CPU time per delivered message in microseconds; not measured
// without server usage, CPU time (results from before it was recorded) or deliveries.
func cpuPerMessage(r *results.Run) (float64, bool) {
	n := r.Delivery.Latency.Count
	if !r.Server.Available || r.Server.CPUSeconds <= 0 || n == 0 {
		return 0, false
	}
	return r.Server.CPUSeconds * 1e6 / float64(n), true
}

// mQuietP99 is p99 without the seconds the machine's neighbours took CPU; only the verdict uses
// it, next to mP99.
var mQuietP99 = metric{key: "delivery.quiet.p99", label: "p99 ms without steal", unit: unitMs, better: lowerBetter, value: latency(quietLatency, func(l *results.Latencies) float64 { return l.P99 })}

// headlineMetrics are the columns of the verdict table: what decides whether a transport did
// its job at a user level and what it cost.
func headlineMetrics() []metric {
	return []metric{mRatio, mPubFail, mLost, mP50, mP99, mFailed, mMsgs, mSrvCPU, mCPUMsg, mSrvRSS, mPerUsr, mGenCPU}
}

// section is a titled group of figures in the per-transport details.
type section struct {
	title   string
	metrics []metric
}

// latencyStats names the statistics of a results.Latencies, in table order.
func latencyStats() []struct {
	label string
	f     func(l *results.Latencies) float64
} {
	return []struct {
		label string
		f     func(l *results.Latencies) float64
	}{
		{"min", func(l *results.Latencies) float64 { return l.Min }},
		{"mean", func(l *results.Latencies) float64 { return l.Mean }},
		{"p50", func(l *results.Latencies) float64 { return l.P50 }},
		{"p90", func(l *results.Latencies) float64 { return l.P90 }},
		{"p95", func(l *results.Latencies) float64 { return l.P95 }},
		{"p99", func(l *results.Latencies) float64 { return l.P99 }},
		{"p99.9", func(l *results.Latencies) float64 { return l.P999 }},
		{"max", func(l *results.Latencies) float64 { return l.Max }},
	}
}

// latencyKinds names the three latency summaries of a run.
func latencyKinds() []struct {
	key, title string
	get        func(r *results.Run) *results.Latencies
} {
	return []struct {
		key, title string
		get        func(r *results.Run) *results.Latencies
	}{
		{"delivery", "Delivery latency, publish → receiver", deliveryLatency},
		{"publish", "Publish latency, send → ack", publishLatency},
		{"connect", "Connect time", connectTime},
	}
}

// latencySections lists every latency statistic as a figure, one section per summary, for the
// per-transport table where transports sit side by side.
func latencySections() []section {
	var ss []section
	for _, k := range latencyKinds() {
		sec := section{title: k.title + " (ms)"}
		sec.metrics = append(sec.metrics, metric{key: k.key + ".count", label: "samples", unit: unitCount, better: neutral,
			value: count(func(r *results.Run) int64 { return k.get(r).Count })})
		for _, s := range latencyStats() {
			sec.metrics = append(sec.metrics, metric{key: k.key + "." + s.label, label: s.label, unit: unitMs, better: lowerBetter,
				value: latency(k.get, s.f)})
		}
		ss = append(ss, sec)
	}
	return ss
}

// usageMetrics lists the resource figures of one process.
func usageMetrics(prefix string, side func(r *results.Run) *results.Usage) []metric {
	return []metric{
		{key: prefix + ".cpuAvg", label: "CPU avg", unit: unitCPU, better: lowerBetter, value: usage(side, func(u *results.Usage) float64 { return u.CPUPercentAvg })},
		{key: prefix + ".cpuMax", label: "CPU max", unit: unitCPU, better: lowerBetter, value: usage(side, func(u *results.Usage) float64 { return u.CPUPercentMax })},
		{key: prefix + ".rssMax", label: "RSS max", unit: unitBytes, better: lowerBetter, value: usage(side, func(u *results.Usage) float64 { return float64(u.RSSMaxBytes) })},
		{key: prefix + ".rssAtPeak", label: "RSS at peak", unit: unitBytes, better: lowerBetter, value: usage(side, func(u *results.Usage) float64 { return float64(u.RSSAtPeak) })},
		{key: prefix + ".bytesPerUser", label: "bytes per user", unit: unitBytes, better: lowerBetter, value: usage(side, func(u *results.Usage) float64 { return u.BytesPerUser })},
		{key: prefix + ".goroutinesMax", label: "goroutines max", unit: unitCount, better: lowerBetter, value: func(r *results.Run) (float64, bool) {
			// Zero means not reported (the field is omitempty; a Go process always has goroutines).
			u := side(r)
			return float64(u.GoroutinesMax), u.Available && u.GoroutinesMax > 0
		}},
		{key: prefix + ".threadsMax", label: "threads max", unit: unitCount, better: lowerBetter, value: func(r *results.Run) (float64, bool) {
			u := side(r)
			return float64(u.ThreadsMax), u.Available && u.ThreadsMax > 0
		}},
		{key: prefix + ".cpuSeconds", label: "CPU time", unit: unitCPUTime, better: lowerBetter, value: func(r *results.Run) (float64, bool) {
			u := side(r)
			return u.CPUSeconds, u.Available && u.CPUSeconds > 0
		}},
	}
}

// detailSections lists every scalar figure of a run, grouped as results.go groups them, except
// the latency summaries (see latencySections).
func detailSections() []section {
	return []section{
		{"Run", []metric{
			{key: "run.peak", label: "peak users", unit: unitCount, better: neutral, value: always(func(r *results.Run) float64 { return float64(r.Peak) })},
			{key: "run.usersReached", label: "users reached", unit: unitCount, better: higherBetter, value: func(r *results.Run) (float64, bool) {
				n, ok := usersReached(r)
				return float64(n), ok
			}},
			{key: "run.duration", label: "duration", unit: unitSeconds, better: neutral, value: always(func(r *results.Run) float64 { return float64(r.Duration) / 1e9 })},
		}},
		{"Connections", []metric{
			{key: "conn.tried", label: "tried", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Connections.Tried })},
			{key: "conn.opened", label: "opened", unit: unitCount, better: neutral, value: mOpened.value},
			{key: "conn.users", label: "users connected", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Connections.Users })},
			{key: "conn.reconnects", label: "reconnects", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Connections.Reconnects })},
			{key: "conn.failed", label: "failed", unit: unitCount, better: lowerBetter, value: mFailed.value},
			{key: "conn.dropped", label: "dropped", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Connections.Dropped })},
		}},
		{"Publish", []metric{
			{key: "publish.sent", label: "sent", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Publish.Sent })},
			{key: mPubFail.key, label: "refused or failed", unit: unitCount, better: lowerBetter, value: mPubFail.value},
			{key: "publish.failedShare", label: "refused or failed share", unit: unitRatio, better: lowerBetter, value: func(r *results.Run) (float64, bool) {
				return r.Publish.FailedShare(), r.Publish.Sent > 0
			}},
			{key: "publish.httpRequests", label: "HTTP requests", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Publish.Requests })},
		}},
		{"Delivery", []metric{
			{key: "delivery.expected", label: "expected", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Delivery.Expected })},
			{key: "delivery.received", label: "received", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Delivery.Received })},
			{key: "delivery.unconfirmed", label: "received, publish failed", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Delivery.Unconfirmed })},
			{key: "delivery.outsideWindow", label: "received outside the window", unit: unitCount, better: neutral, value: count(func(r *results.Run) int64 { return r.Delivery.OutsideWindow })},
			mLost,
			{key: mRatio.key, label: "ratio", unit: unitRatio, better: higherBetter, value: mRatio.value},
			mDups,
			mOOO,
			{key: "delivery.gaps", label: "history gaps", unit: unitCount, better: lowerBetter, value: count(func(r *results.Run) int64 { return r.Delivery.Gaps })},
		}},
		{"Traffic", []metric{
			{key: mMsgs.key, label: "messages/s", unit: unitRate, better: neutral, value: mMsgs.value},
			{key: "traffic.bytes", label: "bytes/s", unit: unitBytesRate, better: neutral, value: always(func(r *results.Run) float64 { return r.Traffic.BytesPerSec })},
			{key: "traffic.requests", label: "HTTP requests/s", unit: unitRate, better: neutral, value: always(func(r *results.Run) float64 { return r.Traffic.RequestsPerSec })},
		}},
		{"Server", usageMetrics("server", serverUsage)},
		{"Generator", usageMetrics("generator", generatorUsage)},
		{"Broker server", usageMetrics("broker", brokerUsage)},
	}
}

// transportBase splits a transport name into the transport and a variant ("longpoll-5s" is
// longpoll, variant 5s). A whole name the lab writes (stomp-tcp, before any round, broker or
// server) is its transport. The notify scenario's interval polls ("poll-1s") are short polling.
func transportBase(t string) (base, variant string) {
	whole := t
	if i := strings.IndexAny(t, "#@~"); i > 0 {
		whole = t[:i]
	}
	if _, _, ok := transports.Lookup(transports.FromLab(whole)); ok {
		return transports.FromLab(whole), ""
	}
	base = t
	if i := strings.IndexAny(t, "-_@:/~ "); i > 0 {
		base, variant = t[:i], t[i+1:]
	}
	if base == "poll" {
		base = transports.ShortPoll
	}
	return base, variant
}

// transportRank orders the known transports as the table does (internal/transports); unknown
// names sort after them.
func transportRank(t string) int {
	base, _ := transportBase(t)
	return transports.Rank(base)
}

// transportLabel is a transport's name as a reader says it. Unknown names, such as a variant
// "longpoll-5s", keep their suffix: "long polling 5s".
func transportLabel(t string) string {
	if t, round, ok := strings.Cut(t, "#"); ok {
		return transportLabel(t) + " · round " + round
	}
	if t, broker, ok := strings.Cut(t, "@"); ok {
		return transportLabel(t) + " · " + brokerLabel(broker)
	}
	if t, kind, ok := strings.Cut(t, "~"); ok {
		return transportLabel(t) + " · " + results.KindLabel(kind)
	}
	base, rest := transportBase(t)
	row, _, ok := transports.Lookup(base)
	if !ok {
		return t
	}
	if rest != "" {
		return row.Label + " " + rest
	}
	return row.Label
}

// palette colors the transports of one user level, in table order. A known transport has the
// same color in every chart of every report, so a reader learns it once; an unknown transport, or
// a second variant of a known one (longpoll-1s next to longpoll-5s), takes the next spare color,
// so no two lines of a chart share one.
func palette(names []string) map[string]string {
	own := func(t string) string {
		base, _ := transportBase(t)
		row, _, _ := transports.Lookup(base)
		return row.Colour
	}
	spare := []string{"#66a61e", "#a6761d", "#666666", "#e6ab02", "#17becf", "#8c564b"}
	used := map[string]bool{}
	colors := map[string]string{}
	next := 0
	for _, t := range names {
		if _, done := colors[t]; done {
			continue
		}
		c := own(t)
		if c == "" || used[c] {
			c = spare[next%len(spare)]
			next++
		}
		used[c] = true
		colors[t] = c
	}
	return colors
}

// brokerLabel is a broker's name as a reader says it.
func brokerLabel(b string) string {
	switch b {
	case "redis":
		return "Redis"
	case "nats":
		return "NATS"
	case "amqp":
		return "RabbitMQ"
	}
	return b
}
