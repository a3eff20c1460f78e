package chat

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// Batch is the chat rooms of a batch of publications (a STOMP transaction) as its publications
// so far leave them, by topic; the zero value is empty and ready.
type Batch map[string]*batchRoom

// batchRoom is a copy of a room's record that a batch's ENTERs and LEAVEs change.
type batchRoom struct {
	rec    roomRecord
	exists bool
}

// Check refuses a chat publication that Publish would refuse, applying the chat rules to a
// copy of the room's record in rooms, so that a batch's later publications see its earlier
// ENTERs and LEAVEs. It publishes nothing.
func (cr *Rooms) Check(ctx context.Context, c transport.Client, req hub.PublishRequest, rooms Batch) error {
	if len(req.Data) > cr.cfg.MaxMsg {
		return fmt.Errorf("%w: chat message of %d bytes, at most %d", hub.ErrTooLarge, len(req.Data), cr.cfg.MaxMsg)
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
		if n := cr.enteredBy(c.ID, req.Topic); n >= cr.cfg.MaxRooms {
			return fmt.Errorf("%w: this connection is in %d rooms, at most %d (--chat-max-rooms)", transport.ErrForbidden, n, cr.cfg.MaxRooms)
		}
		if _, err := cr.admitEnter(&room.rec, room.exists, GrantsOf(c), req.Topic, name); err != nil {
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
