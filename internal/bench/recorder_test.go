package bench

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

func TestCollectorMergesShards(t *testing.T) {
	col := newCollector(4)
	// 400 deliveries spread over the shards: 1 ms .. 400 ms.
	for i := 1; i <= 400; i++ {
		col.shards[i%4].delivered(time.Duration(i)*time.Millisecond, 100, true)
	}
	col.shards[0].update(func(c *counters) { c.pubSent += 7 })
	sec := col.collect()
	if sec.received != 400 || sec.bytesIn != 40000 || sec.pubSent != 7 {
		t.Fatalf("second counts %+v", sec)
	}
	if col.second.TotalCount() != 400 {
		t.Fatalf("second histogram has %d values", col.second.TotalCount())
	}
	// A second second, then the totals hold both.
	for i := 1; i <= 100; i++ {
		col.shards[i%4].delivered(1000*time.Millisecond, 1, true)
	}
	col.collect()
	if col.second.TotalCount() != 100 {
		t.Errorf("second histogram not reset: %d values", col.second.TotalCount())
	}
	l := latencies(col.total[histDelivery])
	if l.Count != 500 || col.c.received != 500 {
		t.Fatalf("totals: %d values, %d received; want 500", l.Count, col.c.received)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.002 }
	if !near(l.Min, 1) || !near(l.Max, 1000) || !near(l.P50, 250) || !near(l.P90, 1000) {
		t.Errorf("latencies %+v; want min 1, p50 250, p90 1000, max 1000 ms", l)
	}
	for _, s := range col.shards {
		if s.hist[histDelivery].TotalCount() != 0 || s.c != (counters{}) {
			t.Errorf("shard not drained")
		}
	}
}

// testCell builds a cell with users in groups without starting anything.
func testCell(t *testing.T, users, groups int) *cell {
	return testCellEvery(t, users, groups, time.Second)
}

// testCellEvery is testCell with users publishing every interval.
func testCellEvery(t *testing.T, users, groups int, interval time.Duration) *cell {
	t.Helper()
	o := &Options{Users: []int{users}, Stages: "10s:PEAK,10s:PEAK", Groups: groups, Interval: interval}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	plan := NewPlan(Resolve(o.stageSpecs, users))
	c := newCell(context.Background(), o, results.KindRTLab, "ws", plan, []string{"127.0.0.1:1"})
	c.clk = clock{t0: time.Unix(0, 0), base: 0}
	return c
}

func TestDeliveryAccounting(t *testing.T) {
	c := testCell(t, 4, 2) // users 0 and 2 in group 0, 1 and 3 in group 1
	const s = int64(time.Second)
	pub := func(user int, ts int64, state uint32, recv int32) {
		v := c.vus[user]
		p := &v.pubs[v.seq]
		v.seq++
		p.ts = ts
		p.state.Store(state)
		p.recv.Store(recv)
	}
	// Group 0: user 0 is there from 1 s to 9 s (window [1 s, 9 s)); user 2 joins at 4 s and
	// plans to leave at 8 s with a 2 s grace (window [4 s, 6 s)).
	c.vus[0].windows = []window{{1 * s, 9 * s}}
	c.vus[2].windows = []window{{4 * s, 6 * s}}
	pub(0, 2*s, pubOK, 1)     // only user 0 was subscribed: expected 1
	pub(0, 5*s, pubOK, 2)     // both: expected 2
	pub(2, 7*s, pubOK, 1)     // user 2 leaves within the grace period: expected 1 (user 0)
	pub(0, 3*s, pubFailed, 1) // refused by the server: not expected, its receipt not counted
	pub(2, 5*s, pubOK, 1)     // expected 2, one receipt lost
	pub(0, 6*s, pubUnused, 0)
	// Group 1: user 1 subscribed twice (left and came back); user 3 never subscribed.
	c.vus[1].windows = []window{{0, 2 * s}, {5 * s, 8 * s}}
	pub(3, 1*s, pubOK, 1) // expected 1
	pub(3, 3*s, pubOK, 0) // between user 1's stretches: expected 0
	pub(1, 6*s, pubOK, 1) // expected 1

	exp, rcv, unc := c.delivery(math.MaxInt64)
	if exp != 1+2+1+2+1+0+1 || rcv != 1+2+1+1+1+0+1 || unc != 1 {
		t.Errorf("expected %d received %d unconfirmed %d; want 8, 7 and 1 (the refused one)", exp, rcv, unc)
	}
	// Interrupted at 6.5 s with a 2 s grace: only publications before 4.5 s count; the
	// receipts of later ones are in the latency figures, so they are named as unconfirmed.
	exp, rcv, unc = c.delivery(4*s + s/2)
	if exp != 1+1 || rcv != 1+1 || unc != 1+2+1+1+1 {
		t.Errorf("cut: expected %d received %d unconfirmed %d; want 2, 2 and 6", exp, rcv, unc)
	}
}

