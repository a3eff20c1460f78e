package amqp_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rtlab/rtlab/internal/broker/amqp"
)

// TestRolesShare: shards racing to take a role get no more than the share between them;
// releasing one lets the next in, and Force goes over the share.
func TestRolesShare(t *testing.T) {
	r := amqp.NewRoles(5)
	var took atomic.Int32
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.Take(2) {
				took.Add(1)
			}
		}()
	}
	wg.Wait()
	if took.Load() != 2 || r.Held() != 2 {
		t.Fatalf("took %d roles, held %d, want 2 of a share of 2", took.Load(), r.Held())
	}
	if r.Take(2) {
		t.Fatal("took a role over the share")
	}
	r.Release()
	if !r.Take(2) {
		t.Fatal("a released role was not taken again")
	}
	r.Force()
	if r.Held() != 3 || r.Shards() != 5 {
		t.Fatalf("held %d of %d shards after Force, want 3 of 5", r.Held(), r.Shards())
	}
	for nodes, want := range map[int]int{1: 5, 2: 3, 3: 2, 5: 1, 9: 1} {
		if got := r.Share(nodes); got != want {
			t.Fatalf("share of 5 shards over %d nodes: %d, want %d", nodes, got, want)
		}
	}
}
