// Package nats is a hub.Broker on NATS JetStream (nats-server 2.9 or newer), for several rtlab
// nodes sharing one NATS server or cluster.
//
// All topics live in one stream; a topic's subject is one token under the stream's name. A
// topic's offsets are assigned by compare-and-set: a publication carries offset previous+1 and
// is stored only if the topic's latest message in the stream is still the one that offset
// follows (header Nats-Expected-Last-Subject-Sequence). On a conflict the node reads the
// topic's latest message and tries again. So offsets are contiguous, and a topic's stream order
// is offset order. Publications travel in the message payload, offset and epoch included.
//
// Every node reads the whole stream in order with one ordered consumer and applies it to a
// replica: each topic's position and latest publications. History answers from the replica,
// which is fast enough for short polling, and a node's handler is called from that consumer, in
// stream order. Publish returns once this node has applied the publication, so a client that
// publishes and then reads history on the same node sees its publication. Every node applies the
// same stream, so every node has the same offsets, epochs and history; the cost is that every
// node receives every publication, subscribed or not (the hub drops topics without local
// subscribers).
//
// The stream keeps Retention.Size publications per topic for Retention.TTL. A topic whose
// publications have all expired is forgotten; its next publication starts a new epoch at
// offset 1. When the connection drops, Ready is false and publishes fail at once; the client
// reconnects, the ordered consumer resumes after the last message it delivered, and once the
// node has caught up with the stream it calls Handler.HandleResubscribed. If the stream itself
// was lost (recreated), the node starts over from the new stream: new epochs tell clients.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// Config configures a Broker.
type Config struct {
	// Policy gives each topic's history size and TTL, as History answers. Nil means Retention
	// for every topic. A topic's policy cannot keep more than Retention.
	Policy func(topic string) hub.HistoryPolicy
	// Retention is what the stream keeps per topic (MaxMsgsPerSubject) and for how long
	// (MaxAge). Zero fields are taken from Policy(""), then default to 100 and 10 minutes.
	Retention hub.HistoryPolicy
	// Stream names the JetStream stream and prefixes its subjects. Zero means "rtlab". Nodes
	// that share topics use the same stream. Letters, digits, '_' and '-' only. Durable topics
	// (a Policy with a negative TTL) live in a stream of their own, <Stream>_durable.
	Stream string
	// DurableSize is what the durable stream keeps per topic (MaxMsgsPerSubject); it has no
	// MaxAge. A durable topic's Policy can only narrow it. Zero means 1000.
	DurableSize int
	// Replicas is the stream's replica count in a JetStream cluster. Zero means 1.
	Replicas int
	// PingInterval is how often the connection is checked; a server that leaves two pings
	// unanswered is taken as lost, which bounds how fast a hung server is noticed (between two
	// and three intervals). Zero means 1 s.
	PingInterval time.Duration
	// Logger receives connection losses and recoveries. Nil means no logging.
	Logger *slog.Logger
	// Registerer receives the broker's Prometheus collectors (rtlab_broker_*{broker="nats"}).
	// Nil means they are not registered.
	Registerer prometheus.Registerer
}

// Errors returned by the broker.
var (
	ErrClosed = errors.New("nats broker: closed")
)

var validStream = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Broker is a hub.Broker on NATS JetStream. It is safe for concurrent use.
type Broker struct {
	replica.EveryTopic // every node reads the whole log: nothing to subscribe to

	cfg     Config
	nc      *natsgo.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	m       *metrics
	rep     *replica.Replica
	handler hub.Handler // set by Run

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	running   atomic.Bool // Run has set the handler and started the consumer
	connected atomic.Bool
	// conn ends when the connection drops, failing the publishes waiting on it at once instead
	// of at their timeout. Replaced on reconnect.
	conn       atomic.Pointer[connScope]
	synced     atomic.Bool // the consumer caught up with the stream since the last (re)connect
	rebuilding atomic.Bool // the replica was reset and is replaying the stream: History would mislead
	resyncs    atomic.Int64
	downSince  atomic.Int64 // unix nanos of the last disconnect; 0 when none pending

	// pubLocks serialize this node's publishes per topic (by replica shard), so a node never
	// conflicts with itself on offsets.
	pubLocks [replica.Shards]sync.Mutex

	// logs are the streams this node reads in full: logs[0] for topics with a TTL, logs[1]
	// for durable ones.
	logs [2]*streamLog
	// consMu guards each log's stream and consumer; deliverMu serializes deliveries (an ordered
	// consumer that is being reset may overlap its old and new subscriptions for a moment).
	consMu    sync.Mutex
	deliverMu sync.Mutex
	closeOnce sync.Once
}

