package bench

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// phaseSlot is the resolution of publish phases. Each user publishes at a fixed phase within
// the interval (seeded, so runs are reproducible); phases fall on a millisecond grid so one
// scheduler goroutine wakes at most once per millisecond for all users.
const phaseSlot = time.Millisecond

// jobKind says what a worker does for a pubJob.
type jobKind uint8

const (
	jobPublish jobKind = iota // publication seq of a.v: a position, or a TALK
	jobFetch                  // read the position of a.v's topic (before an SSE stream), over HTTP
	jobLogin                  // POST /api/login for a.v, over HTTP
	jobEnter                  // the scenario's greeting (ENTER a.v's room), over HTTP
	jobLeave                  // LEAVE a.v's room: over HTTP, or on a.v's own connection
)

// pubJob asks a worker to do one thing for a.v.
type pubJob struct {
	a    *activity
	seq  int
	kind jobKind
	at   int64            // when it was asked (Unix ns): login latency counts from there
	done chan<- jobResult // where the answer goes, for a goroutine waiting on it; may be nil
}

// jobResult is the answer to a fetch, login, ENTER or LEAVE job.
type jobResult struct {
	offset uint64 // fetch: the topic's position
	epoch  string
	token  string // login
	err    error
}

// reply hands res to whoever waits for job; done channels have room for one answer, so a
// waiter that gave up does not block the worker.
func (job pubJob) reply(res jobResult) {
	if job.done != nil {
		job.done <- res
	}
}

// pubWorker is one publishing goroutine. For HTTP transports it owns one keep-alive connection
// of the shared pool.
type pubWorker struct {
	c     *cell
	node  int
	hc    *httpConn
	buf   []byte // request or STOMP frame being built
	body  []byte // data being built
	frame []byte // WebSocket frame being built
	// down: the last connect to the node failed. The user whose job it was fails over to the
	// next node (as its own connections do in cell.dialAny), so that its requests stop going
	// to a node that is gone.
	down bool
}