// TestReceiveCountsDuplicatesAndOrder checks the accounting every server gets: duplicates and
// order come from each sender's sequence numbers in the payload, not from a server's offsets.
func TestReceiveCountsDuplicatesAndOrder(t *testing.T) {
	c := testCellEvery(t, 5, 2, 250*time.Millisecond) // group 0: users 0, 2, 4; group 1: users 1, 3
	v := c.vus[2]
	a := &activity{v: v}
	a.cutoff.Store(math.MaxInt64)
	a.established(100, 0, nil)
	for _, src := range []*vu{c.vus[0], c.vus[4]} {
		src.seq = 40
		for i := range 40 {
			src.pubs[i].ts = 200 + int64(i)
			src.pubs[i].state.Store(pubOK)
		}
	}
	recv := func(from int, seq int64) {
		v.receive(a, dataFields{vu: int64(from), seq: seq, ts: 200 + seq, ok: true}, 50, 1000)
	}
	recv(0, 0)
	recv(0, 2)
	recv(4, 0) // another sender's numbers are its own
	recv(0, 1) // late: out of order, still a first receipt
	recv(0, 2) // duplicate
	recv(4, 0) // duplicate
	recv(0, 3)
	recv(0, 39)
	recv(0, 4)  // 35 below the highest: too old to tell from a replay, a duplicate
	recv(0, 38) // out of order
	recv(1, 0)  // group 1's sender: never delivered here, not ours
	sec := c.col.collect()
	if sec.received != 7 || sec.duplicates != 3 || sec.outOfOrder != 2 || sec.foreign != 1 {
		t.Errorf("received %d dups %d ooo %d foreign %d; want 7, 3, 2, 1", sec.received, sec.duplicates, sec.outOfOrder, sec.foreign)
	}
	for i, want := range map[int]int32{0: 1, 1: 1, 2: 1, 3: 1, 4: 0, 38: 1, 39: 1} {
		if got := c.vus[0].pubs[i].recv.Load(); got != want {
			t.Errorf("publication %d counted %d receipts, want %d", i, got, want)
		}
	}
	// A new activity is a fresh client: it starts from nothing.
	v.resetStream()
	recv(0, 2)
	if sec := c.col.collect(); sec.received != 1 || sec.duplicates != 0 {
		t.Errorf("after a reset: %+v", sec)
	}
}

// TestPosition checks what a resume starts from: the highest offset of the current epoch; a
// new epoch starts over, and a publication without an epoch (Centrifugo names it now and then)
// keeps the one there is.
func TestPosition(t *testing.T) {
	v := &vu{}
	for _, step := range []struct {
		offset uint64
		epoch  string
		last   uint64
		want   string
	}{
		{5, "e1", 5, "e1"},
		{7, "", 7, "e1"},
		{6, "e1", 7, "e1"},
		{2, "e2", 2, "e2"},
	} {
		v.position(step.offset, []byte(step.epoch))
		if v.last != step.last || v.epoch != step.want {
			t.Errorf("after %d %q: at %d %q, want %d %q", step.offset, step.epoch, v.last, v.epoch, step.last, step.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct{ D results.Duration }{results.Duration(90 * time.Second)})
	if err != nil || string(b) != `{"D":"1m30s"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var v struct{ D results.Duration }
	for in, want := range map[string]time.Duration{`{"D":"1m30s"}`: 90 * time.Second, `{"D":1500}`: 1500} {
		if err := json.Unmarshal([]byte(in), &v); err != nil || time.Duration(v.D) != want {
			t.Errorf("unmarshal %s = %v, %v; want %v", in, v.D, err, want)
		}
	}
	if err := json.Unmarshal([]byte(`{"D":"soon"}`), &v); err == nil {
		t.Error("unmarshal of a bad duration succeeded")
	}
}

func TestSaturated(t *testing.T) {
	if !saturated([]float64{10, 190, 185, 181, 20}, 180, 3) {
		t.Error("3 s at 185 % average not saturated")
	}
	if saturated([]float64{190, 190, 10, 190, 190}, 180, 3) {
		t.Error("short bursts counted as saturation")
	}
}
