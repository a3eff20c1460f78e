// Package notify tells users of what concerns them (a chat message naming them) on notify/{user}
// and keeps how far each has read.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// Notes publishes alarms on notify/{user} and keeps, per user, how far they have read.
// Read marks are node-local and in memory; one untouched for readMarkIdle is dropped (the
// user's notifications then count as unread again).
type Notes struct {
	hub  *hub.Hub
	log  *slog.Logger
	mu   sync.Mutex
	read map[string]readMark // guarded by mu
}

type readMark struct {
	pos hub.Position
	at  time.Time // last set or read
}

// readMarkIdle is how long an unused read mark is kept.
const readMarkIdle = 24 * time.Hour

// New keeps the read marks of h's notify/ topics.
func New(h *hub.Hub, log *slog.Logger) *Notes {
	return &Notes{hub: h, log: log, read: make(map[string]readMark)}
}

// Sweep drops read marks unused for readMarkIdle.
func (n *Notes) Sweep(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for u, m := range n.read {
		if now.Sub(m.at) > readMarkIdle {
			delete(n.read, u)
		}
	}
}

// Send notifies user of a chat publication.
func (n *Notes) Send(ctx context.Context, user string, talk *hub.Publication, text string) {
	data, _ := json.Marshal(map[string]any{
		"room": talk.Topic[len("chat/"):], "from": talk.Sender, "message": text,
		"offset": talk.Offset, "time": talk.Time.UTC().Format(hub.TimeFormat),
	})
	_, err := n.hub.Publish(context.WithoutCancel(ctx), hub.PublishRequest{
		Topic: "notify/" + user, Type: "NOTIFY", Sender: talk.Sender, Data: data, Key: talkKey(talk),
	})
	if err != nil {
		n.log.Warn("notification failed", "user", user, "err", err)
	}
}

// talkKey is the idempotency key of talk's notification: a retried TALK (answered as a
// duplicate, its notification sent or not the first time) notifies once.
func talkKey(talk *hub.Publication) string {
	h := sha256.Sum256([]byte(talk.Topic + "\x00" + talk.Epoch + "\x00" + strconv.FormatUint(talk.Offset, 10)))
	return "talk-" + hex.EncodeToString(h[:16])
}

// State is the answer of GET /api/notifications.
type State struct {
	User          string            `json:"user"`
	Unread        uint64            `json:"unread"`
	Read          uint64            `json:"read"`   // offset read up to
	Offset        uint64            `json:"offset"` // latest notification
	Epoch         string            `json:"epoch"`
	Notifications []json.RawMessage `json:"notifications"` // unread ones still in history
}

// Read is user's State, the unread notifications still in history.
func (n *Notes) Read(ctx context.Context, user string) (State, error) {
	topic := "notify/" + user
	n.mu.Lock()
	m, ok := n.read[user]
	if ok {
		m.at = time.Now()
		n.read[user] = m
	}
	read := m.pos
	n.mu.Unlock()
	res, err := n.hub.Read(ctx, topic, hub.ReadOptions{Recover: true, Since: read.Offset, Limit: 100})
	if err != nil {
		return State{}, err
	}
	if read.Epoch != "" && read.Epoch != res.Top.Epoch {
		read = hub.Position{} // history was lost: everything retained is unread
	}
	st := State{User: user, Read: read.Offset, Offset: res.Top.Offset, Epoch: res.Top.Epoch, Notifications: []json.RawMessage{}}
	if res.Top.Offset > read.Offset {
		st.Unread = res.Top.Offset - read.Offset
	}
	for _, p := range res.Publications {
		st.Notifications = append(st.Notifications, p.JSON())
	}
	return st, nil
}

// MarkRead records that user has read up to offset (0 means everything so far).
func (n *Notes) MarkRead(ctx context.Context, user string, offset uint64) (State, error) {
	res, err := n.hub.Read(ctx, "notify/"+user, hub.ReadOptions{})
	if err != nil {
		return State{}, err
	}
	if offset == 0 || offset > res.Top.Offset {
		offset = res.Top.Offset
	}
	n.mu.Lock()
	n.read[user] = readMark{pos: hub.Position{Offset: offset, Epoch: res.Top.Epoch}, at: time.Now()}
	n.mu.Unlock()
	return n.Read(ctx, user)
}

// handlers serve a user's notifications over HTTP.
type handlers struct {
	n  *Notes
	tr *transport.Server
	p  transport.Policy
}

// Routes serves GET /api/notifications and POST /api/notifications/read on mux, with the
// identity p gives and the read limits of tr.
func (n *Notes) Routes(mux *http.ServeMux, tr *transport.Server, p transport.Policy) {
	h := &handlers{n: n, tr: tr, p: p}
	mux.HandleFunc("GET /api/notifications", h.list)
	mux.HandleFunc("POST /api/notifications/read", h.markRead)
}

// notifyUser resolves whose notifications a request is about: the logged-in user, or in open
// dev mode ?user=.
func (h *handlers) user(r *http.Request) (string, error) {
	id, err := h.p.Authenticate(r)
	if err != nil {
		return "", err
	}
	user := id.User
	q := r.URL.Query().Get("user")
	switch {
	case user != "" && q != "" && q != user:
		return "", fmt.Errorf("%w: %s may not read %s's notifications", transport.ErrForbidden, user, q)
	case user != "":
		return user, nil
	case h.p.AuthRequired():
		return "", fmt.Errorf("%w: log in to read notifications", transport.ErrUnauthorized)
	case q == "":
		return "", fmt.Errorf("%w: give ?user= (open dev mode) or log in", transport.ErrBadRequest)
	}
	return q, nil
}

func (h *handlers) list(w http.ResponseWriter, r *http.Request) {
	user, err := h.user(r)
	if err == nil {
		err = h.tr.AllowRead(r, user)
	}
	if err == nil {
		var st State
		if st, err = h.n.Read(r.Context(), user); err == nil {
			transport.WriteJSON(w, http.StatusOK, st)
			return
		}
	}
	h.tr.WriteError(w, r, err)
}

func (h *handlers) markRead(w http.ResponseWriter, r *http.Request) {
	user, err := h.user(r)
	if err != nil {
		h.tr.WriteError(w, r, err)
		return
	}
	var body struct {
		Offset uint64 `json:"offset"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
			h.tr.WriteError(w, r, fmt.Errorf("%w: body must be {\"offset\": N} or empty", transport.ErrBadRequest))
			return
		}
	}
	if v := r.URL.Query().Get("offset"); v != "" {
		body.Offset, _ = strconv.ParseUint(v, 10, 64)
	}
	st, err := h.n.MarkRead(r.Context(), user, body.Offset)
	if err != nil {
		h.tr.WriteError(w, r, err)
		return
	}
	transport.WriteJSON(w, http.StatusOK, st)
}
