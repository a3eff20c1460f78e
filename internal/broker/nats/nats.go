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
// A node receives only the topics it serves. The stream republishes what it stores (RePublish)
// to a subject space of its own, <stream>-live.>, in stream order, each message with its stream
// sequence; a node subscribes (core NATS) to the republished subject of each topic it has local
// subscribers for, and keeps a cache of that topic's latest publications, loaded from the
// stream when it starts following it (follow.go). It subscribes to what the stream stored, not to
// the publish subject: a publish the compare-and-set refuses would still reach plain
// subscribers of that one. A core message lost on the way shows as a gap in offsets, which the
// node fills from the stream before it delivers what follows. History of a followed topic
// answers from the cache; of any other topic, from the stream (direct gets, read.go). Publish
// returns once this node's cache of a followed topic holds the publication, so a client that
// publishes and then reads history on the same node sees it.
//
// The stream keeps Retention.Size publications per topic for Retention.TTL. A topic whose
// publications have all expired is forgotten; its next publication starts a new epoch at
// offset 1. When the connection drops, Ready is false and publishes fail at once; the client
// reconnects and subscribes again, the node reads from the stream what each followed topic
// missed, delivers it, and calls Handler.HandleResubscribed. If the stream itself was lost
// (recreated), the followed topics start over from the new stream: new epochs tell clients.
package nats

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
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

// pubShards is how many locks serialize this node's publishes by topic.
const pubShards = 64

// Broker is a hub.Broker on NATS JetStream. It is safe for concurrent use.
type Broker struct {
	cfg     Config
	nc      *natsgo.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	m       *metrics
	handler hub.Handler // set by Run

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	running   atomic.Bool // Run has set the handler
	connected atomic.Bool
	// conn ends when the connection drops, failing the publishes waiting on it at once instead
	// of at their timeout. Replaced on reconnect.
	conn      atomic.Pointer[connScope]
	synced    atomic.Bool // the followed topics caught up since the last (re)connect
	resyncs   atomic.Int64
	downSince atomic.Int64 // unix nanos of the last disconnect; 0 when none pending

	// pubLocks serialize this node's publishes per topic (by shard), so a node never
	// conflicts with itself on offsets.
	seed     maphash.Seed
	pubLocks [pubShards]sync.Mutex
	hints    [pubShards]hintShard

	followMu sync.Mutex
	follows  map[string]*follow // topics with local subscribers; guarded by followMu

	// logs are the streams: logs[0] for topics with a TTL, logs[1] for durable ones.
	logs      [2]*streamLog
	consMu    sync.Mutex // guards each log's stream and created
	closeOnce sync.Once
}

// streamLog is one stream.
type streamLog struct {
	name    string
	durable bool             // holds the durable topics; immutable
	stream  jetstream.Stream // guarded by Broker.consMu
	created time.Time        // stream creation time, to notice a recreated stream; guarded by Broker.consMu
}

// live is the subject space l's stream republishes what it stores to.
func (l *streamLog) live() string { return l.name + "-live" }

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

var _ hub.Broker = (*Broker)(nil)

// New connects to NATS at url (nats://[user:password@]host:port, several separated by commas)
// and creates or updates the stream. Call Run to start delivering.
func New(ctx context.Context, url string, cfg Config) (*Broker, error) {
	b, err := newBroker(cfg)
	if err != nil {
		return nil, err
	}
	nc, err := natsgo.Connect(url, b.connectOptions()...)
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("nats broker: connect: %w", err)
	}
	if err := b.start(ctx, nc); err != nil {
		b.cancel() // first, so that closing is not logged as a lost connection
		nc.Close()
		return nil, err
	}
	return b, nil
}

func newBroker(cfg Config) (*Broker, error) {
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
		ctx: bctx, cancel: cancel, seed: maphash.MakeSeed(), follows: make(map[string]*follow),
		logs: [2]*streamLog{{name: cfg.Stream}, {name: cfg.Stream + "_durable", durable: true}}}
	for i := range b.hints {
		b.hints[i].m = make(map[string]replica.Last)
	}
	return b, nil
}

// connectOptions are the broker's connection's options: reconnect forever, fail publishes
// while disconnected, and tell the broker of losses and recoveries.
func (b *Broker) connectOptions() []natsgo.Option {
	return []natsgo.Option{
		natsgo.Name("rtlab"),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250 * time.Millisecond),
		natsgo.ReconnectJitter(250*time.Millisecond, time.Second),
		natsgo.ReconnectBufSize(-1), // fail publishes while disconnected instead of buffering them
		natsgo.PingInterval(b.cfg.PingInterval),
		natsgo.MaxPingsOutstanding(2),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) { b.onDisconnect(err) }),
		natsgo.ReconnectHandler(func(*natsgo.Conn) { b.onReconnect() }),
	}
}

