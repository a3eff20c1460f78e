package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
)

// TestNodesStartTogether: five nodes started at the same instant on a fresh broker all come up,
// in each of 20 trials (each trial on a vhost of its own, so each finds the broker empty:
// every node races the others to declare the same queues and streams).
func TestNodesStartTogether(t *testing.T) {
	const trials, nodes = 20, 5
	srv := brokertest.StartRabbitVhosts(t, trials)
	for trial := 1; trial <= trials; trial++ {
		url := srv.VhostURL(trial)
		errs := make([]error, nodes)
		apps := make([]*App, nodes)
		var wg sync.WaitGroup
		start := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		for i := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a, err := New(Config{Broker: url, AMQPDirect: "127.0.0.1:0", Logger: brokertest.Logger()})
				if err == nil {
					err = a.Start(ctx)
					apps[i] = a
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
		cancel()
		t.Logf("trial %d: up in %v, down in %v", trial, up.Round(time.Millisecond), (time.Since(t0) - up).Round(time.Millisecond))
		for i, err := range errs {
			if err != nil {
				t.Errorf("trial %d: node %d of %d: %v", trial, i+1, nodes, fmt.Sprint(err))
			}
		}
		if t.Failed() {
			return
		}
	}
}
