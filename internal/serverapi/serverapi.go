// Package serverapi lets an application's backend act on the server, on every node, with the
// key given by --api-key (header "Authorization: apikey KEY"):
//
//	POST /api/server/publish     {"topic","data","type"?,"sender"?}  → {"topic","offset","epoch"}
//	POST /api/server/disconnect  {"user","reason"?,"reconnect"?}     → {"user","disconnected"}
//	POST /api/server/presence    {"topic"}                          → {"topic","clients","users"}
//	POST /api/server/history     {"topic","since"?,"epoch"?,"limit"?} → as GET /api/poll
//	POST /api/server/rooms       {"room","owner","invited"?}         → the room's member list
//
// It bypasses the policy: a backend may publish on notify/{user} and read any topic. Without
// --api-key every route answers 404.
package serverapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// cmdDisconnect is the node command that closes a user's connections on every node.
const cmdDisconnect = "disconnect"

type disconnectCmd struct {
	User      string `json:"user"`
	Reason    string `json:"reason"`
	Reconnect bool   `json:"reconnect"`
}

// api is the server API of one node.
type api struct {
	key  string
	hub  *hub.Hub
	tr   *transport.Server
	chat *chat.Rooms
	log  *slog.Logger
}

// Routes registers the server API on mux, with key as its key (empty: every route answers
// 404), and the disconnect command on h.
func Routes(mux *http.ServeMux, key string, h *hub.Hub, tr *transport.Server, rooms *chat.Rooms, log *slog.Logger) {
	a := &api{key: key, hub: h, tr: tr, chat: rooms, log: log}
	a.hub.OnCommand(cmdDisconnect, func(data json.RawMessage) {
		var d disconnectCmd
		if json.Unmarshal(data, &d) == nil {
			n := a.tr.CloseWhere(transport.ByUser(d.User), transport.DisconnectReason(d.Reason, d.Reconnect))
			a.log.Info("server API: disconnected a user on another node's request", "user", d.User, "connections", n)
		}
	})
	mux.HandleFunc("POST /api/server/publish", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key") // a backend's retry after a 504 is safe with it
		a.serverAPI(func(ctx context.Context, body []byte) (any, error) { return a.apiPublish(ctx, body, key) })(w, r)
	})
	mux.HandleFunc("POST /api/server/disconnect", a.serverAPI(a.apiDisconnect))
	mux.HandleFunc("POST /api/server/presence", a.serverAPI(a.apiPresence))
	mux.HandleFunc("POST /api/server/history", a.serverAPI(a.apiHistory))
	mux.HandleFunc("POST /api/server/rooms", a.serverAPI(a.apiRoom))
}

// serverAPI checks the key and decodes the JSON body for h.
func (a *api) serverAPI(h func(ctx context.Context, body []byte) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := a.checkAPIKey(r)
		var body []byte
		if err == nil {
			body, err = readJSONBody(w, r, a.tr.Limits().MaxFrame+4096)
		}
		var v any
		if err == nil {
			v, err = h(r.Context(), body)
		}
		if err != nil {
			a.tr.WriteError(w, r, err)
			return
		}
		transport.WriteJSON(w, http.StatusOK, v)
	}
}

func (a *api) checkAPIKey(r *http.Request) error {
	if a.key == "" {
		return fmt.Errorf("%w: the server API is off (start the server with --api-key)", transport.ErrNotFound)
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "apikey ")
	if !ok {
		return fmt.Errorf("%w: send the key as Authorization: apikey KEY", transport.ErrUnauthorized)
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(a.key)) != 1 {
		return fmt.Errorf("%w: wrong API key", transport.ErrUnauthorized)
	}
	return nil
}

// readJSONBody reads a body of at most max bytes that must be a JSON object.
func readJSONBody(w http.ResponseWriter, r *http.Request, max int) ([]byte, error) {
	var raw json.RawMessage
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, int64(max))).Decode(&raw)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, fmt.Errorf("%w: body over %d bytes", hub.ErrTooLarge, max)
	case err != nil || len(raw) == 0 || raw[0] != '{':
		return nil, fmt.Errorf("%w: body must be a JSON object", transport.ErrBadRequest)
	case !utf8.Valid(raw):
		// Decoding would store its invalid bytes as U+FFFD.
		return nil, fmt.Errorf("%w: body is not valid UTF-8", transport.ErrBadRequest)
	}
	return raw, nil
}