// start takes nc as the broker's connection and creates or updates the streams.
func (b *Broker) start(ctx context.Context, nc *natsgo.Conn) error {
	b.nc = nc
	b.newConnScope()
	b.connected.Store(true)
	var err error
	if b.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("nats broker: %w", err)
	}
	for _, l := range b.logs {
		if _, err := b.ensureStream(ctx, l); err != nil {
			return withCause(err)
		}
	}
	return nil
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
		// What the stream stored, in its order, to the nodes that follow a topic.
		RePublish: &jetstream.RePublish{Source: l.name + ".>", Destination: l.live() + ".>"},
	}
	// Retries with an idempotency key are found within the history TTL (Nats-Msg-Id).
	c.Duplicates = hub.HistoryPolicy{TTL: b.cfg.Retention.TTL}.Resolved().TTL
	if l.durable {
		c.Description = "rtlab publications of durable topics (chat rooms), one subject per topic"
		c.MaxMsgsPerSubject, c.MaxAge = int64(b.cfg.DurableSize), 0
		c.Duplicates = hub.DefaultHistoryTTL
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

// streamOf returns l's stream handle.
func (b *Broker) streamOf(l *streamLog) jetstream.Stream {
	b.consMu.Lock()
	defer b.consMu.Unlock()
	return l.stream
}

// ensureStream creates l's stream or updates its limits, and remembers it.
func (b *Broker) ensureStream(ctx context.Context, l *streamLog) (*jetstream.StreamInfo, error) {
	var s jetstream.Stream
	err := askAgainUnanswered(ctx, func(ctx context.Context) (err error) {
		s, err = createOrUpdateStream(ctx, b.js, b.streamConfig(l))
		return err
	})
	var api *jetstream.APIError
	if errors.As(err, &api) && strings.Contains(api.Description, "RePublish") {
		return nil, fmt.Errorf("nats broker: stream %s has no RePublish, which this nats-server (%s) cannot add to an existing stream: "+
			"upgrade nats-server (2.15.2 can), or delete the stream (its topics then start new epochs): %w", l.name, b.nc.ConnectedServerVersion(), err)
	}
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

// createOrUpdateStream creates the stream, or updates it when it exists with another
// configuration. It asks to create first, unlike jetstream's CreateOrUpdateStream: nodes that
// start together on a fresh server race to create the same stream, and an update that reaches
// nats-server 2.9 while another node's create of the stream is under way crashes the server
// (a nil pointer in stream.updateWithAdvisory). Creating a stream that exists with the same
// configuration succeeds, so nodes of one version never update it.
func createOrUpdateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.UpdateStream(ctx, cfg)
	}
	return s, err
}

// Run sets the handler and starts watching the streams. Deliveries continue until Close.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	b.handler = h
	context.AfterFunc(ctx, func() { _ = b.Close() })
	b.synced.Store(true)
	b.running.Store(true)
	b.m.Ready.Set(1)
	go b.watch()
	return nil
}

// watch notices a stream deleted or recreated while the connection stayed up (an operator's
// mistake, a JetStream that lost its storage): the followed topics would wait forever on a
// stream that is gone, so the node resyncs as after a reconnect. It also puts RePublish back on
// a stream whose configuration lost it (a node of an older version updated it).
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
			if err == nil && info.Created.Equal(created) && info.Config.RePublish == nil {
				b.restoreRePublish(l)
				continue
			}
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

// restoreRePublish adds RePublish back to l's stream and reads what the followed topics
// missed without it.
func (b *Broker) restoreRePublish(l *streamLog) {
	b.log.Warn("nats stream lost its RePublish; adding it again", "stream", l.name)
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := b.ensureStream(ctx, l); err != nil {
		b.log.Warn("nats broker: cannot add RePublish again", "stream", l.name, "err", err)
		return
	}
	for _, f := range b.followedTopics() {
		if f.l == l {
			if err := b.catchUp(ctx, f); err != nil {
				b.log.Warn("nats broker: cannot read what a followed topic missed", "topic", f.topic, "err", err)
			}
		}
	}
}

// Close stops deliveries and closes the connection.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		b.synced.Store(false)
		b.nc.Close()
	})
	return nil
}

