package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/hub"
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

// roomPath splits /api/chat/{room}/{what}[/{user}] (a room name may hold slashes) into the
// room, what and user.
func roomPath(rest string) (room, what, user string) {
	for _, w := range []string{"/members", "/owner", "/private"} {
		if i := strings.LastIndex(rest, w); i > 0 {
			tail := rest[i+len(w):]
			if tail == "" {
				return rest[:i], w[1:], ""
			}
			if w == "/members" && strings.HasPrefix(tail, "/") && !strings.Contains(tail[1:], "/") {
				return rest[:i], w[1:], tail[1:]
			}
		}
	}
	return "", "", ""
}

// handleRoom serves GET /api/chat/{room}/members (the member list, for those who may read
// the room), and the owner's actions: POST …/owner {"owner"}, POST …/private {"private"},
// POST …/members {"user"} (invite), DELETE …/members/{user} (remove).
func (a *App) handleRoom(w http.ResponseWriter, r *http.Request) {
	room, what, user := roomPath(r.PathValue("rest"))
	ident, err := a.tr.AuthenticateRequest(r)
	if err == nil && room == "" {
		err = fmt.Errorf("%w: use /api/chat/{room}/members, /owner or /private", transport.ErrNotFound)
	}
	if err == nil {
		err = hub.ValidateTopic("chat/" + room)
	}
	if err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	c := transport.Client{Identity: ident}
	var ch ownerChange
	switch {
	case r.Method == http.MethodGet && what == "members" && user == "":
		if err := a.tr.AllowRead(r, ident.User); err != nil {
			a.tr.WriteError(w, r, err)
			return
		}
		if err := a.policy.CanRead(c, "chat/"+room); err != nil {
			a.tr.WriteError(w, r, err)
			return
		}
		ri, err := a.chat.info(r.Context(), room)
		if err != nil {
			a.tr.WriteError(w, r, err)
			return
		}
		transport.WriteJSON(w, http.StatusOK, ri)
		return
	case r.Method == http.MethodPost && what == "owner" && user == "":
		var body struct {
			Owner string `json:"owner"`
		}
		if !a.decodeSmall(w, r, &body, `{"owner": "user"}`) {
			return
		}
		ch = ownerChange{typ: typeOwner, user: body.Owner}
	case r.Method == http.MethodPost && what == "private" && user == "":
		var body struct {
			Private *bool `json:"private"`
		}
		if !a.decodeSmall(w, r, &body, `{"private": true}`) {
			return
		}
		if body.Private == nil {
			a.tr.WriteError(w, r, fmt.Errorf(`%w: body must be {"private": true} or {"private": false}`, transport.ErrBadRequest))
			return
		}
		ch = ownerChange{typ: typePrivate, value: *body.Private}
	case r.Method == http.MethodPost && what == "members" && user == "":
		var body struct {
			User string `json:"user"`
		}
		if !a.decodeSmall(w, r, &body, `{"user": "name"}`) {
			return
		}
		ch = ownerChange{typ: typeInvite, user: body.User}
	case r.Method == http.MethodDelete && what == "members" && user != "":
		ch = ownerChange{typ: typeRemove, user: user}
	default:
		a.tr.WriteError(w, r, fmt.Errorf("%w: no route %s %s", transport.ErrNotFound, r.Method, r.URL.Path))
		return
	}
	p, rec, err := a.chat.change(r.Context(), c, a.policy.required, room, ch)
	if err != nil {
		a.tr.WriteError(w, r, err)
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"room": room, "owner": rec.Owner, "private": rec.Private || a.chat.privateByPrefix("chat/"+room), "offset": p.Offset})
}

// decodeSmall decodes a small JSON body into v, answering 400 with the expected shape when it
// does not parse.
func (a *App) decodeSmall(w http.ResponseWriter, r *http.Request, v any, shape string) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(v); err != nil {
		a.tr.WriteError(w, r, fmt.Errorf("%w: body must be %s", transport.ErrBadRequest, shape))
		return false
	}
	return true
}
