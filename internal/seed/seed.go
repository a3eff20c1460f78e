// Package seed serves the seed-compatible routes: the paths, methods, status codes and payloads of the seed servers
// (Spring, and the k6 and JMeter scripts written against them), served through the
// transports' hooks for an application's own dialect (transport.RawSocket, HandleDataSSE,
// HandleDataLongPoll, HandlePublishTo, STOMPDests). What the seed servers meant lives here
// alone: their topic names (location/{group}, chat/{room}), their implicit rule (a chat user's
// first message joins the room), the positions they generated for an empty body, and their
// timeouts.
package seed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/appproxy"
	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/location"
	"github.com/rtlab/rtlab/internal/transport"
)

// Config configures the seed-compatible routes. Zero values mean the defaults given.
type Config struct {
	LongTimeout time.Duration // wait of GET /location/long/{group}; zero means 10 s
	// SSETimeout ends each GET /location/sse/connect stream cleanly after this long, as
	// Spring's SseEmitter did (seed scripts rely on it); zero means 30 s, negative never.
	SSETimeout time.Duration
}

// DefaultConfig is what the zero fields of Config mean (the flags' defaults).
func DefaultConfig() Config {
	return Config{LongTimeout: 10 * time.Second, SSETimeout: 30 * time.Second}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.LongTimeout <= 0 {
		c.LongTimeout = d.LongTimeout
	}
	if c.SSETimeout == 0 {
		c.SSETimeout = d.SSETimeout
	}
}

// Policy is what the seed routes publish through: the transports' policy, with its check of a
// batch (a STOMP transaction).
type Policy interface {
	Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error)
	CheckPublish(ctx context.Context, c transport.Client, reqs []hub.PublishRequest) error
	AuthRequired() bool
}

// Routes are the seed routes of one server.
type Routes struct {
	cfg  Config
	p    Policy
	chat *chat.Rooms
	app  *appproxy.Dests // SENDs to the application prefix (/app); nil without
}

// New makes the seed routes, which publish through p; a chat user's first message joins the
// room in rooms.
func New(cfg Config, p Policy, rooms *chat.Rooms, app *appproxy.Dests) *Routes {
	cfg.fill()
	return &Routes{cfg: cfg, p: p, chat: rooms, app: app}
}

// Dests are the seed scripts' STOMP destinations, and the application prefix's.
func (s *Routes) Dests() transport.STOMPDests { return seedDests{s} }

// Register serves the seed routes on mux; cur answers a group's current positions.
func (s *Routes) Register(mux *http.ServeMux, tr *transport.Server, cur http.HandlerFunc) {
	cfg := s.cfg
	mux.HandleFunc("GET /cur/{group}", cur)
	mux.HandleFunc("GET /location/cur/{group}", cur)
	mux.HandleFunc("GET /location/long/{group}", func(w http.ResponseWriter, r *http.Request) {
		tr.HandleDataLongPoll(w, r, location.Topic(r.PathValue("group")), cfg.LongTimeout)
	})
	mux.HandleFunc("POST /location/long/{group}/notify", func(w http.ResponseWriter, r *http.Request) {
		tr.HandlePublishTo(w, r, location.Topic(r.PathValue("group")), generatedPosition)
	})
	mux.HandleFunc("GET /location/sse/connect", func(w http.ResponseWriter, r *http.Request) {
		tr.HandleDataSSE(w, r, location.Topic(groupParam(r)), cfg.SSETimeout)
	})
	mux.HandleFunc("POST /location/sse/share", func(w http.ResponseWriter, r *http.Request) {
		tr.HandlePublishTo(w, r, location.Topic(groupParam(r)), generatedPosition)
	})
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		topic := location.Topic(groupParam(r))
		if err := hub.ValidateTopic(topic); err != nil {
			tr.WriteError(w, r, err)
			return
		}
		tr.HandleRawWS(w, r, &groupSocket{s: s, topic: topic})
	})
	mux.HandleFunc("GET /location", tr.HandleSTOMP) // with seedDests' destinations
	mux.HandleFunc("GET /chat", func(w http.ResponseWriter, r *http.Request) {
		tr.HandleRawWS(w, r, &chatSocket{s: s})
	})
	mux.HandleFunc("GET /stomp/chat", tr.HandleSTOMP)
}

// groupParam is the group a seed route names with ?group=, group 0 when it names none.
func groupParam(r *http.Request) string {
	if g := r.URL.Query().Get("group"); g != "" {
		return g
	}
	return "0"
}

// generatedPosition is what the seed routes publish for an empty body, as the seed servers did.
func generatedPosition() json.RawMessage {
	return fmt.Appendf(nil, `{"x":%.2f,"y":%.2f}`, rand.Float64()*100, rand.Float64()*100)
}

// seedDests are the seed scripts' STOMP destinations: SUBSCRIBE to /sub/location/{g} and
// /sub/chat/{room}, SEND to /pub/share/{g} and /pub/chat/message/{room}. An empty SEND
// publishes a generated position; a SEND to a room joins it first (Join).
type seedDests struct{ s *Routes }

var (
	_ transport.STOMPDests = seedDests{}
	_ transport.RawSocket  = (*groupSocket)(nil)
	_ transport.RawSocket  = (*chatSocket)(nil)
)

