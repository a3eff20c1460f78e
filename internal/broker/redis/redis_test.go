package redis_test

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/hub"
)

func harness(tb testing.TB) brokertest.Harness {
	srv := brokertest.StartRedis(tb)
	return brokertest.Harness{
		Server: srv,
		Shared: true,
		Flush: func(tb testing.TB, _ string) {
			opt, _ := goredis.ParseURL(srv.URL)
			c := goredis.NewClient(opt)
			defer c.Close()
			if err := c.FlushAll(context.Background()).Err(); err != nil {
				tb.Fatal(err)
			}
		},
		NewNode: func(tb testing.TB, ns string, policy hub.HistoryPolicy) hub.Broker {
			b, err := redis.New(context.Background(), srv.URL, redis.Config{
				Prefix: ns,
				Policy: func(string) hub.HistoryPolicy { return policy },
				Logger: brokertest.Logger(),
			})
			if err != nil {
				tb.Fatal(err)
			}
			return b
		},
	}
}

func TestConformance(t *testing.T) { brokertest.Run(t, harness(t)) }

func BenchmarkBroker(b *testing.B) { brokertest.Bench(b, harness(b)) }
