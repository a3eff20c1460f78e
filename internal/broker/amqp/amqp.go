// Package amqp is a hub.Broker on RabbitMQ (3.9 or newer, for stream queues; tested with 3.10)
// over AMQP 0.9.1, for several rtlab nodes sharing one RabbitMQ.
//
// One node at a time is the sequencer: it gives every publication its topic's offset and
// epoch, so each topic has a single active publisher. A node receives only the topics it
// follows (has subscribers for). The design:
//
//   - The sequencer queue (<name>.sequencer) is a classic queue with a single active consumer.
//     Every node consumes it; RabbitMQ delivers to one of them, the sequencer, and moves to
//     another when that one's connection goes. A node publishes a request there, unless it is
//     the sequencer itself or can send it straight to the sequencer's node (direct.go). With
//     several RabbitMQ shards (vhosts or servers), each has its sequencer, and a node that
//     holds its share of them declines another, or hands one over when it holds more
//     (Config.Roles), so no node orders every shard.
//   - The sequencer assigns offsets in the order it takes requests and sends each topic's
//     publications to the live exchange (<name>.topics, a topic exchange) with the topic's
//     routing key. RabbitMQ copies each message to the log (bound to every key) and to the
//     queue of every node bound to that key, in one routing step; then the sequencer answers
//     the publishing node on its queue. A node delivers a publication when its live copy
//     arrives, so whatever a node received is in the log (follow.go).
//   - A node binds its queue to a topic when the hub subscribes it, then asks the sequencer
//     for the topic's history, and answers History from that and the live copies after. It
//     asks the sequencer for the history of the topics it does not follow.
//   - The log (<name>.log) is a stream queue that only a node taking over as the sequencer
//     reads: it binds its queue to every topic and reads the whole log, so that it continues
//     every topic where the previous one stopped, and knows every topic's history.
//
// Classic queues cost RabbitMQ a fraction of a stream read per message.
//
// When the connection drops, Ready is false and publishes fail at once; the node reconnects
// with backoff, follows its topics again and calls Handler.HandleResubscribed. Open opens the
// broker and its state store (state.go) on one connection.
package amqp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/reconnect"
	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// Config configures a Broker.
type Config struct {
	// Policy gives each topic's history size and TTL, as History answers. Nil means Retention
	// for every topic. A topic's policy cannot keep more than Retention.
	Policy func(topic string) hub.HistoryPolicy
	// Retention bounds every topic's history: Size publications kept per topic in each node's
	// cache, and TTL as the log's x-max-age. A topic whose latest publication is older than
	// its TTL starts a new epoch. Zero fields are taken from Policy(""), then default to 100
	// and 10 minutes. Nodes sharing a log must agree on TTL: RabbitMQ refuses a node that
	// declares the log with another.
	Retention hub.HistoryPolicy
	// MaxBytes bounds the log (x-max-length-bytes), and the durable log too. Zero means 1 GiB.
	// RabbitMQ drops whole segments of SegmentBytes at a time.
	MaxBytes int64
	// DurableSize is what a node keeps per durable topic (a Policy with a negative TTL).
	// Durable topics go through a log of their own, <Name>.durable, with no x-max-age, and never
	// start a new epoch for being idle. A durable topic's Policy can only narrow it. Zero means 1000.
	DurableSize int
	// SegmentBytes is the log's segment size (x-stream-max-segment-size-bytes). Zero means
	// MaxBytes/8, at most 64 MiB.
	SegmentBytes int64
	// Name starts the names of what the nodes share: the log <Name>.log, the sequencer queue
	// <Name>.sequencer and the live exchange <Name>.topics. Zero means "rtlab". Nodes that share topics
	// use the same name. Letters, digits, '_', '-' and '.'.
	Name string
	// PublishTimeout bounds how long Publish waits for its publication to come back from the
	// sequencer when ctx has no earlier deadline. Zero means 5 s.
	PublishTimeout time.Duration
	// Direct is the address this node listens on while it is the sequencer, for the other
	// nodes' requests: a request sent straight to the sequencer's node skips a trip through
	// RabbitMQ. Port 0 takes a free port. Other nodes must be able to reach the address the
	// listener gets (on "127.0.0.1:0", nodes on the same machine). Empty: this node neither
	// listens nor sends requests directly; they go through the sequencer queue.
	Direct string
	// Linger is how long a node holds a request to the sequencer, for others to join it in
	// one message: RabbitMQ's cost is per message, so on a busy RabbitMQ a little linger
	// trades latency for less load. Zero sends at once, and still joins the requests that
	// queued while the previous one was being sent.
	Linger time.Duration
	// Roles, shared by the RabbitMQ shards of one node (each a Broker), spreads their sequencers
	// over the nodes: a node that holds its share of them, ceil(shards/nodes), leaves the next
	// to another node (sequencer.go, claim), and one that holds more hands one over (balance).
	// Nil: this node becomes the sequencer whenever RabbitMQ makes it the active consumer, and
	// stays it for the session.
	Roles *Roles
	// RetryIDs bounds the publication ids each node remembers to find a keyed retry: those of
	// the history TTL (at least the latest 16,384), at most RetryIDs. Zero means
	// DefaultRetryIDs.
	RetryIDs int
	// Heartbeat is the AMQP heartbeat interval, which bounds how fast a dead connection is
	// noticed. Zero means 2 s.
	Heartbeat time.Duration
	// Logger receives connection losses and recoveries. Nil means no logging.
	Logger *slog.Logger
	// Registerer receives the broker's Prometheus collectors (rtlab_broker_*{broker="amqp"}).
	// Nil means they are not registered.
	Registerer prometheus.Registerer
}

