package app

import (
	"context"
	"errors"
	"testing"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// CheckPublish answers as Publish would for a batch in order: an ENTER earlier in the batch
// lets a later TALK through; a TALK without one, a LEAVE after it, or a notification is refused.
func TestCheckPublishFollowsTheBatch(t *testing.T) {
	s := startServer(t, nil)
	p, ctx := s.app.policy, context.Background()
	c := transport.Client{ID: "c1", Identity: transport.Identity{User: "ann"}}
	chat := func(typ string) hub.PublishRequest {
		return hub.PublishRequest{Topic: "chat/batch", Type: typ, Data: []byte(`{"message":"hi"}`), Sender: "ann"}
	}
	if err := p.CheckPublish(ctx, c, []hub.PublishRequest{chat("ENTER"), chat("TALK"), chat("LEAVE")}); err != nil {
		t.Fatalf("ENTER, TALK, LEAVE: %v", err)
	}
	for name, batch := range map[string][]hub.PublishRequest{
		"TALK without ENTER": {chat("TALK")},
		"TALK after LEAVE":   {chat("ENTER"), chat("LEAVE"), chat("TALK")},
		"a notification":     {{Topic: "news/a", Data: []byte(`{}`)}, {Topic: "notify/bob", Data: []byte(`{}`)}},
		"the server's own":   {{Topic: controlPrefix + "x", Data: []byte(`{}`)}},
	} {
		if err := p.CheckPublish(ctx, c, batch); !errors.Is(err, transport.ErrForbidden) {
			t.Errorf("%s: %v, want forbidden", name, err)
		}
	}
	// Nothing was published by the checks.
	if hr, err := s.app.hub.Read(ctx, "chat/batch", hub.ReadOptions{}); err != nil || len(hr.Publications) != 0 {
		t.Fatalf("chat/batch after checks: %+v, %v", hr, err)
	}
}
