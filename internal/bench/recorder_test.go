package bench

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestCollectorMergesShards(t *testing.T) {
	col := newCollector(4)
	// 400 deliveries spread over the shards: 1 ms .. 400 ms.
	for i := 1; i <= 400; i++ {
		col.shards[i%4].delivered(time.Duration(i)*time.Millisecond, 100)
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
		col.shards[i%4].delivered(1000*time.Millisecond, 1)
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
	t.Helper()
	o := &Options{Users: []int{users}, Stages: "10s:PEAK,10s:PEAK", Groups: groups, Interval: time.Second}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	plan := NewPlan(Resolve(o.stageSpecs, users))
	c := newCell(context.Background(), o, "ws", plan, []string{"127.0.0.1:1"})
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

	exp, rcv := c.delivery(math.MaxInt64)
	if exp != 1+2+1+2+1+0+1 || rcv != 1+2+1+1+1+0+1 {
		t.Errorf("expected %d received %d; want 8 and 7", exp, rcv)
	}
	// Interrupted at 6.5 s with a 2 s grace: only publications before 4.5 s count.
	exp, rcv = c.delivery(4*s + s/2)
	if exp != 1+1 || rcv != 1+1 {
		t.Errorf("cut: expected %d received %d; want 2 and 2", exp, rcv)
	}
}

func TestReceiveCountsDuplicatesAndOrder(t *testing.T) {
	c := testCell(t, 2, 1)
	v := c.vus[1]
	a := &activity{v: v}
	a.cutoff.Store(math.MaxInt64)
	a.established(100, 10, []byte("e1"))
	src := c.vus[0]
	src.seq = 5
	for i := range 5 {
		src.pubs[i].ts = 200 + int64(i)
		src.pubs[i].state.Store(pubOK)
	}
	recv := func(off uint64, seq int64) {
		v.receive(a, off, []byte("e1"), dataFields{vu: 0, seq: seq, ts: 200 + seq, ok: true}, 50, 1000)
	}
	recv(11, 0)
	recv(13, 2)
	recv(12, 1) // late: out of order, still a first receipt
	recv(13, 2) // duplicate
	recv(10, 9) // at the starting position: a replay, duplicate
	recv(14, 3)
	sec := c.col.collect()
	if sec.received != 4 || sec.duplicates != 2 || sec.outOfOrder != 1 {
		t.Errorf("received %d dups %d ooo %d; want 4, 2, 1", sec.received, sec.duplicates, sec.outOfOrder)
	}
	for i, want := range []int32{1, 1, 1, 1, 0} {
		if got := src.pubs[i].recv.Load(); got != want {
			t.Errorf("publication %d counted %d receipts, want %d", i, got, want)
		}
	}
	// A new epoch starts the offsets over.
	v.receive(a, 1, []byte("e2"), dataFields{vu: 0, seq: 4, ts: 204, ok: true}, 50, 1000)
	if sec := c.col.collect(); sec.received != 1 || sec.duplicates != 0 {
		t.Errorf("after epoch change: %+v", sec)
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct{ D Duration }{Duration(90 * time.Second)})
	if err != nil || string(b) != `{"D":"1m30s"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var v struct{ D Duration }
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
