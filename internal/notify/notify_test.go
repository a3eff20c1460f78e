package notify

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
)

func newHub(t *testing.T) *hub.Hub {
	t.Helper()
	h := hub.New(hub.Config{Broker: memory.New(memory.Config{})})
	if err := h.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestReadMarks: what a user was sent is unread until marked, a mark past the end means all,
// and a mark unused for a day is dropped, so everything counts as unread again.
func TestReadMarks(t *testing.T) {
	h := newHub(t)
	n := New(h, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	for i, text := range []string{"one", "two", "three"} { // three TALKs: a retry of one notifies once
		n.Send(ctx, "ann", &hub.Publication{Topic: "chat/lobby", Sender: "bob", Offset: uint64(i + 1), Time: time.Now()}, text)
	}
	if st, err := n.Read(ctx, "ann"); err != nil || st.Unread != 3 || len(st.Notifications) != 3 {
		t.Fatalf("before marking: %+v %v", st, err)
	}
	if st, err := n.MarkRead(ctx, "ann", 2); err != nil || st.Unread != 1 || st.Read != 2 {
		t.Fatalf("read up to 2: %+v %v", st, err)
	}
	if st, err := n.MarkRead(ctx, "ann", 99); err != nil || st.Unread != 0 || st.Read != 3 {
		t.Fatalf("read past the end: %+v %v", st, err)
	}
	n.Sweep(time.Now().Add(readMarkIdle + time.Minute))
	if st, err := n.Read(ctx, "ann"); err != nil || st.Unread != 3 {
		t.Fatalf("after the mark was swept: %+v %v", st, err)
	}
	if st, err := n.Read(ctx, "bob"); err != nil || st.Unread != 0 || len(st.Notifications) != 0 {
		t.Fatalf("another user: %+v %v", st, err)
	}
}
