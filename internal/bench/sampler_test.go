package bench

import "testing"

func TestParseMachineCPU(t *testing.T) {
	tests := []struct {
		name               string
		stat               string
		busy, steal, total uint64
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice: guest time is part of
		// user and nice already, so it must not count twice.
		{"virtual machine", "cpu  2807415 8802 1161112 8241689 28867 0 188745 181973 500 20\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
			2807415 + 8802 + 1161112 + 188745 + 181973, 181973, 2807415 + 8802 + 1161112 + 8241689 + 28867 + 188745 + 181973},
		{"old kernel without steal", "cpu 10 0 5 100 1\n", 15, 0, 116},
		{"not /proc/stat", "intr 1 2 3\n", 0, 0, 0},
		{"empty", "", 0, 0, 0},
	}
	for _, tt := range tests {
		busy, steal, total := parseMachineCPU([]byte(tt.stat))
		if busy != tt.busy || steal != tt.steal || total != tt.total {
			t.Errorf("%s: got busy %d steal %d total %d, want %d %d %d", tt.name, busy, steal, total, tt.busy, tt.steal, tt.total)
		}
	}
}

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
