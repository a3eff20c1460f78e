package location

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// TestLocationGroupBounds: a group keeps at most Members members and Bytes of data, dropping
// the least recently heard first, and drops members older than MemberTTL.
func TestLocationGroupBounds(t *testing.T) {
	lim := Limits{Members: 3, Bytes: 40, MemberTTL: time.Minute}
	lim.fill()
	g := newGroupState(&lim)
	now := time.Now()
	pub := func(off uint64, sender, data string, at time.Time) {
		g.Deliver(&hub.Publication{Topic: "location/g", Offset: off, Epoch: "e", Time: at, Sender: sender, Data: json.RawMessage(data)})
	}
	names := func() string {
		var ns []string
		for m := g.oldest.next; m != &g.oldest; m = m.next {
			ns = append(ns, m.name)
		}
		return strings.Join(ns, ",")
	}
	pub(1, "a", `{"x":1}`, now.Add(-2*time.Minute))
	pub(2, "b", `{"x":2}`, now)
	pub(3, "c", `{"x":3}`, now)
	pub(4, "a", `{"x":4}`, now) // heard again: newest
	if got := names(); got != "b,c,a" || g.bytes != 21 {
		t.Fatalf("members %s, %d bytes; want b,c,a and 21", got, g.bytes)
	}
	pub(5, "d", `{"x":5}`, now) // a fourth member: b, least recently heard, goes
	if got := names(); got != "c,a,d" {
		t.Fatalf("over the member bound: %s, want c,a,d", got)
	}
	pub(6, "e", `{"big":"0123456789012345678"}`, now) // 30 bytes: over 40 with the others
	if got := names(); got != "d,e" || g.bytes > lim.Bytes {
		t.Fatalf("over the byte bound: %s, %d bytes; want d,e within %d", got, g.bytes, lim.Bytes)
	}
	pub(7, "f", `{"x":7}`, now.Add(90*time.Second))
	g.mu.Lock()
	g.expireLocked(now.Add(70 * time.Second)) // d and e are 70 s old, f 20 s young
	g.mu.Unlock()
	if got := names(); got != "f" || g.bytes != 7 {
		t.Fatalf("after expiry: %s, %d bytes; want f alone", got, g.bytes)
	}
	g.Deliver(&hub.Publication{Topic: "location/g", Offset: 1, Epoch: "e2", Time: now, Sender: "z", Data: json.RawMessage(`{}`)})
	if got := names(); got != "z" || g.bytes != 2 {
		t.Fatalf("after an epoch change: %s, %d bytes; want z alone", got, g.bytes)
	}
}