// Ready reports whether the connection is up and the followed topics caught up.
func (b *Broker) Ready() bool { return b.connected.Load() && b.synced.Load() && b.ctx.Err() == nil }

// History answers from the cache of a followed topic, or from the stream.
func (b *Broker) History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	if b.ctx.Err() != nil {
		return hub.HistoryResult{}, ErrClosed
	}
	if f := b.followed(topic); f != nil {
		if hr, ok := f.history(since, limit, time.Now()); ok {
			return hr, nil
		}
	}
	return b.readHistory(ctx, topic, since, limit)
}

// Publish assigns the topic's next offset by compare-and-set on the stream. For a followed topic
// it returns once this node's cache holds the publication (or 2 s passed: it is stored either
// way).
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
	// that its own call was canceled, or, once a message was sent, that it may be stored.
	sent := false
	fail := func(err error) error {
		b.m.PublishErrors.Inc()
		if sent && mayBeStored(err, scope.ctx) {
			return hub.OutcomeUnknown("nats", fmt.Errorf("publish to %s: %v", req.Topic, err)) // %v: not an outage's ErrNotReady
		}
		if scope.ctx.Err() != nil {
			return hub.Unavailable("nats", fmt.Errorf("connection lost while publishing to %s", req.Topic))
		}
		return err
	}
	shard := b.shard(req.Topic)
	mu := &b.pubLocks[shard]
	mu.Lock()
	defer mu.Unlock()
	f := b.followed(req.Topic)
	last, known := b.lastOf(f, shard, req.Topic, pol, start)
	var payload []byte
	for attempt := 0; ; attempt++ {
		epoch, off := replica.NewEpoch(), uint64(1)
		if known && !last.Expired {
			epoch, off = last.Epoch, last.Offset+1
		}
		payload = replica.AppendTail(replica.AppendHead(payload[:0], off, epoch), t, req.Sender, req.Type, req.Data)
		msg := &natsgo.Msg{Subject: subj, Data: payload}
		if req.Key != "" {
			// JetStream's own de-duplication, per stream within its Duplicates window: a
			// retry is acknowledged with the original's sequence and not stored.
			msg.Header = natsgo.Header{natsgo.MsgIdHdr: []string{msgID(req)}}
		}
		sent = true
		ack, err := b.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last.Seq))
		if err == nil && ack.Duplicate {
			p, err := b.original(ctx, l, req, ack.Sequence)
			if err != nil {
				return nil, fail(err)
			}
			return p, nil
		}
		if err == nil {
			b.hints[shard].put(req.Topic, replica.Last{Seq: ack.Sequence, Epoch: epoch, Offset: off, Time: t})
			if f != nil {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_ = f.waitApplied(wctx, ack.Sequence)
				cancel()
			}
			b.m.Publish.Observe(time.Since(start).Seconds())
			return &hub.Publication{Topic: req.Topic, Offset: off, Epoch: epoch, Time: t,
				Sender: req.Sender, Type: req.Type, Data: req.Data}, nil
		}
		if !isWrongLastSeq(err) {
			return nil, fail(b.wrap("publish to "+req.Topic, err))
		}
		sent = false // refused by the compare-and-set: not stored
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

// msgID is a keyed publication's Nats-Msg-Id: unique per stream, so it names the topic and
// the sender too.
func msgID(req hub.PublishRequest) string {
	return req.Topic + " " + strconv.Itoa(len(req.Sender)) + ":" + req.Sender + " " + req.Key
}

// original answers a retry with the publication JetStream stored at seq.
func (b *Broker) original(ctx context.Context, l *streamLog, req hub.PublishRequest, seq uint64) (*hub.Publication, error) {
	m, err := b.streamOf(l).GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Published, but no longer in the stream (its topic's size limit): the answer says so
		// with offset 0 rather than publish it again.
		return &hub.Publication{Topic: req.Topic, Time: req.Time, Sender: req.Sender, Type: req.Type,
			Data: req.Data, Key: req.Key, Duplicate: true}, nil
	}
	if err != nil {
		return nil, b.wrap("read the original of a retry to "+req.Topic, err)
	}
	p, err := replica.Decode(req.Topic, m.Data)
	if err != nil {
		return nil, fmt.Errorf("nats broker: read the original of a retry to %s: %w", req.Topic, err)
	}
	p.Key = req.Key
	return hub.Duplicate(p), nil
}

