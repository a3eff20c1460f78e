package brokertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// publishKeyed publishes data with an idempotency key and fails the test on error.
func (n *Node) publishKeyed(tb testing.TB, topic, sender, key, data string) *hub.Publication {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := n.Broker.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(data), Sender: sender, Key: key})
	if err != nil {
		tb.Fatalf("Publish(%s, key %s): %v", topic, key, err)
	}
	return p
}

// testRetries checks that a retry with the same key and sender, from either node, is answered
// with the original position and stored once; other keys or senders publish anew.
func testRetries(t *testing.T, h Harness) {
	a, b := startPair(t, h, Namespace(), hub.HistoryPolicy{})
	topic := "idem"
	first := a.publishKeyed(t, topic, "alice", "k-1", `{"n":1}`)
	if first.Duplicate {
		t.Fatalf("first publish marked duplicate: %+v", first)
	}
	for i, n := range []*Node{a, b, a} {
		again := n.publishKeyed(t, topic, "alice", "k-1", `{"n":1}`)
		if !again.Duplicate || again.Offset != first.Offset || again.Epoch != first.Epoch {
			t.Fatalf("retry %d: got offset %d epoch %q duplicate %v, want offset %d epoch %q duplicate",
				i, again.Offset, again.Epoch, again.Duplicate, first.Offset, first.Epoch)
		}
	}
	other := b.publishKeyed(t, topic, "alice", "k-2", `{"n":2}`)
	bob := a.publishKeyed(t, topic, "bob", "k-1", `{"n":3}`)
	plain := a.Publish(t, topic, `{"n":4}`)
	for _, p := range []*hub.Publication{other, bob, plain} {
		if p.Duplicate {
			t.Fatalf("a new publication marked duplicate: %+v", p)
		}
	}
	hr := a.History(t, topic, 0, 0)
	if len(hr.Publications) != 4 || hr.Top.Offset != first.Offset+3 {
		t.Fatalf("history holds %d publications up to %d, want 4 up to %d", len(hr.Publications), hr.Top.Offset, first.Offset+3)
	}
}
