package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultStages is the standard three-phase scenario: ramp up, hold the peak, ramp down.
const DefaultStages = "20s:300,30s:PEAK,10s:0"

// StageSpec is one stage as written on the command line, before PEAK is known.
type StageSpec struct {
	Duration time.Duration
	Target   int  // ignored when Peak is set
	Peak     bool // the target is the run's peak user count (--users)
}

// Stage is one stage with its target resolved: over Duration the number of users ramps
// linearly from the previous stage's target (0 for the first) to Target, as k6's ramping-vus
// executor does.
type Stage struct {
	Duration time.Duration
	Target   int
}

// ParseStages parses "20s:300,30s:PEAK,10s:0": comma-separated duration:target pairs. A
// duration is a Go duration greater than zero; a target is a non-negative integer or PEAK
// (any case).
func ParseStages(s string) ([]StageSpec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty; want duration:target pairs like %q", DefaultStages)
	}
	var out []StageSpec
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		ds, ts, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("stage %d %q: want duration:target like 30s:PEAK", i+1, part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("stage %d %q: duration %q is not a positive Go duration like 20s", i+1, part, ds)
		}
		ts = strings.TrimSpace(ts)
		spec := StageSpec{Duration: d}
		if strings.EqualFold(ts, "PEAK") {
			spec.Peak = true
		} else {
			n, err := strconv.Atoi(ts)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("stage %d %q: target %q is not PEAK or a non-negative integer", i+1, part, ts)
			}
			spec.Target = n
		}
		out = append(out, spec)
	}
	return out, nil
}

// HasPeak reports whether any stage targets PEAK, i.e. whether --users changes the run.
func HasPeak(specs []StageSpec) bool {
	for _, s := range specs {
		if s.Peak {
			return true
		}
	}
	return false
}

// Resolve replaces PEAK with peak.
func Resolve(specs []StageSpec, peak int) []Stage {
	out := make([]Stage, len(specs))
	for i, s := range specs {
		out[i] = Stage{Duration: s.Duration, Target: s.Target}
		if s.Peak {
			out[i].Target = peak
		}
	}
	return out
}

// Interval is a span of time relative to the start of a run.
type Interval struct {
	Start, Stop time.Duration
}

// Plan is the schedule of a run: when each virtual user starts and stops. It is computed once
// from the stages, so every user knows when it will leave (which the delivery accounting
// needs) and the runner only follows a list of events.
type Plan struct {
	Stages   []Stage
	Total    time.Duration // sum of stage durations
	Peak     int           // highest target of any stage
	PeakEnd  time.Duration // end of the last stage that reaches Peak and holds or leaves it
	Activity [][]Interval  // per user id: when it is active, in time order
	Events   []Event       // starts and stops in time order
}

// Event starts or stops one virtual user.
type Event struct {
	At    time.Duration
	User  int
	Start bool
}

// NewPlan computes the schedule. With k6 semantics the number of active users at time t is
// floor(target(t)), target being the piecewise-linear ramp; users are numbered from 0 and the
// highest-numbered active user is the first to leave, so user i is active exactly while
// target(t) >= i+1.
func NewPlan(stages []Stage) *Plan {
	p := &Plan{Stages: stages}
	prev := 0
	var at time.Duration
	for _, s := range stages {
		p.Peak = max(p.Peak, s.Target)
		switch {
		case s.Target > prev:
			for k := prev + 1; k <= s.Target; k++ {
				t := at + time.Duration(float64(s.Duration)*float64(k-prev)/float64(s.Target-prev))
				p.Events = append(p.Events, Event{At: t, User: k - 1, Start: true})
			}
		case s.Target < prev:
			for k := prev - 1; k >= s.Target; k-- {
				t := at + time.Duration(float64(s.Duration)*float64(prev-k)/float64(prev-s.Target))
				p.Events = append(p.Events, Event{At: t, User: k, Start: false})
			}
		}
		at += s.Duration
		prev = s.Target
	}
	p.Total = at
	for i := prev - 1; i >= 0; i-- { // users still active at the end leave then
		p.Events = append(p.Events, Event{At: p.Total, User: i, Start: false})
	}
	// Events are generated in time order per stage; a stable sort keeps the LIFO order of
	// simultaneous stops.
	sort.SliceStable(p.Events, func(i, j int) bool { return p.Events[i].At < p.Events[j].At })

	p.Activity = make([][]Interval, p.Peak)
	for _, e := range p.Events {
		a := p.Activity[e.User]
		if e.Start {
			p.Activity[e.User] = append(a, Interval{Start: e.At})
		} else {
			a[len(a)-1].Stop = e.At
		}
	}
	// A user whose start falls on the very end of the run would live for no time: drop it.
	atEnd := func(u int) bool {
		a := p.Activity[u]
		return len(a) > 0 && a[len(a)-1].Start == p.Total
	}
	keep := p.Events[:0]
	for _, e := range p.Events {
		if e.At < p.Total || !atEnd(e.User) {
			keep = append(keep, e)
		}
	}
	p.Events = keep
	for u, a := range p.Activity {
		if n := len(a); n > 0 && a[n-1].Start == a[n-1].Stop {
			p.Activity[u] = a[:n-1]
		}
	}
	at = 0
	for _, s := range stages {
		at += s.Duration
		if s.Target == p.Peak && p.Peak > 0 {
			p.PeakEnd = at
		}
	}
	return p
}

// Target returns the ramp's target at t (fractional while ramping).
func (p *Plan) Target(t time.Duration) float64 {
	prev := 0.0
	var at time.Duration
	for _, s := range p.Stages {
		if t < at+s.Duration {
			f := float64(t-at) / float64(s.Duration)
			return prev + (float64(s.Target)-prev)*f
		}
		at += s.Duration
		prev = float64(s.Target)
	}
	return prev
}

// StageAt returns the 1-based index of the stage running at t (len(Stages) after the end).
func (p *Plan) StageAt(t time.Duration) int {
	var at time.Duration
	for i, s := range p.Stages {
		at += s.Duration
		if t < at {
			return i + 1
		}
	}
	return len(p.Stages)
}