// streamLog is one stream and this node's consumer of it.
type streamLog struct {
	name    string
	durable bool                     // holds the durable topics; immutable
	stream  jetstream.Stream         // guarded by Broker.consMu
	cons    jetstream.ConsumeContext // guarded by Broker.consMu
	created time.Time                // stream creation time, to notice a recreated stream; guarded by Broker.consMu
	consGen uint64                   // generation of the current consumer; older ones' messages are dropped; guarded by Broker.deliverMu

	appliedMu sync.Mutex
	applied   uint64        // last stream sequence applied; guarded by appliedMu
	waiters   []applyWaiter // guarded by appliedMu
}

type connScope struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *Broker) newConnScope() {
	ctx, cancel := context.WithCancel(b.ctx)
	if old := b.conn.Swap(&connScope{ctx: ctx, cancel: cancel}); old != nil {
		old.cancel()
	}
}

type applyWaiter struct {
	seq uint64
	ch  chan struct{}
}

var _ hub.Broker = (*Broker)(nil)

// New connects to NATS at url (nats://[user:password@]host:port, several separated by commas)
// and creates or updates the stream. Call Run to start delivering.
func New(ctx context.Context, url string, cfg Config) (*Broker, error) {
	if cfg.Stream == "" {
		cfg.Stream = "rtlab"
	}
	if !validStream.MatchString(cfg.Stream) {
		return nil, fmt.Errorf("nats broker: Stream %q: want 1-64 of A-Z a-z 0-9 _ -", cfg.Stream)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DurableSize <= 0 {
		cfg.DurableSize = 1000
	}
	cfg.Retention, cfg.Policy = replica.Policies(cfg.Retention, cfg.DurableSize, cfg.Policy)
	bctx, cancel := context.WithCancel(context.Background())
	b := &Broker{cfg: cfg, log: cfg.Logger.With("broker", "nats"), m: newMetrics(cfg.Registerer),
		rep: replica.New(cfg.Policy), ctx: bctx, cancel: cancel,
		logs: [2]*streamLog{{name: cfg.Stream}, {name: cfg.Stream + "_durable", durable: true}}}
	nc, err := natsgo.Connect(url,
		natsgo.Name("rtlab"),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond),
		natsgo.ReconnectJitter(250*time.Millisecond, time.Second),
		natsgo.ReconnectBufSize(-1), // fail publishes while disconnected instead of buffering them
		natsgo.PingInterval(cfg.PingInterval),
		natsgo.MaxPingsOutstanding(2),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) { b.onDisconnect(err) }),
		natsgo.ReconnectHandler(func(*natsgo.Conn) { b.onReconnect() }),
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("nats broker: connect: %w", err)
	}
	b.nc = nc
	b.newConnScope()
	b.connected.Store(true)
	if b.js, err = jetstream.New(nc); err != nil {
		cancel() // first, so that closing is not logged as a lost connection
		nc.Close()
		return nil, fmt.Errorf("nats broker: %w", err)
	}
	for _, l := range b.logs {
		if _, err := b.ensureStream(ctx, l); err != nil {
			cancel()
			nc.Close()
			return nil, withCause(err)
		}
	}
	return b, nil
}

// withCause adds to a hub.UnavailableError the cause its text leaves out, for New's caller: an
// operator starting a node wants to read why (say, a server without JetStream), not only that
// NATS is unavailable.
func withCause(err error) error {
	var ue *hub.UnavailableError
	if !errors.As(err, &ue) {
		return err
	}
	if errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return fmt.Errorf("%w (%v: is JetStream enabled, nats-server -js?)", err, ue.Cause)
	}
	return fmt.Errorf("%w (%v)", err, ue.Cause)
}

