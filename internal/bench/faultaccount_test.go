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

// TestFaultAccounting checks a window's sums on three users of one group: what each was due
// (accepted publications sent in the window), what it got, and whether its missing ones were
// told (a gap notice in the window or the next) or lost silently.
func TestFaultAccounting(t *testing.T) {
	s := int64(time.Second)
	c := &cell{groups: 1, plan: &Plan{Total: 30 * time.Second}, opts: &Options{}}
	specs := []FaultSpec{{At: 10 * time.Second, Kind: FaultKillNode, Node: 1}, {At: 20 * time.Second, Kind: FaultRestartBroker}}
	for i := range 3 {
		c.vus = append(c.vus, &vu{id: i, c: c, windows: []window{{0, 30 * s}}})
	}
	c.flt = newFaultCount(specs, 3, c)
	pub := c.vus[0]
	pub.pubs = make([]pubRecord, 5)
	for i, at := range []int64{5, 12, 13, 15, 25} { // 13 s was refused
		pub.pubs[i].ts = at * s
		pub.pubs[i].state.Store(map[bool]uint32{true: pubFailed, false: pubOK}[at == 13])
	}
	pub.seq = 5
	got := map[int][]int64{0: {5, 12, 15, 25}, 1: {12, 25}, 2: {12}}
	for u, tss := range got {
		for _, ts := range tss {
			c.flt.received(u, ts*s)
		}
	}
	c.flt.gap(1, 21*s) // tells of window 0's missing 15 s
	in := &injector{c: c, ends: []time.Duration{10 * time.Second, 25 * time.Second}}
	for _, f := range specs {
		in.recs = append(in.recs, results.Fault{Kind: f.Kind, Node: f.Node, At: results.Duration(f.At)})
	}
	run := &results.Run{Series: results.Series{PublishFailed: make([]int64, 30), Received: make([]int64, 30)}}
	run.Series.PublishFailed[13] = 1
	in.account(run, 1<<62)
	for i, want := range []results.Fault{
		{Expected: 6, Delivered: 4, Told: 1, SilentlyLost: 1, PublishFailed: 1},
		{Expected: 3, Delivered: 2, SilentlyLost: 1, Gaps: 1},
	} {
		f := run.Faults[i]
		if f.Expected != want.Expected || f.Delivered != want.Delivered || f.Told != want.Told || f.SilentlyLost != want.SilentlyLost || f.Gaps != want.Gaps || f.PublishFailed != want.PublishFailed {
			t.Errorf("window %d: %+v, want %+v", i, f, want)
		}
	}
}
