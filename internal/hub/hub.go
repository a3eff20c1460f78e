// Package hub holds the core of the real-time server: topics, offsets and epochs, history reads,
// subscriptions with resume, and fan-out of publications to subscribers. It knows nothing of
// transports; they give it a Sink per subscription. It consumes a Broker for offsets, history
// and delivery between nodes.
package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Sink receives a subscription's publications, in offset order. Deliver must not block: it is
// called from the fan-out loop, and one slow sink would delay every other subscriber.
// A transport queues the publication and handles overflow itself.
type Sink interface {
	Deliver(p *Publication)
}

// GapSink is implemented by sinks that must be told when a live subscription's history breaks:
// the epoch changed (a broker lost its data, a memory node restarted), so publications before
// the new epoch's first one may be gone; or publications this node missed (cut off from its
// broker) were no longer retained when it came back. Gap is called before the publication that
// follows the break is delivered, with that publication's position; like Deliver it must not
// block.
type GapSink interface {
	Gap(topic string, now Position, reason string)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(p *Publication)

// Deliver calls f(p).
func (f SinkFunc) Deliver(p *Publication) { f(p) }

// Config configures a Hub.
type Config struct {
	// Broker provides offsets, history and delivery. Required.
	Broker Broker
	// MaxDataBytes bounds a publication's data. Zero means 64 KiB.
	MaxDataBytes int
	// Archive answers pages below the broker's window (Page). Nil: pages end with the window.
	Archive Archive
	// Presence configures who-is-connected tracking (presence.go).
	Presence PresenceConfig
}

// Stats are cumulative counters, read by the metrics exporter.
type Stats struct {
	Publications  atomic.Uint64 // publications accepted by Publish on this node
	Received      atomic.Uint64 // publications received from the broker (any node)
	Deliveries    atomic.Uint64 // publications handed to sinks
	Duplicates    atomic.Uint64 // publications dropped because a subscriber already had them
	GapsFilled    atomic.Uint64 // publications fetched from history after a delivery gap
	GapsReported  atomic.Uint64 // breaks in a subscription's history its sink was told of (GapSink)
	Subscriptions atomic.Int64  // current subscriptions
	Topics        atomic.Int64  // topics with at least one local subscriber
}

const numShards = 64

// Hub routes publications to subscriptions. It is safe for concurrent use.
type Hub struct {
	broker  Broker
	archive Archive // nil when there is none
	maxData int
	seed    maphash.Seed
	shards  [numShards]shard
	stats   Stats
	closed  atomic.Bool
	pres    *presence
}

type shard struct {
	mu     sync.RWMutex
	topics map[string]*topic // guarded by mu
}

// topic is the local state of a topic that has subscribers on this node.
type topic struct {
	name string
	refs int // guarded by the shard's mu; the entry is removed at zero

	// mu serializes changes to the subscriber list and the broker subscription.
	mu               sync.Mutex
	brokerSubscribed bool                            // guarded by mu
	subs             atomic.Pointer[[]*Subscription] // copy-on-write, replaced under mu

	// deliverMu serializes deliveries of this topic (broker calls and gap fills).
	deliverMu sync.Mutex
	last      Position // last position delivered; guarded by deliverMu
	// known is set once last is a baseline to compare deliveries with: the topic's position when
	// the broker subscription started, or a later delivery. Until then nothing can be told
	// missing. Guarded by deliverMu.
	known bool
}

// New returns a Hub using cfg.Broker. Call Run before use.
func New(cfg Config) *Hub {
	h := &Hub{broker: cfg.Broker, archive: cfg.Archive, maxData: cfg.MaxDataBytes, seed: maphash.MakeSeed()}
	if h.maxData <= 0 {
		h.maxData = 64 << 10
	}
	for i := range h.shards {
		h.shards[i].topics = make(map[string]*topic)
	}
	h.pres = newPresence(h, cfg.Presence)
	return h
}

// Run starts the broker's delivery to this hub.
func (h *Hub) Run(ctx context.Context) error {
	if err := h.broker.Run(ctx, (*brokerHandler)(h)); err != nil {
		return fmt.Errorf("hub: start broker: %w", err)
	}
	go h.pres.run()
	return nil
}

// Close stops accepting publications and subscriptions and closes the broker.
func (h *Hub) Close() error {
	if h.closed.Swap(true) {
		return nil
	}
	h.pres.close() // says goodbye to the other nodes while the broker is still there
	return h.broker.Close()
}

// Stats returns the hub's counters.
func (h *Hub) Stats() *Stats { return &h.stats }

// Ready reports whether the hub can publish and deliver.
func (h *Hub) Ready() bool { return !h.closed.Load() && h.broker.Ready() }

// MaxDataBytes is the largest publication data accepted.
func (h *Hub) MaxDataBytes() int { return h.maxData }

func (h *Hub) shard(name string) *shard {
	return &h.shards[maphash.String(h.seed, name)%numShards]
}

// Publish validates and publishes a publication. Data must be valid JSON.
func (h *Hub) Publish(ctx context.Context, req PublishRequest) (*Publication, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	if err := ValidateTopic(req.Topic); err != nil {
		return nil, err
	}
	if len(req.Data) > h.maxData {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(req.Data), h.maxData)
	}
	if len(req.Data) == 0 || !json.Valid(req.Data) {
		return nil, ErrBadData
	}
	// encoding/json accepts invalid UTF-8 inside strings; browsers close a WebSocket that
	// carries it, so it is refused here, once per publication, for every route.
	if !utf8.Valid(req.Data) || !utf8.ValidString(req.Sender) || !utf8.ValidString(req.Type) {
		return nil, ErrBadText
	}
	if err := checkName("type", req.Type); err != nil {
		return nil, err
	}
	if err := checkName("sender", req.Sender); err != nil {
		return nil, err
	}
	if req.Key != "" {
		if err := CheckKey(req.Key); err != nil {
			return nil, err
		}
	}
	if bytes.ContainsAny(req.Data, "\r\n") {
		// Raw line breaks can only be whitespace between JSON tokens; without them the data is
		// one line, as SSE's data: field needs.
		var b bytes.Buffer
		if err := json.Compact(&b, req.Data); err != nil {
			return nil, ErrBadData
		}
		req.Data = b.Bytes()
	}
	p, err := h.broker.Publish(ctx, req)
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrNotReady) && !errors.Is(err, ErrOutcomeUnknown) {
		// The caller's deadline passed with the publication possibly on its way: that is not
		// a refusal, whatever the broker's words.
		err = OutcomeUnknown("", err)
	}
	if err != nil {
		return nil, fmt.Errorf("hub: publish to %s: %w", req.Topic, err)
	}
	if p.Duplicate {
		return p, nil // counted and archived when it was published
	}
	h.stats.Publications.Add(1)
	if h.archive != nil {
		h.archive.Added(p)
	}
	return p, nil
}

