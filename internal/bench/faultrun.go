package bench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/faultproxy"
	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
)

// faultEnv is what a cell's faults act on besides its nodes: the broker the lab started for
// it (--broker redis, nats, amqp) and, with --fault, one proxy per node between the node and
// its broker. A nil *faultEnv is a cell with neither.
type faultEnv struct {
	broker  *peers.Broker
	url     string              // the broker's URL, the lab's own or --broker's
	proxies []*faultproxy.Proxy // per node; nil without --fault
	extra   []*peers.Server     // nodes restarted by a fault, stopped with the cell
	log     *os.File            // the broker's output, over its restarts
	mu      sync.Mutex
}

// newFaultEnv starts what a cell on broker needs for its faults: the broker itself when the
// lab starts it, and the proxies when the run has faults and a shared broker.
func (o *Options) newFaultEnv(ctx context.Context, broker string, nodes int, logDir string) (*faultEnv, error) {
	if !spawned(broker) && len(o.faults) == 0 {
		return nil, nil
	}
	env := &faultEnv{url: brokerURL(broker)}
	if spawned(broker) {
		var logw io.Writer
		if logDir != "" {
			f, err := os.Create(filepath.Join(logDir, fmt.Sprintf("broker-%s-%d.log", env.url, time.Now().UnixNano())))
			if err != nil {
				return nil, fmt.Errorf("creating the broker's log: %w", err)
			}
			env.log, logw = f, f
		}
		b, err := peers.StartBroker(ctx, env.url, logw)
		if err != nil {
			env.close()
			return nil, flagErr(err)
		}
		env.broker, env.url = b, b.URL
	}
	if len(o.faults) > 0 && env.url != "memory" {
		u, err := url.Parse(env.url)
		if err != nil {
			env.close()
			return nil, fmt.Errorf("broker URL: %w", err)
		}
		for range nodes {
			p, err := faultproxy.StartTCP(u.Host)
			if err != nil {
				env.close()
				return nil, err
			}
			env.proxies = append(env.proxies, p)
		}
	}
	return env, nil
}

// brokerFor is the --broker node i of the cell gets: through its proxy when there is one.
func (e *faultEnv) brokerFor(broker string, i int) string {
	if e == nil {
		return brokerURL(broker)
	}
	if i < len(e.proxies) {
		u, _ := url.Parse(e.url)
		u.Host = e.proxies[i].Addr()
		return u.String()
	}
	return e.url
}

// close stops the restarted nodes, the proxies and the broker.
func (e *faultEnv) close() {
	if e == nil {
		return
	}
	e.mu.Lock()
	extra := e.extra
	e.extra = nil
	e.mu.Unlock()
	for _, s := range extra {
		s.Stop()
	}
	for _, p := range e.proxies {
		p.Close()
	}
	if e.broker != nil {
		e.broker.Stop()
	}
	if e.log != nil {
		_ = e.log.Close()
	}
}

// injector injects a cell's faults at their times and records each. A nil *injector (a run
// without faults) does nothing.
type injector struct {
	c       *cell
	env     *faultEnv
	servers []*peers.Server // its own copy: a restarted node replaces its entry
	recs    []results.Fault
	ends    []time.Duration // when each fault was over, since the start
	cancel  context.CancelFunc
	done    chan struct{}
}

// inject starts injecting the cell's faults, if any; stop ends it.
func (e *faultEnv) inject(ctx context.Context, c *cell, servers []*peers.Server) *injector {
	if len(c.opts.faults) == 0 {
		return nil
	}
	in := &injector{c: c, env: e, servers: slices.Clone(servers), done: make(chan struct{})}
	ctx, in.cancel = context.WithCancel(ctx)
	go func() {
		defer close(in.done)
		in.run(ctx)
	}()
	return in
}

func (in *injector) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, f := range in.c.opts.faults {
		t.Reset(time.Until(in.c.clk.t0.Add(f.At)))
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		rec := results.Fault{Kind: f.Kind, Node: f.Node, At: results.Duration(f.At), For: results.Duration(f.For), Delay: results.Duration(f.Delay)}
		// Windows stay at the planned times (receipts are counted into them as they come); a
		// fault held up by the one before it (a slow broker restart) says by how much.
		if late := time.Since(in.c.clk.t0) - f.At; late >= 100*time.Millisecond {
			rec.Late = results.Duration(late.Round(time.Millisecond))
		}
		if err := in.apply(ctx, f); err != nil {
			rec.Error = err.Error()
		}
		in.recs = append(in.recs, rec)
		in.ends = append(in.ends, time.Since(in.c.clk.t0))
	}
}

