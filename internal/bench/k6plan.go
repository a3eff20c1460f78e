package bench

import (
	"math/rand/v2"
	"time"
)

// Workload is what another load generator needs to send the same traffic as the bench at one
// user level of the location scenario: stages with PEAK resolved, the groups users fall in (user
// i in group i % Groups), each user's publish phase within the interval, and the grace that
// decides which receipts count.
type Workload struct {
	Stages   []Stage
	Peak     int
	Groups   int
	Interval time.Duration
	Grace    time.Duration
	LongWait time.Duration
	Phases   []time.Duration // per user id, as the bench draws them from Seed
}

// WorkloadFor returns the workload of o (validated) at peak users.
func (o *Options) WorkloadFor(peak int) Workload {
	w := Workload{
		Stages: Resolve(o.stageSpecs, peak), Peak: peak, Groups: o.groupsFor(peak),
		Interval: o.Interval, Grace: o.Grace, LongWait: o.LongWait,
		Phases: make([]time.Duration, peak),
	}
	// The same draws, in the same order, as newCell makes.
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))
	for i := range w.Phases {
		w.Phases[i] = time.Duration(rng.Int64N(int64(o.Interval/phaseSlot))) * phaseSlot
	}
	return w
}