// mayBeStored reports whether a publish that failed with err after its message was sent may
// still be stored: no answer came (a timeout, the connection lost, whose reconnect buffer may
// send it later), rather than JetStream's refusal or no stream to take it.
func mayBeStored(err error, scope context.Context) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, natsgo.ErrNoResponders):
		return false
	case scope.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout):
		return true
	}
	var ue *hub.UnavailableError
	return errors.As(err, &ue) // wrap's "could not be reached", after the send
}

// conflictBudget bounds how long a publish keeps retrying offset conflicts.
const conflictBudget = 5 * time.Second

func (b *Broker) shard(topic string) int { return int(maphash.String(b.seed, topic) % pubShards) }

// lastOf is what this node knows of topic's latest publication: from the cache when it
// follows the topic, or from its own latest publish to it, whichever is further. Either may be
// behind the stream; the compare-and-set then tells.
func (b *Broker) lastOf(f *follow, shard int, topic string, pol hub.HistoryPolicy, now time.Time) (replica.Last, bool) {
	last, known := b.hints[shard].get(topic)
	if f != nil {
		if c, ok := f.lastKnown(); ok && (!known || c.Seq > last.Seq) {
			last, known = c, true
		}
	}
	if known {
		last.Expired = pol.TTL >= 0 && now.Sub(last.Time) > pol.TTL
	}
	return last, known
}

// maxHints bounds, per shard, the topics whose latest publish a node remembers (64 shards:
// 65,536 topics). A topic forgotten costs one read of its latest message at its next publish.
const maxHints = 1024

// hintShard remembers this node's latest publish per topic, the offset its next publish to
// the topic most likely follows.
type hintShard struct {
	mu sync.Mutex
	m  map[string]replica.Last // guarded by mu
}

func (h *hintShard) get(topic string) (replica.Last, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.m[topic]
	return l, ok
}

func (h *hintShard) put(topic string, l replica.Last) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[topic]; !ok && len(h.m) >= maxHints {
		for k := range h.m { // forget one at random
			delete(h.m, k)
			break
		}
	}
	h.m[topic] = l
}

// fetchLast reads the topic's latest message from the stream.
func (b *Broker) fetchLast(ctx context.Context, l *streamLog, topic, subj string, pol hub.HistoryPolicy, now time.Time) (replica.Last, bool, error) {
	p, seq, err := b.readLast(ctx, l, topic, subj)
	if err != nil || p == nil {
		return replica.Last{}, false, err
	}
	return replica.Last{Seq: seq, Epoch: p.Epoch, Offset: p.Offset, Time: p.Time, Expired: pol.TTL >= 0 && now.Sub(p.Time) > pol.TTL}, true, nil
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

func (b *Broker) onDisconnect(err error) {
	if b.ctx.Err() != nil {
		return
	}
	b.connected.Store(false)
	b.synced.Store(false)
	b.conn.Load().cancel()
	b.m.Ready.Set(0)
	b.downSince.CompareAndSwap(0, time.Now().UnixNano())
	b.log.Warn("nats connection lost", "err", err)
}

func (b *Broker) onReconnect() {
	b.newConnScope()
	b.connected.Store(true)
	if !b.running.Load() {
		return // Run declares the node synced
	}
	gen := b.resyncs.Add(1)
	go b.resync(gen)
}

// resync runs after a reconnect: it makes sure the streams exist (starting the followed topics
// over if one was recreated), reads what each followed topic missed, then declares the node
// ready and lets the hub fill gaps from history.
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
	for _, l := range b.logs {
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
		if !info.Created.Equal(created) {
			// The stream was lost and recreated: its sequences start over. Followed topics read
			// it from the start; its publications carry new epochs, which is how clients learn
			// that history is gone.
			b.log.Warn("nats stream was recreated; starting over", "stream", l.name,
				"created", info.Created, "was_created", created)
			for _, f := range b.followedTopics() {
				if f.l == l {
					f.startOver()
				}
			}
			b.consMu.Lock()
			l.created = info.Created
			b.consMu.Unlock()
		}
		if info.Config.RePublish == nil {
			if _, err := b.ensureStream(ctx, l); err != nil {
				return err
			}
		}
	}
	ctx, cancel = context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for _, f := range b.followedTopics() {
		if err := b.catchUp(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// askAgainUnanswered runs call with a deadline of 2 s at a time, pausing between tries, until
// it is answered or ctx ends: a JetStream that is still starting may leave a request without an
// answer, or the connection may be down for a moment, which would otherwise fail the node.
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
