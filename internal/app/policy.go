package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/login"
	"github.com/rtlab/rtlab/internal/transport"
)

// controlPrefix starts the topics the nodes use among themselves (revocations); clients may
// neither read nor publish them.
const controlPrefix = "_rtlab/"

// policy applies the application's rules for every transport: who a client is (tokens), what
// it may read (notify/{user}, members-only rooms, the token's grants) and what publishing to
// chat/ and notify/ means.
type policy struct {
	hub      *hub.Hub
	verifier *auth.Verifier
	required bool // a secret, key or JWKS was configured: anonymous clients are refused
	chat     *chat.Rooms
}

var _ transport.Policy = (*policy)(nil)

func (p *policy) Authenticate(r *http.Request) (transport.Identity, error) {
	tok := login.BearerToken(r)
	if tok == "" {
		return transport.Identity{}, nil
	}
	return p.AuthenticateToken(tok)
}

func (p *policy) AuthenticateToken(tok string) (transport.Identity, error) {
	c, err := p.verifier.Verify(tok)
	if err != nil {
		return transport.Identity{}, fmt.Errorf("%w: %v", transport.ErrUnauthorized, err)
	}
	id := transport.Identity{User: c.User, Expires: c.Expires, Session: c.ID}
	if c.Grants.Subscribe != nil || c.Grants.Publish != nil || c.Grants.Rooms != nil || c.Grants.Own != nil {
		id.Grants = &c.Grants
	}
	return id, nil
}

func (p *policy) AuthRequired() bool { return p.required }

// policyTimeout bounds the state reads a permission check makes.
const policyTimeout = 5 * time.Second

// CanRead keeps notify/{user} to that user (in open dev mode anonymous clients may read any
// user's notifications: there is no identity to check), members-only rooms to their members,
// the nodes' own topics to the nodes, and a token with subscribe grants to those topics.
func (p *policy) CanRead(c transport.Client, topic string) error {
	who := c.User
	if who == "" {
		who = "an anonymous client"
	}
	if strings.HasPrefix(topic, controlPrefix) {
		return fmt.Errorf("%w: %s* topics are the server's own", transport.ErrForbidden, controlPrefix)
	}
	if rest, ok := strings.CutPrefix(topic, "user/"); ok { // STOMP's /user/ destinations
		if owner, _, _ := strings.Cut(rest, "/"); owner == "" || c.User != owner {
			return fmt.Errorf("%w: only %s may subscribe to %s, not %s", transport.ErrForbidden, owner, topic, who)
		}
		return nil
	}
	if owner, ok := strings.CutPrefix(topic, "notify/"); ok {
		if c.User != owner && (p.required || c.User != "") {
			return fmt.Errorf("%w: only %s may subscribe to %s, not %s", transport.ErrForbidden, owner, topic, who)
		}
		return nil
	}
	if g := chat.GrantsOf(c); g != nil && !g.MayRead(topic) {
		return fmt.Errorf("%w: %s's token does not grant reading %s", transport.ErrForbidden, who, topic)
	}
	if strings.HasPrefix(topic, "chat/") {
		ctx, cancel := context.WithTimeout(context.Background(), policyTimeout)
		defer cancel()
		return p.chat.CanRead(ctx, c, topic)
	}
	return nil
}

// CanSubscribe is CanRead; a chat room's subscription is guarded, so a member removed later
// (or a room made members-only) stops receiving.
func (p *policy) CanSubscribe(c transport.Client, topic string) (transport.Guard, error) {
	if err := p.CanRead(c, topic); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(topic, "chat/") {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), policyTimeout)
	defer cancel()
	return p.chat.Guard(ctx, c, topic)
}

// Publish publishes as the authenticated user: the publication's sender is that user on every
// route, and a "sender" field in the data that says otherwise is overwritten.
func (p *policy) Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if c.User != "" {
		req.Sender = c.User
		req.Data = withSender(req.Data, c.User)
	}
	switch {
	case strings.HasPrefix(req.Topic, controlPrefix):
		return nil, fmt.Errorf("%w: %s* topics are the server's own", transport.ErrForbidden, controlPrefix)
	case strings.HasPrefix(req.Topic, "user/"):
		return nil, fmt.Errorf("%w: user/ topics are published by the application's backend through the server API", transport.ErrForbidden)
	case strings.HasPrefix(req.Topic, "notify/"):
		return nil, fmt.Errorf("%w: notifications are sent by the server; clients may not publish to %s", transport.ErrForbidden, req.Topic)
	}
	if g := chat.GrantsOf(c); g != nil && !g.MayPublish(req.Topic) {
		return nil, fmt.Errorf("%w: %s's token does not grant publishing on %s", transport.ErrForbidden, c.User, req.Topic)
	}
	if strings.HasPrefix(req.Topic, "chat/") {
		return p.chat.Publish(ctx, c, req)
	}
	return p.hub.Publish(ctx, req)
}

func (p *policy) Disconnected(c transport.Client) { p.chat.Disconnected(c) }
