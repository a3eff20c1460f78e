package app

import (
	"context"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
)

// TestNodesStartTogether: five nodes started at the same instant on a fresh broker all come up,
// in each of 20 trials: every node races the others to declare the same streams, queues and
// keys. RabbitMQ gets a fresh vhost per trial (one boot), NATS a fresh server, Redis an empty
// one (FLUSHALL).
func TestNodesStartTogether(t *testing.T) {
	const trials = 20
	t.Run("amqp", func(t *testing.T) {
		srv := brokertest.StartRabbitVhosts(t, trials)
		for trial := 1; trial <= trials; trial++ {
			if !startTogether(t, trial, srv.VhostURL(trial)) {
				return
			}
		}
	})
	t.Run("nats", func(t *testing.T) {
		for trial := 1; trial <= trials; trial++ {
			srv := brokertest.StartNATS(t)
			ok := startTogether(t, trial, srv.URL)
			srv.Stop()
			if !ok {
				return
			}
		}
	})
	t.Run("redis", func(t *testing.T) {
		srv := brokertest.StartRedis(t)
		opt, err := goredis.ParseURL(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opt)
		defer c.Close()
		for trial := 1; trial <= trials; trial++ {
			if err := c.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if !startTogether(t, trial, srv.URL) {
				return
			}
		}
	})
}

// startTogether starts five nodes on brokerURL at one instant, reports any that failed, and
// stops them.
func startTogether(t *testing.T, trial int, brokerURL string) bool {
	t.Helper()
	const nodes = 5
	errs := make([]error, nodes)
	apps := make([]*App, nodes)
	var wg sync.WaitGroup
	start := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, err := New(Config{Broker: brokerURL, AMQPDirect: "127.0.0.1:0", Logger: brokertest.Logger()})
			if err == nil {
				apps[i], err = a, a.Start(ctx)
			}
			errs[i] = err
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	up := time.Since(t0)
	for _, a := range apps {
		if a != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = a.Shutdown(sctx)
			scancel()
		}
	}
	t.Logf("trial %d: up in %v", trial, up.Round(time.Millisecond))
	ok := true
	for i, err := range errs {
		if err != nil {
			t.Errorf("trial %d: node %d of %d: %v", trial, i+1, nodes, err)
			ok = false
		}
	}
	return ok
}
