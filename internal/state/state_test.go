package state_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	amqpbroker "github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	natsbroker "github.com/rtlab/rtlab/internal/broker/nats"
	redisbroker "github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/state"
)

// open returns two stores on one backend, as two nodes would have; reopen opens the second
// again (a node restarted).
type backend struct {
	name string
	open func(t *testing.T) (a, b state.Store, reopen func() state.Store)
}

func backends() []backend {
	ctx := context.Background()
	must := func(t *testing.T, s state.Store, err error) state.Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return []backend{
		{"memory", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			m := state.NewMemory()
			return m, m, func() state.Store { return m }
		}},
		{"bolt", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			path := filepath.Join(t.TempDir(), "state.db")
			b, err := state.OpenBolt(path)
			b1 := must(t, b, err)
			return b1, b1, func() state.Store {
				_ = b1.Close()
				b2, err := state.OpenBolt(path)
				return must(t, b2, err)
			}
		}},
		{"redis", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			srv := brokertest.StartRedis(t)
			a, err := redisbroker.OpenState(ctx, srv.URL, "t")
			b, err2 := redisbroker.OpenState(ctx, srv.URL, "t")
			return must(t, a, err), must(t, b, err2), func() state.Store {
				c, err := redisbroker.OpenState(ctx, srv.URL, "t")
				return must(t, c, err)
			}
		}},
		{"redis-mirror", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			srv := brokertest.StartRedis(t)
			mirror := func() state.Store {
				r, err := redisbroker.OpenState(ctx, srv.URL, "t")
				if err != nil {
					t.Fatal(err)
				}
				m, err := state.NewMirror(ctx, r, time.Second, nil)
				return must(t, m, err)
			}
			return mirror(), mirror(), mirror
		}},
		{"redis-cluster", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			srv := brokertest.StartRedisCluster(t)
			a, err := redisbroker.OpenState(ctx, srv.URL, "t")
			b, err2 := redisbroker.OpenState(ctx, srv.URL, "t")
			return must(t, a, err), must(t, b, err2), func() state.Store {
				c, err := redisbroker.OpenState(ctx, srv.URL, "t")
				return must(t, c, err)
			}
		}},
		{"nats", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			srv := brokertest.StartNATS(t)
			a, err := natsbroker.OpenState(ctx, srv.URL, "t-state")
			b, err2 := natsbroker.OpenState(ctx, srv.URL, "t-state")
			return must(t, a, err), must(t, b, err2), func() state.Store {
				c, err := natsbroker.OpenState(ctx, srv.URL, "t-state")
				return must(t, c, err)
			}
		}},
		{"amqp", func(t *testing.T) (state.Store, state.Store, func() state.Store) {
			srv := brokertest.StartRabbit(t)
			a, err := amqpbroker.OpenState(ctx, srv.URL, "t.state")
			b, err2 := amqpbroker.OpenState(ctx, srv.URL, "t.state")
			return must(t, a, err), must(t, b, err2), func() state.Store {
				c, err := amqpbroker.OpenState(ctx, srv.URL, "t.state")
				return must(t, c, err)
			}
		}},
	}
}