// ReadOptions say where a read or a subscription starts.
type ReadOptions struct {
	// Recover asks for publications after Since. Without it a subscription starts from now and
	// a read returns only the position.
	Recover bool
	Since   uint64
	// Epoch is the epoch the client's Since belongs to; empty means "whatever is current".
	Epoch string
	// Limit bounds the publications returned by a read (zero means all retained).
	// Subscriptions always replay everything retained.
	Limit int
}

// ReadResult is the answer to a read or the start of a subscription.
type ReadResult struct {
	Publications []*Publication
	Top          Position
	// Recovered is false when some publications the client asked for are gone; Reason says why.
	Recovered bool
	Reason    string
}

// Next is where what follows a read starts: its first publication, or the one after Top when
// it has none. A resume's gap notice carries it, as a live gap carries the publication after
// the break, so that on every path a client goes on from the notice's offset minus one.
func (r ReadResult) Next() Position {
	if len(r.Publications) > 0 {
		p := r.Publications[0]
		return Position{Offset: p.Offset, Epoch: p.Epoch}
	}
	return Position{Offset: r.Top.Offset + 1, Epoch: r.Top.Epoch}
}

// Read returns publications after opts.Since from history, and whether that covers everything
// the client missed.
func (h *Hub) Read(ctx context.Context, name string, opts ReadOptions) (ReadResult, error) {
	if err := ValidateTopic(name); err != nil {
		return ReadResult{}, err
	}
	return h.read(ctx, name, opts)
}

