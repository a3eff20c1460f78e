package transport

import (
	"fmt"
	"strings"
)

// Reason says why a connection was closed. Clients are told Code and Text; metrics count Code.
type Reason struct {
	Code      string
	Text      string
	WSCode    uint16 // WebSocket close code
	Reconnect bool   // whether the client should reconnect (and resume)
}

// Reasons a server closes connections, in one table as errors.go keeps errors: the code clients
// are told and metrics count, the text, the WebSocket close code and whether the client should
// reconnect (and resume). A reason whose text depends on the case is made from its entry with
// with. Each transport says it in its own way (its framer's goodbye: a WebSocket disconnect
// message and close frame, an SSE event: disconnect, a STOMP ERROR frame); a waiting long poll
// answers with pollError.
var (
	ReasonClientClosed = Reason{Code: "client_closed", Text: "client closed the connection", WSCode: 1000}
	ReasonShutdown     = Reason{Code: "shutdown", Text: "server is shutting down, reconnect and resume", WSCode: 1012, Reconnect: true}
	ReasonSlow         = Reason{Code: "slow_consumer", Text: "send queue overflowed, reconnect and resume from your last offset", WSCode: 4001, Reconnect: true}
	ReasonWriteTimeout = Reason{Code: "write_timeout", Text: "write timed out, reconnect and resume from your last offset", WSCode: 4002, Reconnect: true}
	ReasonWriteError   = Reason{Code: "write_error", Text: "write failed", WSCode: 1011, Reconnect: true}
	ReasonReadError    = Reason{Code: "read_error", Text: "read failed", WSCode: 1002}
	ReasonHeartbeat    = Reason{Code: "heartbeat_timeout", Text: "no data from client within the heart-beat interval", WSCode: 1001, Reconnect: true}
	ReasonNormal       = Reason{Code: "normal", Text: "bye", WSCode: 1000}
	ReasonTokenExpired = Reason{Code: "token_expired", Text: "the token expired: refresh it before it does, or reconnect with a new one", WSCode: 4003, Reconnect: true}
	ReasonRevoked      = Reason{Code: "token_revoked", Text: "the token was revoked (logged out)", WSCode: 4003}
	// ReasonMaxAge closes an SSE stream that reached its maximum age (--sse-max-age, or a data
	// stream's own).
	ReasonMaxAge = Reason{Code: "max_age", Text: "the stream reached its maximum age, reconnect with Last-Event-ID", WSCode: 1000, Reconnect: true}

	reasonNoTopic      = Reason{Code: "unavailable", Text: "no topic could be subscribed, retry", Reconnect: true} // an SSE stream's
	reasonForbidden    = Reason{Code: "forbidden", WSCode: 4003, Reconnect: true}                                  // text: the Guard's error
	reasonDisconnected = Reason{Code: "disconnected", Text: "disconnected by the server", WSCode: 4009}            // the server API's
	reasonTooLarge     = Reason{Code: "too_large", WSCode: 1009}
	reasonInvalidUTF8  = Reason{Code: "invalid_utf8", Text: errInvalidUTF8.Error(), WSCode: 1007}
	reasonProtocol     = Reason{Code: "protocol_error", WSCode: 1002}
	reasonSTOMPError   = Reason{Code: "stomp_error", WSCode: 4000} // after an ERROR frame; WSCode per error
)

// with is r told with text instead.
func (r Reason) with(text string) Reason {
	r.Text = text
	return r
}

// ForbiddenReason is the close reason of a connection whose subscription a Guard refused.
func ForbiddenReason(err error) Reason { return reasonForbidden.with(err.Error()) }

// DisconnectReason is the reason a server-side disconnect gives: code "disconnected", the
// operator's text, and whether the client should reconnect.
func DisconnectReason(text string, reconnect bool) Reason {
	r := reasonDisconnected
	if text = strings.TrimSpace(text); text != "" {
		r.Text = text
	}
	r.Reconnect = reconnect
	return r
}

// pollError is how a waiting single-topic long poll answers a close reason: the end of its
// token is 401, anything else (the server API's disconnect) 403, with the reason's text.
func pollError(r Reason) error {
	if r.Code == ReasonTokenExpired.Code || r.Code == ReasonRevoked.Code {
		return fmt.Errorf("%w: %s", ErrUnauthorized, r.Text)
	}
	return fmt.Errorf("%w: %s", ErrForbidden, r.Text)
}
