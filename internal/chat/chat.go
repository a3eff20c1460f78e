// Package chat applies the chat rules: rooms, their members and owners, members-only rooms and
// the token grants that name them, the views that guard subscriptions, and the room routes.
package chat

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

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/notify"
	"github.com/rtlab/rtlab/internal/shrink"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
)

// Chat message types. CHAT is the seed scripts' name for TALK. The server publishes the others
// when a room's state changes, so members see it and history shows it.
const (
	typeEnter   = "ENTER"
	typeTalk    = "TALK"
	typeLeave   = "LEAVE"
	typeOwner   = "OWNER"   // {owner, by}: the room was handed over
	typePrivate = "PRIVATE" // {private, by}: the room became members-only (or open again)
	typeInvite  = "INVITE"  // {user, by}: the owner admitted a user to a members-only room
	typeRemove  = "REMOVE"  // {user, by}: the owner removed a user from the room
)

// kindRoom is the state kind of room records, named by topic.
const kindRoom = "room"

// roomRecord is a room's durable state: who owns it, who is in it, and who may be. It lives in
// the shared state store, never in the room's history, so an ENTER/LEAVE flood that pushes
// the room's first ENTER out of history changes nothing, and every node reads the same.
type roomRecord struct {
	Owner   string           `json:"owner"`
	Private bool             `json:"private,omitempty"` // members-only (also by --private-rooms)
	Members map[string]int64 `json:"members"`           // entered users → since (Unix ms)
	Invited []string         `json:"invited,omitempty"` // admitted by the owner (members-only rooms)
	Created int64            `json:"created"`           // Unix ms
}

// admits reports whether user may be in the room (and read it): anyone in an open room; in a
// members-only room its owner, members, invited users and those the backend names (grants).
func (r *roomRecord) admits(user string, g *auth.Grants, topic string, private bool) bool {
	if !private {
		return true
	}
	if user == "" {
		return false
	}
	if user == r.Owner || slices.Contains(r.Invited, user) {
		return true
	}
	if _, ok := r.Members[user]; ok {
		return true
	}
	return g != nil && g.InRoom(topic)
}

// Config bounds the chat rooms.
type Config struct {
	MaxMsg     int           // largest chat message, bytes
	MaxMembers int           // members (and invited users) per room
	MaxRooms   int           // rooms one connection may have entered
	Private    []string      // topic prefixes of rooms that are members-only from the start
	Idle       time.Duration // a room view no subscription used for this long is dropped
}

// Rooms applies the chat rules. Room state is in the store; this node keeps only which of
// its connections entered which rooms (for the automatic LEAVE) and the views its
// subscriptions' guards read.
type Rooms struct {
	hub    *hub.Hub
	store  state.Store
	notify *notify.Notes
	cfg    Config
	log    *slog.Logger

	mu      sync.Mutex
	entered map[string]map[string][]string // connection ID → topic → names it entered as; guarded by mu
	online  map[[2]string]int              // {topic, name} → connections here that entered; guarded by mu
	views   shrink.Map[string, *roomView]  // by topic; guarded by mu
	joins   [64]sync.Mutex                 // serialise implicit ENTERs by room and member (join.go)
}

// New applies the chat rules to h's chat/ topics, with room records in st.
func New(h *hub.Hub, st state.Store, n *notify.Notes, cfg Config, log *slog.Logger) *Rooms {
	return &Rooms{hub: h, store: st, notify: n, cfg: cfg, log: log,
		entered: make(map[string]map[string][]string), online: make(map[[2]string]int), views: shrink.NewMap[string, *roomView](shrink.Floor)}
}

// privateByPrefix reports whether --private-rooms makes topic members-only.
func (cr *Rooms) privateByPrefix(topic string) bool {
	for _, p := range cr.cfg.Private {
		if strings.HasPrefix(topic, p) {
			return true
		}
	}
	return false
}

// load reads a room's record; ok is false when nobody ever entered the room. It keeps nothing.
func (cr *Rooms) load(ctx context.Context, topic string) (rec roomRecord, ok bool, err error) {
	r, err := cr.store.Get(ctx, kindRoom, topic)
	if err != nil {
		return rec, false, fmt.Errorf("%w: room state: %v", hub.ErrNotReady, err)
	}
	if r.Rev == 0 {
		return rec, false, nil
	}
	if err := json.Unmarshal(r.Value, &rec); err != nil {
		return rec, false, fmt.Errorf("room state of %s: %w", topic, err)
	}
	return rec, true, nil
}

