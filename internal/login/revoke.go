package login

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
)

// kindRevoked is the state kind of revoked tokens.
const kindRevoked = "revoked"

// Revoker carries a logout to every node. The revocation is kept in the shared state store,
// so a node that starts later (or this one after a restart) refuses the token too, and is
// announced on its topic, so every node adds it to its set at once and closes its open
// connections that use the token.
type Revoker struct {
	hub   *hub.Hub
	store state.Store
	set   *auth.Revocations
	tr    *transport.Server
	log   *slog.Logger
	topic string // announces revocations to every node
}

// NewRevoker keeps revocations in st and set, announces them on topic (one of the nodes' own,
// which clients may neither read nor publish) and closes tr's connections that use a revoked
// token.
func NewRevoker(h *hub.Hub, st state.Store, set *auth.Revocations, tr *transport.Server, topic string, log *slog.Logger) *Revoker {
	return &Revoker{hub: h, store: st, set: set, tr: tr, topic: topic, log: log}
}

// revocation is what the store and the announcement hold.
type revocation struct {
	ID      string    `json:"id"`
	User    string    `json:"user"`
	Expires time.Time `json:"exp"`
}

// Start subscribes to announcements, then loads the stored revocations (dropping expired
// ones), so nothing revoked meanwhile is missed. A store that other nodes write back into
// after the broker lost it (state.Mirror) is read again each time.
func (rv *Revoker) Start(ctx context.Context) error {
	sub, _, err := rv.hub.Subscribe(ctx, rv.topic, hub.SinkFunc(rv.deliver), hub.ReadOptions{})
	if err != nil {
		return fmt.Errorf("revocations: subscribe: %w", err)
	}
	if err := rv.load(ctx); err != nil {
		rv.hub.Unsubscribe(sub)
		return err
	}
	if m, ok := rv.store.(*state.Mirror); ok {
		m.OnRestore(func(ctx context.Context) {
			if err := rv.load(ctx); err != nil {
				rv.log.Warn("revocations not read again after the broker's state was restored", "err", err)
			}
		})
	}
	sub.Start()
	return nil
}

// load adds the stored revocations to the set and deletes the expired ones.
func (rv *Revoker) load(ctx context.Context) error {
	now := time.Now()
	var expired []string
	err := rv.store.List(ctx, kindRevoked, func(name string, v []byte) {
		var r revocation
		if json.Unmarshal(v, &r) != nil || !r.Expires.After(now) {
			expired = append(expired, name)
			return
		}
		if err := rv.set.Add(r.ID, r.Expires); err != nil {
			rv.log.Warn("revocation not loaded", "user", r.User, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("revocations: load: %w", err)
	}
	for _, name := range expired {
		_ = rv.store.Delete(ctx, kindRevoked, name)
	}
	return nil
}

// deliver applies an announced revocation on this node.
func (rv *Revoker) deliver(p *hub.Publication) {
	var r revocation
	if json.Unmarshal(p.Data, &r) != nil || r.ID == "" {
		return
	}
	_ = rv.set.Add(r.ID, r.Expires)
	if m, ok := rv.store.(*state.Mirror); ok {
		m.Remember(kindRevoked, revokedName(r.ID), p.Data) // to write back should the broker lose it
	}
	rv.closeSessions(r.ID)
}

func (rv *Revoker) closeSessions(id string) {
	n := rv.tr.CloseWhere(transport.BySession(id), transport.ReasonRevoked)
	if n > 0 {
		rv.log.Info("closed connections of a revoked token", "connections", n)
	}
}

// revoke records c's revocation, announces it and closes this node's connections using it.
func (rv *Revoker) revoke(ctx context.Context, c auth.Claims) error {
	if err := rv.set.Add(c.ID, c.Expires); err != nil {
		return fmt.Errorf("%w: %v", hub.ErrNotReady, err)
	}
	data, _ := json.Marshal(revocation{ID: c.ID, User: c.User, Expires: c.Expires})
	if _, err := rv.store.Put(ctx, kindRevoked, revokedName(c.ID), data, 0); err != nil && !errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("%w: keep revocation: %v", hub.ErrNotReady, err)
	}
	rv.closeSessions(c.ID)
	if _, err := rv.hub.Publish(ctx, hub.PublishRequest{Topic: rv.topic, Type: "REVOKE", Sender: c.User, Data: data}); err != nil {
		return fmt.Errorf("announce revocation: %w", err)
	}
	return nil
}

// revokedName is a revocation's record name: a hash of the token id, of fixed length.
func revokedName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}
