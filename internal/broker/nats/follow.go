package nats

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/history"
	"github.com/rtlab/rtlab/internal/hub"
)

// follow is a topic this node has local subscribers for: a core subscription to the subject
// its stream republishes it on, and a cache of its latest publications, which History answers
// from. The cache starts from what the stream holds when the node starts following the topic;
// republished messages then extend it in stream order. Its size and age are the topic's
// policy, so it holds what History may answer and no more.
type follow struct {
	topic string
	l     *streamLog
	subj  string // the topic's subject in the stream
	pol   hub.HistoryPolicy
	sub   *natsgo.Subscription
	gone  atomic.Bool // unsubscribed: late messages are dropped

	// dmu serializes what changes the cache and what is delivered, in stream order: the first
	// load, republished messages, and catch-ups after a gap or a reconnect. Handler calls are
	// made under it, so one topic's are never concurrent; History takes only mu.
	dmu sync.Mutex

	mu        sync.Mutex // guards what follows; never held across a call out
	loaded    bool       // the cache was loaded from the stream
	overAgain bool       // the stream was recreated: the next catch-up reads it from its start
	seq       uint64     // stream sequence of the latest message applied
	epoch     string
	top       uint64    // offset of the latest publication
	last      time.Time // of the latest publication
	ring      history.Ring
	waiters   []applyWaiter
}

type applyWaiter struct {
	seq uint64
	ch  chan struct{}
}

// followed returns the topic's follow, or nil.
func (b *Broker) followed(topic string) *follow {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	return b.follows[topic]
}

func (b *Broker) followedTopics() []*follow {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	out := make([]*follow, 0, len(b.follows))
	for _, f := range b.follows {
		out = append(out, f)
	}
	return out
}

// Subscribe makes this node receive topic: it subscribes to the topic's republished subject,
// makes sure the server has the subscription, and loads the cache from the stream. A
// publication stored after the subscription took effect is delivered; one stored before it is
// in the cache, which History answers from.
func (b *Broker) Subscribe(ctx context.Context, topic string) error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	l := b.logFor(topic)
	f := &follow{topic: topic, l: l, subj: subject(l.name, topic), pol: b.cfg.Policy(topic)}
	f.ring = history.NewRing(f.pol.Size)
	b.followMu.Lock()
	if b.follows[topic] != nil {
		b.followMu.Unlock()
		return nil
	}
	b.follows[topic] = f
	f.dmu.Lock() // republished messages wait until the cache is loaded
	b.followMu.Unlock()
	defer f.dmu.Unlock()
	fail := func(err error) error {
		b.followMu.Lock()
		if b.follows[topic] == f {
			delete(b.follows, topic)
		}
		b.followMu.Unlock()
		f.gone.Store(true)
		if f.sub != nil {
			_ = f.sub.Unsubscribe()
		}
		return err
	}
	sub, err := b.nc.Subscribe(liveSubject(l, topic), func(m *natsgo.Msg) { b.onLive(f, m) })
	if err != nil {
		return fail(b.wrap("subscribe to "+topic, err))
	}
	f.sub = sub
	// Messages the server queues for a slow subscription beyond these are dropped, and show as
	// a gap that the node fills from the stream.
	_ = sub.SetPendingLimits(65536, 64<<20)
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second) // Flush wants a deadline
	defer cancel()
	if err := b.nc.FlushWithContext(fctx); err != nil {
		return fail(b.wrap("subscribe to "+topic, err))
	}
	if err := b.catchUpLocked(ctx, f, false); err != nil {
		return fail(err)
	}
	return nil
}

// Unsubscribe stops following topic. What this node knew of the topic's latest publication is
// kept for its next publish there.
func (b *Broker) Unsubscribe(_ context.Context, topic string) error {
	b.followMu.Lock()
	f := b.follows[topic]
	delete(b.follows, topic)
	b.followMu.Unlock()
	if f == nil {
		return nil
	}
	f.gone.Store(true)
	if last, ok := f.lastKnown(); ok {
		sh := b.shard(topic)
		if h, known := b.hints[sh].get(topic); !known || h.Seq < last.Seq {
			b.hints[sh].put(topic, last)
		}
	}
	if err := f.sub.Unsubscribe(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
		return b.wrap("unsubscribe from "+topic, err)
	}
	return nil
}

