package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// driver is one transport's client behaviour.
type driver interface {
	// run is one activity of v: connect, subscribe, receive, reconnect after a drop, until the
	// activity ends. It returns when a.ctx is done (and any drain is over).
	run(a *activity)
	// publish sends one publication of job.v. Workers call it; w is the worker's state.
	publish(w *pubWorker, job pubJob)
	// leave sends the LEAVE that ends job.a's chat session and ends the session once it is
	// answered (or at once when there is nothing to leave).
	leave(w *pubWorker, job pubJob)
	// httpPublish reports whether publications go through the shared HTTP pool.
	httpPublish() bool
}

// drainTimeout is how long a leaving user waits for the answers to publications it has
// already written before it closes its connection.
const drainTimeout = 2 * time.Second

// spreadAbove is the number of sockets above which connections to a loopback server are spread
// over source addresses 127.0.0.1-127.0.0.250, so no (source, destination) pair runs out of
// ephemeral ports.
const spreadAbove = 20000

// cell is one run of the matrix: one transport at one peak.
type cell struct {
	opts       *Options
	scn        scenario // what the users do
	kind       string   // the server kind: rtlab, or a peer (see ServerKinds)
	transport  string
	name       string // in status lines: the transport, or transport@broker
	level      int    // the --users value of this cell (PEAK)
	plan       *Plan
	clk        clock
	nodes      []string // host:port of each server
	stompNodes []string // host:port of each server's STOMP over TCP listener (stomp-tcp)
	col        *collector
	vus        []*vu
	drv        driver
	spread     bool
	groups     int          // location groups, or chat rooms
	tag        string       // chat and notify: prefix of room and user names, unique per cell
	connected  atomic.Int64 // users with a confirmed subscription right now
	flt        *faultCount  // per fault window; nil without --fault

	// notify: ownerIn[r] is closed once the owner of room r has entered it, so that the owner
	// is the room's first member. ownerOnce guards the close.
	ownerIn   []chan struct{}
	ownerOnce []sync.Once

	lateStarts   atomic.Int64 // publications that waited more than lateStart for a worker
	outOfTurn    atomic.Int64 // publications skipped because a later one of the user had gone first
	maxStartWait atomic.Int64 // longest such wait, ns

	ctx     context.Context // the cell's life; cancelled at its end
	cancel  context.CancelFunc
	wg      sync.WaitGroup // activity goroutines
	pubq    []chan pubJob  // per node: scheduler → publish workers; never closed
	httpq   []chan pubJob  // per node: the shared HTTP pool (logins, positions); pubq for HTTP transports
	pubStop chan struct{}  // closed when the workers should finish
	pubwg   sync.WaitGroup // publish workers
}

func newCell(ctx context.Context, o *Options, kind, transport string, plan *Plan, nodes []string) *cell {
	c := &cell{opts: o, scn: o.scn, kind: kind, transport: transport, name: transport, plan: plan, nodes: nodes}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.col = newCollector(2 * runtime.GOMAXPROCS(0))
	c.spread = plan.Peak+o.PubConns > spreadAbove
	if every, ok := pollEvery(transport, o.Interval); ok {
		c.drv = &pollDriver{c: c, every: every}
	}
	switch transport {
	case "longpoll":
		c.drv = &pollDriver{c: c, long: true}
	case "sse":
		c.drv = &sseDriver{c: c}
	case "ws":
		c.drv = &wsDriver{c: c}
		if kind == results.KindCentrifugo {
			c.drv = &cfWSDriver{c: c}
		}
	case "stomp":
		c.drv = &stompDriver{c: c, d: stompDialectFor(kind, o)}
	case TransportSTOMPTCP:
		c.drv = &stompDriver{c: c, d: stompDialectFor(kind, o), over: overTCP}
	case TransportSockJS:
		c.drv = &stompDriver{c: c, d: stompDialectFor(kind, o), over: overSockJS}
	}
	if kind == results.KindCentrifugo && transport == "sse" {
		c.drv = &cfSSEDriver{c: c}
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))
	c.scn.prepare(c)
	if o.profile != nil {
		c.drv = newProfDriver(c, o.profile, transport)
	}
	c.vus = make([]*vu, plan.Peak)
	for i := range c.vus {
		g := i % c.groups
		v := &vu{
			id: i, group: g, c: c,
			sh:       c.col.shards[i%len(c.col.shards)],
			phase:    time.Duration(rng.Int64N(int64(o.Interval/phaseSlot))) * phaseSlot,
			measured: true, talker: true,
		}
		v.node.Store(int32(nodeOf(i, c.groups, len(nodes))))
		c.scn.user(c, v)
		if o.AuthSecret != "" && kind == results.KindRTLab {
			// The servers require tokens: each user carries one minted with the secret. (A
			// Centrifugo user signs its own, see cfToken.)
			tok := mintToken(o.AuthSecret, c.tag+"-u"+strconv.Itoa(i))
			v.token.Store(&tok)
		}
		if v.talker {
			// One record per publication the user can make: one per interval it is active, plus
			// one for each activity's partial interval.
			n := 0
			for _, iv := range plan.Activity[i] {
				n += int((iv.Stop-iv.Start)/o.Interval) + 2
			}
			v.pubs = make([]pubRecord, n)
		}
		c.vus[i] = v
	}
	return c
}

