package bench

import (
	"slices"
	"sort"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// recoveredShare is the share of the median second before the first fault at which a second's
// deliveries count as back to normal.
const recoveredShare = 0.9

// account fills run.Faults from the injector's records and the cell's counts, once every
// activity has ended; cut is as for delivery.
func (in *injector) account(run *results.Run, cut int64) {
	if in == nil {
		return
	}
	c, fc := in.c, in.c.flt
	byGroup := c.acceptedByGroup(cut)
	base := c.clk.base
	total := int64(c.plan.Total)
	for k := range in.recs {
		f := &in.recs[k]
		from, to := base+int64(f.At), base+total
		if k+1 < len(in.recs) {
			to = base + int64(in.recs[k+1].At)
		}
		for _, v := range c.vus {
			exp := v.expectedIn(byGroup[v.group], from, min(to, cut))
			got := min(fc.recv[v.id][k].Load(), exp)
			f.Expected += exp
			f.Delivered += got
			f.Gaps += fc.gaps[v.id][k].Load()
			if fc.told(v.id, k) {
				f.Told += exp - got
			} else {
				f.SilentlyLost += exp - got
			}
		}
		f.Duplicates, f.Reordered = fc.dups[k].Load(), fc.ooo[k].Load()
		lo, hi := int(time.Duration(f.At).Seconds()), int(time.Duration(to-base).Seconds())
		f.PublishFailed = sumRange(run.Series.PublishFailed, lo, hi)
		f.Recovery = recovery(run.Series.Received, in.recs[0].At, in.ends[k], time.Duration(total))
	}
	run.Faults = in.recs
}

// told reports whether user got a gap notice in window k or the next: a notice tells of what
// went before it, and one about the last moments of a window (history lost in a broker
// restart that begins the next) arrives in the next.
func (fc *faultCount) told(user, k int) bool {
	return fc.gaps[user][k].Load() > 0 || (k+1 < len(fc.at) && fc.gaps[user][k+1].Load() > 0)
}

// acceptedByGroup lists the send times of the accepted publications sent before cut, per
// group, sorted.
func (c *cell) acceptedByGroup(cut int64) [][]int64 {
	byGroup := make([][]int64, c.groups)
	for _, v := range c.vus {
		for i := range v.seq {
			if p := &v.pubs[i]; p.state.Load() == pubOK && p.ts < cut {
				byGroup[v.group] = append(byGroup[v.group], p.ts)
			}
		}
	}
	for _, ts := range byGroup {
		slices.Sort(ts)
	}
	return byGroup
}

// expectedIn counts the send times ts (sorted) in [from, to) inside v's delivery windows.
func (v *vu) expectedIn(ts []int64, from, to int64) int64 {
	var n int64
	for _, w := range v.windows {
		a, b := max(w.from, from), min(w.to, to)
		if b <= a {
			continue
		}
		n += int64(sort.Search(len(ts), func(i int) bool { return ts[i] >= b }) - sort.Search(len(ts), func(i int) bool { return ts[i] >= a }))
	}
	return n
}

// sumRange sums s[lo:hi], within bounds.
func sumRange(s []int64, lo, hi int) int64 {
	var n int64
	for i := max(lo, 0); i < min(hi, len(s)); i++ {
		n += s[i]
	}
	return n
}

// recovery is the time from end (the fault over) to the end of the first whole second after it,
// before until (the run's end: a slow restart may outlast its window), whose deliveries reach recoveredShare of the median second of the 10 s before
// the first fault; nil when none does or there is no second to compare with.
func recovery(received []int64, first results.Duration, end, until time.Duration) *results.Duration {
	hi := int(time.Duration(first).Seconds())
	lo := max(0, hi-10)
	if hi > len(received) || hi-lo < 1 {
		return nil
	}
	before := slices.Clone(received[lo:hi])
	slices.Sort(before)
	normal := recoveredShare * float64(before[len(before)/2])
	for s := int((end + time.Second - 1) / time.Second); s < min(len(received), int(until/time.Second)+1); s++ {
		if float64(received[s]) >= normal {
			d := results.Duration((time.Duration(s+1)*time.Second - end).Round(time.Millisecond))
			return &d
		}
	}
	return nil
}
