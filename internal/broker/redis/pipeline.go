package redis

import (
	"context"
	"errors"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/hub"
)

// publisher runs the publish scripts of concurrent Publish calls in batches ("auto-pipelining"):
// while one batch is at Redis, the calls that arrive queue, and the next batch sends them all
// as one pipeline, one write and one read for the node and one wake-up for Redis. A call that
// finds nothing in flight is sent at once, on its caller's goroutine and context: light load
// waits for no timer and costs what a lone command costs.
//
// A batch is a pipeline, not a transaction: each script runs on its own, as it would alone,
// and nothing is resent after a network error (NewClient's clients do not retry). When a
// batch finds Redis gone (no answer, a broken connection), the calls queued behind it fail at
// once instead of waiting for a batch each; so do those queued while the broker is not ready.
type publisher struct {
	client goredis.UniversalClient
	ctx    context.Context // the broker's: ends at Close
	ready  func() bool     // the broker's pub/sub connection is up

	mu    sync.Mutex
	busy  bool       // a batch is in flight, and whoever sent it sends the queue next
	queue []*pubCall // calls waiting for the next batch
}

// maxBatch bounds a batch; the rest wait for the next, which follows at once.
const maxBatch = 256

type pubCall struct {
	ctx  context.Context
	keys []string
	args []any
	res  []any
	err  error
	done chan struct{}
}

// run runs the publish script with keys and args, alone or in a batch, and returns its result.
func (p *publisher) run(ctx context.Context, keys []string, args []any) ([]any, error) {
	c := &pubCall{ctx: ctx, keys: keys, args: args}
	p.mu.Lock()
	if p.busy {
		c.done = make(chan struct{})
		p.queue = append(p.queue, c)
		p.mu.Unlock()
		select {
		case <-c.done:
			return c.res, c.err
		case <-ctx.Done():
			return nil, ctx.Err() // sent or not, as with a lone command cancelled
		}
	}
	p.busy = true
	p.mu.Unlock()
	c.res, c.err = publishScript.Run(ctx, p.client, keys, args...).Slice()
	if ctx.Err() == nil && lost(c.err) {
		p.failQueued(c.err)
	}
	p.mu.Lock()
	if len(p.queue) == 0 {
		p.busy = false
		p.mu.Unlock()
		return c.res, c.err
	}
	p.mu.Unlock()
	go p.drain() // the caller has its answer; the queue goes on without it
	return c.res, c.err
}

// drain sends the queue in batches until it is empty, then lets the next call send alone.
func (p *publisher) drain() {
	for {
		p.mu.Lock()
		n := min(len(p.queue), maxBatch)
		if n == 0 {
			p.busy = false
			p.mu.Unlock()
			return
		}
		batch := p.queue[:n:n]
		p.queue = append([]*pubCall(nil), p.queue[n:]...)
		p.mu.Unlock()
		p.send(batch)
	}
}

// send runs batch as one pipeline on the broker's context (a waiter that gives up does not
// cancel the others), and hands each call its result.
func (p *publisher) send(batch []*pubCall) {
	live := batch[:0:0]
	ready := p.ready()
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err // not sent: its caller gave up while it queued
			close(c.done)
			continue
		}
		if !ready {
			c.err = hub.Unavailable("redis", errors.New("pub/sub connection down"))
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	pipe := p.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = publishScript.EvalSha(p.ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(p.ctx) // each command holds its own error
	var gone error
	for i, c := range live {
		c.res, c.err = cmds[i].Slice()
		if c.err != nil && goredis.HasErrorPrefix(c.err, "NOSCRIPT") {
			// Not run: this Redis lost its scripts (a restart). Run loads it again.
			c.res, c.err = publishScript.Run(c.ctx, p.client, c.keys, c.args...).Slice()
		}
		if gone == nil && p.ctx.Err() == nil && lost(c.err) {
			gone = c.err
		}
		close(c.done)
	}
	if gone != nil {
		p.failQueued(gone)
	}
}

// failQueued fails every queued call with err, the failure of the batch before them: they
// would meet the same Redis. They were not sent, so they were not published.
func (p *publisher) failQueued(err error) {
	p.mu.Lock()
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, c := range q {
		c.err = hub.Unavailable("redis", err)
		close(c.done)
	}
}

// lost reports whether err says Redis could not be reached or did not answer, rather than
// answering with an error.
func lost(err error) bool {
	var reply goredis.Error
	return err != nil && !errors.As(err, &reply)
}
