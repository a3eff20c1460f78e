package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// SeedJoin gives the seed chat routes the seed servers' rule: a user's first message to a room
// joins it. The ENTER is published as any ENTER is (members, history and the owner follow
// from it), by the same member the message will speak for: the logged-in user, or in open dev
// mode the message's "sender".
func (p *policy) SeedJoin(ctx context.Context, c transport.Client, req hub.PublishRequest) error {
	if !strings.HasPrefix(req.Topic, "chat/") {
		return nil
	}
	if p.required && c.User == "" {
		return fmt.Errorf("%w: a chat room is joined by a logged-in user; send a token", transport.ErrUnauthorized)
	}
	return p.chat.joinImplicitly(ctx, c, req)
}

// joinImplicitly enters req's room for the member a TALK speaks for, unless it is a member
// already; then it only notes that connection c speaks for the member, so that the member
// leaves when its last connection drops. Other types follow the explicit rules in publish.
func (cr *chatRooms) joinImplicitly(ctx context.Context, c transport.Client, req hub.PublishRequest) error {
	if err := hub.ValidateTopic(req.Topic); err != nil {
		return err
	}
	typ, name, _, err := classify(c, req)
	if err != nil || typ != typeTalk || len(req.Data) > cr.cfg.maxMsg {
		return nil // publish applies it, or refuses it (then no ENTER either)
	}
	// First messages from one member often come together (a user's tabs, a script's users
	// sharing one sender): one ENTER between them.
	mu := &cr.joins[joinStripe(req.Topic, name)%uint32(len(cr.joins))]
	mu.Lock()
	defer mu.Unlock()
	rec, ok, err := cr.load(ctx, req.Topic)
	if err != nil {
		return err
	}
	if _, in := rec.Members[name]; ok && in {
		cr.track(c.ID, req.Topic, name)
		return nil
	}
	data, _ := json.Marshal(map[string]string{"type": typeEnter, "sender": name, "roomId": strings.TrimPrefix(req.Topic, "chat/"), "reason": "first message"})
	_, err = cr.publish(ctx, c, hub.PublishRequest{Topic: req.Topic, Type: typeEnter, Sender: name, Data: data})
	return err
}

// joinStripe hashes a room and member (FNV-1a) to pick one of chatRooms.joins.
func joinStripe(topic, name string) uint32 {
	h := uint32(2166136261)
	for _, s := range [...]string{topic, "\x00", name} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint32(s[i])) * 16777619
		}
	}
	return h
}