// DefaultRetryIDs is Config.RetryIDs' default: a retry window of 10 minutes up to 218
// publications/s per node, of the 5 s publish timeout up to 26,000/s.
const DefaultRetryIDs = 131072

// A batch is at most maxBatch publications or about maxBatchBytes.
const (
	maxBatch      = 256
	maxBatchBytes = 64 << 10
)

// Errors returned by the broker.
var (
	ErrClosed = errors.New("amqp broker: closed")
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// Broker is a hub.Broker on RabbitMQ. It is safe for concurrent use.
type Broker struct {
	cfg    Config
	conns  *shared // the connection, shared with the state store Open opens
	logQ   string  // the log, a stream queue
	dlogQ  string  // the durable topics' log, a stream queue without x-max-age
	seqQ   string  // the sequencer queue
	liveX  string  // the live exchange, routed by topic
	dliveX string  // the live exchange of durable topics, bound to dlogQ
	log    *slog.Logger
	m      *metrics
	// rep holds the topics this node follows, and every topic while it is the sequencer.
	rep *replica.Replica

	followMu sync.RWMutex
	follows  map[string]*follow // the topics this node has subscribers for; guarded by followMu
	handler  hub.Handler        // set by Run

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection loop exits

	conn    reconnect.Loop          // the connection; ready once caught up with the log
	session atomic.Pointer[session] // current connection; nil between connections

	recent recentIDs // ids of the latest publications applied, for the sequencer
	// seqAt is the latest sequencer announcement read, for Config.Direct; seqNews tells the
	// request loop that it changed.
	seqAt   atomic.Pointer[announcement]
	seqNews chan struct{}

	waitMu  sync.Mutex
	waiting map[string]*waiter // entry id → its waiter; guarded by waitMu

	onBroadcast atomic.Pointer[func(msg []byte)] // broadcast.go
}

// waiter is a Publish waiting for its publication to come back, or a request waiting for
// the sequencer's answer.
type waiter struct {
	ch     chan *hub.Publication // a Publish's
	answer chan answer           // a history or list request's
	req    []byte                // the request
	link   *link                 // the link the request went on, if it did; guarded by waitMu
}

var _ hub.Broker = (*Broker)(nil)

// retryWindow is how long an id is remembered within RetryIDs: the history TTL, never less
// than the publish timeout a retry follows.
func (b *Broker) retryWindow() time.Duration {
	return max(b.cfg.Retention.TTL, b.cfg.PublishTimeout)
}

// New checks the configuration and that RabbitMQ at url (amqp://user:password@host:port/vhost)
// answers. Call Run to connect and start delivering.
func New(ctx context.Context, url string, cfg Config) (*Broker, error) {
	if cfg.Name == "" {
		cfg.Name = "rtlab"
	}
	if !validName.MatchString(cfg.Name) {
		return nil, fmt.Errorf("amqp broker: Name %q: want 1-200 of A-Z a-z 0-9 _ . -", cfg.Name)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 30
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = min(cfg.MaxBytes/8, 64<<20)
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DurableSize <= 0 {
		cfg.DurableSize = 1000
	}
	if cfg.RetryIDs <= 0 {
		cfg.RetryIDs = DefaultRetryIDs
	}
	cfg.Retention, cfg.Policy = replica.Policies(cfg.Retention, cfg.DurableSize, cfg.Policy)
	b := &Broker{
		cfg: cfg, conns: newShared(url, cfg.Heartbeat, cfg.Logger.With("broker", "amqp")), logQ: cfg.Name + ".log", seqQ: cfg.Name + ".sequencer", liveX: cfg.Name + ".topics",
		dlogQ: cfg.Name + ".durable", dliveX: cfg.Name + ".durable-topics", follows: make(map[string]*follow),
		log: cfg.Logger.With("broker", "amqp"), m: newMetrics(cfg.Registerer),
		rep: replica.New(cfg.Policy), done: make(chan struct{}),
		waiting: make(map[string]*waiter), seqNews: make(chan struct{}, 1),
	}
	b.recent.init(recentSize, cfg.RetryIDs, b.retryWindow())
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.conn = reconnect.Loop{
		Name: "amqp", Log: b.log, Metrics: b.m.Metrics, Backoff: 100 * time.Millisecond,
		Session:      b.runSession,
		Resubscribed: func() { b.handler.HandleResubscribed() },
	}
	// Check the URL and the server now, so a wrong --broker fails at start. The connection
	// stays for the first session.
	conn, err := b.conns.get()
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("amqp broker: connect: %w", err)
	}
	if err := b.declare(conn); err != nil {
		b.conns.close()
		b.cancel()
		return nil, err
	}
	return b, nil
}

// logTTL is the log's x-max-age: whole seconds, as declared.
func (b *Broker) logTTL() time.Duration {
	return (b.cfg.Retention.TTL + time.Second - 1).Truncate(time.Second)
}

// declare declares what the nodes share: the log, the sequencer queue and the live exchange.
// The last two are transient: they hold nothing a restart should keep.
func (b *Broker) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqp broker: open channel: %w", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(b.logQ, true, false, false, false, amqp.Table{
		"x-queue-type":                    "stream",
		"x-max-age":                       strconv.FormatInt(int64(b.logTTL()/time.Second), 10) + "s",
		"x-max-length-bytes":              b.cfg.MaxBytes,
		"x-stream-max-segment-size-bytes": b.cfg.SegmentBytes,
	}); err != nil {
		return fmt.Errorf("amqp broker: declare %s: %w", b.logQ, err)
	}
	if _, err := ch.QueueDeclare(b.seqQ, false, false, false, false, amqp.Table{
		"x-queue-type":             "classic",
		"x-single-active-consumer": true,
	}); err != nil {
		return fmt.Errorf("amqp broker: declare %s: %w", b.seqQ, err)
	}
	if _, err := ch.QueueDeclare(b.dlogQ, true, false, false, false, amqp.Table{
		"x-queue-type":                    "stream",
		"x-max-length-bytes":              b.cfg.MaxBytes,
		"x-stream-max-segment-size-bytes": b.cfg.SegmentBytes,
	}); err != nil {
		return fmt.Errorf("amqp broker: declare %s: %w", b.dlogQ, err)
	}
	for _, x := range []string{b.liveX, b.dliveX} {
		if err := ch.ExchangeDeclare(x, "topic", false, false, false, false, nil); err != nil {
			return fmt.Errorf("amqp broker: declare %s: %w", x, err)
		}
	}
	// Each log is bound to its live exchange for every key, so that one message from the
	// sequencer reaches the log and the queue of every node following its topic in the same
	// routing step.
	for _, bind := range [][2]string{{b.dlogQ, b.dliveX}, {b.logQ, b.liveX}} {
		if err := ch.QueueBind(bind[0], "#", bind[1], false, nil); err != nil {
			return fmt.Errorf("amqp broker: bind %s to %s: %w", bind[0], bind[1], err)
		}
	}
	return nil
}

