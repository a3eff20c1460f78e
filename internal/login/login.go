// Package login issues tokens (POST /api/login) and revokes them on every node (POST
// /api/logout).
package login

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/transport"
)

// Config is what login needs besides the transports.
type Config struct {
	Signer   *auth.Signer   // nil: POST /api/login is off
	Users    *auth.Users    // nil: login takes any name (open dev mode)
	Verifier *auth.Verifier // checks the token a logout revokes
}

type handlers struct {
	Config
	tr *transport.Server
	rv *Revoker
}

// Routes serves POST /api/login and POST /api/logout on mux; a logout is carried to every
// node by rv.
func Routes(mux *http.ServeMux, tr *transport.Server, rv *Revoker, c Config) {
	h := &handlers{Config: c, tr: tr, rv: rv}
	mux.HandleFunc("POST /api/login", h.login)
	mux.HandleFunc("POST /api/logout", h.logout)
}

// BearerToken returns the token of a request: Authorization: Bearer, or access_token (for
// EventSource and WebSocket, which cannot set headers in browsers).
func BearerToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
	}
	return r.URL.Query().Get("access_token")
}

// login issues a token: POST /api/login. In open dev mode any name gets one
// ({"user": "alice"}): tokens identify, but are not needed. With a verifier configured, login
// is off (404: tokens come from the application's backend) unless --login-users gives real
// credentials ({"user": "alice", "password": "…"}).
func (h *handlers) login(w http.ResponseWriter, r *http.Request) {
	if h.Signer == nil {
		h.tr.WriteError(w, r, fmt.Errorf("%w: login is off: tokens come from the application's backend (or configure --login-users)", transport.ErrNotFound))
		return
	}
	// Attempts are limited per address before the body is read, failed ones per user name
	// after; a refusal is answered once the client could retry (transport.Tarpit).
	if h.Users != nil {
		if err := h.tr.AllowLoginFrom(r); err != nil {
			transport.Tarpit(r, err)
			h.tr.WriteError(w, r, err)
			return
		}
	}
	var body struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		h.tr.WriteError(w, r, fmt.Errorf("%w: body must be {\"user\": \"name\"%s}", transport.ErrBadRequest, map[bool]string{true: `, "password": "…"`}[h.Users != nil]))
		return
	}
	if h.Users != nil {
		// Password checks cost a bcrypt each: limited before it runs.
		done, err := h.tr.AllowLogin(r, body.User)
		if err != nil {
			transport.Tarpit(r, err)
			h.tr.WriteError(w, r, err)
			return
		}
		ok := niced(func() bool { return h.Users.Check(body.User, body.Password) })
		done(ok)
		if !ok {
			h.tr.WriteError(w, r, fmt.Errorf("%w: wrong user or password", transport.ErrUnauthorized))
			return
		}
	}
	tok, c, err := h.Signer.Issue(body.User)
	if err != nil {
		h.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrBadRequest, err))
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"user": c.User, "token": tok, "expires": c.Expires})
}

// logout revokes the request's token on every node: POST /api/logout with
// Authorization: Bearer. Open connections using the token are closed (token_revoked).
func (h *handlers) logout(w http.ResponseWriter, r *http.Request) {
	tok := BearerToken(r)
	if tok == "" {
		h.tr.WriteError(w, r, fmt.Errorf("%w: send the token to revoke as Authorization: Bearer", transport.ErrUnauthorized))
		return
	}
	c, err := h.Verifier.Verify(tok)
	switch {
	case errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrExpired):
		// Logging out twice, or with a token that ended anyway, is fine.
	case err != nil:
		h.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrUnauthorized, err))
		return
	default:
		if err := h.rv.revoke(r.Context(), c); err != nil {
			h.tr.WriteError(w, r, err)
			return
		}
	}
	transport.WriteJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}
