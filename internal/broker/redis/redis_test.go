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