func (b *Broker) streamConfig(l *streamLog) jetstream.StreamConfig {
	c := jetstream.StreamConfig{
		Name:              l.name,
		Description:       "rtlab publications, one subject per topic",
		Subjects:          []string{l.name + ".>"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: int64(b.cfg.Retention.Size),
		MaxAge:            b.cfg.Retention.TTL,
		Replicas:          b.cfg.Replicas,
		AllowDirect:       true,
	}
	if l.durable {
		c.Description = "rtlab publications of durable topics (chat rooms), one subject per topic"
		c.MaxMsgsPerSubject, c.MaxAge = int64(b.cfg.DurableSize), 0
	}
	return c
}

// logFor returns the stream topic lives in.
func (b *Broker) logFor(topic string) *streamLog {
	if b.cfg.Policy(topic).TTL < 0 {
		return b.logs[1]
	}
	return b.logs[0]
}

// TopicsSince names the durable topics published to since since, for archive sweeps.
func (b *Broker) TopicsSince(_ context.Context, since time.Time) ([]string, error) {
	return b.rep.DurableTopicsSince(since), nil
}

// ensureStream creates l's stream or updates its limits, and remembers it.
func (b *Broker) ensureStream(ctx context.Context, l *streamLog) (*jetstream.StreamInfo, error) {
	var s jetstream.Stream
	err := askAgainUnanswered(ctx, func(ctx context.Context) (err error) {
		s, err = b.js.CreateOrUpdateStream(ctx, b.streamConfig(l))
		return err
	})
	if err != nil {
		return nil, b.wrap("create stream "+l.name, err)
	}
	info := s.CachedInfo()
	b.consMu.Lock()
	l.stream = s
	if l.created.IsZero() {
		l.created = info.Created
	}
	b.consMu.Unlock()
	return info, nil
}

// Run starts the consumer, replays the stream into the replica and returns once it has caught
// up with the stream (or ctx ends, or 60 s pass). Deliveries continue until Close.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	b.handler = h
	context.AfterFunc(ctx, func() { _ = b.Close() })
	if err := b.startConsumers(false); err != nil {
		return err
	}
	if err := b.catchUp(ctx, 60*time.Second); err != nil {
		return err
	}
	b.synced.Store(true)
	b.running.Store(true)
	b.m.Ready.Set(1)
	go b.rep.SweepEvery(b.ctx, time.Minute)
	go b.watch()
	return nil
}

// watch notices a stream deleted or recreated while the connection stayed up (an operator's
// mistake, a JetStream that lost its storage): the consumer would wait forever on a stream that
// is gone, so the node resyncs as after a reconnect.
func (b *Broker) watch() {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		if !b.Ready() {
			continue
		}
		for _, l := range b.logs {
			ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
			b.consMu.Lock()
			s, created := l.stream, l.created
			b.consMu.Unlock()
			info, err := s.Info(ctx)
			cancel()
			if errors.Is(err, jetstream.ErrStreamNotFound) || (err == nil && !info.Created.Equal(created)) {
				b.log.Warn("nats stream was deleted or recreated", "stream", l.name)
				b.synced.Store(false)
				b.m.Ready.Set(0)
				b.downSince.CompareAndSwap(0, time.Now().UnixNano())
				b.resync(b.resyncs.Add(1))
				break
			}
		}
	}
}

// startConsumers (re)starts every log's ordered consumer after the last sequence applied, or
// from the beginning of the stream when nothing is. With reset, it first forgets everything
// applied: a stream was recreated, and the replica is rebuilt from both.
func (b *Broker) startConsumers(reset bool) error {
	b.consMu.Lock()
	defer b.consMu.Unlock()
	// New generations, and the reset, in one step under deliverMu: the old consumers apply
	// nothing more, in particular nothing after the replica was reset.
	var gens, applied [2]uint64
	b.deliverMu.Lock()
	if reset {
		b.rebuilding.Store(true)
		b.rep.Reset()
	}
	for i, l := range b.logs {
		l.consGen++
		gens[i] = l.consGen
		l.appliedMu.Lock()
		if reset {
			l.applied = 0
		}
		applied[i] = l.applied
		l.appliedMu.Unlock()
	}
	b.deliverMu.Unlock()
	for i, l := range b.logs {
		if err := b.startConsumerLocked(l, gens[i], applied[i]); err != nil {
			return err
		}
	}
	return nil
}