// read keeps to the first history read, with the rest in resume, because it runs on the stack of
// every connection's reader goroutine: a deeper subscribe there doubles an idle connection's
// stack (BENCHMARKS.md, idle memory).
func (h *Hub) read(ctx context.Context, name string, opts ReadOptions) (ReadResult, error) {
	since := uint64(math.MaxUint64)
	if opts.Recover {
		since = opts.Since
	}
	hr, err := h.broker.History(ctx, name, since, opts.Limit)
	if err != nil {
		return ReadResult{}, fmt.Errorf("hub: history of %s: %w", name, err)
	}
	if !opts.Recover {
		return ReadResult{Top: hr.Top, Recovered: true}, nil
	}
	return h.resume(ctx, name, opts, &hr)
}

// resume answers a read that resumes: with what history hr holds after opts.Since, or, when
// it cannot resume there, with why and everything retained.
func (h *Hub) resume(ctx context.Context, name string, opts ReadOptions, hr *HistoryResult) (ReadResult, error) {
	res := ReadResult{Publications: hr.Publications, Top: hr.Top, Recovered: true}
	trimmed := false // history starts after since+1
	switch {
	case opts.Epoch != "" && hr.Top.Epoch == "":
		res.Recovered = false
		res.Reason = fmt.Sprintf("no retained history (epoch %s is gone)", opts.Epoch)
	case opts.Epoch != "" && opts.Epoch != hr.Top.Epoch:
		res.Recovered = false
		res.Reason = fmt.Sprintf("epoch changed from %s to %s: history was lost", opts.Epoch, hr.Top.Epoch)
	case opts.Since > hr.Top.Offset:
		res.Recovered = false
		res.Reason = fmt.Sprintf("offset %d is ahead of the topic (at %d): history was reset", opts.Since, hr.Top.Offset)
	case hr.Oldest > opts.Since+1 || (hr.Oldest == 0 && hr.Top.Offset > opts.Since):
		res.Recovered = false
		res.Reason = fellOut(opts.Since, *hr)
		trimmed = true
	default:
		return res, nil
	}
	if opts.Since > 0 {
		// The client's offsets do not line up with what is retained: give it everything retained.
		again, err := h.broker.History(ctx, name, 0, opts.Limit)
		if err != nil {
			return ReadResult{}, fmt.Errorf("hub: history of %s: %w", name, err)
		}
		if trimmed && again.Top.Epoch == hr.Top.Epoch {
			// Publications may have been trimmed between the two reads: name what this read lacks.
			res.Reason = fellOut(opts.Since, again)
		}
		res.Publications, res.Top = again.Publications, again.Top
	}
	return res, nil
}

// fellOut names what history hr no longer holds after offset since, as a live gap does, so a
// client reads one kind of notice whether it was following or resuming.
func fellOut(since uint64, hr HistoryResult) string {
	last := hr.Top.Offset
	if hr.Oldest > 0 {
		last = hr.Oldest - 1
	}
	return fmt.Sprintf("offset %d fell out of history (oldest retained is %d): publications %d to %d of epoch %s are no longer retained",
		since, hr.Oldest, since+1, last, hr.Top.Epoch)
}

// Subscription is one sink's interest in one topic.
type Subscription struct {
	hub   *Hub
	topic *topic
	sink  Sink

	live   atomic.Bool // set once caught up; after it, deliveries skip mu
	closed atomic.Bool

	mu    sync.Mutex
	start ReadResult // the first page of what Start replays; guarded by mu
	cu    *catchUp   // until live; nil when there is nothing to catch up; guarded by mu

	// last is the position of the last publication handed to the sink. Before live it is
	// guarded by mu; after, it is owned by the topic's delivery (deliverMu).
	last Position

	present  *ClientInfo // counted in the topic's presence as this; guarded by the hub's presence mu
	watching bool        // told of joins and leaves; guarded by the hub's presence mu
}