func decodeInto(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", transport.ErrBadRequest, err)
	}
	return nil
}

func (a *api) apiPublish(ctx context.Context, body []byte, key string) (any, error) {
	var req struct {
		Topic  string          `json:"topic"`
		Data   json.RawMessage `json:"data"`
		Type   string          `json:"type"`
		Sender string          `json:"sender"`
	}
	if err := decodeInto(body, &req); err != nil {
		return nil, err
	}
	if len(req.Data) == 0 {
		return nil, fmt.Errorf("%w: publish needs a topic and data", transport.ErrBadRequest)
	}
	p, err := a.hub.Publish(ctx, hub.PublishRequest{Topic: req.Topic, Data: req.Data, Type: req.Type, Sender: req.Sender, Key: key})
	if err != nil {
		return nil, err
	}
	ans := map[string]any{"topic": p.Topic, "offset": p.Offset, "epoch": p.Epoch}
	if p.Duplicate {
		ans["duplicate"] = true
	}
	return ans, nil
}

func (a *api) apiDisconnect(ctx context.Context, body []byte) (any, error) {
	var d disconnectCmd
	if err := decodeInto(body, &d); err != nil {
		return nil, err
	}
	if d.User == "" {
		return nil, fmt.Errorf("%w: disconnect needs a user", transport.ErrBadRequest)
	}
	if len(d.Reason) > 200 {
		return nil, fmt.Errorf("%w: reason longer than 200 bytes", transport.ErrBadRequest)
	}
	data, _ := json.Marshal(d)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The other nodes first: the answer then means every node was told.
	if err := a.hub.Command(cctx, cmdDisconnect, data); err != nil {
		return nil, err
	}
	n := a.tr.CloseWhere(transport.ByUser(d.User), transport.DisconnectReason(d.Reason, d.Reconnect))
	return map[string]any{"user": d.User, "disconnected": n}, nil
}

func (a *api) apiPresence(_ context.Context, body []byte) (any, error) {
	var req struct {
		Topic string `json:"topic"`
	}
	if err := decodeInto(body, &req); err != nil {
		return nil, err
	}
	clients, err := a.hub.Presence(req.Topic)
	if err != nil {
		return nil, transport.PresenceErr(err)
	}
	return transport.NewPresenceAnswer(req.Topic, clients), nil
}

func (a *api) apiHistory(ctx context.Context, body []byte) (any, error) {
	var req struct {
		Topic string  `json:"topic"`
		Since *uint64 `json:"since"`
		Epoch string  `json:"epoch"`
		Limit int     `json:"limit"`
	}
	if err := decodeInto(body, &req); err != nil {
		return nil, err
	}
	if req.Limit < 0 || req.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit must be 1..1000", transport.ErrBadRequest)
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	opts := hub.ReadOptions{Recover: true, Epoch: req.Epoch, Limit: req.Limit}
	if req.Since != nil {
		opts.Since = *req.Since
	}
	res, err := a.hub.Read(ctx, req.Topic, opts)
	if err != nil {
		return nil, err
	}
	ans := map[string]any{"topic": req.Topic, "epoch": res.Top.Epoch, "offset": res.Top.Offset,
		"recovered": res.Recovered, "publications": publicationsJSON(res.Publications)}
	if !res.Recovered {
		ans["reason"] = res.Reason
	}
	return ans, nil
}

func publicationsJSON(ps []*hub.Publication) []json.RawMessage {
	out := make([]json.RawMessage, len(ps))
	for i, p := range ps {
		out[i] = p.JSON()
	}
	return out
}

// apiRoom creates the members-only room chat/{room} owned by owner, with invited users, or
// takes over an open room of that name: the backend's word on who may be in it.
func (a *api) apiRoom(ctx context.Context, body []byte) (any, error) {
	var req struct {
		Room    string   `json:"room"`
		Owner   string   `json:"owner"`
		Invited []string `json:"invited"`
	}
	if err := decodeInto(body, &req); err != nil {
		return nil, err
	}
	if err := a.chat.Create(ctx, req.Room, req.Owner, req.Invited); err != nil {
		return nil, err
	}
	return a.chat.Info(ctx, req.Room)
}
