package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

var _ transport.PublishChecker = (*policy)(nil)

// CheckPublish tells whether Publish would refuse any of reqs, publishing nothing: a STOMP
// COMMIT asks before publishing its SENDs, so that it publishes all of them or none. Chat
// rules are checked against the rooms' state as it is, with the batch's own ENTERs and
// LEAVEs applied in order to copies. A refusal is a *transport.PublishBatchError.
func (p *policy) CheckPublish(ctx context.Context, c transport.Client, reqs []hub.PublishRequest) error {
	rooms := chat.Batch{} // chat rooms as the batch so far leaves them
	for i, req := range reqs {
		if err := p.checkOne(ctx, c, req, rooms); err != nil {
			return &transport.PublishBatchError{Index: i, Err: fmt.Errorf("publish %d of %d: %w", i+1, len(reqs), err)}
		}
	}
	return nil
}

// checkOne refuses what Publish would: the server's own prefixes, user/ and notify/ topics,
// the token's grants, control characters in the type, and the chat rules.
func (p *policy) checkOne(ctx context.Context, c transport.Client, req hub.PublishRequest, rooms chat.Batch) error {
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
	if g := chat.GrantsOf(c); g != nil && !g.MayPublish(req.Topic) {
		return fmt.Errorf("%w: %s's token does not grant publishing on %s", transport.ErrForbidden, c.User, req.Topic)
	}
	if !strings.HasPrefix(req.Topic, "chat/") {
		return nil
	}
	return p.chat.Check(ctx, c, req, rooms)
}
