package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/stomp"
)

// Presence on the wire. Every streaming connection's subscriptions count in their topic's
// presence (hub.PresenceSink). A client that asks (WebSocket subscribe "presence":true, SSE
// presence=true, STOMP SUBSCRIBE header presence:true) is told who is there once, right after
// its subscription starts, then of every join and leave:
//
//	WebSocket  {"op":"presence","topic","clients":[info...]}  {"op":"join"|"leave","topic","info"}
//	SSE        event: presence / join / leave, data as the WebSocket message without op
//	STOMP      MESSAGE with header presence:presence|join|leave, the same JSON as body

var (
	_ hub.PresenceSink    = (*wsSink)(nil)
	_ hub.PresenceWatcher = (*wsSink)(nil)
	_ hub.PresenceSink    = (*sseSink)(nil)
	_ hub.PresenceWatcher = (*sseSink)(nil)
	_ hub.PresenceSink    = (*stompSub)(nil)
	_ hub.PresenceWatcher = (*stompSub)(nil)
)

// wantsPresence reports whether an SSE request asked for presence (presence=true or 1).
func wantsPresence(r *http.Request) bool {
	v := r.URL.Query().Get("presence")
	return v == "true" || v == "1"
}

// headerTrue reports whether a STOMP frame's header is "true".
func headerTrue(f *stomp.Frame, key string) bool {
	v, _ := f.Get(key)
	return v == "true"
}

// presenceJSON encodes a presence event's body: {"topic","clients"} or {"topic","info"}.
func presenceJSON(topic string, clients []hub.ClientInfo, info *hub.ClientInfo) []byte {
	var v any
	if info != nil {
		v = struct {
			Topic string          `json:"topic"`
			Info  *hub.ClientInfo `json:"info"`
		}{topic, info}
	} else {
		if clients == nil {
			clients = []hub.ClientInfo{}
		}
		v = struct {
			Topic   string           `json:"topic"`
			Clients []hub.ClientInfo `json:"clients"`
		}{topic, clients}
	}
	b, _ := json.Marshal(v)
	return b
}

// withOp returns a JSON object with "op" first, then body's fields.
func withOp(op string, body []byte) []byte {
	b := make([]byte, 0, len(body)+16)
	b = append(b, `{"op":`...)
	b = strconv.AppendQuote(b, op)
	if len(body) > 2 {
		b = append(b, ',')
	}
	return append(b, body[1:]...)
}

// WebSocket.

func (k *wsSink) PresenceInfo() hub.ClientInfo {
	return hub.ClientInfo{Client: k.c.id, User: k.c.identity().User, Transport: "ws"}
}

func (k *wsSink) WatchPresence() bool { return k.watch }

func (k *wsSink) Presence(topic string, clients []hub.ClientInfo) {
	if presenceRefused(k.guard, k.c.w, topic) {
		return
	}
	k.c.w.sendRaw(appendWSText(nil, withOp("presence", presenceJSON(topic, clients, nil))))
}

func (k *wsSink) Join(topic string, c hub.ClientInfo) {
	if presenceRefused(k.guard, k.c.w, topic) {
		return
	}
	k.c.w.sendRaw(appendWSText(nil, withOp("join", presenceJSON(topic, nil, &c))))
}

func (k *wsSink) Leave(topic string, c hub.ClientInfo) {
	if presenceRefused(k.guard, k.c.w, topic) {
		return
	}
	k.c.w.sendRaw(appendWSText(nil, withOp("leave", presenceJSON(topic, nil, &c))))
}

// Server-Sent Events.

func (k *sseSink) PresenceInfo() hub.ClientInfo {
	return hub.ClientInfo{Client: k.c.id, User: k.c.identity().User, Transport: "sse"}
}

func (k *sseSink) WatchPresence() bool { return k.c.watch }

