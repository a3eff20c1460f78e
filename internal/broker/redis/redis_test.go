package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness(tb testing.TB) brokertest.Harness {
	srv := brokertest.StartRedis(tb)
	open := func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return redis.New(context.Background(), url, redis.Config{Prefix: ns, Policy: policy, Logger: brokertest.Logger()})
	}
	flushAll := func(string) error {
		opt, err := goredis.ParseURL(srv.URL)
		if err != nil {
			return err
		}
		c := goredis.NewClient(opt)
		defer c.Close()
		return c.FlushAll(context.Background()).Err()
	}
	return brokertest.External(srv, open, flushAll)
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }

// TestDurableTopicsSurviveRestartWithAOF: with Redis run as docs/brokers.md advises for durable
// topics (appendonly yes, appendfsync always), a room's keys carry no TTL, and after a restart
// of redis-server its history is there, in the same epoch, and offsets continue.
func TestDurableTopicsSurviveRestartWithAOF(t *testing.T) {
	srv := brokertest.StartRedisAOF(t)
	h := brokertest.External(srv, func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return redis.New(context.Background(), url, redis.Config{Prefix: ns, Policy: policy, Logger: brokertest.Logger()})
	}, nil)
	ns := brokertest.Namespace()
	policy := func(topic string) hub.HistoryPolicy {
		if topic == "chat/aof" {
			return hub.HistoryPolicy{Size: 1000, TTL: -1}
		}
		return hub.HistoryPolicy{}
	}
	rec := brokertest.NewRecorder()
	b := h.NewNodeFunc(t, ns, policy)
	ctx := context.Background()
	if err := b.Run(ctx, rec); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var last *hub.Publication
	for range 30 {
		p, err := b.Publish(ctx, hub.PublishRequest{Topic: "chat/aof", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	opt, _ := goredis.ParseURL(srv.URL)
	c := goredis.NewClient(opt)
	defer c.Close()
	for _, k := range []string{ns + ":s:{chat/aof}", ns + ":m:{chat/aof}"} {
		if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl != -1 {
			t.Fatalf("%s has TTL %v (%v); a durable topic's keys must not expire", k, ttl, err)
		}
	}
	srv.Stop()
	srv.Start()
	eventually.Nil(t, 30*time.Second, func() error {
		hr, err := b.History(ctx, "chat/aof", 0, 0)
		if err != nil {
			return err
		}
		if hr.Top != (hub.Position{Offset: 30, Epoch: last.Epoch}) || len(hr.Publications) != 30 {
			return fmt.Errorf("after the restart: top %+v, %d publications; want 30:%s and 30", hr.Top, len(hr.Publications), last.Epoch)
		}
		return nil
	})
	eventually.Nil(t, 30*time.Second, func() error {
		p, err := b.Publish(ctx, hub.PublishRequest{Topic: "chat/aof", Data: []byte(`{}`)})
		if err != nil {
			return err
		}
		if p.Offset != 31 || p.Epoch != last.Epoch {
			t.Fatalf("after the restart the next publication is %d:%s, want 31:%s", p.Offset, p.Epoch, last.Epoch)
		}
		return nil
	})
}

func clusterHarness(tb testing.TB) (brokertest.Harness, *brokertest.Server) {
	srv := brokertest.StartRedisCluster(tb)
	open := func(url, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
		return redis.New(context.Background(), url, redis.Config{Prefix: ns, Policy: policy, Logger: brokertest.Logger()})
	}
	flushAll := func(string) error {
		for _, m := range srv.Members() {
			opt, err := goredis.ParseURL(m.URL)
			if err != nil {
				return err
			}
			c := goredis.NewClient(opt)
			err = c.FlushAll(context.Background()).Err()
			_ = c.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	h := brokertest.External(srv, open, flushAll)
	// A relay in front of one node would not cut a node off: the cluster client dials every
	// master at the addresses the cluster announces.
	h.NewNodeVia = nil
	return h, srv
}

// TestClusterConformance runs the suite on a Redis Cluster of three masters; its restart stops
// and starts every master.
func TestClusterConformance(t *testing.T) {
	h, _ := clusterHarness(t)
	brokertest.Run(t, h)
}

// TestClusterMasterRestart: on a Redis Cluster a topic's channel is subscribed on its own
// master only, and when that master restarts alone (same port and cluster configuration, data
// lost), the nodes reconnect, resubscribe and deliver again in a new epoch.
func TestClusterMasterRestart(t *testing.T) {
	h, srv := clusterHarness(t)
	ns := brokertest.Namespace()
	topic := "chat/master"
	ctx := context.Background()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{srv.Members()[0].Addr}})
	defer cc.Close()
	ch := ns + ":c:{" + topic + "}"
	master, err := cc.MasterForKey(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	var owner *brokertest.Server
	for _, m := range srv.Members() {
		if m.Addr == master.Options().Addr {
			owner = m
		}
	}
	if owner == nil {
		t.Fatalf("no member at %s", master.Options().Addr)
	}

	recs := []*brokertest.Recorder{brokertest.NewRecorder(), brokertest.NewRecorder()}
	nodes := make([]hub.Broker, 2)
	for i := range nodes {
		nodes[i] = h.NewNode(t, ns, hub.HistoryPolicy{Size: 1000})
		if err := nodes[i].Run(ctx, recs[i]); err != nil {
			t.Fatal(err)
		}
		defer nodes[i].Close()
	}
	if err := nodes[0].Subscribe(ctx, topic); err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Members() {
		c := goredis.NewClient(&goredis.Options{Addr: m.Addr})
		chans, err := c.PubSubShardChannels(ctx, ns+":*").Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := m == owner; (len(chans) == 1 && chans[0] == ch) != want {
			t.Fatalf("master %s has shard channels %v; the topic's channel belongs on %s only", m.Addr, chans, owner.Addr)
		}
	}
	first, err := nodes[1].Publish(ctx, hub.PublishRequest{Topic: topic, Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	recs[0].WaitCount(t, topic, 1, 10*time.Second)

	owner.Stop()
	eventually.True(t, 15*time.Second, "nodes not ready with a master down", func() bool {
		return !nodes[0].Ready() && !nodes[1].Ready()
	})
	owner.Start()
	eventually.True(t, 60*time.Second, "nodes ready and resubscribed", func() bool {
		return nodes[0].Ready() && nodes[1].Ready() && recs[0].Resubscribed.Load() > 0
	})
	var p *hub.Publication
	eventually.Nil(t, 30*time.Second, func() error {
		p, err = nodes[1].Publish(ctx, hub.PublishRequest{Topic: topic, Data: []byte(`{}`)})
		return err
	})
	if p.Epoch == first.Epoch {
		t.Fatalf("the restarted master lost the topic, but offsets continue in epoch %s (now %d)", p.Epoch, p.Offset)
	}
	eventually.True(t, 10*time.Second, "the publication after the restart delivered", func() bool {
		got := recs[0].Get(topic)
		return len(got) > 0 && got[len(got)-1].Epoch == p.Epoch
	})
}

// TestClusterOneMasterOutages runs the suite's restart and hang checks with only the master of
// their topic restarted or hung, the two others serving on.
func TestClusterOneMasterOutages(t *testing.T) {
	h, srv := clusterHarness(t)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{srv.Members()[0].Addr}})
	defer cc.Close()
	master, err := cc.MasterForKey(context.Background(), "{"+brokertest.OutageTopic+"}")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range srv.Members() {
		if m.Addr == master.Options().Addr {
			h.Server = m
		}
	}
	brokertest.Outages(t, h)
}
