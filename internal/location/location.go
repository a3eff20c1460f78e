// Package location keeps the latest position of each member of the location groups someone
// asks about (GET /cur/{group}, GET /api/location/{group}).
package location

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// Limits bound what GET /cur/{group} keeps. Zero values mean the defaults given.
type Limits struct {
	Groups    int           // groups tracked at once; zero means 1,000 (the least recently asked is dropped)
	Members   int           // members kept per group; zero means 10,000
	Bytes     int           // position data kept per group, in bytes; zero means 4 MiB
	MemberTTL time.Duration // a member whose last position is older is dropped; zero means 5 minutes
}

// DefaultLimits are what the zero fields of Limits mean (the flags' defaults).
func DefaultLimits() Limits {
	return Limits{Groups: 1000, Members: 10_000, Bytes: 4 << 20, MemberTTL: 5 * time.Minute}
}

func (l *Limits) fill() {
	d := DefaultLimits()
	orDefault(&l.Groups, d.Groups)
	orDefault(&l.Members, d.Members)
	orDefault(&l.Bytes, d.Bytes)
	orDefault(&l.MemberTTL, d.MemberTTL)
}

// orDefault sets *v to d when it is zero or less.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Groups keeps the latest position per member of each group someone asked about. A group
// is tracked through an ordinary hub subscription (seeded from history), so positions
// published on other nodes count too; groups nobody asks about for a while are dropped.
// Everything is bounded: groups, members and bytes per group, and a member's age; over a bound
// the least recently heard member (or asked group) goes first.
type Groups struct {
	hub     *hub.Hub
	idleTTL time.Duration
	lim     Limits

	mu     sync.Mutex
	groups map[string]*groupState // guarded by mu
}

type groupState struct {
	lim     *Limits
	sub     *hub.Subscription
	ready   chan struct{} // closed once the replay was applied
	mu      sync.Mutex
	top     hub.Position
	members map[string]*groupMember // guarded by mu
	oldest  groupMember             // sentinel of the list of members, least recently heard first; guarded by mu
	bytes   int                     // data bytes of all members; guarded by mu
	asked   time.Time               // guarded by Groups.mu
}

// groupMember is one member's latest position, in its group's list by recency.
type groupMember struct {
	name       string
	offset     uint64
	time       time.Time
	data       json.RawMessage
	prev, next *groupMember
}

// memberPos is a member as GET /cur/{group} shows it.
type memberPos struct {
	Member string          `json:"member"`
	Offset uint64          `json:"offset"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

// New keeps the groups of h's location/ topics within lim (zero fields: DefaultLimits).
func New(h *hub.Hub, lim Limits) *Groups {
	lim.fill()
	return &Groups{hub: h, idleTTL: 5 * time.Minute, lim: lim, groups: make(map[string]*groupState)}
}

func newGroupState(lim *Limits) *groupState {
	g := &groupState{lim: lim, ready: make(chan struct{}), members: make(map[string]*groupMember)}
	g.oldest.prev, g.oldest.next = &g.oldest, &g.oldest
	return g
}

// memberOf says whose position p is: the authenticated sender, else a name field in the data.
func memberOf(p *hub.Publication) string {
	if p.Sender != "" {
		return p.Sender
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(p.Data, &fields) == nil {
		for _, k := range []string{"member", "userId", "user", "sender", "name", "id"} {
			if v, ok := fields[k]; ok {
				if s := strings.Trim(string(v), `"`); s != "" && s != "null" {
					return s
				}
			}
		}
	}
	return "anonymous"
}

func (g *groupState) Deliver(p *hub.Publication) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.Epoch != g.top.Epoch {
		g.clearLocked() // history was lost: old positions belong to a previous life
	}
	g.top = hub.Position{Offset: p.Offset, Epoch: p.Epoch}
	name := memberOf(p)
	m := g.members[name]
	if m == nil {
		m = &groupMember{name: name}
		g.members[name] = m
	} else {
		g.bytes -= len(m.data)
		m.prev.next, m.next.prev = m.next, m.prev // out of the list; back in at the newest end
	}
	m.offset, m.time, m.data = p.Offset, p.Time, p.Data
	g.bytes += len(m.data)
	m.prev, m.next = g.oldest.prev, &g.oldest
	m.prev.next, g.oldest.prev = m, m
	for len(g.members) > g.lim.Members || g.bytes > g.lim.Bytes {
		g.dropLocked(g.oldest.next)
	}
}