func (k *sseSink) event(name string, body []byte) {
	if presenceRefused(k.guard, k.c.w, k.c.topics[k.idx]) {
		return
	}
	k.c.w.sendRaw(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, body))
}

func (k *sseSink) Presence(topic string, clients []hub.ClientInfo) {
	k.event("presence", presenceJSON(topic, clients, nil))
}

func (k *sseSink) Join(topic string, c hub.ClientInfo) { k.event("join", presenceJSON(topic, nil, &c)) }

func (k *sseSink) Leave(topic string, c hub.ClientInfo) {
	k.event("leave", presenceJSON(topic, nil, &c))
}

// STOMP. One session may subscribe to a topic twice, so a client is the session's id and the
// subscription's.

func (k *stompSub) PresenceInfo() hub.ClientInfo {
	return hub.ClientInfo{Client: k.c.id + "/" + k.key, User: k.c.identity().User, Transport: "stomp"}
}

func (k *stompSub) WatchPresence() bool { return k.watch }

func (k *stompSub) presenceFrame(kind string, body []byte) {
	if presenceRefused(k.guard, k.c.w, k.topic) {
		return
	}
	k.c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: []stomp.Header{
		{Key: "destination", Value: k.dest}, {Key: "subscription", Value: k.key},
		{Key: "message-id", Value: k.key + ":presence"}, {Key: "presence", Value: kind},
		{Key: "content-type", Value: "application/json"},
	}, Body: body})
}

func (k *stompSub) Presence(topic string, clients []hub.ClientInfo) {
	k.presenceFrame("presence", presenceJSON(topic, clients, nil))
}

func (k *stompSub) Join(topic string, c hub.ClientInfo) {
	k.presenceFrame("join", presenceJSON(topic, nil, &c))
}

func (k *stompSub) Leave(topic string, c hub.ClientInfo) {
	k.presenceFrame("leave", presenceJSON(topic, nil, &c))
}

// PresenceAnswer is the answer of a presence read: the clients present, oldest first, and
// the distinct users among them.
type PresenceAnswer struct {
	Topic   string           `json:"topic"`
	Clients []hub.ClientInfo `json:"clients"`
	Users   []string         `json:"users"`
}

// NewPresenceAnswer builds the answer for topic from the hub's list.
func NewPresenceAnswer(topic string, clients []hub.ClientInfo) PresenceAnswer {
	a := PresenceAnswer{Topic: topic, Clients: clients, Users: []string{}}
	if a.Clients == nil {
		a.Clients = []hub.ClientInfo{}
	}
	seen := map[string]bool{}
	for _, c := range clients {
		if c.User != "" && !seen[c.User] {
			seen[c.User] = true
			a.Users = append(a.Users, c.User)
		}
	}
	return a
}

// HandlePresence serves GET /api/topics/{topic}/presence, with the permissions of the topic's
// history.
func (s *Server) HandlePresence(w http.ResponseWriter, r *http.Request, topic string) {
	if err := s.canRead(r, topic); err != nil {
		s.WriteError(w, r, err)
		return
	}
	clients, err := s.hub.Presence(topic)
	if err != nil {
		s.WriteError(w, r, PresenceErr(err))
		return
	}
	WriteJSON(w, http.StatusOK, NewPresenceAnswer(topic, clients))
}

// PresenceErr maps the hub's "presence is off" to a 404 with a reason.
func PresenceErr(err error) error {
	if errors.Is(err, hub.ErrPresenceOff) {
		return fmt.Errorf("%w: presence is off on this server (--presence=false)", ErrNotFound)
	}
	return err
}

// presenceRefused runs a subscription's guard before a presence event, as before a
// publication: who is in a room is for those it admits, so a member removed from it hears no
// more joins and leaves (the connection closes, forbidden, at the first one).
func presenceRefused(g Guard, w *writer, topic string) bool {
	if g == nil {
		return false
	}
	return guardRefuses(g, w, &hub.Publication{Topic: topic})
}