// startConsumerLocked (re)starts l's consumer of generation gen after sequence applied.
// b.consMu must be held.
func (b *Broker) startConsumerLocked(l *streamLog, gen, applied uint64) error {
	if l.cons != nil {
		// Stop waits for a consumer reset nats.go may have in flight, whose request, sent
		// before the connection dropped, times out only after 10 s. The generation bump
		// already drops the old consumer's messages, so it is stopped in the background.
		go l.cons.Stop()
		l.cons = nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if applied > 0 {
		cfg = jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: applied + 1}
	}
	c, err := b.js.OrderedConsumer(b.ctx, l.name, cfg)
	if err != nil {
		return b.wrap("create consumer", err)
	}
	cc, err := c.Consume(func(msg jetstream.Msg) { b.onMsg(l, gen, msg) },
		jetstream.PullMaxMessages(1000),
		jetstream.PullExpiry(4*time.Second),
		// A consumer that gets nothing, not even heartbeats, for two heartbeats is recreated
		// by nats.go. nats-server 2.9.10 sometimes stops serving a pull consumer under load
		// (docs/brokers.md, "Running several nodes"): the heartbeat bounds how long that lasts.
		jetstream.PullHeartbeat(500*time.Millisecond),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				b.log.Warn("nats consumer missed heartbeats; recreating it", "stream", l.name, "err", err)
				return
			}
			b.log.Debug("nats consumer", "stream", l.name, "err", err)
		}))
	if err != nil {
		return b.wrap("consume", err)
	}
	l.cons = cc
	return nil
}

// catchUp waits until the replica has applied everything the streams held when it was called.
func (b *Broker) catchUp(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, l := range b.logs {
		b.consMu.Lock()
		s := l.stream
		b.consMu.Unlock()
		info, err := s.Info(ctx)
		if err != nil {
			return b.wrap("stream info", err)
		}
		if info.State.Msgs == 0 {
			continue
		}
		if err := b.waitApplied(ctx, l, info.State.LastSeq); err != nil {
			return hub.Unavailable("nats", fmt.Errorf("catching up with stream %s to %d: %w", l.name, info.State.LastSeq, err))
		}
	}
	return nil
}

// Close stops the consumer and closes the connection.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		b.consMu.Lock()
		for _, l := range b.logs {
			if l.cons != nil {
				l.cons.Stop()
			}
		}
		b.consMu.Unlock()
		b.synced.Store(false)
		b.nc.Close()
	})
	return nil
}

// Ready reports whether the connection is up and the node has caught up with the stream.
func (b *Broker) Ready() bool { return b.connected.Load() && b.synced.Load() && b.ctx.Err() == nil }

// History answers from the replica.
func (b *Broker) History(_ context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	if b.ctx.Err() != nil {
		return hub.HistoryResult{}, ErrClosed
	}
	if b.rebuilding.Load() {
		// A replica replaying the stream from its start would tell a resuming client that its
		// history is gone; it may only be further down the stream.
		return hub.HistoryResult{}, hub.Unavailable("nats", errors.New("replaying the stream"))
	}
	return b.rep.History(topic, since, limit, time.Now()), nil
}

// Publish assigns the topic's next offset by compare-and-set on the stream and returns once this
// node has applied the publication (or 2 s passed: it is stored either way).
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	if !b.Ready() {
		b.m.PublishErrors.Inc()
		return nil, hub.Unavailable("nats", errors.New("not connected"))
	}
	start := time.Now()
	if req.Time.IsZero() {
		req.Time = start
	}
	t := req.Time.Truncate(time.Millisecond)
	pol := b.cfg.Policy(req.Topic)
	l := b.logFor(req.Topic)
	subj := subject(l.name, req.Topic)
	scope := b.conn.Load()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(scope.ctx, cancel)()
	// A lost connection cancels ctx too; the caller is told the broker is unavailable, not
	// that its own call was canceled.
	fail := func(err error) error {
		b.m.PublishErrors.Inc()
		if scope.ctx.Err() != nil {
			return hub.Unavailable("nats", fmt.Errorf("connection lost while publishing to %s", req.Topic))
		}
		return err
	}
	mu := &b.pubLocks[b.rep.Shard(req.Topic)]
	mu.Lock()
	defer mu.Unlock()
	last, known := b.rep.Last(req.Topic, start)
	var payload []byte
	for attempt := 0; ; attempt++ {
		epoch, off := replica.NewEpoch(), uint64(1)
		if known && !last.Expired {
			epoch, off = last.Epoch, last.Offset+1
		}
		payload = replica.AppendTail(replica.AppendHead(payload[:0], off, epoch), t, req.Sender, req.Type, req.Data)
		ack, err := b.js.PublishMsg(ctx, &natsgo.Msg{Subject: subj, Data: payload},
			jetstream.WithExpectLastSequencePerSubject(last.Seq))
		if err == nil {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = b.waitApplied(wctx, l, ack.Sequence)
			cancel()
			b.m.Publish.Observe(time.Since(start).Seconds())
			return &hub.Publication{Topic: req.Topic, Offset: off, Epoch: epoch, Time: t,
				Sender: req.Sender, Type: req.Type, Data: req.Data}, nil
		}
		if !isWrongLastSeq(err) {
			return nil, fail(b.wrap("publish to "+req.Topic, err))
		}
		// Another node published to the topic since this node last saw it. A node that keeps
		// losing that race on a busy topic retries until conflictBudget rather than a fixed
		// number of times, and after a few losses in a row first waits a random moment, so
		// that it stops racing the other node in lockstep.
		b.m.conflicts.Inc()
		if time.Since(start) > conflictBudget {
			return nil, fail(fmt.Errorf("nats broker: publish to %s: %d offset conflicts in %v: %w",
				req.Topic, attempt+1, time.Since(start).Round(time.Millisecond), err))
		}
		if attempt >= 2 {
			select {
			case <-time.After(rand.N(100 * time.Microsecond << min(attempt-2, 5))):
			case <-ctx.Done():
				return nil, fail(b.wrap("publish to "+req.Topic, ctx.Err()))
			}
		}
		// Read the topic's latest message, then try again.
		if last, known, err = b.fetchLast(ctx, l, req.Topic, subj, pol, start); err != nil {
			return nil, fail(err)
		}
	}
}

