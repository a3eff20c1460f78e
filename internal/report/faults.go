package report

import (
	"fmt"
	"slices"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// faultLine says what one injected fault cost over its window (docs/bench.md#faults).
func faultLine(f results.Fault) string {
	what := f.Kind
	if f.Node > 0 {
		what += fmt.Sprintf(" node %d", f.Node)
	}
	if f.Delay > 0 {
		what += " " + f.Delay.String()
	}
	when := f.At.String()
	if f.Late > 0 {
		when += fmt.Sprintf(" (%s late)", f.Late)
	}
	if f.For > 0 {
		when += " for " + f.For.String()
	}
	if f.Error != "" {
		return fmt.Sprintf("fault %s at %s failed: %s", what, when, f.Error)
	}
	rec := "not recovered"
	if f.Recovery != nil {
		rec = "recovered in " + time.Duration(*f.Recovery).Round(100*time.Millisecond).String()
	}
	return fmt.Sprintf("fault %s at %s: delivered %s of %s, told (gap) %s, silently lost %s, gaps %s, dups %s, reordered %s, refused publishes %s, %s",
		what, when, fmtInt(f.Delivered), fmtInt(f.Expected), fmtInt(f.Told), fmtInt(f.SilentlyLost), fmtInt(f.Gaps),
		fmtInt(f.Duplicates), fmtInt(f.Reordered), fmtInt(f.PublishFailed), rec)
}

// faultFlagged reports a fault that broke a promise: a delivery lost silently, or no recovery.
func faultFlagged(f results.Fault) bool {
	return f.SilentlyLost > 0 || f.Recovery == nil || f.Error != ""
}

// chartFault is a fault marked on the time charts: from At to End, seconds since the start.
type chartFault struct {
	At    float64 `json:"at"`
	End   float64 `json:"end"`
	Label string  `json:"label"`
}

// chartFaults are the faults of a level's runs, each once (every run of a schedule has the
// same).
func chartFaults(runs []*results.Run) []chartFault {
	var out []chartFault
	for _, r := range runs {
		for _, f := range r.Faults {
			label := f.Kind
			if f.Node > 0 {
				label += fmt.Sprintf("=%d", f.Node)
			}
			cf := chartFault{At: time.Duration(f.At).Seconds(), End: time.Duration(f.At + f.For).Seconds(), Label: label}
			if !slices.Contains(out, cf) {
				out = append(out, cf)
			}
		}
	}
	return out
}
