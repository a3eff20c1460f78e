package report

import (
	"math"
	"slices"
	"strings"

	"github.com/rtlab/rtlab/internal/bench"
)

// minSpreadSeconds is how many seconds at the peak a run needs before its own spread says
// anything: with fewer, no difference to another run counts as clear.
const minSpreadSeconds = 5

// perSecond returns m's per-second values in r over the seconds at the peak (at least 90 % of
// the most users the run reached) that measured it, or nil when m has no per-second series.
// Ramps are left out: their figures differ for a reason that is no noise.
func perSecond(m metric, r *bench.Run) []float64 {
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
}

// cellFigures groups runs into cells (their key without the round) and returns m's figure of
// each cell that measured it, in table order.
func cellFigures(m metric, runs []*bench.Run) []cellFigure {
	var keys []string
	byKey := map[string][]*bench.Run{}
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
		if len(vs) > 1 {
			f.v, f.spread = median(vs), slices.Max(vs)-slices.Min(vs)
		} else if ps := perSecond(m, byKey[k][0]); len(ps) >= minSpreadSeconds {
			f.spread = iqr(ps)
		}
		out = append(out, f)
	}
	return out
}

// apart reports whether two cells differ by more than either one's own spread: only then does
// the verdict say one was lower.
func apart(a, b cellFigure) bool {
	return math.Abs(a.v-b.v) > max(a.spread, b.spread)
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

// spreadText says how large the spread that hid a difference was: "the runs' own spread (up to
// 2.1 ms from second to second)", or that a run was too short to tell.
func spreadText(m metric, lo, hi cellFigure) string {
	s := max(lo.spread, hi.spread)
	switch {
	case math.IsInf(s, 1):
		return "too few seconds at the peak to tell a difference from noise"
	case lo.rounds > 1 || hi.rounds > 1:
		return "within the spread over rounds (up to " + m.formatWithUnit(s) + ")"
	}
	return "within the runs' own spread (up to " + m.formatWithUnit(s) + " between seconds at the peak)"
}
