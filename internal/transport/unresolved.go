package transport

import (
	"errors"
	"fmt"

	"github.com/rtlab/rtlab/internal/hub"
)

// unresolved is a connection's keyed publish whose outcome is unknown: it may still land. Until
// a retry with its key is answered, the connection's other publishes are refused as not
// published, so that none of them lands before it: a late execution never overtakes its
// publisher's later messages. Unkeyed publishes cannot be retried safely and are not held.
// Owned by the connection's reader goroutine.
type unresolved struct {
	topic, key string
}

// check refuses req while another publish is unresolved.
func (u *unresolved) check(req hub.PublishRequest) error {
	if u.key == "" || (req.Key == u.key && req.Topic == u.topic) {
		return nil
	}
	return fmt.Errorf("%w: the publish to %s with idempotency key %s has an unknown outcome: retry it first",
		hub.ErrNotReady, u.topic, u.key)
}

// settle notes the answer to req: an outcome unknown holds the connection's publishes, and an
// answer to the held one's retry releases them.
func (u *unresolved) settle(req hub.PublishRequest, err error) {
	switch {
	case req.Key == "":
	case errors.Is(err, hub.ErrOutcomeUnknown):
		u.topic, u.key = req.Topic, req.Key
	case err == nil && req.Key == u.key && req.Topic == u.topic:
		u.topic, u.key = "", ""
	}
}
