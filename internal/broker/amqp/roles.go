package amqp

import "sync/atomic"

// Roles counts the shards whose sequencers a node holds, out of the shards it was opened with,
// so that a shard's broker can leave its role to another node once this one holds its share.
// It is safe for concurrent use.
type Roles struct {
	shards int
	held   atomic.Int64
}

// NewRoles returns the count for a node of shards shards, holding none.
func NewRoles(shards int) *Roles { return &Roles{shards: shards} }

// Shards is how many shards the node has.
func (r *Roles) Shards() int { return r.shards }

// Share is the most roles one of nodes nodes should hold: ceil(shards/nodes).
func (r *Roles) Share(nodes int) int { return (r.shards + nodes - 1) / nodes }

// Held is how many roles the node holds.
func (r *Roles) Held() int { return int(r.held.Load()) }

// Take takes a role if the node holds fewer than share, and reports whether it did.
func (r *Roles) Take(share int) bool {
	for {
		n := r.held.Load()
		if n >= int64(share) {
			return false
		}
		if r.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Leave gives a role up if the node holds more than share, and reports whether it did.
func (r *Roles) Leave(share int) bool {
	for {
		n := r.held.Load()
		if n <= int64(share) {
			return false
		}
		if r.held.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Force takes a role whatever the node holds.
func (r *Roles) Force() { r.held.Add(1) }

// Release gives a role up.
func (r *Roles) Release() { r.held.Add(-1) }
