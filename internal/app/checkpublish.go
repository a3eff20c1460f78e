package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

var _ transport.PublishChecker = (*policy)(nil)

// CheckPublish tells whether Publish would refuse any of reqs, publishing nothing: a STOMP
// COMMIT asks before publishing its SENDs, so that it publishes all of them or none. Chat
// rules are checked against the rooms' state as it is, with the batch's own ENTERs and
// LEAVEs counted in order.
func (p *policy) CheckPublish(ctx context.Context, c transport.Client, reqs []hub.PublishRequest) error {
	in := make(map[string]bool) // room + "\x00" + member → in the room after the batch so far
	for i, req := range reqs {
		if err := p.checkOne(ctx, c, req, in); err != nil {
			return fmt.Errorf("publish %d of %d: %w", i+1, len(reqs), err)
		}
	}
	return nil
}

func (p *policy) checkOne(ctx context.Context, c transport.Client, req hub.PublishRequest, in map[string]bool) error {
	switch {
	case strings.HasPrefix(req.Topic, controlPrefix):
		return fmt.Errorf("%w: %s* topics are the server's own", transport.ErrForbidden, controlPrefix)
	case strings.HasPrefix(req.Topic, "notify/"):
		return fmt.Errorf("%w: notifications are sent by the server; clients may not publish to %s", transport.ErrForbidden, req.Topic)
	}
	if g := grantsOf(c); g != nil && !g.MayPublish(req.Topic) {
		return fmt.Errorf("%w: %s's token does not grant publishing on %s", transport.ErrForbidden, c.User, req.Topic)
	}
	if !strings.HasPrefix(req.Topic, "chat/") {
		return nil
	}
	cr := p.chat
	if len(req.Data) > cr.cfg.maxMsg {
		return fmt.Errorf("%w: chat message of %d bytes, at most %d", hub.ErrTooLarge, len(req.Data), cr.cfg.maxMsg)
	}
	typ, name, _, err := classify(c, req)
	if err != nil {
		return err
	}
	rec, exists, err := cr.load(ctx, req.Topic)
	if err != nil {
		return err
	}
	key := req.Topic + "\x00" + name
	member, seen := in[key]
	if !seen {
		_, member = rec.Members[name]
		member = member && exists
	}
	switch typ {
	case typeEnter:
		if exists && !rec.admits(name, grantsOf(c), req.Topic, rec.Private || cr.privateByPrefix(req.Topic)) {
			return fmt.Errorf("%w: %s is members-only; its owner (%s) may invite %s", transport.ErrForbidden, req.Topic, rec.Owner, name)
		}
		in[key] = true
	case typeTalk:
		if !member {
			return fmt.Errorf("%w: %s has not entered %s (send ENTER first)", transport.ErrForbidden, name, req.Topic)
		}
	case typeLeave:
		if !member {
			return fmt.Errorf("%w: LEAVE without ENTER: %s is not in %s", transport.ErrBadRequest, name, req.Topic)
		}
		in[key] = false
	}
	return nil
}
