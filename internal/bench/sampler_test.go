package bench

import "testing"

// TestStealWatch checks which seconds count towards the latency free of steal: not one with
// steal, nor the one after it, whose deliveries may have been held up.
func TestStealWatch(t *testing.T) {
	w := newStealWatch()
	sec := func(ms ...int64) {
		h := newHist()
		for _, v := range ms {
			_ = h.RecordValue(v * 1000)
		}
		w.second(0, h)
	}
	sec(1, 2)
	sec(2)
	if q := w.result(); q != nil {
		t.Fatalf("no second was left out, yet result = %+v", q)
	}
	stolen := newHist()
	_ = stolen.RecordValue(50_000)
	w.second(35, stolen) // taken by the neighbours
	after := newHist()
	_ = after.RecordValue(40_000)
	w.second(2, after) // the deliveries they held up arrive now
	sec(3)
	q := w.result()
	if q == nil {
		t.Fatal("result is nil after a second with steal")
	}
	if q.Seconds != 3 || q.LeftOut != 2 || q.Latency.Count != 4 || q.Latency.Max > 3.01 {
		t.Errorf("got %d seconds counted, %d left out, %d deliveries up to %.2f ms; want 3, 2, 4, 3 ms",
			q.Seconds, q.LeftOut, q.Latency.Count, q.Latency.Max)
	}
	if w.secs != 1 || w.max != 35 {
		t.Errorf("got %d seconds with steal, at most %.0f; want 1, 35", w.secs, w.max)
	}
}
