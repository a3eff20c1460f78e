package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/state"
)

// State is a state.Store in Redis: one hash per kind, <prefix>:{state}:<kind>, whose fields are the
// names and whose values are the revision (20 decimal digits) followed by the value.
// Revisions come from one counter, <prefix>:{state}:rev. A Put is one Lua script, so the
// compare and the set are atomic; the braces keep every key in one Redis Cluster slot, so the
// script runs on a cluster too.
//
// Its client must not resend a command after a network error, since a Put is not idempotent:
// NewClient's clients do not.
type State struct {
	c      goredis.UniversalClient
	prefix string
	owns   bool // Close closes c
}

var _ state.Store = (*State)(nil)

var redisPut = goredis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local rev = 0
if cur then rev = tonumber(string.sub(cur, 1, 20)) end
if rev ~= tonumber(ARGV[2]) then return -1 end
local n = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%020d', n) .. ARGV[3])
return n
`)

// OpenState connects to the Redis at url (redis://host:port/db), or to the Redis Cluster at
// redis+cluster://host:port, on a client of its own.
func OpenState(ctx context.Context, url, prefix string) (*State, error) {
	c, err := NewClient(url)
	if err != nil {
		return nil, fmt.Errorf("state: redis url: %w", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("state: redis: %w", err)
	}
	return &State{c: c, prefix: prefix, owns: true}, nil
}

// NewState is a store on c, a client from NewClient that another owner (the broker) closes.
func NewState(c goredis.UniversalClient, prefix string) *State {
	return &State{c: c, prefix: prefix}
}

func (r *State) key(kind string) string { return r.prefix + ":{state}:" + kind }

func decodeRedis(s string) (state.Record, error) {
	if len(s) < 20 {
		return state.Record{}, errors.New("state: redis: malformed record")
	}
	rev, err := strconv.ParseUint(s[:20], 10, 64)
	if err != nil {
		return state.Record{}, fmt.Errorf("state: redis: malformed record: %w", err)
	}
	return state.Record{Rev: rev, Value: []byte(s[20:])}, nil
}

func (r *State) Get(ctx context.Context, kind, name string) (state.Record, error) {
	s, err := r.c.HGet(ctx, r.key(kind), name).Result()
	if errors.Is(err, goredis.Nil) {
		return state.Record{}, nil
	}
	if err != nil {
		return state.Record{}, fmt.Errorf("state: redis: %w", err)
	}
	return decodeRedis(s)
}

func (r *State) Put(ctx context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	if len(value) > state.MaxValue {
		return 0, state.ErrTooLarge
	}
	n, err := redisPut.Run(ctx, r.c, []string{r.key(kind), r.prefix + ":{state}:rev"}, name, rev, value).Int64()
	if err != nil {
		return 0, fmt.Errorf("state: redis: %w", err)
	}
	if n < 0 {
		return 0, state.ErrConflict
	}
	return uint64(n), nil
}

func (r *State) Delete(ctx context.Context, kind, name string) error {
	if err := r.c.HDel(ctx, r.key(kind), name).Err(); err != nil {
		return fmt.Errorf("state: redis: %w", err)
	}
	return nil
}

func (r *State) List(ctx context.Context, kind string, fn func(string, []byte)) error {
	iter := r.c.HScan(ctx, r.key(kind), 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		name := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		if rec, err := decodeRedis(iter.Val()); err == nil {
			fn(name, rec.Value)
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("state: redis: %w", err)
	}
	return nil
}

// Close closes the client when the store opened it.
func (r *State) Close() error {
	if !r.owns {
		return nil
	}
	return r.c.Close()
}
