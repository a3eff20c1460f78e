package shard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp091 "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/nats"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/broker/shard"
	"github.com/rtlab/rtlab/internal/hub"
)

// open makes a node on the space-separated URLs, as --broker does: RabbitMQ shards spread
// their sequencers over the nodes.
func open(urls, ns string, policy func(string) hub.HistoryPolicy) (hub.Broker, error) {
	var shards []hub.Broker
	roles := amqp.NewRoles(len(strings.Fields(urls)))
	for _, u := range strings.Fields(urls) {
		var (
			b   hub.Broker
			err error
		)
		switch {
		case strings.HasPrefix(u, "redis://"):
			b, err = redis.New(context.Background(), u, redis.Config{Prefix: ns, Policy: policy, Logger: brokertest.Logger()})
		case strings.HasPrefix(u, "nats://"):
			b, err = nats.New(context.Background(), u, nats.Config{Stream: ns, Policy: policy, Logger: brokertest.Logger()})
		default:
			b, err = amqp.New(context.Background(), u, amqp.Config{Name: ns, Policy: policy, MaxBytes: 64 << 20, Roles: roles, Logger: brokertest.Logger()})
		}
		if err != nil {
			for _, s := range shards {
				_ = s.Close()
			}
			return nil, err
		}
		shards = append(shards, b)
	}
	return shard.New(shards)
}

func eachShard(srv *brokertest.Server, f func(*goredis.Client) error) error {
	for _, m := range srv.Members() {
		opt, err := goredis.ParseURL(m.URL)
		if err != nil {
			return err
		}
		c := goredis.NewClient(opt)
		err = f(c)
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// TestConformance: three independent Redis servers, topics spread over them, pass the suite
// (restarts and hangs act on all three at once; the cut-off tests, which relay one server, are
// skipped).
func TestConformance(t *testing.T) {
	srv := brokertest.StartRedisShards(t, 3)
	h := brokertest.External(srv, open, func(string) error {
		return eachShard(srv, func(c *goredis.Client) error { return c.FlushAll(context.Background()).Err() })
	})
	h.NewNodeVia = nil
	brokertest.Run(t, h)
}

// TestConformanceNATS: topics sharded over three independent NATS servers, each ordering its
// own, pass the suite.
func TestConformanceNATS(t *testing.T) {
	srv := brokertest.StartShards(t, 3, brokertest.StartNATS)
	h := brokertest.External(srv, open, func(ns string) error {
		for _, m := range srv.Members() {
			nc, err := natsgo.Connect(m.URL)
			if err != nil {
				return err
			}
			js, err := jetstream.New(nc)
			if err == nil {
				err = js.DeleteStream(context.Background(), ns)
			}
			nc.Close()
			if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
		}
		return nil
	})
	h.NewNodeVia = nil
	brokertest.Run(t, h)
}

// TestConformanceAMQP: topics sharded over three vhosts of one RabbitMQ, each with a sequencer
// of its own, pass the suite.
func TestConformanceAMQP(t *testing.T) {
	srv := brokertest.RabbitVhostShards(brokertest.StartRabbitVhosts(t, 3), 3)
	h := brokertest.External(srv, open, func(ns string) error {
		for _, u := range strings.Fields(srv.URL) {
			conn, err := amqp091.Dial(u)
			if err != nil {
				return err
			}
			ch, err := conn.Channel()
			if err == nil {
				_, err = ch.QueueDelete(ns+".log", false, false, false)
			}
			_ = conn.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	h.NewNodeVia = nil
	h.FlushKeepsHistory = true
	brokertest.Run(t, h)
}

// TestTopicsSpread: 99 topics published through a node land on all three servers, each holding
// between a fifth and a half of them, and a second node reads each topic's history back.
func TestTopicsSpread(t *testing.T) {
	srv := brokertest.StartRedisShards(t, 3)
	ctx := context.Background()
	ns := brokertest.Namespace()
	var nodes [2]hub.Broker
	for i := range nodes {
		b, err := open(srv.URL, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Run(ctx, brokertest.NewRecorder()); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		nodes[i] = b
	}
	const topics = 99
	for i := range topics {
		if _, err := nodes[0].Publish(ctx, hub.PublishRequest{Topic: fmt.Sprintf("loc/%d", i), Data: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range topics {
		res, err := nodes[1].History(ctx, fmt.Sprintf("loc/%d", i), 0, 0)
		if err != nil || len(res.Publications) != 1 {
			t.Fatalf("history of loc/%d on the other node: %d publications, %v", i, len(res.Publications), err)
		}
	}
	var held []int
	_ = eachShard(srv, func(c *goredis.Client) error {
		n := 0
		iter := c.Scan(ctx, 0, ns+"*", 1000).Iterator()
		seen := map[string]bool{}
		for iter.Next(ctx) {
			k := iter.Val()
			if i := strings.Index(k, "loc/"); i >= 0 {
				topic := k[i:]
				if j := strings.IndexAny(topic, ":}"); j >= 0 {
					topic = topic[:j]
				}
				if !seen[topic] {
					seen[topic] = true
					n++
				}
			}
		}
		held = append(held, n)
		return iter.Err()
	})
	sum := 0
	for _, n := range held {
		sum += n
		if n < topics/5 || n > topics/2 {
			t.Errorf("topics per server %v: want each between %d and %d", held, topics/5, topics/2)
		}
	}
	if sum != topics {
		t.Errorf("topics per server %v: %d in all, want %d (each on one server)", held, sum, topics)
	}
}