// Topic returns the subscription's topic name.
func (s *Subscription) Topic() string { return s.topic.name }

// Subscribe registers sink for the topic and reads what it should replay (a first page of at
// most opts.Limit publications, or CatchUpPage for a PacedSink). The subscription buffers live publications until
// it has caught up (Start), so the transport can tell its client the outcome (ReadResult:
// recovered or not, position) before the replay. Call Start next, then Unsubscribe when done.
func (h *Hub) Subscribe(ctx context.Context, name string, sink Sink, opts ReadOptions) (*Subscription, ReadResult, error) {
	if h.closed.Load() {
		return nil, ReadResult{}, ErrClosed
	}
	if err := ValidateTopic(name); err != nil {
		return nil, ReadResult{}, err
	}
	t, err := h.attach(ctx, name)
	if err != nil {
		return nil, ReadResult{}, err
	}
	s := &Subscription{hub: h, topic: t, sink: sink}
	t.mu.Lock()
	t.addLocked(s)
	t.mu.Unlock()

	// Attached before reading, so nothing published after the read can be missed: it is either
	// in history or buffered (duplicates are dropped by offset). A paced sink reads its replay a
	// page at a time; any other gets all that is retained at once, as one consistent read.
	if _, paced := sink.(PacedSink); paced && opts.Limit <= 0 {
		opts.Limit = CatchUpPage
	}
	res, err := h.read(ctx, name, opts)
	if err != nil {
		h.remove(s)
		return nil, ReadResult{}, err
	}
	// Counted from the read, where the subscription starts: what was published before it (even
	// if buffered meanwhile) is history. Anyone who waits for the count and then publishes is
	// therefore delivered to.
	h.stats.Subscriptions.Add(1)
	s.mu.Lock()
	s.start = res
	s.last = res.Top
	if opts.Recover && len(res.Publications) == 0 && res.Recovered {
		s.last.Offset = opts.Since
	}
	s.mu.Unlock()
	return s, res, nil
}

// Start replays what the subscription resumes from, then everything buffered since Subscribe,
// and switches the subscription to live delivery. A PacedSink is handed the replay as its queue
// drains (catchup.go); any other sink gets it all before Start returns.
func (s *Subscription) Start() {
	s.start0()
	s.hub.pres.started(s)
}