// TestConformance runs the Store contract on every backend: create-once, compare-and-set
// across two stores, names with every topic character, list, delete, and a reopened store
// that finds everything.
func TestConformance(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			a, b, reopen := be.open(t)
			name := "chat/a.b:c@d_e-f/g"
			if r, err := a.Get(ctx, "room", name); err != nil || r.Rev != 0 {
				t.Fatalf("missing record: %+v %v", r, err)
			}
			rev, err := a.Put(ctx, "room", name, []byte(`{"owner":"ann"}`), 0)
			if err != nil || rev == 0 {
				t.Fatalf("create: %d %v", rev, err)
			}
			if _, err := b.Put(ctx, "room", name, []byte(`{"owner":"mallory"}`), 0); !errors.Is(err, state.ErrConflict) {
				t.Fatalf("second create from another node: %v", err)
			}
			// b sees a's record (RabbitMQ: once its fold has read it).
			var rb state.Record
			eventually.Nil(t, 10*time.Second, func() error {
				if rb, err = b.Get(ctx, "room", name); err != nil || rb.Rev != rev {
					return fmt.Errorf("b reads %+v %v, want rev %d", rb, err, rev)
				}
				return nil
			})
			if string(rb.Value) != `{"owner":"ann"}` {
				t.Fatalf("b reads %q", rb.Value)
			}
			// Compare-and-set: one of two updates from the same revision wins.
			_, errA := a.Put(ctx, "room", name, []byte(`{"owner":"bob"}`), rev)
			_, errB := b.Put(ctx, "room", name, []byte(`{"owner":"eve"}`), rev)
			if (errA == nil) == (errB == nil) {
				t.Fatalf("both or neither of two updates from revision %d won: %v / %v", rev, errA, errB)
			}
			// Update under contention from both stores: every increment counts.
			var wg sync.WaitGroup
			for i, s := range []state.Store{a, b, a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 10 {
						if _, err := state.Update(ctx, s, "counter", "n", func(cur []byte) ([]byte, error) {
							n := 0
							fmt.Sscan(string(cur), &n)
							return []byte(fmt.Sprint(n + 1)), nil
						}); err != nil {
							t.Errorf("update %d: %v", i, err)
						}
					}
				}()
			}
			wg.Wait()
			var last state.Record
			eventually.Nil(t, 10*time.Second, func() error {
				last, _ = a.Get(ctx, "counter", "n")
				if string(last.Value) != "40" {
					return fmt.Errorf("counter %q, want 40", last.Value)
				}
				return nil
			})
			_, _ = a.Put(ctx, "revoked", "x1", []byte("1"), 0)
			_, _ = a.Put(ctx, "revoked", "x2", []byte("2"), 0)
			if err := a.Delete(ctx, "revoked", "x1"); err != nil {
				t.Fatal(err)
			}
			c := reopen()
			got := map[string]string{}
			if err := c.List(ctx, "revoked", func(n string, v []byte) { got[n] = string(v) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got["x2"] != "2" {
				t.Fatalf("list after reopen: %v", got)
			}
			if r, _ := c.Get(ctx, "room", name); r.Rev == 0 {
				t.Fatal("reopened store lost the room")
			}
		})
	}
}

// TestMirrorWritesBack: Redis without persistence restarts empty. A node's copies come back,
// and what another node deleted before the restart stays deleted.
func TestMirrorWritesBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := brokertest.StartRedis(t)
	open := func() *state.Mirror {
		r, err := redisbroker.OpenState(ctx, srv.URL, "t")
		if err != nil {
			t.Fatal(err)
		}
		m, err := state.NewMirror(ctx, r, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a, b := open(), open()
	for _, n := range []string{"kept", "gone"} {
		if _, err := a.Put(ctx, "room", n, []byte(n), 0); err != nil {
			t.Fatal(err)
		}
		if r, err := b.Get(ctx, "room", n); err != nil || string(r.Value) != n {
			t.Fatalf("b reads %s: %+v %v", n, r, err)
		}
	}
	if err := a.Delete(ctx, "room", "gone"); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Get(ctx, "room", "gone"); err != nil || r.Rev != 0 {
		t.Fatalf("b reads a deleted record: %+v %v", r, err)
	}
	srv.Stop()
	srv.Start()
	eventually.Nil(t, 30*time.Second, func() error {
		r, err := b.Get(ctx, "room", "kept")
		if err != nil || string(r.Value) != "kept" {
			return fmt.Errorf("after the restart b reads %+v %v", r, err)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // both nodes' checks have run: nothing brings the deleted record back
	for _, s := range []state.Store{a, b} {
		if r, err := s.Get(ctx, "room", "gone"); err != nil || r.Rev != 0 {
			t.Fatalf("a record deleted before the restart came back: %+v %v", r, err)
		}
	}
}
