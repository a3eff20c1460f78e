package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/transport"
)

// handleLogin issues a token: POST /api/login. In open dev mode any name gets one
// ({"user": "alice"}): tokens identify, but are not needed. With a verifier configured, login
// is off (404: tokens come from the application's backend) unless --login-users gives real
// credentials ({"user": "alice", "password": "…"}).
func (a *App) handleLogin(w http.ResponseWriter, r *http.Request) {
	if a.login == nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: login is off: tokens come from the application's backend (or configure --login-users)", transport.ErrNotFound))
		return
	}
	// Attempts are limited per address before the body is read, failed ones per user name
	// after; a refusal is answered once the client could retry (transport.Tarpit).
	if a.users != nil {
		if err := a.tr.AllowLoginFrom(r); err != nil {
			transport.Tarpit(r, err)
			a.tr.WriteError(w, r, err)
			return
		}
	}
	var body struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: body must be {\"user\": \"name\"%s}", transport.ErrBadRequest, map[bool]string{true: `, "password": "…"`}[a.users != nil]))
		return
	}
	if a.users != nil {
		// Password checks cost a bcrypt each: limited before it runs.
		done, err := a.tr.AllowLogin(r, body.User)
		if err != nil {
			transport.Tarpit(r, err)
			a.tr.WriteError(w, r, err)
			return
		}
		ok := niced(func() bool { return a.users.Check(body.User, body.Password) })
		done(ok)
		if !ok {
			a.tr.WriteError(w, r, fmt.Errorf("%w: wrong user or password", transport.ErrUnauthorized))
			return
		}
	}
	tok, c, err := a.login.Issue(body.User)
	if err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrBadRequest, err))
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"user": c.User, "token": tok, "expires": c.Expires})
}

// handleLogout revokes the request's token on every node: POST /api/logout with
// Authorization: Bearer. Open connections using the token are closed (token_revoked).
func (a *App) handleLogout(w http.ResponseWriter, r *http.Request) {
	tok := bearerToken(r)
	if tok == "" {
		a.tr.WriteError(w, r, fmt.Errorf("%w: send the token to revoke as Authorization: Bearer", transport.ErrUnauthorized))
		return
	}
	c, err := a.policy.verifier.Verify(tok)
	switch {
	case errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrExpired):
		// Logging out twice, or with a token that ended anyway, is fine.
	case err != nil:
		a.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrUnauthorized, err))
		return
	default:
		if err := a.revoker.revoke(r.Context(), c); err != nil {
			a.tr.WriteError(w, r, err)
			return
		}
	}
	transport.WriteJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}
