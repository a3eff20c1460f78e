package app

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

// locations keeps the latest position per member of each group someone asked about. A group
// is tracked through an ordinary hub subscription (seeded from history), so positions
// published on other nodes count too; groups nobody asks about for a while are dropped.
type locations struct {
	hub     *hub.Hub
	idleTTL time.Duration
	maxMem  int // members kept per group

	mu     sync.Mutex
	groups map[string]*groupState // guarded by mu
}

type groupState struct {
	sub     *hub.Subscription
	ready   chan struct{} // closed once the replay was applied
	mu      sync.Mutex
	top     hub.Position
	members map[string]memberPos // guarded by mu
	asked   time.Time            // guarded by locations.mu
}

type memberPos struct {
	Member string          `json:"member"`
	Offset uint64          `json:"offset"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

func newLocations(h *hub.Hub) *locations {
	return &locations{hub: h, idleTTL: 5 * time.Minute, maxMem: 10000, groups: make(map[string]*groupState)}
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
		clear(g.members) // history was lost: old positions belong to a previous life
	}
	g.top = hub.Position{Offset: p.Offset, Epoch: p.Epoch}
	m := memberOf(p)
	if _, ok := g.members[m]; !ok && len(g.members) >= 10000 {
		return
	}
	g.members[m] = memberPos{Member: m, Offset: p.Offset, Time: p.Time.UTC().Format(hub.TimeFormat), Data: p.Data}
}

// state returns the group's state, starting to track it if needed.
func (l *locations) state(ctx context.Context, topic string) (*groupState, error) {
	l.mu.Lock()
	g := l.groups[topic]
	if g == nil {
		g = &groupState{ready: make(chan struct{}), members: make(map[string]memberPos)}
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

// sweep drops groups nobody asked about within idleTTL.
func (l *locations) sweep(ctx context.Context) {
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
				}
			}
			l.mu.Unlock()
		}
	}
}

func (l *locations) serve(w http.ResponseWriter, r *http.Request, group string) error {
	topic := "location/" + group
	if err := hub.ValidateTopic(topic); err != nil {
		return err
	}
	g, err := l.state(r.Context(), topic)
	if err != nil {
		return err
	}
	g.mu.Lock()
	members := make([]memberPos, 0, len(g.members))
	for _, m := range g.members {
		members = append(members, m)
	}
	top := g.top
	g.mu.Unlock()
	slices.SortFunc(members, func(a, b memberPos) int { return strings.Compare(a.Member, b.Member) })
	transport.WriteJSON(w, http.StatusOK, map[string]any{
		"group": group, "topic": topic, "epoch": top.Epoch, "offset": top.Offset, "members": members,
	})
	return nil
}