// apply injects f and returns once it is over (a node or broker back, a partition healed).
func (in *injector) apply(ctx context.Context, f FaultSpec) error {
	switch f.Kind {
	case FaultKillNode:
		return in.killNode(ctx, f)
	case FaultRestartBroker:
		if in.env == nil || in.env.broker == nil {
			return fmt.Errorf("no broker the lab started")
		}
		in.env.broker.Kill()
		sleepCtx(ctx, f.For)
		return in.env.broker.Start(context.WithoutCancel(ctx))
	case FaultPartitionNode:
		if in.env == nil || f.Node > len(in.env.proxies) {
			return fmt.Errorf("node %d has no proxy to its broker", f.Node)
		}
		p := in.env.proxies[f.Node-1]
		p.Set(faultproxy.BlackHole)
		defer p.Set(faultproxy.Pass)
		sleepCtx(ctx, f.For)
	case FaultDelayBroker:
		if in.env == nil || len(in.env.proxies) == 0 {
			return fmt.Errorf("no proxy to the broker")
		}
		for _, p := range in.env.proxies {
			p.SetDelay(f.Delay)
			defer p.SetDelay(0)
		}
		sleepCtx(ctx, f.For)
	}
	return nil
}

// killNode kills node f.Node with SIGKILL and, after f.For, starts it again on its ports.
func (in *injector) killNode(ctx context.Context, f FaultSpec) error {
	if f.Node > len(in.servers) {
		return fmt.Errorf("there is no node %d", f.Node)
	}
	s := in.servers[f.Node-1]
	s.Kill()
	if f.For == 0 {
		return nil
	}
	sleepCtx(ctx, f.For)
	ns, err := s.Restarted(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	in.servers[f.Node-1] = ns
	in.env.mu.Lock()
	in.env.extra = append(in.env.extra, ns)
	in.env.mu.Unlock()
	return nil
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// stop ends a fault under way (a partition heals, a delay ends) and waits for the injector.
func (in *injector) stop() {
	if in != nil {
		in.cancel()
		<-in.done
	}
}

// faultCount counts per fault window what the receivers saw: per user, receipts in its
// delivery window (by the publication's send time) and gap notices (by arrival); duplicates
// and reordered receipts by arrival. A window runs from its fault to the next one, or the end.
type faultCount struct {
	at        []int64 // the faults' times since the start, ns
	base      func() int64
	recv      [][]atomic.Int64 // [user][fault]
	gaps      [][]atomic.Int64
	dups, ooo []atomic.Int64
}

func newFaultCount(fs []FaultSpec, users int, c *cell) *faultCount {
	if len(fs) == 0 {
		return nil
	}
	fc := &faultCount{base: func() int64 { return c.clk.base }, dups: make([]atomic.Int64, len(fs)), ooo: make([]atomic.Int64, len(fs))}
	for _, f := range fs {
		fc.at = append(fc.at, int64(f.At))
	}
	fc.recv, fc.gaps = make([][]atomic.Int64, users), make([][]atomic.Int64, users)
	for i := range users {
		fc.recv[i], fc.gaps[i] = make([]atomic.Int64, len(fs)), make([]atomic.Int64, len(fs))
	}
	return fc
}

// window is the index of the fault window holding Unix-ns time t, -1 before the first.
func (fc *faultCount) window(t int64) int {
	return sort.Search(len(fc.at), func(i int) bool { return fc.at[i] > t-fc.base() }) - 1
}

func (fc *faultCount) received(user int, ts int64) {
	if fc != nil {
		if k := fc.window(ts); k >= 0 {
			fc.recv[user][k].Add(1)
		}
	}
}

func (fc *faultCount) gap(user int, now int64) {
	if fc != nil {
		if k := fc.window(now); k >= 0 {
			fc.gaps[user][k].Add(1)
		}
	}
}

// duplicated counts a duplicate receipt at now.
func (fc *faultCount) duplicated(now int64) {
	if fc != nil {
		fc.count(fc.dups, now)
	}
}

// reordered counts a receipt out of its sender's order at now.
func (fc *faultCount) reordered(now int64) {
	if fc != nil {
		fc.count(fc.ooo, now)
	}
}

func (fc *faultCount) count(per []atomic.Int64, now int64) {
	if k := fc.window(now); k >= 0 {
		per[k].Add(1)
	}
}