func (d seedDests) Dest(dest string, send bool) (transport.STOMPRoute, bool) {
	if d.s.app != nil {
		if r, ok := d.s.app.Dest(dest, send); ok {
			return r, true
		}
	}
	if send {
		if g, ok := strings.CutPrefix(dest, "/pub/share/"); ok {
			return transport.STOMPRoute{Topic: location.Topic(g), Publish: d.publish}, true
		}
		if room, ok := strings.CutPrefix(dest, "/pub/chat/message/"); ok {
			return transport.STOMPRoute{Topic: "chat/" + room, Publish: d.publishChat, Check: d.checkChat}, true
		}
		return transport.STOMPRoute{}, false
	}
	if g, ok := strings.CutPrefix(dest, "/sub/location/"); ok {
		return transport.STOMPRoute{Topic: location.Topic(g)}, true
	}
	if room, ok := strings.CutPrefix(dest, "/sub/chat/"); ok {
		return transport.STOMPRoute{Topic: "chat/" + room}, true
	}
	return transport.STOMPRoute{}, false
}

func (d seedDests) Forms(send bool) string {
	app := ""
	if d.s.app != nil {
		app = d.s.app.Form(send)
	}
	if send {
		return app + "/pub/share/{g} or /pub/chat/message/{room}"
	}
	return app + "/user/queue/{name} (the user's own), /sub/location/{g} or /sub/chat/{room}"
}

func (d seedDests) publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if req.Data == nil {
		req.Data = generatedPosition()
	}
	return d.s.p.Publish(ctx, c, req)
}

func (d seedDests) publishChat(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if req.Data == nil {
		req.Data = generatedPosition()
	}
	if err := d.s.Join(ctx, c, req); err != nil {
		return nil, err
	}
	return d.s.p.Publish(ctx, c, req)
}

// checkChat refuses what publishChat would: a TALK counts as its member's ENTER first, as
// publishChat joins the room for it.
func (d seedDests) checkChat(ctx context.Context, c transport.Client, req hub.PublishRequest) error {
	if d.s.p.AuthRequired() && c.User == "" {
		return fmt.Errorf("%w: a chat room is joined by a logged-in user; send a token", transport.ErrUnauthorized)
	}
	if req.Data == nil {
		req.Data = generatedPosition()
	}
	return d.s.p.CheckPublish(ctx, c, chat.WithImplicitEnter(c, req))
}

// groupSocket is the seed raw socket /ws?group=G: it follows the group's locations, and each
// frame that is not a protocol op is a position shared with the group (text that is not JSON
// as a JSON string).
type groupSocket struct {
	s     *Routes
	topic string
}

func (g *groupSocket) Open(ctx context.Context, c *transport.RawConn) {
	if err := c.Subscribe(ctx, g.topic); err != nil {
		c.Error(err, g.topic)
	}
}

func (g *groupSocket) Frame(ctx context.Context, c *transport.RawConn, msg []byte) {
	if c.Op(ctx, msg) {
		return
	}
	g.s.publishRaw(ctx, c, hub.PublishRequest{Topic: g.topic, Data: transport.AsJSON(msg), Sender: c.Client().User}, false)
}

// chatSocket is the seed raw chat /chat: each frame is a chat message {type, sender, message,
// roomId}; the first names the room, which the socket then follows, and joins it (Join).
type chatSocket struct {
	s    *Routes
	room string // the topic of the room joined; empty before the first message
}

// chatMessage is the seed chat's message shape.
type chatMessage struct {
	Type   string          `json:"type"`
	Sender string          `json:"sender"`
	RoomID json.RawMessage `json:"roomId"`
}

func (s *chatSocket) Open(context.Context, *transport.RawConn) {}

func (s *chatSocket) Frame(ctx context.Context, c *transport.RawConn, msg []byte) {
	var m chatMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		c.Error(fmt.Errorf("%w: chat message must be a JSON object {type, sender, message, roomId}: %v", transport.ErrBadRequest, err), "")
		return
	}
	room := string(bytes.Trim(m.RoomID, `"`))
	if room == "" || room == "null" {
		if s.room == "" {
			c.Error(fmt.Errorf("%w: the first message needs a roomId", transport.ErrBadRequest), "")
			return
		}
	} else if s.room == "" {
		topic := "chat/" + room
		if err := c.Subscribe(ctx, topic); err != nil {
			c.Error(err, topic)
			return
		}
		s.room = topic
	}
	topic := s.room
	if room != "" && room != "null" {
		topic = "chat/" + room
	}
	sender := m.Sender
	if u := c.Client().User; u != "" {
		sender = u
	}
	s.s.publishRaw(ctx, c, hub.PublishRequest{Topic: topic, Data: msg, Type: m.Type, Sender: sender}, true)
}

// publishRaw publishes req for a raw socket's client within its rate, joining the room first
// when join is set, and tells the client of a refusal.
func (s *Routes) publishRaw(ctx context.Context, c *transport.RawConn, req hub.PublishRequest, join bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.Allow()
	if err == nil && join {
		err = s.Join(ctx, c.Client(), req)
	}
	if err == nil {
		_, err = s.p.Publish(ctx, c.Client(), req)
	}
	if err != nil {
		c.Error(err, req.Topic)
	}
}

// Join gives the seed chat routes the seed servers' rule: a user's first message to a room
// joins it. The ENTER is published as any ENTER is (members, history and the owner follow
// from it), by the same member the message will speak for: the logged-in user, or in open dev
// mode the message's "sender".
func (s *Routes) Join(ctx context.Context, c transport.Client, req hub.PublishRequest) error {
	if s.p.AuthRequired() && c.User == "" {
		return fmt.Errorf("%w: a chat room is joined by a logged-in user; send a token", transport.ErrUnauthorized)
	}
	return s.chat.JoinImplicitly(ctx, c, req)
}
