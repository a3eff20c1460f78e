package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/faultproxy"
	"github.com/rtlab/rtlab/internal/hub"
)

// TestBlackholedPublishIsOutcomeUnknown: a publish whose script went out into a blackhole is
// answered outcome unknown, not unavailable; the script runs late, when the network heals, and
// a retry with the same key is answered with that late publication's position, which is not
// published twice.
func TestBlackholedPublishIsOutcomeUnknown(t *testing.T) {
	srv := brokertest.StartRedis(t)
	proxy, err := faultproxy.Start(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	ns := brokertest.Namespace()
	b, err := redis.New(context.Background(), "redis://"+proxy.Addr(), redis.Config{Prefix: ns, Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Run(context.Background(), brokertest.NewRecorder()); err != nil {
		t.Fatal(err)
	}
	const topic = "chat/late"
	publish := func(key string, timeout time.Duration) (*hub.Publication, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return b.Publish(ctx, hub.PublishRequest{Topic: topic, Data: json.RawMessage(`{}`), Sender: "alice", Key: key})
	}
	if _, err := publish("", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	proxy.Set(faultproxy.BlackHole)
	if _, err := publish("k-late", 5*time.Second); !errors.Is(err, hub.ErrOutcomeUnknown) || errors.Is(err, hub.ErrNotReady) {
		t.Fatalf("a publish sent into a blackhole: %v, want outcome unknown", err)
	}
	proxy.Set(faultproxy.Pass)
	direct := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer direct.Close()
	eventually.Nil(t, 60*time.Second, func() error { // the held script reaches Redis and runs
		o, err := direct.HGet(context.Background(), ns+":m:{"+topic+"}", "o").Int()
		if err == nil && o != 2 {
			err = errors.New("not yet run")
		}
		return err
	})
	var retry *hub.Publication
	eventually.Nil(t, 60*time.Second, func() error { // the broker reconnects
		retry, err = publish("k-late", 10*time.Second)
		return err
	})
	if !retry.Duplicate || retry.Offset != 2 {
		t.Fatalf("retry after heal: offset %d duplicate %v, want the late publication's 2, duplicate", retry.Offset, retry.Duplicate)
	}
	next, err := publish("k-next", 30*time.Second)
	if err != nil || next.Offset != 3 {
		t.Fatalf("next publish: %+v, %v; want offset 3 (the retry published nothing)", next, err)
	}
}