// Run connects and returns once the node is ready (or ctx ends, or 60 s pass). Deliveries
// continue until Close.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	b.handler = h
	context.AfterFunc(ctx, func() { _ = b.Close() })
	up := make(chan struct{})
	go func() {
		defer close(b.done)
		b.conn.Run(b.ctx, up)
	}()
	go b.rep.SweepEvery(b.ctx, time.Minute)
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return ErrClosed
	case <-time.After(60 * time.Second):
		return hub.Unavailable("amqp", errors.New("not connected after 60 s"))
	}
}

// Close stops the connection loop.
func (b *Broker) Close() error {
	b.cancel()
	if s := b.session.Load(); s != nil {
		s.close()
	}
	if b.handler != nil {
		<-b.done
	}
	b.conns.close()
	return nil
}

// Ready reports whether the node is connected and has taken its topics' history. It is false
// from the moment a session ends, before the session has finished winding down.
func (b *Broker) Ready() bool {
	s := b.session.Load()
	return b.conn.Ready() && s != nil && s.ctx.Err() == nil
}

// durable reports whether topic goes through the durable log.
func (b *Broker) durable(topic string) bool { return b.cfg.Policy(topic).TTL < 0 }

// Publish sends the publication to the sequencer and returns it once the sequencer's answer
// (or, on a node following the topic, its live copy) came back, with the offset and epoch every
// node has for it.
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	s := b.session.Load()
	if !b.conn.Ready() || s == nil {
		b.m.PublishErrors.Inc()
		return nil, hub.Unavailable("amqp", errors.New("not connected"))
	}
	start := time.Now()
	if req.Time.IsZero() {
		req.Time = start
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	id := newID()
	if req.Key != "" {
		id = keyedID(req.Topic, req.Sender, req.Key)
	}
	body := appendRequest(nil, id, s.liveQ, req.Topic, req.Time.Truncate(time.Millisecond), req.Sender, req.Type, req.Data)
	ch := b.await(id, body)
	defer b.unawait(id)
	// fail counts a publish that did not complete and says why: late is the reason when ctx
	// ran out. Once the request was handed over it may still be sequenced (resent on a new
	// link, or taken late): its outcome is unknown, not a refusal.
	sent := false
	fail := func(late string) (*hub.Publication, error) {
		b.m.PublishErrors.Inc()
		switch {
		case sent && errors.Is(ctx.Err(), context.Canceled) && s.ctx.Err() == nil:
			return nil, fmt.Errorf("amqp broker: publish to %s: %w", req.Topic, ctx.Err())
		case sent:
			return nil, hub.OutcomeUnknown("amqp", fmt.Errorf("publish to %s: %s", req.Topic, cmp.Or(late, "connection lost")))
		case s.ctx.Err() != nil:
			return nil, hub.Unavailable("amqp", errors.New("connection lost while publishing"))
		case errors.Is(ctx.Err(), context.Canceled):
			return nil, fmt.Errorf("amqp broker: publish to %s: %w", req.Topic, ctx.Err())
		}
		return nil, hub.Unavailable("amqp", errors.New(late))
	}
	// The sequencer takes its own node's requests straight away; the others' go through the
	// sequencer queue.
	to := s.requests
	if s.sequencer.Load() {
		to = s.local
	}
	select {
	case to <- body:
	case <-s.ctx.Done():
		return fail("")
	case <-ctx.Done():
		return fail("the sequencer did not take the publication in time")
	}
	sent = true
	select {
	case p := <-ch:
		b.m.Publish.Observe(time.Since(start).Seconds())
		return p, nil
	case <-s.ctx.Done():
		return fail("")
	case <-ctx.Done():
		return fail("the publication did not come back from the sequencer in time")
	}
}

