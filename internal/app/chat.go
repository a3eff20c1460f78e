package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// Chat message types. CHAT is the seed scripts' name for TALK. OWNER records an owner change
// in the room's own history, so every node (and a restarted one) agrees on it.
const (
	typeEnter = "ENTER"
	typeTalk  = "TALK"
	typeLeave = "LEAVE"
	typeOwner = "OWNER"
)

// chatRooms keeps each room's membership and owner. The state is folded from the room's
// publications (history first, then live), so it is the same on every node and survives a
// restart with durable history. Which connection entered for whom is node-local: it drives the
// automatic LEAVE when a member's last connection here drops.
type chatRooms struct {
	hub     *hub.Hub
	notify  *notifications
	maxMsg  int
	log     *slog.Logger
	mu      sync.Mutex
	rooms   map[string]*room              // by topic; guarded by mu
	entered map[string]map[*room][]string // connection ID → rooms → members it entered as; guarded by mu
	joins   [64]sync.Mutex                // serialise implicit ENTERs by room and member (seedchat.go)
}

type room struct {
	topic string
	name  string
	ready chan struct{}
	sub   *hub.Subscription
	err   error

	mu      sync.Mutex
	cond    *sync.Cond
	applied hub.Position       // last publication folded in; guarded by mu
	owner   string             // guarded by mu
	members map[string]*member // guarded by mu
}

type member struct {
	Name  string    `json:"user"`
	Since time.Time `json:"since"`
	conns int       // connections on this node that entered as this member
}

func newChatRooms(h *hub.Hub, n *notifications, maxMsg int, log *slog.Logger) *chatRooms {
	return &chatRooms{hub: h, notify: n, maxMsg: maxMsg, log: log,
		rooms: make(map[string]*room), entered: make(map[string]map[*room][]string)}
}

// room returns the tracked state of a room, starting to track it if needed.
func (cr *chatRooms) room(ctx context.Context, topic string) (*room, error) {
	cr.mu.Lock()
	r := cr.rooms[topic]
	if r == nil {
		r = &room{topic: topic, name: strings.TrimPrefix(topic, "chat/"), ready: make(chan struct{}), members: make(map[string]*member)}
		r.cond = sync.NewCond(&r.mu)
		cr.rooms[topic] = r
		cr.mu.Unlock()
		sub, _, err := cr.hub.Subscribe(context.WithoutCancel(ctx), topic, r, hub.ReadOptions{Recover: true})
		if err != nil {
			r.err = err
			cr.mu.Lock()
			delete(cr.rooms, topic)
			cr.mu.Unlock()
		} else {
			r.sub = sub
			sub.Start()
		}
		close(r.ready)
	} else {
		cr.mu.Unlock()
	}
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r, r.err
}

// Deliver folds a publication of the room into its state.
func (r *room) Deliver(p *hub.Publication) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Epoch != r.applied.Epoch && r.applied.Epoch != "" {
		r.members, r.owner = make(map[string]*member), "" // history was lost
	}
	r.applied = hub.Position{Offset: p.Offset, Epoch: p.Epoch}
	switch p.Type {
	case typeEnter:
		if _, ok := r.members[p.Sender]; !ok {
			r.members[p.Sender] = &member{Name: p.Sender, Since: p.Time}
		}
		if r.owner == "" {
			r.owner = p.Sender
		}
	case typeLeave:
		delete(r.members, p.Sender)
	case typeOwner:
		var d struct {
			Owner string `json:"owner"`
		}
		if json.Unmarshal(p.Data, &d) == nil && d.Owner != "" {
			r.owner = d.Owner
		}
	}
	r.cond.Broadcast()
}

// waitApplied waits until the room's state includes publication p (it arrives through the
// room's subscription; with a remote broker that can lag the publish answer a little).
func (r *room) waitApplied(p *hub.Publication) {
	deadline := time.Now().Add(2 * time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for !(r.applied.Epoch == p.Epoch && r.applied.Offset >= p.Offset) && time.Now().Before(deadline) {
		t := time.AfterFunc(50*time.Millisecond, r.cond.Broadcast)
		r.cond.Wait()
		t.Stop()
	}
}

func (r *room) isMember(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.members[name]
	return ok
}

// chatFields are the fields of a chat message the server looks at; the rest passes through.
type chatFields struct {
	Type    string `json:"type"`
	Sender  string `json:"sender"`
	Message string `json:"message"`
}

// publish applies the chat rules: ENTER joins, TALK needs membership and notifies the owner,
// LEAVE needs membership.
func (cr *chatRooms) publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if len(req.Data) > cr.maxMsg {
		return nil, fmt.Errorf("%w: chat message of %d bytes, at most %d", hub.ErrTooLarge, len(req.Data), cr.maxMsg)
	}
	if err := hub.ValidateTopic(req.Topic); err != nil {
		return nil, err
	}
	typ, name, f, err := classify(c, req)
	if err != nil {
		return nil, err
	}
	r, err := cr.room(ctx, req.Topic)
	if err != nil {
		return nil, err
	}
	switch typ {
	case typeTalk:
		if !r.isMember(name) {
			return nil, fmt.Errorf("%w: %s has not entered %s (send ENTER first)", transport.ErrForbidden, name, req.Topic)
		}
	case typeLeave:
		if !r.isMember(name) {
			return nil, fmt.Errorf("%w: LEAVE without ENTER: %s is not in %s", transport.ErrBadRequest, name, req.Topic)
		}
	}
	req.Type, req.Sender = typ, name
	p, err := cr.hub.Publish(ctx, req)
	if err != nil {
		return nil, err
	}
	r.waitApplied(p)
	switch typ {
	case typeEnter:
		cr.noteEntered(c, r, name)
	case typeTalk:
		r.mu.Lock()
		owner := r.owner
		r.mu.Unlock()
		if owner != "" && owner != name {
			cr.notify.send(ctx, owner, p, f.Message)
		}
	}
	return p, nil
}

