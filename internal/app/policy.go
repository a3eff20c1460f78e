package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// policy applies the application's rules for every transport: who a client is (tokens), who may
// read notify/{user}, and what publishing to chat/ and notify/ means.
type policy struct {
	hub      *hub.Hub
	signer   *auth.Signer
	required bool // a secret was configured: anonymous clients are refused
	chat     *chatRooms
}

var _ transport.Policy = (*policy)(nil)

// bearerToken returns the token of a request: Authorization: Bearer, or access_token (for
// EventSource and WebSocket, which cannot set headers in browsers).
func bearerToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
	}
	return r.URL.Query().Get("access_token")
}

func (p *policy) Authenticate(r *http.Request) (string, error) {
	tok := bearerToken(r)
	if tok == "" {
		return "", nil
	}
	return p.AuthenticateToken(tok)
}

func (p *policy) AuthenticateToken(tok string) (string, error) {
	c, err := p.signer.Verify(tok)
	if err != nil {
		return "", fmt.Errorf("%w: %v", transport.ErrUnauthorized, err)
	}
	return c.User, nil
}

func (p *policy) AuthRequired() bool { return p.required }

// CanSubscribe keeps notify/{user} to that user. In open dev mode anonymous clients may read
// any user's notifications (there is no identity to check), logged-in ones only their own.
func (p *policy) CanSubscribe(c transport.Client, topic string) error {
	if owner, ok := strings.CutPrefix(topic, "notify/"); ok && c.User != owner && (p.required || c.User != "") {
		who := c.User
		if who == "" {
			who = "an anonymous client"
		}
		return fmt.Errorf("%w: only %s may subscribe to %s, not %s", transport.ErrForbidden, owner, topic, who)
	}
	return nil
}

func (p *policy) Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if c.User != "" {
		req.Sender = c.User
	}
	switch {
	case strings.HasPrefix(req.Topic, "notify/"):
		return nil, fmt.Errorf("%w: notifications are sent by the server; clients may not publish to %s", transport.ErrForbidden, req.Topic)
	case strings.HasPrefix(req.Topic, "chat/"):
		return p.chat.publish(ctx, c, req)
	}
	return p.hub.Publish(ctx, req)
}

func (p *policy) Disconnected(c transport.Client) { p.chat.disconnected(c) }
