package transport

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rtlab/rtlab/internal/hub"
)

// Errors a Policy or a transport returns; each maps to a wire code.
var (
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrRateLimited  = errors.New("rate limited")
	ErrTooManySubs  = errors.New("too many subscriptions")
	ErrNotFound     = errors.New("not found")
	ErrTooManyConns = errors.New("too many connections")
	ErrServerFull   = errors.New("server full")
	ErrTimeout      = errors.New("timed out")
)

// errorCode maps an error to the code clients see and an HTTP status.
func errorCode(err error) (string, int) {
	switch {
	case errors.Is(err, hub.ErrBadTopic):
		return "bad_topic", http.StatusBadRequest
	case errors.Is(err, hub.ErrTooLarge):
		return "too_large", http.StatusRequestEntityTooLarge
	case errors.Is(err, hub.ErrBadData), errors.Is(err, hub.ErrBadText), errors.Is(err, hub.ErrBadName), errors.Is(err, hub.ErrBadKey), errors.Is(err, ErrBadRequest):
		return "bad_request", http.StatusBadRequest
	case errors.Is(err, ErrUnauthorized):
		return "unauthorized", http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return "forbidden", http.StatusForbidden
	case errors.Is(err, ErrRateLimited):
		return "rate_limited", http.StatusTooManyRequests
	case errors.Is(err, ErrTooManySubs):
		return "too_many_subscriptions", http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return "not_found", http.StatusNotFound
	case errors.Is(err, ErrTooManyConns):
		return "too_many_connections", http.StatusTooManyRequests
	case errors.Is(err, ErrServerFull):
		return "server_full", http.StatusServiceUnavailable
	case errors.Is(err, ErrTimeout):
		return "timeout", http.StatusRequestTimeout
	case errors.Is(err, hub.ErrTooManyTopics):
		return "too_many_topics", http.StatusServiceUnavailable
	case errors.Is(err, hub.ErrOutcomeUnknown): // before unavailable: a cause may be a broker's outage
		return "outcome_unknown", http.StatusGatewayTimeout
	case errors.Is(err, hub.ErrClosed), errors.Is(err, hub.ErrNotReady):
		return "unavailable", http.StatusServiceUnavailable
	}
	return "internal", http.StatusInternalServerError
}

// reasonText is the human-readable part of an error. Internal errors are not detailed to
// clients: they may carry broker addresses.
func reasonText(err error) string {
	if code, _ := errorCode(err); code == "internal" {
		return "internal error"
	}
	return err.Error()
}

// WriteError answers an HTTP request with {"error": code, "reason": text} and the status.
// A request whose client left gets no answer (a body read that timed out also ends r's
// context, but that client is still there and is told). Only r tells that: an error wrapping
// context.Canceled can also come from inside the server (a broker connection dropped
// mid-call), and that client is still waiting for a reason.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && !errors.Is(err, ErrTimeout) {
		return // nobody reads an answer and it is not a server fault
	}
	code, status := errorCode(err)
	if !serverSide(code) {
		s.m.Refused.WithLabelValues("http", code).Inc()
	} else {
		s.log.Warn("request failed", "err", err)
	}
	if ra := retryAfter(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	if status == http.StatusRequestTimeout {
		w.Header().Set("Connection", "close") // the rest of a trickled body is not waited for
	}
	WriteJSON(w, status, map[string]string{"error": code, "reason": reasonText(err)})
}

// serverSide reports whether code is the server's or its broker's failure rather than a
// refusal of the client's request: those are logged, not counted as refusals.
func serverSide(code string) bool {
	return code == "internal" || code == "unavailable" || code == "outcome_unknown"
}

// WriteJSON answers an HTTP request with v as JSON, uncached.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal","reason":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
