package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

var _ transport.PublishChecker = (*policy)(nil)

// CheckPublish tells whether Publish would refuse any of reqs, publishing nothing: a STOMP
// COMMIT asks before publishing its SENDs, so that it publishes all of them or none. Chat
// rules are checked against the rooms' state as it is, with the batch's own ENTERs and
// LEAVEs applied in order to copies. A refusal is a *transport.PublishBatchError.
func (p *policy) CheckPublish(ctx context.Context, c transport.Client, reqs []hub.PublishRequest) error {
	rooms := make(map[string]*batchRoom) // chat rooms as the batch so far leaves them
	for i, req := range reqs {
		if err := p.checkOne(ctx, c, req, rooms); err != nil {
			return &transport.PublishBatchError{Index: i, Err: fmt.Errorf("publish %d of %d: %w", i+1, len(reqs), err)}
		}
	}
	return nil
}

// batchRoom is a copy of a room's record that a batch's ENTERs and LEAVEs change.
type batchRoom struct {
	rec    roomRecord
	exists bool
}

// checkOne refuses what Publish would: the server's own prefixes, user/ and notify/ topics,
// the token's grants, control characters in the type, and the chat rules.
func (p *policy) checkOne(ctx context.Context, c transport.Client, req hub.PublishRequest, rooms map[string]*batchRoom) error {
	switch {
	case strings.HasPrefix(req.Topic, controlPrefix):
		return fmt.Errorf("%w: %s* topics are the server's own", transport.ErrForbidden, controlPrefix)
	case strings.HasPrefix(req.Topic, "user/"):
		return fmt.Errorf("%w: user/ topics are published by the application's backend through the server API", transport.ErrForbidden)
	case strings.HasPrefix(req.Topic, "notify/"):
		return fmt.Errorf("%w: notifications are sent by the server; clients may not publish to %s", transport.ErrForbidden, req.Topic)
	}
	if err := hub.ValidateTopic(req.Topic); err != nil {
		return err
	}
	if err := hub.CheckName("type", req.Type); err != nil {
		return err
	}
	if g := grantsOf(c); g != nil && !g.MayPublish(req.Topic) {
		return fmt.Errorf("%w: %s's token does not grant publishing on %s", transport.ErrForbidden, c.User, req.Topic)
	}
	if !strings.HasPrefix(req.Topic, "chat/") {
		return nil
	}
	return p.checkChat(ctx, c, req, rooms)
}

// checkChat applies the chat rules to a copy of the room's record.
func (p *policy) checkChat(ctx context.Context, c transport.Client, req hub.PublishRequest, rooms map[string]*batchRoom) error {
	cr := p.chat
	if len(req.Data) > cr.cfg.maxMsg {
		return fmt.Errorf("%w: chat message of %d bytes, at most %d", hub.ErrTooLarge, len(req.Data), cr.cfg.maxMsg)
	}
	typ, name, _, err := classify(c, req)
	if err != nil {
		return err
	}
	room := rooms[req.Topic]
	if room == nil {
		rec, exists, err := cr.load(ctx, req.Topic)
		if err != nil {
			return err
		}
		rec.Members = maps.Clone(rec.Members)
		rec.Invited = slices.Clone(rec.Invited)
		room = &batchRoom{rec: rec, exists: exists}
		rooms[req.Topic] = room
	}
	_, member := room.rec.Members[name]
	member = member && room.exists
	switch typ {
	case typeEnter:
		if n := cr.enteredBy(c.ID, req.Topic); n >= cr.cfg.maxRooms {
			return fmt.Errorf("%w: this connection is in %d rooms, at most %d (--chat-max-rooms)", transport.ErrForbidden, n, cr.cfg.maxRooms)
		}
		if _, err := cr.admitEnter(&room.rec, room.exists, grantsOf(c), req.Topic, name); err != nil {
			return err
		}
		room.exists = true
	case typeTalk:
		if !member {
			return fmt.Errorf("%w: %s has not entered %s (send ENTER first)", transport.ErrForbidden, name, req.Topic)
		}
	case typeLeave:
		if !member {
			return fmt.Errorf("%w: LEAVE without ENTER: %s is not in %s", transport.ErrBadRequest, name, req.Topic)
		}
		delete(room.rec.Members, name)
	}
	return nil
}
