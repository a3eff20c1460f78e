package replica

import (
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// TestSeed: a topic's history taken from elsewhere joins the live copies applied meanwhile,
// whichever overlap; Retain and Forget drop topics.
func TestSeed(t *testing.T) {
	policy := func(string) hub.HistoryPolicy { return hub.HistoryPolicy{Size: 10, TTL: time.Hour} }
	now := time.Now()
	pub := func(topic string, off uint64) *hub.Publication {
		return &hub.Publication{Topic: topic, Offset: off, Epoch: "e", Time: now.Add(time.Duration(off) * time.Millisecond)}
	}
	pubs := func(topic string, from, to uint64) (ps []*hub.Publication) {
		for o := from; o <= to; o++ {
			ps = append(ps, pub(topic, o))
		}
		return ps
	}
	r := New(policy)
	for _, p := range pubs("a", 5, 7) { // live copies before the seed's answer
		r.ApplyNewer(p, 0)
	}
	r.Seed("a", pubs("a", 1, 6))
	hr := r.History("a", 0, 0, now)
	if hr.Top != (hub.Position{Offset: 7, Epoch: "e"}) || hr.Oldest != 1 || len(hr.Publications) != 7 {
		t.Fatalf("seeded under live copies: top %+v oldest %d, %d publications", hr.Top, hr.Oldest, len(hr.Publications))
	}
	r.Seed("b", pubs("b", 1, 3)) // nothing live yet
	if hr := r.History("b", 0, 0, now); hr.Top.Offset != 3 || len(hr.Publications) != 3 {
		t.Fatalf("seeded alone: %+v", hr)
	}
	r.Retain(func(topic string) bool { return topic == "a" })
	if _, ok := r.Last("b", now); ok {
		t.Fatal("Retain kept b")
	}
	r.Forget("a")
	if _, ok := r.Last("a", now); ok {
		t.Fatal("Forget kept a")
	}
}
