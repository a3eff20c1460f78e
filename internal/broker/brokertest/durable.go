package brokertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

// durablePolicy is the policy of the durable-topic tests: topics under chat/ are durable
// (negative TTL, size durable), the others keep 10 publications for ttl.
func durablePolicy(durable int, ttl time.Duration) func(string) hub.HistoryPolicy {
	return func(topic string) hub.HistoryPolicy {
		if strings.HasPrefix(topic, "chat/") {
			return hub.HistoryPolicy{Size: durable, TTL: -1}
		}
		return hub.HistoryPolicy{Size: 10, TTL: ttl}
	}
}

// startDurable starts two nodes (one when h is not Shared) with a per-topic policy.
func startDurable(t *testing.T, h Harness, ns string, policy func(string) hub.HistoryPolicy) []*Node {
	t.Helper()
	if h.NewNodeFunc == nil {
		t.Skip("harness has no NewNodeFunc")
	}
	var nodes []*Node
	for range map[bool]int{true: 2, false: 1}[h.Shared] {
		rec := NewRecorder()
		nodes = append(nodes, &Node{Broker: runNode(t, h.NewNodeFunc(t, ns, policy), rec), Rec: rec})
	}
	return nodes
}

// topicLister is what archive sweeps use to find durable topics.
type topicLister interface {
	TopicsSince(ctx context.Context, since time.Time) ([]string, error)
}

// testDurable: a durable topic keeps its window past the TTL that expires the others, on every
// node, continues its offsets in the same epoch, is listed for archive sweeps, and (on a durable
// server) survives a server restart.
func testDurable(t *testing.T, h Harness) {
	const ttl = 1500 * time.Millisecond
	nodes := startDurable(t, h, Namespace(), durablePolicy(30, ttl))
	a, b := nodes[0], nodes[len(nodes)-1]
	before := time.Now().Add(-time.Second)
	var first *hub.Publication
	for i := 1; i <= 50; i++ {
		p := nodes[i%len(nodes)].Publish(t, "chat/durable", fmt.Sprintf(`{"i":%d}`, i))
		if first == nil {
			first = p
		}
	}
	a.Publish(t, "location/short", `{}`)
	eventually.Nil(t, ttl+10*time.Second, func() error {
		if hr := a.History(t, "location/short", 0, 0); len(hr.Publications) != 0 {
			return notYet("location/short still holds %d publications past its TTL", len(hr.Publications))
		}
		return nil
	})
	check := func(what string) {
		t.Helper()
		for i, n := range nodes {
			hr := n.History(t, "chat/durable", 0, 0)
			if hr.Top != (hub.Position{Offset: 50, Epoch: first.Epoch}) || hr.Oldest != 21 || len(hr.Publications) != 30 {
				t.Fatalf("%s, node %d: top %+v oldest %d, %d publications; want 50:%s, 21, 30", what, i, hr.Top, hr.Oldest, len(hr.Publications), first.Epoch)
			}
			for j, p := range hr.Publications {
				if p.Offset != uint64(21+j) || string(p.Data) != fmt.Sprintf(`{"i":%d}`, 21+j) {
					t.Fatalf("%s, node %d: History[%d] = %d %s", what, i, j, p.Offset, p.Data)
				}
			}
		}
	}
	check("after the other topic's TTL")
	for _, n := range nodes {
		l, ok := n.Broker.(topicLister)
		if !ok {
			t.Fatalf("%T does not list durable topics (TopicsSince)", n.Broker)
		}
		got, err := l.TopicsSince(context.Background(), before)
		if err != nil || !slices.Contains(got, "chat/durable") {
			t.Fatalf("TopicsSince(before publishing) = %v, %v; want chat/durable in it", got, err)
		}
		if got, _ := l.TopicsSince(context.Background(), time.Time{}); !slices.Contains(got, "chat/durable") {
			t.Fatalf("TopicsSince(zero) = %v; want chat/durable in it", got)
		}
		if got, _ := l.TopicsSince(context.Background(), time.Now().Add(time.Hour)); slices.Contains(got, "chat/durable") {
			t.Fatalf("TopicsSince(an hour ahead) = %v", got)
		}
	}
	if h.Server != nil && h.Durable {
		h.Server.Stop()
		h.Server.Start()
		for _, n := range nodes {
			eventually.Nil(t, 60*time.Second, func() error {
				if !n.Ready() {
					return notYet("node not ready after the restart")
				}
				return nil
			})
		}
		check("after a server restart")
	}
	p := b.Publish(t, "chat/durable", `{"i":51}`)
	if p.Offset != 51 || p.Epoch != first.Epoch {
		t.Fatalf("next publication %d:%s, want 51:%s", p.Offset, p.Epoch, first.Epoch)
	}
}

// testDurablePaging reads a durable window back from its newest publication as the hub's
// paging does (History from before-1-limit, limit), and finds every retained offset once.
func testDurablePaging(t *testing.T, h Harness) {
	nodes := startDurable(t, h, Namespace(), durablePolicy(200, time.Minute))
	for i := 1; i <= 500; i++ {
		nodes[i%len(nodes)].Publish(t, "chat/paged", fmt.Sprintf(`{"i":%d}`, i))
	}
	for k, n := range nodes {
		eventually.Nil(t, 10*time.Second, func() error {
			if hr := n.History(t, "chat/paged", ^uint64(0), 0); hr.Top.Offset != 500 {
				return notYet("node %d at %d of 500", k, hr.Top.Offset)
			}
			return nil
		})
		before, seen := uint64(501), 0
		for before > 1 {
			const limit = 37
			since := uint64(0)
			if before-1 > limit {
				since = before - 1 - limit
			}
			hr := n.History(t, "chat/paged", since, limit)
			var page []*hub.Publication
			for _, p := range hr.Publications {
				if p.Offset < before {
					page = append(page, p)
				}
			}
			if len(page) == 0 {
				if hr.Oldest != 301 {
					t.Fatalf("node %d: window ends at %d, oldest %d; want 301", k, before, hr.Oldest)
				}
				break
			}
			for i := len(page) - 1; i >= 0; i-- {
				if want := before - 1; page[i].Offset != want {
					t.Fatalf("node %d: after %d came %d", k, before, page[i].Offset)
				}
				before = page[i].Offset
				seen++
			}
		}
		if seen != 200 || before != 301 {
			t.Fatalf("node %d: paged %d back to %d; want 200 back to 301", k, seen, before)
		}
	}
}
