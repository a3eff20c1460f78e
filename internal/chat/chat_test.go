package chat

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/notify"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
)

// newRooms is the chat rules on a real hub (memory broker) and state store.
func newRooms(t *testing.T, cfg Config) (*Rooms, *notify.Notes) {
	t.Helper()
	h := hub.New(hub.Config{Broker: memory.New(memory.Config{})})
	if err := h.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	log := slog.New(slog.DiscardHandler)
	n := notify.New(h, log)
	if cfg.MaxMsg == 0 {
		cfg.MaxMsg = 4096
	}
	if cfg.MaxRooms == 0 {
		cfg.MaxRooms = 10
	}
	if cfg.Idle == 0 {
		cfg.Idle = time.Minute
	}
	return New(h, state.NewMemory(), n, cfg, log), n
}

func client(id, user string) transport.Client {
	return transport.Client{ID: id, Identity: transport.Identity{User: user}}
}

func say(ctx context.Context, cr *Rooms, c transport.Client, typ string) error {
	_, err := cr.Publish(ctx, c, hub.PublishRequest{Topic: "chat/lobby", Type: typ, Data: []byte(`{"message":"hi"}`)})
	return err
}

// TestRoomRulesAndMemberBound: the first to enter owns the room, a TALK needs membership and
// notifies the owner, and a room over its member bound refuses another ENTER while its
// members go on talking.
func TestRoomRulesAndMemberBound(t *testing.T) {
	cr, notes := newRooms(t, Config{MaxMembers: 2})
	ctx := context.Background()
	ann, bob, eve := client("1", "ann"), client("2", "bob"), client("3", "eve")
	if err := say(ctx, cr, bob, "TALK"); !errors.Is(err, transport.ErrForbidden) {
		t.Fatalf("TALK before ENTER: %v", err)
	}
	for _, c := range []transport.Client{ann, bob} {
		if err := say(ctx, cr, c, "ENTER"); err != nil {
			t.Fatalf("%s ENTER: %v", c.User, err)
		}
	}
	if err := say(ctx, cr, eve, "ENTER"); !errors.Is(err, transport.ErrForbidden) {
		t.Fatalf("ENTER over the member bound: %v", err)
	}
	if err := say(ctx, cr, bob, "TALK"); err != nil {
		t.Fatalf("a member's TALK beside the refusal: %v", err)
	}
	ri, err := cr.Info(ctx, "lobby")
	if err != nil || ri.Owner != "ann" || len(ri.Members) != 2 || !ri.Members[0].Online {
		t.Fatalf("room info %+v %v", ri, err)
	}
	if st, err := notes.Read(ctx, "ann"); err != nil || st.Unread != 1 {
		t.Fatalf("owner's notifications %+v %v", st, err)
	}
	cr.Disconnected(bob)
	if ri, _ := cr.Info(ctx, "lobby"); len(ri.Members) != 1 || cr.Conns("chat/lobby", "bob") != 0 {
		t.Fatalf("after bob's only connection dropped: %+v", ri.Members)
	}
}

// TestBatchCheck: a batch sees its own earlier ENTERs and LEAVEs, and checking publishes
// nothing.
func TestBatchCheck(t *testing.T) {
	cr, _ := newRooms(t, Config{MaxMembers: 10})
	ctx := context.Background()
	ann := client("1", "ann")
	req := func(typ string) hub.PublishRequest {
		return hub.PublishRequest{Topic: "chat/lobby", Type: typ, Data: []byte(`{}`)}
	}
	b := Batch{}
	for _, typ := range []string{"ENTER", "TALK", "LEAVE"} {
		if err := cr.Check(ctx, ann, req(typ), b); err != nil {
			t.Fatalf("%s in the batch: %v", typ, err)
		}
	}
	if err := cr.Check(ctx, ann, req("TALK"), b); !errors.Is(err, transport.ErrForbidden) {
		t.Fatalf("TALK after the batch's LEAVE: %v", err)
	}
	if _, err := cr.Info(ctx, "lobby"); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("a checked batch made the room: %v", err)
	}
	if got := WithImplicitEnter(ann, req("TALK")); len(got) != 2 || got[0].Type != "ENTER" {
		t.Fatalf("a seed TALK's batch: %+v", got)
	}
}

func TestRoomPath(t *testing.T) {
	for rest, want := range map[string][3]string{
		"lobby/members":         {"lobby", "members", ""},
		"a/b/members/ann":       {"a/b", "members", "ann"},
		"lobby/owner":           {"lobby", "owner", ""},
		"lobby/private":         {"lobby", "private", ""},
		"lobby/members/ann/x":   {"", "", ""},
		"lobby":                 {"", "", ""},
		"/members":              {"", "", ""},
		"members/owner/private": {"members/owner", "private", ""},
	} {
		if room, what, user := roomPath(rest); [3]string{room, what, user} != want {
			t.Errorf("roomPath(%q) = %q %q %q, want %q", rest, room, what, user, want)
		}
	}
}

// TestTalkRetry: a TALK retried with its idempotency key is answered as a duplicate, and the
// owner is notified once.
func TestTalkRetry(t *testing.T) {
	cr, notes := newRooms(t, Config{MaxMembers: 2})
	ctx := context.Background()
	ann, bob := client("1", "ann"), client("2", "bob")
	for _, c := range []transport.Client{ann, bob} {
		if err := say(ctx, cr, c, "ENTER"); err != nil {
			t.Fatalf("%s ENTER: %v", c.User, err)
		}
	}
	talk := hub.PublishRequest{Topic: "chat/lobby", Type: "TALK", Data: []byte(`{"message":"hi"}`), Key: "t-1"}
	first, err := cr.Publish(ctx, bob, talk)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cr.Publish(ctx, bob, talk)
	if err != nil || !again.Duplicate || again.Offset != first.Offset {
		t.Fatalf("retry: %+v %v, want offset %d marked duplicate", again, err, first.Offset)
	}
	if st, err := notes.Read(ctx, "ann"); err != nil || st.Unread != 1 {
		t.Fatalf("owner's notifications after a retried TALK: %+v %v, want 1 unread", st, err)
	}
}