// conflictBudget bounds how long a publish keeps retrying offset conflicts.
const conflictBudget = 5 * time.Second

// fetchLast reads the topic's latest message from the stream.
func (b *Broker) fetchLast(ctx context.Context, l *streamLog, topic, subj string, pol hub.HistoryPolicy, now time.Time) (replica.Last, bool, error) {
	b.consMu.Lock()
	s := l.stream
	b.consMu.Unlock()
	m, err := s.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return replica.Last{}, false, nil
	}
	if err != nil {
		return replica.Last{}, false, b.wrap("read latest of "+topic, err)
	}
	p, err := replica.Decode(topic, m.Data)
	if err != nil {
		return replica.Last{}, false, fmt.Errorf("nats broker: read latest of %s: %w", topic, err)
	}
	return replica.Last{Seq: m.Sequence, Epoch: p.Epoch, Offset: p.Offset, Time: p.Time, Expired: pol.TTL >= 0 && now.Sub(p.Time) > pol.TTL}, true, nil
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// wrap classifies err: JetStream API errors are returned as they are; anything else means NATS
// could not be reached.
func (b *Broker) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("nats broker: %s: %w", op, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code != 503 {
		return fmt.Errorf("nats broker: %s: %w", op, err)
	}
	return hub.Unavailable("nats", fmt.Errorf("%s: %w", op, err))
}

// onMsg applies one message of l's stream from consumer generation gen and hands new
// publications to the hub.
func (b *Broker) onMsg(l *streamLog, gen uint64, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	b.deliverMu.Lock()
	defer b.deliverMu.Unlock()
	if gen != l.consGen {
		return // a replaced consumer's late message
	}
	// A topic is read from the stream its policy puts it in: what an earlier configuration
	// left in the other one (before a topic became durable) is not applied.
	if topic, ok := topicOf(l.name, msg.Subject()); ok && b.logFor(topic) == l {
		if p, err := replica.Decode(topic, msg.Data()); err != nil {
			b.log.Error("nats broker: undecodable publication", "subject", msg.Subject(), "seq", seq, "err", err)
		} else if b.rep.Apply(p, seq) {
			b.handler.HandlePublication(p)
		}
	}
	l.setApplied(seq)
}

