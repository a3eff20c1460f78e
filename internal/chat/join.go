package chat

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// JoinImplicitly enters req's room for the member a TALK speaks for, unless it is a member
// already; then it only notes that connection c speaks for the member, so that the member
// leaves when its last connection drops. Other types follow the explicit rules in publish.
func (cr *Rooms) JoinImplicitly(ctx context.Context, c transport.Client, req hub.PublishRequest) error {
	if err := hub.ValidateTopic(req.Topic); err != nil {
		return err
	}
	typ, name, _, err := classify(c, req)
	if err != nil || typ != typeTalk || len(req.Data) > cr.cfg.MaxMsg {
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
	_, err = cr.Publish(ctx, c, hub.PublishRequest{Topic: req.Topic, Type: typeEnter, Sender: name, Data: data})
	return err
}

// joinStripe hashes a room and member (FNV-1a) to pick one of Rooms.joins.
func joinStripe(topic, name string) uint32 {
	h := uint32(2166136261)
	for _, s := range [...]string{topic, "\x00", name} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint32(s[i])) * 16777619
		}
	}
	return h
}

// WithImplicitEnter is req as a batch that CheckPublish can hold to the rules JoinImplicitly
// follows: a TALK counts as its member's ENTER first.
func WithImplicitEnter(c transport.Client, req hub.PublishRequest) []hub.PublishRequest {
	if typ, _, _, err := classify(c, req); err == nil && typ == typeTalk {
		enter := req
		enter.Type = typeEnter
		return []hub.PublishRequest{enter, req}
	}
	return []hub.PublishRequest{req}
}