// pubRecord returns the record of publication seq of user id, or nil for data that is not a
// publication of this run.
func (c *cell) pubRecord(id, seq int64) *pubRecord {
	if id < 0 || id >= int64(len(c.vus)) {
		return nil
	}
	p := c.vus[id].pubs
	if seq < 0 || seq >= int64(len(p)) {
		return nil
	}
	return &p[seq]
}

// start begins an activity of v that the plan ends at leave.
func (c *cell) start(v *vu, leave time.Duration) {
	a := &activity{v: v, leave: c.clk.at(leave)}
	a.cutoff.Store(a.leave - int64(c.opts.Grace))
	a.ctx, a.cancel = context.WithCancel(c.ctx)
	prev := v.done
	done := make(chan struct{})
	v.done = done
	v.act.Store(a)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev // a user restarted quickly waits for its previous life to end
		}
		v.resetStream()
		c.scn.run(c, a)
	}()
}

// stop ends v's current activity.
func (c *cell) stop(v *vu) {
	if a := v.act.Swap(nil); a != nil {
		a.stop(drainTimeout)
	}
}

// drive follows the plan's events until the end or ctx is done.
func (c *cell) drive(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for _, e := range c.plan.Events {
		if d := time.Until(c.clk.t0.Add(e.At)); d > 0 {
			t.Reset(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
		v := c.vus[e.User]
		if !e.Start {
			c.stop(v)
			continue
		}
		leave := c.plan.Total
		for _, iv := range c.plan.Activity[e.User] {
			if iv.Start == e.At {
				leave = iv.Stop
				break
			}
		}
		c.start(v, leave)
	}
}

// stopAll ends every activity (interrupt or end of run).
func (c *cell) stopAll() {
	for _, v := range c.vus {
		c.stop(v)
	}
}

// dial opens a TCP connection for v to its node, or the next one that answers (dialAny).
func (c *cell) dial(ctx context.Context, v *vu) (net.Conn, error) {
	return c.dialAny(ctx, v, c.nodes)
}

// dialAny connects v to its node among addrs (one per node). When that node cannot be reached
// (killed, restarting) the user fails over as a client given a list of URLs does: it tries the
// next nodes in turn, and the first that answers becomes its node, where it resumes.
func (c *cell) dialAny(ctx context.Context, v *vu, addrs []string) (net.Conn, error) {
	n := v.at()
	first := fmt.Errorf("no address to connect to")
	for i := range addrs {
		k := (n + i) % len(addrs)
		conn, err := c.dialNode(ctx, v, addrs[k])
		if err == nil {
			if k != n {
				v.node.Store(int32(k))
			}
			return conn, nil
		}
		if i == 0 {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// dialNode connects v to addr, and no other.
func (c *cell) dialNode(ctx context.Context, v *vu, addr string) (net.Conn, error) {
	return c.dialAddr(ctx, v.id, addr)
}

// dialAddr opens connection k to addr, over TLS when the target wants it: every driver's
// connections come through here.
func (c *cell) dialAddr(ctx context.Context, k int, addr string) (net.Conn, error) {
	conn, err := c.dialer(k).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return c.opts.tlsClient(ctx, conn)
}

// nodeOf is the node of user i in the default layout: the members of each group (user i is
// member i ÷ groups of group i mod groups) go to the nodes round-robin from a node that moves
// with the group, so that every group spans the nodes and a node lost is felt by every group.
func nodeOf(i, groups, nodes int) int {
	return (i%groups + i/groups) % nodes
}

// dialer returns the dialer for connection k: above spreadAbove sockets, connections use
// source address 127.0.0.(1 + k mod 250).
func (c *cell) dialer(k int) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if c.spread {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+k%250))}
	}
	return d
}

// Connection accounting, shared by the transports.

func (c *cell) connTried(v *vu) { v.sh.update(func(k *counters) { k.connTried++ }) }

// connFailed counts a connection attempt that did not get to usable: a failure, or, when the
// user was leaving anyway, an abandoned attempt.
func (c *cell) connFailed(a *activity, err error) {
	if a.ending() || a.ctx.Err() != nil {
		c.connAbandoned(a.v)
		return
	}
	a.v.sh.fail(fmt.Errorf("connect: %w", err), func(k *counters) { k.connFailed++ })
}

// connAbandoned counts an attempt given up because the user left while it was under way.
func (c *cell) connAbandoned(v *vu) { v.sh.update(func(k *counters) { k.connAbandoned++ }) }

// connOpened counts a connection that got to usable, and, apart from the total, the user's
// first one in the run and an activity's reconnects (after a drop or a close by the server),
// so that users, connections and reconnects stay separate counts.
func (c *cell) connOpened(a *activity, took time.Duration) {
	v := a.v
	first := v.connected.CompareAndSwap(false, true)
	again := a.opens.Add(1) > 1
	v.sh.mu.Lock()
	v.sh.c.connOpened++
	if first {
		v.sh.c.connUsers++
	}
	if again {
		v.sh.c.connReconnects++
	}
	recordDur(v.sh.hist[histConnect], took)
	v.sh.mu.Unlock()
}

// connDropped counts an open connection lost while the user was staying.
func (c *cell) connDropped(a *activity, err error) {
	if a.ending() || a.ctx.Err() != nil {
		return
	}
	a.v.sh.fail(fmt.Errorf("dropped: %w", err), func(k *counters) { k.connDropped++ })
}

// backoff returns the wait before reconnect attempt n (0-based): 250 ms doubling to 5 s, with
// jitter so users dropped together do not return together.
func backoff(n int) time.Duration {
	d := 250 * time.Millisecond << min(n, 5)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// delivery computes the expected-delivery accounting once every activity has ended. A
// publication is expected at a receiver when the server accepted it, its intended send time
// lies in one of the receiver's windows (subscription confirmed at or before it; planned leave
// at least the grace period after it), and it was sent before cut (the interrupt time minus
// the grace period; math.MaxInt64 for a complete run).
func (c *cell) delivery(cut int64) (expected, received, unconfirmed int64) {
	byGroup := make([][]int64, c.groups)
	for _, v := range c.vus {
		for i := range v.seq {
			p := &v.pubs[i]
			if p.state.Load() == pubOK && p.ts < cut {
				byGroup[v.group] = append(byGroup[v.group], p.ts)
				received += int64(p.recv.Load())
			} else {
				unconfirmed += int64(p.recv.Load())
			}
		}
	}
	for _, ts := range byGroup {
		slices.Sort(ts)
	}
	for _, v := range c.vus {
		ts := byGroup[v.group]
		for _, w := range v.windows {
			to := min(w.to, cut)
			if to <= w.from {
				continue
			}
			lo := sort.Search(len(ts), func(i int) bool { return ts[i] >= w.from })
			hi := sort.Search(len(ts), func(i int) bool { return ts[i] >= to })
			expected += int64(hi - lo)
		}
	}
	return expected, received, unconfirmed
}

// settle marks publications still waiting for an answer as failed: the run ended first.
func (c *cell) settle() {
	for _, v := range c.vus {
		for i := range v.seq {
			if v.pubs[i].state.CompareAndSwap(pubSent, pubFailed) {
				v.sh.fail(errNoAnswer, func(k *counters) { k.pubFailed++ })
			}
		}
	}
}