func (l *streamLog) setApplied(seq uint64) {
	l.appliedMu.Lock()
	defer l.appliedMu.Unlock()
	if seq <= l.applied {
		return
	}
	l.applied = seq
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		if w.seq <= seq {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
}

// waitApplied waits until l's stream has been applied up to seq.
func (b *Broker) waitApplied(ctx context.Context, l *streamLog, seq uint64) error {
	l.appliedMu.Lock()
	if l.applied >= seq {
		l.appliedMu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	l.waiters = append(l.waiters, applyWaiter{seq: seq, ch: ch})
	l.appliedMu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return ErrClosed
	}
}

func (b *Broker) onDisconnect(err error) {
	if b.ctx.Err() != nil {
		return
	}
	b.connected.Store(false)
	b.synced.Store(false)
	b.conn.Load().cancel()
	if b.running.Load() {
		// The ordered consumers resume by themselves after a reconnect, at the next sequence
		// they expect; on a stream recreated meanwhile that skips its first messages. Nothing
		// they deliver is applied until resync has checked the streams and started new ones.
		b.deliverMu.Lock()
		for _, l := range b.logs {
			l.consGen++
		}
		b.deliverMu.Unlock()
	}
	b.m.Ready.Set(0)
	b.downSince.CompareAndSwap(0, time.Now().UnixNano())
	b.log.Warn("nats connection lost", "err", err)
}

func (b *Broker) onReconnect() {
	b.newConnScope()
	b.connected.Store(true)
	if !b.running.Load() {
		return // Run catches up itself
	}
	gen := b.resyncs.Add(1)
	go b.resync(gen)
}

// resync runs after a reconnect: it makes sure the stream exists (starting over if it was
// recreated), waits until the consumer caught up, then declares the node ready and lets the hub
// fill gaps from history.
func (b *Broker) resync(gen int64) {
	backoff := 100 * time.Millisecond
	for b.ctx.Err() == nil && b.resyncs.Load() == gen {
		if err := b.resyncOnce(); err != nil {
			b.log.Debug("nats resync", "err", err)
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		if b.resyncs.Load() != gen || !b.connected.Load() {
			return
		}
		b.synced.Store(true)
		b.m.Ready.Set(1)
		b.m.Reconnects.Inc()
		if since := b.downSince.Swap(0); since != 0 {
			d := time.Since(time.Unix(0, since))
			b.m.Outage.Observe(d.Seconds())
			b.log.Info("nats node caught up with the stream again", "down_for", d.Round(time.Millisecond))
		}
		b.handler.HandleResubscribed()
		return
	}
}

func (b *Broker) resyncOnce() error {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	reset := false
	infos := make([]*jetstream.StreamInfo, len(b.logs))
	for i, l := range b.logs {
		b.consMu.Lock()
		s, created := l.stream, l.created
		b.consMu.Unlock()
		info, err := s.Info(ctx)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			info, err = b.ensureStream(ctx, l)
		}
		if err != nil {
			return err
		}
		l.appliedMu.Lock()
		applied := l.applied
		l.appliedMu.Unlock()
		if !info.Created.Equal(created) || info.State.LastSeq < applied {
			// The stream was lost and recreated: its sequences start over. Read it from the start;
			// its publications carry new epochs, which is how clients learn that history is gone.
			b.log.Warn("nats stream was recreated; starting over", "stream", l.name,
				"created", info.Created, "was_created", created, "last_seq", info.State.LastSeq, "applied", applied)
			reset = true
		}
		infos[i] = info
	}
	// A consumer that missed its heartbeats while the connection was down is recreated by
	// nats.go on a backoff of up to 10 s; a new one, after what was applied, starts now.
	if err := b.startConsumers(reset); err != nil {
		return err // created is unchanged: the next attempt starts over again
	}
	if reset {
		b.consMu.Lock()
		for i, l := range b.logs {
			l.created = infos[i].Created
		}
		b.consMu.Unlock()
	}
	if err := b.catchUp(b.ctx, 30*time.Second); err != nil {
		return err
	}
	b.rebuilding.Store(false)
	return nil
}

// askAgainUnanswered runs call with a deadline of 2 s at a time, pausing between tries, until
// it is answered or ctx ends: nodes starting together race to create the same stream, and JetStream may leave
// such a request without an answer (seen with five nodes on a fresh nats-server 2.9), which
// would otherwise fail every one of them.
func askAgainUnanswered(ctx context.Context, call func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := call(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !Unanswered(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// Unanswered reports whether err says a JetStream request got no answer (it timed out, nobody
// answered yet, or the connection was down meanwhile): asking again may succeed.
func Unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrTimeout) ||
		errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, natsgo.ErrReconnectBufExceeded) || errors.Is(err, natsgo.ErrConnectionReconnecting) ||
		overlapsCreated(err)
}

// overlapsCreated: another node created the stream between this node's look and its create;
// asked again, the stream is found and updated.
func overlapsCreated(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == 10065 // JSStreamSubjectOverlapErr
}