// start0 is Start without presence.
func (s *Subscription) start0() {
	s.mu.Lock()
	first := s.start
	s.start = ReadResult{}
	if s.cu != nil || len(first.Publications) > 0 || !reachesTop(first) {
		cu := s.catchUpLocked() // made already when publications were buffered
		cu.pending, cu.atTop = first.Publications, reachesTop(first)
	}
	if len(first.Publications) > 0 {
		// The replay starts where history does; when that is past what the client asked for,
		// its answer already said so (Recovered false), so no gap is reported for it.
		p := first.Publications[0]
		s.last = Position{Offset: p.Offset - 1, Epoch: p.Epoch}
	}
	if s.caughtUpLocked() {
		s.goLiveLocked() // the common case: nothing to replay
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if ps, ok := s.sink.(PacedSink); ok {
		ps.Pace(s.pull)
		return
	}
	for s.pull(math.MaxInt) {
	}
}

// deliver is called by the topic's fan-out, sequentially per topic.
func (s *Subscription) deliver(p *Publication) {
	if s.closed.Load() {
		return
	}
	if s.live.Load() {
		s.deliverLocked(p) // single writer: the topic's delivery owns s.last once live
		return
	}
	s.mu.Lock()
	if s.live.Load() {
		s.deliverLocked(p)
	} else {
		s.bufferLocked(p)
	}
	s.mu.Unlock()
}

// deliverLocked drops publications the sink already has, tells the sink when its history broke
// (the epoch changed under it, or publications before p could not be delivered), then hands p
// over.
func (s *Subscription) deliverLocked(p *Publication) {
	if p.Epoch == s.last.Epoch && p.Offset <= s.last.Offset {
		s.hub.stats.Duplicates.Add(1)
		return
	}
	var reason string
	switch {
	case s.last.Epoch != "" && p.Epoch != s.last.Epoch:
		reason = fmt.Sprintf("epoch changed from %s to %s: history was lost, offsets start over", s.last.Epoch, p.Epoch)
	case p.Offset > s.last.Offset+1 && (p.Epoch == s.last.Epoch || s.last.Epoch == ""):
		// The hub fills gaps from history (fillGapLocked); this is what history no longer held.
		reason = fmt.Sprintf("publications %d to %d of epoch %s are no longer retained", s.last.Offset+1, p.Offset-1, p.Epoch)
	}
	if reason != "" {
		s.hub.stats.GapsReported.Add(1)
		if g, ok := s.sink.(GapSink); ok {
			g.Gap(s.topic.name, Position{Offset: p.Offset, Epoch: p.Epoch}, reason)
		}
	}
	s.last = Position{Offset: p.Offset, Epoch: p.Epoch}
	s.hub.stats.Deliveries.Add(1)
	s.sink.Deliver(p)
}

// Unsubscribe removes the subscription. It is safe to call more than once.
func (h *Hub) Unsubscribe(s *Subscription) {
	if s != nil && h.remove(s) {
		h.stats.Subscriptions.Add(-1)
	}
}

// remove takes a subscription off its topic; it reports whether this call did.
func (h *Hub) remove(s *Subscription) bool {
	if s.closed.Swap(true) {
		return false
	}
	h.pres.stopped(s)
	t := s.topic
	t.mu.Lock()
	empty := t.removeLocked(s)
	if empty && t.brokerSubscribed {
		t.brokerSubscribed = false
		// Best effort: a failed unsubscribe only costs unneeded deliveries, dropped here. Bounded,
		// because t.mu is held and a broker connection may hang.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.broker.Unsubscribe(ctx, t.name)
		cancel()
		// Deliveries stop here: a later subscription starts from a new baseline.
		t.deliverMu.Lock()
		t.known = false
		t.deliverMu.Unlock()
	}
	t.mu.Unlock()
	h.detach(t)
	return true
}

// attach finds or creates the local topic and makes sure the broker delivers it here.
func (h *Hub) attach(ctx context.Context, name string) (*topic, error) {
	sh := h.shard(name)
	sh.mu.Lock()
	t := sh.topics[name]
	if t == nil {
		t = &topic{name: name}
		t.subs.Store(new([]*Subscription))
		sh.topics[name] = t
		h.stats.Topics.Add(1)
	}
	t.refs++
	sh.mu.Unlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.brokerSubscribed {
		if err := h.broker.Subscribe(ctx, name); err != nil {
			go h.detach(t) // not under t.mu: detach takes the shard lock only
			return nil, fmt.Errorf("hub: subscribe %s at broker: %w", name, err)
		}
		t.brokerSubscribed = true
		h.baseline(ctx, t)
	}
	return t, nil
}

// baseline records where the topic stands as this node starts receiving it, so that missing
// offsets are noticed even before the first delivery here: a node cut off from its broker right
// after a client subscribed must still fetch what was published meanwhile, not start from
// whatever arrives after it returns. It runs under t.mu, before any subscription is added, and
// subscriptions read their history after it, so nothing a subscriber still needs is at or
// below the baseline.
func (h *Hub) baseline(ctx context.Context, t *topic) {
	hr, err := h.broker.History(ctx, t.name, math.MaxUint64, 0)
	if err != nil {
		return // no baseline: the first delivery is taken as it comes, and becomes one
	}
	t.deliverMu.Lock()
	// A delivery may have come in between the broker subscription and this read's answer;
	// being later in the topic, it is the better baseline. Going back to the read's position
	// would make the next delivery look like a gap over what was already delivered.
	if !t.known || t.last.Epoch != hr.Top.Epoch || t.last.Offset < hr.Top.Offset {
		t.last = hr.Top
	}
	t.known = true
	t.deliverMu.Unlock()
}

func (h *Hub) detach(t *topic) {
	sh := h.shard(t.name)
	sh.mu.Lock()
	t.refs--
	if t.refs == 0 {
		delete(sh.topics, t.name)
		h.stats.Topics.Add(-1)
	}
	sh.mu.Unlock()
}

func (t *topic) addLocked(s *Subscription) {
	old := *t.subs.Load()
	next := make([]*Subscription, len(old), len(old)+1)
	copy(next, old)
	next = append(next, s)
	t.subs.Store(&next)
}

// removeLocked removes s and reports whether no subscriber is left.
func (t *topic) removeLocked(s *Subscription) bool {
	old := *t.subs.Load()
	next := make([]*Subscription, 0, len(old))
	for _, x := range old {
		if x != s {
			next = append(next, x)
		}
	}
	t.subs.Store(&next)
	return len(next) == 0
}

func (h *Hub) lookup(name string) *topic {
	sh := h.shard(name)
	sh.mu.RLock()
	t := sh.topics[name]
	sh.mu.RUnlock()
	return t
}

// brokerHandler is the Hub seen by its Broker.
type brokerHandler Hub

// HandlePublication fans p out to the topic's local subscribers.
func (bh *brokerHandler) HandlePublication(p *Publication) {
	h := (*Hub)(bh)
	h.stats.Received.Add(1)
	t := h.lookup(p.Topic)
	if t == nil {
		return
	}
	t.deliverMu.Lock()
	defer t.deliverMu.Unlock()
	switch {
	case !t.known:
		// The broker subscription is starting and its baseline is not read yet: nothing to
		// compare with, and no subscriber yet that could miss anything.
	case t.last.Epoch == p.Epoch && p.Offset > t.last.Offset+1:
		h.fillGapLocked(t, p) // deliveries were lost within the epoch
	case t.last.Epoch != p.Epoch && p.Offset > 1:
		h.fillGapLocked(t, p) // a new epoch began (or the first one did) while deliveries were interrupted
	}
	h.fanOutLocked(t, p)
}

// HandleResubscribed fetches, for every local topic, what was published while the broker's
// deliveries were interrupted.
func (bh *brokerHandler) HandleResubscribed() {
	h := (*Hub)(bh)
	var topics []*topic
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for _, t := range sh.topics {
			topics = append(topics, t)
		}
		sh.mu.RUnlock()
	}
	for _, t := range topics {
		t.deliverMu.Lock()
		h.fillGapLocked(t, nil)
		t.deliverMu.Unlock()
	}
}

