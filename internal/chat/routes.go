package chat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// handlers serve a room's members and its owner's actions over HTTP.
type handlers struct {
	cr *Rooms
	tr *transport.Server
	p  transport.Policy
}

// Routes serves /api/chat/{room}/... on mux: who may read a room is p's to say, the owner's
// actions need p's identity when p requires one.
func (cr *Rooms) Routes(mux *http.ServeMux, tr *transport.Server, p transport.Policy) {
	h := &handlers{cr: cr, tr: tr, p: p}
	mux.HandleFunc("GET /api/chat/{rest...}", h.room)
	mux.HandleFunc("POST /api/chat/{rest...}", h.room)
	mux.HandleFunc("DELETE /api/chat/{rest...}", h.room)
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

// room serves GET /api/chat/{room}/members (the member list, for those who may read
// the room), and the owner's actions: POST …/owner {"owner"}, POST …/private {"private"},
// POST …/members {"user"} (invite), DELETE …/members/{user} (remove).
func (h *handlers) room(w http.ResponseWriter, r *http.Request) {
	room, what, user := roomPath(r.PathValue("rest"))
	ident, err := h.tr.AuthenticateRequest(r)
	if err == nil && room == "" {
		err = fmt.Errorf("%w: use /api/chat/{room}/members, /owner or /private", transport.ErrNotFound)
	}
	if err == nil {
		err = hub.ValidateTopic("chat/" + room)
	}
	if err != nil {
		h.tr.WriteError(w, r, err)
		return
	}
	c := transport.Client{Identity: ident}
	var ch ownerChange
	switch {
	case r.Method == http.MethodGet && what == "members" && user == "":
		if err := h.tr.AllowRead(r, ident.User); err != nil {
			h.tr.WriteError(w, r, err)
			return
		}
		if err := h.p.CanRead(c, "chat/"+room); err != nil {
			h.tr.WriteError(w, r, err)
			return
		}
		ri, err := h.cr.Info(r.Context(), room)
		if err != nil {
			h.tr.WriteError(w, r, err)
			return
		}
		transport.WriteJSON(w, http.StatusOK, ri)
		return
	case r.Method == http.MethodPost && what == "owner" && user == "":
		var body struct {
			Owner string `json:"owner"`
		}
		if !h.decodeSmall(w, r, &body, `{"owner": "user"}`) {
			return
		}
		ch = ownerChange{typ: typeOwner, user: body.Owner}
	case r.Method == http.MethodPost && what == "private" && user == "":
		var body struct {
			Private *bool `json:"private"`
		}
		if !h.decodeSmall(w, r, &body, `{"private": true}`) {
			return
		}
		if body.Private == nil {
			h.tr.WriteError(w, r, fmt.Errorf(`%w: body must be {"private": true} or {"private": false}`, transport.ErrBadRequest))
			return
		}
		ch = ownerChange{typ: typePrivate, value: *body.Private}
	case r.Method == http.MethodPost && what == "members" && user == "":
		var body struct {
			User string `json:"user"`
		}
		if !h.decodeSmall(w, r, &body, `{"user": "name"}`) {
			return
		}
		ch = ownerChange{typ: typeInvite, user: body.User}
	case r.Method == http.MethodDelete && what == "members" && user != "":
		ch = ownerChange{typ: typeRemove, user: user}
	default:
		h.tr.WriteError(w, r, fmt.Errorf("%w: no route %s %s", transport.ErrNotFound, r.Method, r.URL.Path))
		return
	}
	p, rec, err := h.cr.change(r.Context(), c, h.p.AuthRequired(), room, ch)
	if err != nil {
		h.tr.WriteError(w, r, err)
		return
	}
	transport.WriteJSON(w, http.StatusOK, map[string]any{"room": room, "owner": rec.Owner, "private": rec.Private || h.cr.privateByPrefix("chat/"+room), "offset": p.Offset})
}

// decodeSmall decodes a small JSON body into v, answering 400 with the expected shape when it
// does not parse.
func (h *handlers) decodeSmall(w http.ResponseWriter, r *http.Request, v any, shape string) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(v); err != nil {
		h.tr.WriteError(w, r, fmt.Errorf("%w: body must be %s", transport.ErrBadRequest, shape))
		return false
	}
	return true
}
