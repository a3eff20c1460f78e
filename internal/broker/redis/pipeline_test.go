package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestConcurrentPublishes: publishes made at once (sent to Redis in batches) each get their own
// offset, every topic's offsets are 1…N without a hole, and history holds what each returned.
func TestConcurrentPublishes(t *testing.T) {
	for name, start := range map[string]func(testing.TB) *brokertest.Server{
		"single": brokertest.StartRedis, "cluster": brokertest.StartRedisCluster,
	} {
		t.Run(name, func(t *testing.T) {
			srv := start(t)
			ctx := context.Background()
			b, err := redis.New(ctx, srv.URL, redis.Config{Prefix: brokertest.Namespace(), Logger: brokertest.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.Run(ctx, brokertest.NewRecorder()); err != nil {
				t.Fatal(err)
			}
			const topics, each = 7, 60
			got := make([]map[uint64]string, topics)
			for i := range got {
				got[i] = map[uint64]string{}
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range topics * each {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data := fmt.Sprintf(`{"n":%d}`, i)
					p, err := b.Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("t/%d", i%topics), Data: []byte(data)})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if prev, dup := got[i%topics][p.Offset]; dup {
						t.Errorf("offset %d of t/%d given to %s and %s", p.Offset, i%topics, prev, data)
					}
					got[i%topics][p.Offset] = data
				}()
			}
			wg.Wait()
			for i := range topics {
				hr, err := b.History(ctx, fmt.Sprintf("t/%d", i), 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if hr.Top.Offset != each || len(hr.Publications) != each {
					t.Fatalf("t/%d: top %d, %d in history; want %d", i, hr.Top.Offset, len(hr.Publications), each)
				}
				for k, p := range hr.Publications {
					if p.Offset != uint64(k+1) || string(p.Data) != got[i][p.Offset] {
						t.Fatalf("t/%d history #%d: offset %d %s, want offset %d %s", i, k, p.Offset, p.Data, k+1, got[i][uint64(k+1)])
					}
				}
			}
		})
	}
}

// TestOpenSharesOneClient: Open's broker and state store work side by side on one client, and
// closing the store first leaves the broker serving.
func TestOpenSharesOneClient(t *testing.T) {
	srv := brokertest.StartRedis(t)
	ctx := context.Background()
	o, err := redis.Open(ctx, srv.URL, broker.Options{State: true, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Broker.Run(ctx, brokertest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	rev, err := o.State.Put(ctx, "room", "r1", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.State.Put(ctx, "room", "r1", []byte("w"), 0); err == nil {
		t.Fatal("a Put at a stale revision succeeded")
	}
	if rec, err := o.State.Get(ctx, "room", "r1"); err != nil || rec.Rev != rev || string(rec.Value) != "v" {
		t.Fatalf("Get: %+v, %v; want rev %d v", rec, err, rev)
	}
	if err := o.State.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Broker.Publish(ctx, hub.PublishRequest{Topic: "a", Data: []byte(`1`)}); err != nil {
		t.Fatalf("publish after the store closed: %v", err)
	}
	if err := o.Broker.Close(); err != nil {
		t.Fatal(err)
	}
}