// onLive applies one republished message of f's topic and delivers it; a gap in offsets
// before it (messages lost on the way, or while the connection was down) is first read from
// the stream and delivered.
func (b *Broker) onLive(f *follow, m *natsgo.Msg) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		b.log.Error("nats broker: republished message without its sequence", "subject", m.Subject)
		return
	}
	p, err := replica.Decode(f.topic, m.Data)
	if err != nil {
		b.log.Error("nats broker: undecodable publication", "subject", m.Subject, "seq", seq, "err", err)
		return
	}
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.gone.Load() || b.ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	applied, epoch, top, over := f.seq, f.epoch, f.top, f.overAgain
	f.mu.Unlock()
	if seq <= applied || over {
		return // already read from the stream; or the stream is being read again from its start
	}
	if (p.Epoch == epoch && p.Offset > top+1) || (p.Epoch != epoch && p.Offset > 1) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := b.catchUpLocked(ctx, f, true)
		cancel()
		if err != nil {
			b.log.Warn("nats broker: cannot read what a followed topic missed", "topic", f.topic, "err", err)
		}
	}
	if f.apply(p, seq) {
		b.deliver(p)
	}
}

func (b *Broker) deliver(p *hub.Publication) {
	if b.running.Load() {
		b.handler.HandlePublication(p)
	}
}

// catchUp reads from the stream what f missed and delivers it.
func (b *Broker) catchUp(ctx context.Context, f *follow) error {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.gone.Load() {
		return nil
	}
	return b.catchUpLocked(ctx, f, true)
}

// catchUpLocked reads f's topic from the stream after what the cache holds (from the start when
// the cache is new or the stream was recreated) and applies it; with deliver, what is new is
// delivered. The first load delivers nothing: History shows it. f.dmu must be held.
func (b *Broker) catchUpLocked(ctx context.Context, f *follow, deliver bool) error {
	f.mu.Lock()
	after, over := f.seq, f.overAgain
	if over {
		after = 0
	}
	f.mu.Unlock()
	msgs, err := b.readSubject(ctx, f.l, f.topic, f.subj, after, b.maxRead(f.l))
	if err != nil {
		return err
	}
	f.mu.Lock()
	if over {
		// The recreated stream's publications carry new epochs; what the old one held is gone.
		f.seq, f.epoch, f.top, f.overAgain = 0, "", 0, false
		f.ring.Clear()
	}
	f.loaded = true
	f.mu.Unlock()
	for _, m := range msgs {
		if f.apply(m.pub, m.seq) && deliver {
			b.deliver(m.pub)
		}
	}
	return nil
}

// startOver makes the next catch-up read the stream from its start: it was recreated.
func (f *follow) startOver() {
	f.mu.Lock()
	f.overAgain = true
	f.mu.Unlock()
}

// apply adds p, stored at seq, to the cache and reports whether it is new. A publication of
// the cache's epoch at or below its latest offset is not (a stale writer's). A jump in offsets
// (publications removed from the stream before this node read them) restarts the cache at p.
func (f *follow) apply(p *hub.Publication, seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq <= f.seq {
		return false
	}
	f.seq = seq
	fresh := f.epoch != p.Epoch || p.Offset > f.top
	if fresh {
		if f.epoch != p.Epoch || p.Offset != f.top+1 {
			f.ring.Clear()
		}
		f.epoch, f.top, f.last = p.Epoch, p.Offset, p.Time
		f.ring.Append(p)
	}
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.seq <= seq {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(f.waiters[len(kept):])
	f.waiters = kept
	return fresh
}

// waitApplied waits until the cache has applied the stream up to seq.
func (f *follow) waitApplied(ctx context.Context, seq uint64) error {
	f.mu.Lock()
	if f.seq >= seq || f.gone.Load() {
		f.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	f.waiters = append(f.waiters, applyWaiter{seq: seq, ch: ch})
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lastKnown is the cache's latest publication, for the next publish's compare-and-set.
func (f *follow) lastKnown() (replica.Last, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.loaded || f.epoch == "" {
		return replica.Last{}, false
	}
	return replica.Last{Seq: f.seq, Epoch: f.epoch, Offset: f.top, Time: f.last}, true
}

// history answers History from the cache, once it is loaded: the retained publications after
// since (at most limit; limit <= 0 means all) that have not outlived the topic's TTL at now.
func (f *follow) history(since uint64, limit int, now time.Time) (hub.HistoryResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.loaded || f.overAgain {
		return hub.HistoryResult{}, false
	}
	if f.pol.TTL >= 0 {
		f.ring.Expire(now.Add(-f.pol.TTL))
	}
	if f.ring.Len() == 0 {
		return hub.HistoryResult{}, true // nothing retained: the topic is unused
	}
	return hub.HistoryResult{
		Top:          hub.Position{Offset: f.top, Epoch: f.epoch},
		Oldest:       f.ring.Oldest(),
		Publications: f.ring.After(since, limit),
	}, true
}
