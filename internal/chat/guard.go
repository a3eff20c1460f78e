package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// roomView is a node's copy of one room's record for the guards of its subscriptions, which
// run on the delivery path and so cannot read the store. The room's own state publications
// keep it current: each is applied at once (its data says what changed) and then the record
// is read again from the store in the background, which settles any difference.
type roomView struct {
	cr    *Rooms
	topic string
	used  atomic.Int64 // Unix ns of the last use, for eviction

	mu        sync.Mutex
	rec       roomRecord // guarded by mu
	exists    bool       // guarded by mu
	applied   uint64     // offset of the last state publication applied; guarded by mu
	gen       int        // bumped by each applied publication; guarded by mu
	reloading bool       // guarded by mu
}

// view returns the room's shared view, reading it from the store when the node has none.
func (cr *Rooms) view(ctx context.Context, topic string) (*roomView, error) {
	cr.mu.Lock()
	v := cr.views.M[topic]
	cr.mu.Unlock()
	if v != nil {
		v.used.Store(time.Now().UnixNano())
		return v, nil
	}
	rec, ok, err := cr.load(ctx, topic)
	if err != nil {
		return nil, err
	}
	v = &roomView{cr: cr, topic: topic, rec: rec, exists: ok}
	v.used.Store(time.Now().UnixNano())
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if old := cr.views.M[topic]; old != nil {
		return old, nil
	}
	cr.views.Set(topic, v)
	return v, nil
}

// Guard returns the check run before each delivery of topic to c: once c is no longer
// admitted (removed by the owner, the room turned members-only), deliveries stop and the
// connection is closed with the reason.
func (cr *Rooms) Guard(ctx context.Context, c transport.Client, topic string) (transport.Guard, error) {
	v, err := cr.view(ctx, topic)
	if err != nil {
		return nil, err
	}
	g := GrantsOf(c)
	return func(p *hub.Publication) error {
		v.used.Store(time.Now().UnixNano())
		switch p.Type {
		case typeEnter, typeLeave, typeOwner, typePrivate, typeInvite, typeRemove:
			v.observe(p)
		}
		v.mu.Lock()
		ok := v.rec.admits(c.User, g, topic, v.rec.Private || cr.privateByPrefix(topic))
		owner := v.rec.Owner
		v.mu.Unlock()
		if ok || p.Type == typeRemove { // the removed user still hears that it was removed
			return nil
		}
		return fmt.Errorf("%w: %s is members-only and %s is no longer admitted (its owner is %s)", transport.ErrForbidden, topic, c.User, owner)
	}, nil
}

// observe applies a state publication to the view once, then rereads the record.
func (v *roomView) observe(p *hub.Publication) {
	var d struct {
		User    string `json:"user"`
		Owner   string `json:"owner"`
		Private *bool  `json:"private"`
	}
	_ = json.Unmarshal(p.Data, &d)
	v.mu.Lock()
	defer v.mu.Unlock()
	if p.Offset <= v.applied {
		return // another subscription's guard applied it
	}
	v.applied = p.Offset
	v.gen++
	r := &v.rec
	if r.Members == nil {
		r.Members = make(map[string]int64)
	}
	switch p.Type {
	case typeEnter:
		r.Members[p.Sender] = p.Time.UnixMilli()
		v.exists = true
	case typeLeave:
		delete(r.Members, p.Sender)
	case typeOwner:
		r.Owner = d.Owner
	case typePrivate:
		if d.Private != nil && *d.Private {
			r.makePrivate()
		} else if d.Private != nil {
			r.Private, r.Invited = false, nil
		}
	case typeInvite:
		r.Invited = append(r.Invited, d.User)
	case typeRemove:
		delete(r.Members, d.User)
		for i, u := range r.Invited {
			if u == d.User {
				r.Invited = append(r.Invited[:i], r.Invited[i+1:]...)
				break
			}
		}
	}
	if !v.reloading {
		v.reloading = true
		go v.reload()
	}
}

// reload reads the record until no publication was applied while it read.
func (v *roomView) reload() {
	for {
		v.mu.Lock()
		gen := v.gen
		v.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, ok, err := v.cr.load(ctx, v.topic)
		cancel()
		v.mu.Lock()
		if err == nil && v.gen == gen {
			v.rec, v.exists, v.reloading = rec, ok, false
			v.mu.Unlock()
			return
		}
		if err != nil {
			v.reloading = false // the next state publication tries again
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
	}
}

// Sweep drops the views no guard used for cfg.Idle, until ctx ends. Subscriptions that still
// hold a dropped view keep it current themselves; a new subscription reads a fresh one.
func (cr *Rooms) Sweep(ctx context.Context) {
	t := time.NewTicker(max(cr.cfg.Idle/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cutoff := now.Add(-cr.cfg.Idle).UnixNano()
			cr.mu.Lock()
			for topic, v := range cr.views.M {
				if v.used.Load() < cutoff {
					cr.views.Delete(topic)
				}
			}
			cr.views.Tidy()
			cr.mu.Unlock()
			cr.notify.Sweep(now)
		}
	}
}

// ViewCount is how many room views the node holds; for tests and metrics.
func (cr *Rooms) ViewCount() int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return len(cr.views.M)
}
