package app

import (
	"context"
	"net/http"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// openPolicy is the dev-mode policy: no authentication, everyone may subscribe and publish
// everywhere. The server says so at start.
type openPolicy struct {
	hub *hub.Hub
}

var _ transport.Policy = (*openPolicy)(nil)

func (p *openPolicy) Authenticate(*http.Request) (string, error) { return "", nil }
func (p *openPolicy) AuthenticateToken(string) (string, error)   { return "", nil }
func (p *openPolicy) CanSubscribe(user, topic string) error      { return nil }
func (p *openPolicy) Publish(ctx context.Context, user string, req hub.PublishRequest) (*hub.Publication, error) {
	return p.hub.Publish(ctx, req)
}