// await registers interest in the publication of request req, whose id is id.
func (b *Broker) await(id string, req []byte) <-chan *hub.Publication {
	ch := make(chan *hub.Publication, 1)
	b.waitMu.Lock()
	b.waiting[id] = &waiter{ch: ch, req: req}
	b.waitMu.Unlock()
	return ch
}

// sentOn notes that the requests reqs went on link l.
func (b *Broker) sentOn(l *link, reqs [][]byte) {
	b.waitMu.Lock()
	defer b.waitMu.Unlock()
	for _, r := range reqs {
		if w := b.waiting[requestID(r)]; w != nil {
			w.link = l
		}
	}
}

// resend returns the requests that went on link l and still wait for their publication.
func (b *Broker) resend(l *link) [][]byte {
	b.waitMu.Lock()
	defer b.waitMu.Unlock()
	var reqs [][]byte
	for _, w := range b.waiting {
		if w.link == l {
			w.link = nil
			reqs = append(reqs, w.req)
		}
	}
	return reqs
}

func (b *Broker) unawait(id string) {
	b.waitMu.Lock()
	delete(b.waiting, id)
	b.waitMu.Unlock()
}

// notify hands p (nil for a marker) to whoever waits for id.
func (b *Broker) notify(id string, p *hub.Publication) {
	b.waitMu.Lock()
	w := b.waiting[id]
	if w != nil && w.ch != nil {
		delete(b.waiting, id)
	}
	b.waitMu.Unlock()
	if w != nil && w.ch != nil {
		w.ch <- p
	}
}