// schedule wakes publishers: a single goroutine walks the phases of all users in order and
// hands each connected user's turn to the workers, with the slot time as the intended send
// time. Users that are not connected skip their turn. Time spent waiting for a worker (a
// saturated pool) stays in the measured latency, since it counts from the intended time.
func (c *cell) schedule(ctx context.Context) {
	byPhase := map[time.Duration][]*vu{}
	for _, v := range c.vus {
		byPhase[v.phase] = append(byPhase[v.phase], v)
	}
	phases := make([]time.Duration, 0, len(byPhase))
	for p := range byPhase {
		phases = append(phases, p)
	}
	slices.Sort(phases)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for cycle := time.Duration(0); ; cycle++ {
		for _, p := range phases {
			at := cycle*c.opts.Interval + p
			if at >= c.plan.Total {
				return
			}
			if d := time.Until(c.clk.t0.Add(at)); d > 0 {
				t.Reset(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
			ts := c.clk.at(at)
			for _, v := range byPhase[p] {
				a := v.act.Load()
				if a == nil || !c.scn.turn(c, a, ts, c.pubq[v.at()], ctx.Done()) || v.seq >= len(v.pubs) {
					continue
				}
				seq := v.seq
				v.seq++
				v.pubs[seq].ts = ts
				a.inflight.Add(1)
				select {
				case c.pubq[v.at()] <- pubJob{a: a, seq: seq}:
				case <-ctx.Done():
					a.inflight.Add(-1)
					return
				}
			}
		}
	}
}

// startWorkers starts the publish workers: the shared HTTP pool per node for transports that
// publish over HTTP, else a few goroutines that write on the users' own connections. The chat
// and notify scenarios log in over HTTP on every transport: ws and stomp get an HTTP pool of
// the same size too.
func (c *cell) startWorkers() {
	c.pubStop = make(chan struct{})
	if c.drv.httpPublish() {
		c.pubq = c.startPool(c.poolConns())
		c.httpq = c.pubq
		return
	}
	c.pubq = c.startPool(4 * runtime.GOMAXPROCS(0))
	if c.scn.logsIn() {
		c.httpq = c.startPool(c.poolConns())
	}
}

// poolConns is the number of keep-alive connections of a shared HTTP pool, per node.
func (c *cell) poolConns() int { return min(c.opts.PubConns, max(2, c.plan.Peak/8)) }

// startPool starts per workers on every node, fed by one queue per node.
func (c *cell) startPool(per int) []chan pubJob {
	qs := make([]chan pubJob, len(c.nodes))
	for n := range c.nodes {
		qs[n] = make(chan pubJob, 4096)
		for range per {
			w := &pubWorker{c: c, node: n}
			c.pubwg.Add(1)
			go func() {
				defer c.pubwg.Done()
				w.loop(qs[n], c.pubStop)
				if w.hc != nil {
					w.hc.close()
				}
			}()
		}
	}
	return qs
}

// loop handles jobs until stop is closed, then finishes what is queued. The queue is never
// closed, so a late sender (a user still leaving) cannot panic.
func (w *pubWorker) loop(q <-chan pubJob, stop <-chan struct{}) {
	for {
		select {
		case job := <-q:
			w.handle(job)
		case <-stop:
			for {
				select {
				case job := <-q:
					w.handle(job)
				default:
					return
				}
			}
		}
	}
}

func (w *pubWorker) handle(job pubJob) {
	defer w.failOver(job.a.v)
	switch job.kind {
	case jobFetch:
		w.fetchPosition(job)
		return
	case jobLogin:
		w.login(job)
		return
	case jobEnter:
		job.reply(jobResult{err: w.chatHTTP(job.a, w.c.scn.greeting())})
		return
	case jobLeave:
		w.c.drv.leave(w, job)
		return
	}
	c := w.c
	defer job.a.inflight.Add(-1)
	if wait := c.clk.now() - job.a.v.pubs[job.seq].ts; wait > int64(lateStart) {
		c.lateStarts.Add(1)
		for m := c.maxStartWait.Load(); wait > m && !c.maxStartWait.CompareAndSwap(m, wait); m = c.maxStartWait.Load() {
		}
	}
	c.drv.publish(w, job)
}

// failOver moves v to the next node when this worker could not reach its own (down).
func (w *pubWorker) failOver(v *vu) {
	if !w.down {
		return
	}
	w.down = false
	if n := len(w.c.nodes); n > 1 {
		v.node.CompareAndSwap(int32(w.node), int32((w.node+1)%n))
	}
}

// lateStart is the wait for a publish worker above which a publication counts as started late:
// the pool (or the server behind it) was not keeping up.
const lateStart = 100 * time.Millisecond

// stopWorkers lets the workers finish what is queued and waits for them.
func (c *cell) stopWorkers() {
	close(c.pubStop)
	c.pubwg.Wait()
}

// appendPub appends the data of publication seq of v for the cell's scenario.
func (c *cell) appendPub(dst []byte, v *vu, seq int, ts int64) []byte {
	return c.scn.appendData(dst, c, v, seq, ts)
}

// appendData appends the data of one publication: a position plus who sent it, its number and
// its intended send time, which receivers use for latency and accounting.
func appendData(dst []byte, seed int64, v *vu, seq int, ts int64) []byte {
	h := mix(uint64(seed) ^ uint64(v.id)<<20 ^ uint64(seq))
	dst = append(dst, `{"x":`...)
	dst = strconv.AppendFloat(dst, float64(h%10000)/100, 'f', 2, 64)
	dst = append(dst, `,"y":`...)
	dst = strconv.AppendFloat(dst, float64((h>>20)%10000)/100, 'f', 2, 64)
	return appendTrace(dst, v, seq, ts)
}

// appendTrace ends a published JSON object with what receivers measure by: the publishing
// user, its sequence number and the intended send time (unix ns).
func appendTrace(dst []byte, v *vu, seq int, ts int64) []byte {
	dst = append(dst, `,"vu":`...)
	dst = strconv.AppendInt(dst, int64(v.id), 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, int64(seq), 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	return append(dst, '}')
}

// mix is splitmix64's finaliser: cheap, deterministic pseudo-random positions.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// answered settles publication seq of a.v with the server's answer (ack, receipt or error)
// and reports whether a leaving user has nothing more to wait for.
func (a *activity) answered(seq int64, ok bool, err error) (drained bool) {
	v := a.v
	now := v.c.clk.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq >= 0 && seq < int64(len(v.pubs)) {
		p := &v.pubs[seq]
		to := uint32(pubFailed)
		if ok {
			to = pubOK
		}
		if p.state.CompareAndSwap(pubSent, to) {
			a.pending--
			if int(seq) >= a.lowSeq {
				a.lowSeq = int(seq) + 1
			}
			if ok {
				v.sh.observe(histPublish, time.Duration(now-p.ts))
			} else {
				v.sh.fail(err, func(c *counters) { c.pubFailed++ })
			}
		}
	}
	return a.stopping.Load() && a.pending <= 0
}

// sent marks publication seq written on a.conn; a.mu must be held.
func (a *activity) sentLocked(seq int) {
	if a.pending == 0 {
		a.lowSeq = seq
	}
	a.pending++
	a.highSeq = seq + 1
	a.v.pubs[seq].state.Store(pubSent)
}
