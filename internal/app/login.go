package app

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rtlab/rtlab/internal/transport"
)

// handleLogin issues a token: POST /api/login {"user": "alice"}. Without a configured secret
// (open dev mode) tokens are signed with a per-process secret: they identify, but are not needed.
func (a *App) handleLogin(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User string `json:"user"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: body must be {\"user\": \"name\"}", transport.ErrBadRequest))
		return
	}
	tok, c, err := a.policy.signer.Issue(body.User)
	if err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrBadRequest, err))
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"user": c.User, "token": tok, "expires": c.Expires})
}

// handleLogout revokes the request's token: POST /api/logout with Authorization: Bearer.
func (a *App) handleLogout(w http.ResponseWriter, r *http.Request) {
	tok := bearerToken(r)
	if tok == "" {
		a.tr.WriteError(w, r, fmt.Errorf("%w: send the token to revoke as Authorization: Bearer", transport.ErrUnauthorized))
		return
	}
	// Revoking an already revoked or expired token succeeds, so logging out twice is fine.
	if err := a.policy.signer.Revoke(tok); err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: %v", transport.ErrUnauthorized, err))
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]string{"status": "logged out"})
}

func (a *App) handleMembers(w http.ResponseWriter, r *http.Request) {
	if _, err := a.tr.AuthenticateRequest(r); err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	ri, err := a.chat.info(r.Context(), r.PathValue("room"))
	if err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	transport.WriteJSON(w, http.StatusOK, ri)
}

func (a *App) handleOwner(w http.ResponseWriter, r *http.Request) {
	user, err := a.tr.AuthenticateRequest(r)
	if err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	var body struct {
		Owner string `json:"owner"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: body must be {\"owner\": \"user\"}", transport.ErrBadRequest))
		return
	}
	p, err := a.chat.setOwner(r.Context(), transport.Client{User: user}, a.policy.required, r.PathValue("room"), body.Owner)
	if err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"room": r.PathValue("room"), "owner": body.Owner, "offset": p.Offset})
}