// update changes a room's record by compare-and-set; fn gets exists=false for a new room and
// may return state.ErrUnchanged to leave it alone.
func (cr *Rooms) update(ctx context.Context, topic string, fn func(rec *roomRecord, exists bool) error) (roomRecord, error) {
	var out roomRecord
	v, err := state.Update(ctx, cr.store, kindRoom, topic, func(cur []byte) ([]byte, error) {
		var rec roomRecord
		exists := cur != nil
		if exists {
			if err := json.Unmarshal(cur, &rec); err != nil {
				return nil, fmt.Errorf("room state of %s: %w", topic, err)
			}
		}
		if rec.Members == nil {
			rec.Members = make(map[string]int64)
		}
		if err := fn(&rec, exists); err != nil {
			out = rec
			return nil, err
		}
		return json.Marshal(rec)
	})
	if err != nil && !errors.Is(err, state.ErrUnchanged) {
		var tle, conflict = errors.Is(err, state.ErrTooLarge), errors.Is(err, state.ErrConflict)
		if tle || conflict {
			return out, fmt.Errorf("%w: room state of %s: %v", hub.ErrNotReady, topic, err)
		}
		return out, err
	}
	if v != nil {
		_ = json.Unmarshal(v, &out)
	}
	return out, nil
}

// chatFields are the fields of a chat message the server looks at; the rest passes through.
type chatFields struct {
	Type    string `json:"type"`
	Sender  string `json:"sender"`
	Message string `json:"message"`
}

// GrantsOf returns the token grants of a client (nil when it has none).
func GrantsOf(c transport.Client) *auth.Grants {
	if g, ok := c.Grants.(*auth.Grants); ok {
		return g
	}
	return nil
}

