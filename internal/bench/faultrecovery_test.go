package bench

import (
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// TestRecovery checks the rule: from the fault's end to the end of the first whole second
// after it that delivers 90 % of the median second of the 10 s before the first fault.
func TestRecovery(t *testing.T) {
	s := time.Second
	//                   0    1    2    3    4    5    6    7    8    9
	received := []int64{50, 100, 100, 100, 100, 10, 0, 0, 80, 95, 100, 100}
	for _, tc := range []struct {
		first      time.Duration
		end, until time.Duration
		want       time.Duration // -1: none
	}{
		{5 * s, 5500 * time.Millisecond, 12 * s, 4500 * time.Millisecond}, // second 9 (95 ≥ 90) ends at 10 s
		{5 * s, 9 * s, 12 * s, s}, // already back: the second after the end
		{5 * s, 5 * s, 8 * s, -1}, // nothing back before until
		{0, 5 * s, 12 * s, -1},    // no second before the first fault
		{5 * s, 10200 * time.Millisecond, 12 * s, 1800 * time.Millisecond},
		{5 * s, 10200400 * time.Microsecond, 12 * s, 1800 * time.Millisecond}, // rounded to the ms
	} {
		got := recovery(received, results.Duration(tc.first), tc.end, tc.until)
		switch {
		case tc.want < 0 && got != nil:
			t.Errorf("%+v: recovery %s, want none", tc, *got)
		case tc.want >= 0 && (got == nil || time.Duration(*got) != tc.want):
			t.Errorf("%+v: recovery %v, want %s", tc, got, tc.want)
		}
	}
}