// classify returns a chat message's type (from the request, else the data's own "type"; CHAT
// means TALK) and the member it speaks for: the logged-in user, or in open dev mode the data's
// "sender".
func classify(c transport.Client, req hub.PublishRequest) (typ, name string, f chatFields, err error) {
	_ = json.Unmarshal(req.Data, &f) // non-object data is a TALK with no fields
	typ = strings.ToUpper(req.Type)
	if typ == "" {
		typ = strings.ToUpper(f.Type)
	}
	switch typ {
	case "", "CHAT", "MESSAGE":
		typ = typeTalk
	case typeEnter, typeTalk, typeLeave:
	default:
		return "", "", f, fmt.Errorf("%w: chat type %q: want ENTER, TALK or LEAVE", transport.ErrBadRequest, typ)
	}
	name = c.User
	if name == "" {
		name = f.Sender
	}
	if name == "" {
		name = "anonymous"
	}
	return typ, name, f, nil
}

// noteEntered records that connection c entered r as name, so that its drop can LEAVE for it.
func (cr *chatRooms) noteEntered(c transport.Client, r *room, name string) {
	if c.ID == "" {
		return
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	byRoom := cr.entered[c.ID]
	if byRoom == nil {
		byRoom = make(map[*room][]string)
		cr.entered[c.ID] = byRoom
	}
	if slices.Contains(byRoom[r], name) {
		return
	}
	byRoom[r] = append(byRoom[r], name)
	r.mu.Lock()
	if m := r.members[name]; m != nil {
		m.conns++
	}
	r.mu.Unlock()
}

// disconnected sends LEAVE for every member whose last connection on this node was c.
func (cr *chatRooms) disconnected(c transport.Client) {
	cr.mu.Lock()
	byRoom := cr.entered[c.ID]
	delete(cr.entered, c.ID)
	cr.mu.Unlock()
	for r, names := range byRoom {
		for _, name := range names {
			r.mu.Lock()
			m := r.members[name]
			last := false
			if m != nil {
				m.conns--
				last = m.conns <= 0
			}
			r.mu.Unlock()
			if !last {
				continue
			}
			data, _ := json.Marshal(map[string]string{"type": typeLeave, "sender": name, "roomId": r.name, "reason": "disconnected"})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cr.hub.Publish(ctx, hub.PublishRequest{Topic: r.topic, Type: typeLeave, Sender: name, Data: data})
			cancel()
			if err != nil && !errors.Is(err, hub.ErrClosed) {
				cr.log.Warn("automatic LEAVE failed", "room", r.topic, "member", name, "err", err)
			}
		}
	}
}

// roomInfo is the answer of GET /api/chat/{room}/members.
type roomInfo struct {
	Room    string       `json:"room"`
	Topic   string       `json:"topic"`
	Owner   string       `json:"owner"`
	Offset  uint64       `json:"offset"`
	Epoch   string       `json:"epoch"`
	Members []memberInfo `json:"members"`
}

type memberInfo struct {
	User   string `json:"user"`
	Since  string `json:"since"`  // when the member entered, in the protocol's time format
	Online bool   `json:"online"` // has a connection on this node that entered as this member
}

func (cr *chatRooms) info(ctx context.Context, name string) (roomInfo, error) {
	topic := "chat/" + name
	if err := hub.ValidateTopic(topic); err != nil {
		return roomInfo{}, err
	}
	r, err := cr.room(ctx, topic)
	if err != nil {
		return roomInfo{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied.Offset == 0 {
		return roomInfo{}, fmt.Errorf("%w: no room %q (nobody has entered it)", transport.ErrNotFound, name)
	}
	ri := roomInfo{Room: name, Topic: topic, Owner: r.owner, Offset: r.applied.Offset, Epoch: r.applied.Epoch, Members: []memberInfo{}}
	for _, m := range r.members {
		ri.Members = append(ri.Members, memberInfo{User: m.Name, Since: m.Since.UTC().Format(hub.TimeFormat), Online: m.conns > 0})
	}
	slices.SortFunc(ri.Members, func(a, b memberInfo) int { return strings.Compare(a.User, b.User) })
	return ri, nil
}

// setOwner records a new owner in the room's history. Only the current owner may hand the room
// over (anyone may claim a room without owner); in open dev mode anyone may.
func (cr *chatRooms) setOwner(ctx context.Context, c transport.Client, required bool, name, owner string) (*hub.Publication, error) {
	if owner == "" {
		return nil, fmt.Errorf("%w: body must be {\"owner\": \"user\"}", transport.ErrBadRequest)
	}
	topic := "chat/" + name
	if err := hub.ValidateTopic(topic); err != nil {
		return nil, err
	}
	r, err := cr.room(ctx, topic)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	cur := r.owner
	r.mu.Unlock()
	if required && cur != "" && cur != c.User {
		return nil, fmt.Errorf("%w: only the owner (%s) may hand over %s", transport.ErrForbidden, cur, topic)
	}
	data, _ := json.Marshal(map[string]string{"type": typeOwner, "owner": owner, "by": c.User})
	p, err := cr.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Type: typeOwner, Sender: c.User, Data: data})
	if err != nil {
		return nil, err
	}
	r.waitApplied(p)
	return p, nil
}
