package amqp

import (
	"strconv"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// TestRecentIDsWindow: ids are remembered for the window by their publications' time, never
// fewer than the floor nor more than the bound, and a retry's id within them is found.
func TestRecentIDsWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r recentIDs
	r.init(100, 5000, time.Minute)
	add := func(i int, at time.Time) { r.add("id-"+strconv.Itoa(i), &hub.Publication{Offset: uint64(i), Time: at}) }
	for i := range 3000 { // 3,000 within a second: over the floor, all within the window
		add(i, t0.Add(time.Duration(i)*time.Millisecond/3))
	}
	if pos, ok := r.get("id-0"); !ok || pos.offset != 0 || r.count() != 3000 {
		t.Fatalf("within the window: id-0 found %v, %d remembered, want 3000", ok, r.count())
	}
	for i := 3000; i < 9000; i++ { // as many again: over the bound
		add(i, t0.Add(time.Second))
	}
	if _, ok := r.get("id-3999"); ok || r.count() != 5000 {
		t.Fatalf("over the bound: id-3999 found %v, %d remembered, want the latest 5000", ok, r.count())
	}
	if _, ok := r.get("id-4000"); !ok {
		t.Fatal("the oldest of the latest 5000 forgotten")
	}
	add(9000, t0.Add(2*time.Minute)) // a minute after the rest: only the floor stays
	if _, ok := r.get("id-8900"); ok || r.count() != 100 {
		t.Fatalf("after the window: id-8900 found %v, %d remembered, want the latest 100", ok, r.count())
	}
	if _, ok := r.get("id-8901"); !ok {
		t.Fatal("the floor's oldest forgotten")
	}
}