// fillGapLocked delivers from history what was published after t.last and before next (all of
// it when next is nil). When the epoch changed meanwhile, that is the new epoch from its first
// retained publication; subscribers are told of the change as it is delivered (see GapSink).
func (h *Hub) fillGapLocked(t *topic, next *Publication) {
	if !t.known {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hr, err := h.broker.History(ctx, t.name, t.last.Offset, 0)
	if err != nil {
		return // subscribers see the gap in offsets and can resume
	}
	epoch := t.last.Epoch
	if hr.Top.Epoch != "" && hr.Top.Epoch != t.last.Epoch {
		epoch = hr.Top.Epoch
		if t.last.Offset > 0 {
			if hr, err = h.broker.History(ctx, t.name, 0, 0); err != nil {
				return
			}
		}
	}
	for _, p := range hr.Publications {
		if p.Epoch != epoch || (next != nil && p.Epoch == next.Epoch && p.Offset >= next.Offset) {
			break
		}
		h.stats.GapsFilled.Add(1)
		h.fanOutLocked(t, p)
	}
}

func (h *Hub) fanOutLocked(t *topic, p *Publication) {
	if t.last.Epoch == p.Epoch && p.Offset <= t.last.Offset {
		return // already delivered (a gap fill raced the live delivery)
	}
	t.last, t.known = Position{Offset: p.Offset, Epoch: p.Epoch}, true
	for _, s := range *t.subs.Load() {
		s.deliver(p)
	}
}
