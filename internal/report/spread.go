package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rtlab/rtlab/internal/results"
)

// minSpreadSeconds is how many seconds at the peak a run needs before its own spread says
// anything: with fewer, no difference to another run counts as clear.
const minSpreadSeconds = 5

// perSecond returns m's per-second values in r over the seconds at the peak (at least 90 % of
// the most users the run reached) that measured it, or nil when m has no per-second series.
// Ramps are left out: their figures differ for a reason that is no noise.
func perSecond(m metric, r *results.Run) []float64 {
	s := &r.Series
	var vs []float64
	needDeliveries := true
	switch m.key {
	case mP99.key:
		vs = s.LatencyP99
	case mP50.key:
		vs = s.LatencyP50
	case mSrvCPU.key:
		if !r.Server.Available {
			return nil
		}
		vs, needDeliveries = s.ServerCPU, false
	default:
		return nil
	}
	most, _ := usersReached(r)
	var out []float64
	for i, v := range vs {
		if i >= len(s.Users) || float64(s.Users[i]) < 0.9*float64(most) {
			continue
		}
		if needDeliveries && (i >= len(s.Received) || s.Received[i] == 0) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// cellFigure is one figure of one cell of a user level (a transport, on a server and broker):
// the run's value, or with several rounds the median of the rounds' values, and the spread the
// cell shows of its own: the interquartile range of its per-second values at the peak, or the
// range over its rounds. An unknown spread is +Inf.
type cellFigure struct {
	name   string
	v      float64
	spread float64
	rounds int
	// lo and hi bound the samples the cell shows of itself (its per-second values at the peak,
	// or its rounds' values); n counts them, 0 when there are none.
	lo, hi float64
	n      int
}

// cellFigures groups runs into cells (their key without the round) and returns m's figure of
// each cell that measured it, in table order.
func cellFigures(m metric, runs []*results.Run) []cellFigure {
	var keys []string
	byKey := map[string][]*results.Run{}
	for _, r := range runs {
		k, _, _ := strings.Cut(r.Key(), "#")
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var out []cellFigure
	for _, k := range keys {
		var vs []float64
		for _, r := range byKey[k] {
			if v, ok := m.value(r); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		f := cellFigure{name: transportLabel(k), v: vs[0], spread: math.Inf(1), rounds: len(vs)}
		samples := vs
		if len(vs) > 1 {
			f.v, f.spread = median(vs), slices.Max(vs)-slices.Min(vs)
		} else {
			samples = perSecond(m, byKey[k][0])
			if len(samples) >= minSpreadSeconds {
				f.spread = iqr(samples)
			}
		}
		if f.n = len(samples); f.n > 0 {
			f.lo, f.hi = slices.Min(samples), slices.Max(samples)
		}
		out = append(out, f)
	}
	return out
}

// apart reports whether two cells differ beyond the noise they show of themselves: only then
// does the verdict say one was lower. They do when one is at least twice the other and their
// samples do not overlap (every second of one below every second of the other), however short
// the run; else when they are further apart than either one's own spread (the interquartile
// range of minSpreadSeconds or more seconds at the peak, or the range over rounds).
func apart(a, b cellFigure) bool {
	return separated(a, b) || math.Abs(a.v-b.v) > max(a.spread, b.spread)
}

// separated reports whether a and b are 2× apart or more with samples that do not overlap.
func separated(a, b cellFigure) bool {
	if a.v > b.v {
		a, b = b, a
	}
	if a.n == 0 || b.n == 0 || a.v < 0 || b.v < 2*a.v {
		return false
	}
	return a.hi < b.lo
}

// iqr is the interquartile range of xs (linear interpolation between order statistics).
func iqr(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	q := func(p float64) float64 {
		pos := p * float64(len(s)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(s)-1)
		return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
	}
	return q(0.75) - q(0.25)
}

// lowHigh returns the cells with the lowest and the highest value.
func lowHigh(fs []cellFigure) (lo, hi cellFigure) {
	lo, hi = fs[0], fs[0]
	for _, f := range fs[1:] {
		if f.v < lo.v {
			lo = f
		}
		if f.v > hi.v {
			hi = f
		}
	}
	return lo, hi
}

// spreadText says what hid a difference: the runs' own spread ("up to 2.1 ms from second to
// second"), the spread over rounds, or seconds too few to tell, with how many there were.
func spreadText(m metric, lo, hi cellFigure) string {
	s := max(lo.spread, hi.spread)
	switch {
	case !math.IsInf(s, 1) && (lo.rounds > 1 || hi.rounds > 1):
		return "within the spread over rounds (up to " + m.formatWithUnit(s) + ")"
	case !math.IsInf(s, 1):
		return "within the runs' own spread (up to " + m.formatWithUnit(s) + " between seconds at the peak)"
	case lo.n == 0 || hi.n == 0:
		return "too few seconds at the peak to tell a difference from noise"
	case lo.hi >= hi.lo && lo.lo <= hi.hi:
		return fmt.Sprintf("their seconds at the peak overlap (%s–%s and %s–%s), and %d and %d seconds are too few to tell more",
			m.format(lo.lo), m.format(lo.hi), m.format(hi.lo), m.formatWithUnit(hi.hi), lo.n, hi.n)
	}
	return fmt.Sprintf("under 2× apart, and %d and %d seconds at the peak are too few (%d needed) to tell that from noise", lo.n, hi.n, minSpreadSeconds)
}