// Publish applies the chat rules: ENTER joins (creating the room, owned by whoever enters
// first), TALK needs membership and notifies the owner, LEAVE needs membership.
func (cr *Rooms) Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	if len(req.Data) > cr.cfg.MaxMsg {
		return nil, fmt.Errorf("%w: chat message of %d bytes, at most %d", hub.ErrTooLarge, len(req.Data), cr.cfg.MaxMsg)
	}
	if err := hub.ValidateTopic(req.Topic); err != nil {
		return nil, err
	}
	typ, name, f, err := classify(c, req)
	if err != nil {
		return nil, err
	}
	topic := req.Topic
	var owner string
	switch typ {
	case typeEnter:
		if n := cr.enteredBy(c.ID, topic); n >= cr.cfg.MaxRooms {
			return nil, fmt.Errorf("%w: this connection is in %d rooms, at most %d (--chat-max-rooms)", transport.ErrForbidden, n, cr.cfg.MaxRooms)
		}
		rec, err := cr.enter(ctx, c, topic, name)
		if err != nil {
			return nil, err
		}
		owner = rec.Owner
	case typeTalk:
		rec, ok, err := cr.load(ctx, topic)
		if err != nil {
			return nil, err
		}
		if _, in := rec.Members[name]; !ok || !in {
			return nil, fmt.Errorf("%w: %s has not entered %s (send ENTER first)", transport.ErrForbidden, name, topic)
		}
		owner = rec.Owner
	case typeLeave:
		if _, err := cr.update(ctx, topic, func(rec *roomRecord, exists bool) error {
			if _, in := rec.Members[name]; !exists || !in {
				return fmt.Errorf("%w: LEAVE without ENTER: %s is not in %s", transport.ErrBadRequest, name, topic)
			}
			delete(rec.Members, name)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	req.Type, req.Sender = typ, name
	p, err := cr.hub.Publish(ctx, req)
	if err != nil {
		return nil, err
	}
	switch typ {
	case typeEnter:
		cr.track(c.ID, topic, name)
	case typeTalk:
		if owner != "" && owner != name {
			cr.notify.Send(ctx, owner, p, f.Message)
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
		name = f.Sender // open dev mode, anonymous: the data names the sender
	}
	if name == "" {
		name = "anonymous"
	}
	return typ, name, f, nil
}

// enter records name as a member of topic, creating the room (owned by name) when it is new.
// A members-only room admits only its owner, invited users and those the backend names. Only
// the backend creates one (a token naming its owner in rtlab.own, or the server API): a first
// ENTER would otherwise let anyone squat a name the backend will hand out.
func (cr *Rooms) enter(ctx context.Context, c transport.Client, topic, name string) (roomRecord, error) {
	g := GrantsOf(c)
	return cr.update(ctx, topic, func(rec *roomRecord, exists bool) error {
		changed, err := cr.admitEnter(rec, exists, g, topic, name)
		if err == nil && !changed {
			return state.ErrUnchanged
		}
		return err
	})
}

// admitEnter applies name's ENTER to the room's record (exists: there was one), or refuses it;
// changed says whether rec changed. CheckPublish runs it on a copy, so a COMMIT refuses what
// enter would.
func (cr *Rooms) admitEnter(rec *roomRecord, exists bool, g *auth.Grants, topic, name string) (changed bool, err error) {
	byClaim := g != nil && g.InRoom(topic)
	owns := g != nil && g.Owns(topic)
	switch {
	case !exists && (byClaim || cr.privateByPrefix(topic)) && !owns:
		return false, fmt.Errorf("%w: %s is members-only and does not exist yet: the application's backend creates it (a token naming its owner in rtlab.own, or POST /api/server/rooms)", transport.ErrForbidden, topic)
	case !exists:
		*rec = roomRecord{Owner: name, Members: map[string]int64{}, Private: byClaim, Created: time.Now().UnixMilli()}
	case byClaim && !rec.Private && owns:
		rec.claim(name) // an open room of a name the backend owns: the backend's word wins
	case byClaim && !rec.Private:
		return false, fmt.Errorf("%w: %s is named members-only by your token but is an open room (owner %s): the backend's owner takes it over (rtlab.own, or POST /api/server/rooms)", transport.ErrForbidden, topic, rec.Owner)
	}
	private := rec.Private || cr.privateByPrefix(topic)
	if !rec.admits(name, g, topic, private) {
		return false, fmt.Errorf("%w: %s is members-only; its owner (%s) may invite %s", transport.ErrForbidden, topic, rec.Owner, name)
	}
	changed = !exists
	if _, in := rec.Members[name]; !in {
		if len(rec.Members) >= cr.cfg.MaxMembers {
			return false, fmt.Errorf("%w: %s has %d members, at most %d", transport.ErrForbidden, topic, len(rec.Members), cr.cfg.MaxMembers)
		}
		if rec.Members == nil {
			rec.Members = map[string]int64{}
		}
		rec.Members[name] = time.Now().UnixMilli()
		changed = true
	}
	return changed, nil
}

// Create makes chat/{name} a members-only room of owner with invited users, as the backend
// says (the server API): a new room, or one that was open, whose members are then only these.
func (cr *Rooms) Create(ctx context.Context, name, owner string, invited []string) error {
	topic := "chat/" + name
	if err := hub.ValidateTopic(topic); err != nil {
		return err
	}
	if len(invited) > cr.cfg.MaxMembers {
		return fmt.Errorf("%w: %d invited users, at most %d", transport.ErrBadRequest, len(invited), cr.cfg.MaxMembers)
	}
	for _, u := range append([]string{owner}, invited...) {
		if err := auth.ValidUser(u); err != nil {
			return fmt.Errorf("%w: %v", transport.ErrBadRequest, err)
		}
	}
	_, err := cr.update(ctx, topic, func(rec *roomRecord, exists bool) error {
		if !exists {
			*rec = roomRecord{Members: map[string]int64{}, Created: time.Now().UnixMilli()}
		} else if rec.Private && rec.Owner == owner {
			rec.Invited = slices.Compact(slices.Sorted(slices.Values(append(rec.Invited, invited...))))
			if len(rec.Invited) > cr.cfg.MaxMembers {
				return fmt.Errorf("%w: %s would have %d invited users, at most %d", transport.ErrForbidden, topic, len(rec.Invited), cr.cfg.MaxMembers)
			}
			return nil
		}
		rec.claim(owner)
		rec.Invited = slices.Compact(slices.Sorted(slices.Values(invited)))
		return nil
	})
	return err
}

// claim makes the room members-only and owner's alone, as the backend says: whoever was in it
// as an open room is not admitted unless the backend names them too.
func (r *roomRecord) claim(owner string) {
	r.Owner, r.Private, r.Invited = owner, true, nil
	clear(r.Members)
}

// makePrivate makes the room members-only, inviting whoever is in it now.
func (r *roomRecord) makePrivate() {
	r.Private = true
	for m := range r.Members {
		if m != r.Owner && !slices.Contains(r.Invited, m) {
			r.Invited = append(r.Invited, m)
		}
	}
	slices.Sort(r.Invited)
}

// enteredBy is how many rooms other than topic connection connID has entered (0 for plain
// HTTP requests, which enter for no connection).
func (cr *Rooms) enteredBy(connID, topic string) int {
	if connID == "" {
		return 0
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	byTopic := cr.entered[connID]
	if _, in := byTopic[topic]; in {
		return 0
	}
	return len(byTopic)
}

// track counts a connection that entered topic as name, for the automatic LEAVE.
func (cr *Rooms) track(connID, topic, name string) {
	if connID == "" {
		return
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	byTopic := cr.entered[connID]
	if byTopic == nil {
		byTopic = make(map[string][]string)
		cr.entered[connID] = byTopic
	}
	if !slices.Contains(byTopic[topic], name) {
		byTopic[topic] = append(byTopic[topic], name)
		cr.online[[2]string{topic, name}]++
	}
}

// Disconnected sends LEAVE for every member whose last connection on this node was c.
func (cr *Rooms) Disconnected(c transport.Client) {
	cr.mu.Lock()
	byTopic := cr.entered[c.ID]
	delete(cr.entered, c.ID)
	var last [][2]string
	for topic, names := range byTopic {
		for _, name := range names {
			k := [2]string{topic, name}
			if cr.online[k]--; cr.online[k] <= 0 {
				delete(cr.online, k)
				last = append(last, k)
			}
		}
	}
	cr.mu.Unlock()
	for _, k := range last {
		topic, name := k[0], k[1]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cr.update(ctx, topic, func(rec *roomRecord, exists bool) error {
			if _, in := rec.Members[name]; !exists || !in {
				return state.ErrUnchanged
			}
			delete(rec.Members, name)
			return nil
		})
		if err == nil {
			data, _ := json.Marshal(map[string]string{"type": typeLeave, "sender": name, "roomId": strings.TrimPrefix(topic, "chat/"), "reason": "disconnected"})
			_, err = cr.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Type: typeLeave, Sender: name, Data: data})
		}
		cancel()
		if err != nil && !errors.Is(err, hub.ErrClosed) {
			cr.log.Warn("automatic LEAVE failed", "room", topic, "member", name, "err", err)
		}
	}
}

// isOnline reports whether a connection on this node entered topic as name.
func (cr *Rooms) isOnline(topic, name string) bool { return cr.Conns(topic, name) > 0 }

// Conns is how many connections on this node entered topic as name.
func (cr *Rooms) Conns(topic, name string) int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.online[[2]string{topic, name}]
}

// RoomInfo is the answer of GET /api/chat/{room}/members.
type RoomInfo struct {
	Room    string       `json:"room"`
	Topic   string       `json:"topic"`
	Owner   string       `json:"owner"`
	Private bool         `json:"private"`
	Offset  uint64       `json:"offset"`
	Epoch   string       `json:"epoch"`
	Members []MemberInfo `json:"members"`
	Invited []string     `json:"invited,omitempty"` // members-only rooms
}

type MemberInfo struct {
	User   string `json:"user"`
	Since  string `json:"since"`  // when the member entered, in the protocol's time format
	Online bool   `json:"online"` // has a connection on this node that entered as this member
}

// Info answers the member list of a room. A room nobody entered is a 404 that leaves nothing
// behind: no subscription, no cache entry.
func (cr *Rooms) Info(ctx context.Context, name string) (RoomInfo, error) {
	topic := "chat/" + name
	rec, ok, err := cr.load(ctx, topic)
	if err != nil {
		return RoomInfo{}, err
	}
	if !ok {
		return RoomInfo{}, fmt.Errorf("%w: no room %q (nobody has entered it)", transport.ErrNotFound, name)
	}
	ri := RoomInfo{Room: name, Topic: topic, Owner: rec.Owner, Private: rec.Private || cr.privateByPrefix(topic), Members: []MemberInfo{}, Invited: rec.Invited}
	if res, err := cr.hub.Read(ctx, topic, hub.ReadOptions{}); err == nil {
		ri.Offset, ri.Epoch = res.Top.Offset, res.Top.Epoch
	}
	for m, since := range rec.Members {
		ri.Members = append(ri.Members, MemberInfo{User: m, Since: time.UnixMilli(since).UTC().Format(hub.TimeFormat), Online: cr.isOnline(topic, m)})
	}
	slices.SortFunc(ri.Members, func(a, b MemberInfo) int { return strings.Compare(a.User, b.User) })
	return ri, nil
}

// ownerChange is one of the owner's actions on a room (POST /api/chat/{room}/...).
type ownerChange struct {
	typ   string // typeOwner, typePrivate, typeInvite, typeRemove
	user  string // the new owner, or the user invited or removed
	value bool   // typePrivate: members-only or not
}

// change applies an owner's action to a room and publishes it. Only the owner may act (in
// open dev mode, anyone), and only on a room somebody entered: nobody can claim a room that
// does not exist yet.
func (cr *Rooms) change(ctx context.Context, c transport.Client, required bool, name string, ch ownerChange) (*hub.Publication, roomRecord, error) {
	topic := "chat/" + name
	if err := hub.ValidateTopic(topic); err != nil {
		return nil, roomRecord{}, err
	}
	if ch.typ != typePrivate {
		if err := auth.ValidUser(ch.user); err != nil {
			return nil, roomRecord{}, fmt.Errorf("%w: %v", transport.ErrBadRequest, err)
		}
	}
	rec, err := cr.update(ctx, topic, func(rec *roomRecord, exists bool) error {
		if !exists {
			return fmt.Errorf("%w: no room %q (nobody has entered it, so nobody can own it)", transport.ErrNotFound, name)
		}
		if required && rec.Owner != c.User {
			return fmt.Errorf("%w: only the owner (%s) may change %s", transport.ErrForbidden, rec.Owner, topic)
		}
		switch ch.typ {
		case typeOwner:
			rec.Owner = ch.user
		case typePrivate:
			if ch.value && !rec.Private {
				rec.makePrivate()
			} else if !ch.value {
				rec.Private, rec.Invited = false, nil
			}
		case typeInvite:
			if slices.Contains(rec.Invited, ch.user) {
				return state.ErrUnchanged
			}
			if len(rec.Invited) >= cr.cfg.MaxMembers {
				return fmt.Errorf("%w: %s has %d invited users, at most %d", transport.ErrForbidden, topic, len(rec.Invited), cr.cfg.MaxMembers)
			}
			rec.Invited = append(rec.Invited, ch.user)
		case typeRemove:
			if ch.user == rec.Owner {
				return fmt.Errorf("%w: the owner cannot be removed; hand the room over first", transport.ErrBadRequest)
			}
			delete(rec.Members, ch.user)
			rec.Invited = slices.DeleteFunc(rec.Invited, func(u string) bool { return u == ch.user })
		}
		return nil
	})
	if err != nil {
		return nil, rec, err
	}
	body := map[string]any{"type": ch.typ, "by": c.User}
	switch ch.typ {
	case typeOwner:
		body["owner"] = ch.user
	case typePrivate:
		body["private"] = ch.value
	default:
		body["user"] = ch.user
	}
	data, _ := json.Marshal(body)
	p, err := cr.hub.Publish(ctx, hub.PublishRequest{Topic: topic, Type: ch.typ, Sender: c.User, Data: data})
	return p, rec, err
}

// CanRead refuses a read or subscription of a members-only room to those it does not admit.
// A room that does not exist is open unless --private-rooms covers it.
func (cr *Rooms) CanRead(ctx context.Context, c transport.Client, topic string) error {
	rec, ok, err := cr.load(ctx, topic)
	if err != nil {
		return err
	}
	private := cr.privateByPrefix(topic) || (ok && rec.Private)
	if rec.admits(c.User, GrantsOf(c), topic, private) {
		return nil
	}
	who := c.User
	if who == "" {
		who = "an anonymous client"
	}
	if !ok {
		return fmt.Errorf("%w: %s is members-only and %s is not named for it", transport.ErrForbidden, topic, who)
	}
	return fmt.Errorf("%w: %s is members-only and %s is not a member (its owner %s may invite)", transport.ErrForbidden, topic, who, rec.Owner)
}
