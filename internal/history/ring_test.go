package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

func offsets(ps []*hub.Publication) string {
	out := make([]uint64, len(ps))
	for i, p := range ps {
		out[i] = p.Offset
	}
	return fmt.Sprint(out)
}

func TestRing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewRing(3)
	if r.After(0, 0) != nil || r.Oldest() != 0 {
		t.Fatal("empty ring")
	}
	for i := uint64(1); i <= 5; i++ {
		r.Append(&hub.Publication{Offset: i, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	cases := []struct {
		since uint64
		limit int
		want  string
	}{
		{0, 0, "[3 4 5]"}, {2, 0, "[3 4 5]"}, {3, 0, "[4 5]"}, {4, 1, "[5]"}, {5, 0, "[]"}, {9, 0, "[]"}, {0, 2, "[3 4]"},
	}
	for _, c := range cases {
		if got := offsets(r.After(c.since, c.limit)); got != c.want {
			t.Errorf("After(%d, %d) = %s, want %s", c.since, c.limit, got, c.want)
		}
	}
	if r.Oldest() != 3 || r.Len() != 3 {
		t.Fatalf("oldest %d len %d", r.Oldest(), r.Len())
	}
	r.Expire(t0.Add(4500 * time.Millisecond))
	if got := offsets(r.After(0, 0)); got != "[5]" {
		t.Fatalf("after expiry %s", got)
	}
	r.Clear()
	if r.Len() != 0 || r.After(0, 0) != nil {
		t.Fatal("clear")
	}
}

// TestRingFindKey checks that a key is found while its publication is retained, and no longer
// once it is dropped by a newer one, by age or by Clear; the newest of a reused key wins.
func TestRingFindKey(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewRing(3)
	pub := func(off uint64, sender, key string) *hub.Publication {
		p := &hub.Publication{Offset: off, Sender: sender, Key: key, Time: t0.Add(time.Duration(off) * time.Second)}
		r.Append(p)
		return p
	}
	a := pub(1, "alice", "k")
	pub(2, "bob", "k")
	pub(3, "alice", "")
	if r.FindKey("alice", "k") != a || r.FindKey("bob", "k") == nil || r.FindKey("alice", "x") != nil {
		t.Fatal("keys retained not found as published")
	}
	if r.FindKey("alice", "") != nil {
		t.Fatal("an unkeyed publication found by the empty key")
	}
	pub(4, "carol", "c")
	if r.FindKey("alice", "k") != nil {
		t.Fatal("alice's key found after its publication was dropped")
	}
	again := pub(5, "bob", "k") // drops offset 2, bob's older publication of the same key
	if r.FindKey("bob", "k") != again {
		t.Fatal("dropping the older publication of a reused key lost the newer one")
	}
	r.Expire(t0.Add(5 * time.Second)) // drops 3 and 4
	if r.FindKey("carol", "c") != nil || r.FindKey("bob", "k") != again {
		t.Fatal("expiry kept a dropped key or lost a retained one")
	}
	r.Clear()
	if r.FindKey("bob", "k") != nil {
		t.Fatal("a key found after Clear")
	}
}
