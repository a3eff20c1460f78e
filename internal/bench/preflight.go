package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// preflightWait bounds each step of the pre-flight.
const preflightWait = 10 * time.Second

// preflight proves a profile on its target before any ramp: one user subscribes, a second
// subscribes and publishes once, and the first must receive that publication with the
// bench's fields where the profile reads them. The error names the step that failed.
func preflight(ctx context.Context, o *Options, transport string) error {
	po := *o
	po.Groups = 1
	total := time.Minute
	plan := &Plan{Peak: 2, Total: total, Activity: [][]Interval{{{0, total}}, {{0, total}}}}
	c := newCell(ctx, &po, results.KindRTLab, transport, plan, []string{o.targetHost})
	c.clk = newClock()
	c.startWorkers()
	defer func() {
		c.stopAll()
		c.cancel()
		waitTimeout(&c.wg, drainTimeout+5*time.Second)
		c.stopWorkers()
	}()
	d := c.drv.(*profDriver)
	recv, pub := c.vus[0], c.vus[1]
	for _, v := range []*vu{recv, pub} {
		c.start(v, total)
		if !c.await(func() bool { a := v.act.Load(); return a != nil && a.estab.Load() != 0 }) {
			return c.stepErr("subscribe "+d.describe(v), "not subscribed", "")
		}
	}
	a := pub.act.Load()
	p := &pub.pubs[0]
	p.ts = c.clk.now()
	pub.seq = 1
	a.inflight.Add(1)
	c.pubq[0] <- pubJob{a: a, seq: 0, kind: jobPublish}
	if !c.await(func() bool { return p.state.Load() == pubOK || p.state.Load() == pubFailed }) || p.state.Load() == pubFailed {
		return c.stepErr("publish "+d.describePub(pub), "no answer", "")
	}
	if !c.await(func() bool { return p.recv.Load() > 0 }) {
		return c.stepErr("receive", "no delivery", c.othersSeen(d))
	}
	return nil
}

// othersSeen says how many messages arrived that the profile's read did not take, if any.
func (c *cell) othersSeen(d *profDriver) string {
	var n int64
	for _, s := range c.col.shards {
		s.mu.Lock()
		n += s.c.other
		s.mu.Unlock()
	}
	if n == 0 {
		return ""
	}
	why := "read.match"
	switch {
	case d.t.Name == "sse":
		why = fmt.Sprintf("read.event %q or read.match", nonEmptyStr(d.t.Read.Event, "message"))
	case d.sio != nil:
		why = fmt.Sprintf("receive.event %q or read.match", d.sio.RecvEvent)
	}
	return fmt.Sprintf(" (%d messages arrived that %s left out)", n, why)
}

// await polls cond until it holds, a user meets an error, or preflightWait has passed.
func (c *cell) await(cond func() bool) bool {
	deadline := time.Now().Add(preflightWait)
	for time.Now().Before(deadline) && c.ctx.Err() == nil && c.firstErr() == nil {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// firstErr is the first error a user of c met, if any.
func (c *cell) firstErr() error {
	for _, s := range c.col.shards {
		s.mu.Lock()
		err := s.first
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// stepErr names a failed step with the first error the users met, or what did not happen
// (and detail, what was seen instead).
func (c *cell) stepErr(step, missing, detail string) error {
	if err := c.firstErr(); err != nil {
		return fmt.Errorf("%s: %s", step, strings.TrimSpace(err.Error()))
	}
	return fmt.Errorf("%s: %s in %s%s", step, missing, preflightWait, detail)
}

// describe names v's subscription route for the pre-flight's errors.
func (d *profDriver) describe(v *vu) string {
	if d.sio != nil {
		return d.sioDescribe(v)
	}
	if d.t.Subscribe.Destination != nil {
		return d.t.Subscribe.Destination.Render(d.vals(v, 0, 0))
	}
	if d.t.URL == nil {
		return d.t.Name
	}
	return "GET " + d.route(v, d.t.URL, "")
}

// describePub names v's publish route.
func (d *profDriver) describePub(v *vu) string {
	pub := &d.t.Publish
	switch {
	case d.sio != nil:
		return "emit " + d.sio.PubEvent
	case pub.HTTP():
		return pub.Method + " " + d.route(v, pub.URL, "")
	case pub.Destination != nil:
		return "SEND " + pub.Destination.Render(d.vals(v, 0, 0))
	}
	return "frame"
}