// dropLocked removes m from the group.
func (g *groupState) dropLocked(m *groupMember) {
	m.prev.next, m.next.prev = m.next, m.prev
	m.prev, m.next = nil, nil
	g.bytes -= len(m.data)
	delete(g.members, m.name)
}

func (g *groupState) clearLocked() {
	clear(g.members)
	g.oldest.prev, g.oldest.next = &g.oldest, &g.oldest
	g.bytes = 0
}

// expireLocked drops members whose latest position is older than the member TTL.
func (g *groupState) expireLocked(now time.Time) {
	for m := g.oldest.next; m != &g.oldest && now.Sub(m.time) > g.lim.MemberTTL; m = g.oldest.next {
		g.dropLocked(m)
	}
}

// GroupCount is how many groups are tracked.
func (l *Groups) GroupCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.groups)
}

// state returns the group's state, starting to track it if needed.
func (l *Groups) state(ctx context.Context, topic string) (*groupState, error) {
	l.mu.Lock()
	g := l.groups[topic]
	if g == nil {
		if len(l.groups) >= l.lim.Groups {
			l.dropLeastAskedLocked()
		}
		g = newGroupState(&l.lim)
		l.groups[topic] = g
		l.mu.Unlock()
		sub, res, err := l.hub.Subscribe(ctx, topic, g, hub.ReadOptions{Recover: true})
		if err != nil {
			l.mu.Lock()
			delete(l.groups, topic)
			l.mu.Unlock()
			close(g.ready)
			return nil, err
		}
		g.mu.Lock()
		g.top = res.Top
		g.mu.Unlock()
		sub.Start()
		l.mu.Lock()
		g.sub = sub // under l.mu: sweep reads it
		close(g.ready)
	}
	g.asked = time.Now()
	l.mu.Unlock()
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if g.sub == nil {
		return l.state(ctx, topic) // the tracker that was starting failed; try ourselves
	}
	return g, nil
}

// dropLeastAskedLocked stops tracking the group asked about least recently, to make room.
func (l *Groups) dropLeastAskedLocked() {
	var (
		name string
		old  *groupState
	)
	for n, g := range l.groups {
		if g.sub != nil && (old == nil || g.asked.Before(old.asked)) {
			name, old = n, g
		}
	}
	if old != nil {
		l.hub.Unsubscribe(old.sub)
		delete(l.groups, name)
	}
}

// Sweep drops groups nobody asked about within idleTTL, and members past their TTL.
func (l *Groups) Sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.mu.Lock()
			for name, g := range l.groups {
				if g.sub != nil && now.Sub(g.asked) > l.idleTTL {
					l.hub.Unsubscribe(g.sub)
					delete(l.groups, name)
					continue
				}
				g.mu.Lock()
				g.expireLocked(now)
				g.mu.Unlock()
			}
			l.mu.Unlock()
		}
	}
}

// serve answers the group's members and their latest positions.
func (l *Groups) serve(w http.ResponseWriter, r *http.Request, group string) error {
	topic := Topic(group)
	if err := hub.ValidateTopic(topic); err != nil {
		return err
	}
	g, err := l.state(r.Context(), topic)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.expireLocked(time.Now())
	members := make([]memberPos, 0, len(g.members))
	for m := g.oldest.next; m != &g.oldest; m = m.next {
		members = append(members, memberPos{Member: m.name, Offset: m.offset, Time: m.time.UTC().Format(hub.TimeFormat), Data: m.data})
	}
	top := g.top
	g.mu.Unlock()
	slices.SortFunc(members, func(a, b memberPos) int { return strings.Compare(a.Member, b.Member) })
	transport.WriteJSON(w, http.StatusOK, map[string]any{
		"group": group, "topic": topic, "epoch": top.Epoch, "offset": top.Offset, "members": members,
	})
	return nil
}

// Topic is the topic of a location group.
func Topic(group string) string { return "location/" + group }

// Handler answers a request for {group}'s members and positions (GET /api/location/{group},
// the seed routes' /cur/{group}) to those p lets read the group.
func (l *Groups) Handler(tr *transport.Server, p transport.Policy) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ident, err := tr.AuthenticateRequest(r)
		if err == nil {
			err = tr.AllowRead(r, ident.User)
		}
		if err == nil {
			err = p.CanRead(transport.Client{Identity: ident}, Topic(r.PathValue("group")))
		}
		if err == nil {
			err = l.serve(w, r, r.PathValue("group"))
		}
		if err != nil {
			tr.WriteError(w, r, err)
		}
	}
}
