// Package amqp is a hub.Broker on RabbitMQ (3.9 or newer, for stream queues; tested with 3.10)
// over AMQP 0.9.1, for several rtlab nodes sharing one RabbitMQ.
//
// RabbitMQ has no conditional append, but a stream queue is one ordered log that every
// consumer reads in the same order. The design:
//
//   - The log is a stream queue (<name>.log). A node publishes straight to it: no node assigns
//     offsets for the others. Every node consumes the whole log, in order, and counts each
//     topic's publications as it reads them (see counter): the same log read in the same order
//     gives every node the same offsets and epochs. Each node applies the log to a replica,
//     which History answers from, and hands publications to its handler.
//   - A publish is acknowledged once the publishing node has read its entry back, so it is in
//     the log and in that node's history, with the offset every node gives it.
//   - RabbitMQ drops old segments of the log (x-max-age, x-max-length-bytes). A node that starts
//     on a log whose start is gone cannot count from there: it waits for a checkpoint (the
//     counting state after some offset), which nodes append every CheckpointEvery entries and
//     when a starting node asks. If no node answers, the starting node appends a reset: from it
//     on, every node starts every topic in a new epoch, and clients are told history is gone.
//
// When the connection drops, Ready is false and publishes fail at once; the node reconnects
// with backoff, resumes the log after the last entry it read, catches up, and calls
// Handler.HandleResubscribed.
package amqp

import (
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
	// replica, and TTL as the log's x-max-age. A topic whose latest publication is older than
	// TTL starts a new epoch. Zero fields are taken from Policy(""), then default to 100 and
	// 10 minutes. Nodes sharing a log must agree on TTL: RabbitMQ refuses a node that declares
	// the log with another.
	Retention hub.HistoryPolicy
	// MaxBytes bounds the log (x-max-length-bytes). Zero means 1 GiB. RabbitMQ drops whole
	// segments of SegmentBytes at a time.
	MaxBytes int64
	// SegmentBytes is the log's segment size (x-stream-max-segment-size-bytes). Zero means
	// MaxBytes/8, at most 64 MiB.
	SegmentBytes int64
	// Name names the log: the stream queue <Name>.log. Zero means "rtlab". Nodes that share
	// topics use the same name. Letters, digits, '_', '-' and '.'.
	Name string
	// PublishTimeout bounds how long Publish waits to read its entry back from the log when
	// ctx has no earlier deadline. Zero means 5 s.
	PublishTimeout time.Duration
	// CheckpointEvery is how many publications a node reads between the checkpoints it
	// appends, so that a node starting after RabbitMQ dropped the log's start can count on.
	// Zero means 20,000.
	CheckpointEvery int
	// CheckpointWait is how long a starting node waits for a running node to answer its
	// request for a checkpoint before it appends a reset. Zero means 3 s.
	CheckpointWait time.Duration
	// Linger is how long a node holds a publication before appending it, for others to join
	// it in one message: RabbitMQ's cost is per message, so on a busy RabbitMQ a little
	// linger trades latency at the median for less load and a shorter tail. Zero appends at
	// once, and still joins the publications that queued while the previous append was
	// being written.
	Linger time.Duration
	// Heartbeat is the AMQP heartbeat interval, which bounds how fast a dead connection is
	// noticed. Zero means 2 s.
	Heartbeat time.Duration
	// Logger receives connection losses and recoveries. Nil means no logging.
	Logger *slog.Logger
	// Registerer receives the broker's Prometheus collectors (rtlab_broker_*{broker="amqp"}).
	// Nil means they are not registered.
	Registerer prometheus.Registerer
}

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
	replica.EveryTopic // every node reads the whole log: nothing to subscribe to

	cfg     Config
	url     string
	logQ    string
	log     *slog.Logger
	m       *metrics
	rep     *replica.Replica
	handler hub.Handler // set by Run

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection loop exits

	conn    reconnect.Loop          // the connection; ready once caught up with the log
	session atomic.Pointer[session] // current connection; nil between connections

	// reader is what the log consumer owns: where it is, and how it counts.
	reader reader
	// counting is true once the reader can count publications: it read the log from its start,
	// or from a checkpoint or reset. Until then a starting node is not ready.
	counting atomic.Bool
	// rebuilding is true from a replay of a recreated log until the node caught up: until then
	// History would tell resuming clients their history is gone.
	rebuilding atomic.Bool

	waitMu  sync.Mutex
	waiting map[string]chan *hub.Publication // entry id → its waiter; guarded by waitMu
}

// session is one AMQP connection and the channel the publish path uses.
type session struct {
	pub   *amqp.Channel // publications, markers, checkpoints
	ctx   context.Context
	close context.CancelFunc
	// snapshot asks the log consumer for a checkpoint of what it has read.
	snapshot chan chan []byte
	// appends queues publication entries for appendLoop.
	appends chan []byte
	// lastCheckpoint is the log offset of the latest checkpoint read (-1: none yet); a node
	// about to append one skips it if another node's came first.
	lastCheckpoint atomic.Int64
}

var _ hub.Broker = (*Broker)(nil)

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
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 20000
	}
	if cfg.CheckpointWait <= 0 {
		cfg.CheckpointWait = 3 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Retention, cfg.Policy = replica.Policies(cfg.Retention, cfg.Policy)
	b := &Broker{
		cfg: cfg, url: url, logQ: cfg.Name + ".log",
		log: cfg.Logger.With("broker", "amqp"), m: newMetrics(cfg.Registerer),
		rep: replica.New(cfg.Policy), done: make(chan struct{}),
		waiting: make(map[string]chan *hub.Publication),
	}
	b.reader = reader{next: -1, count: newCounter(b.logTTL())}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.conn = reconnect.Loop{
		Name: "amqp", Log: b.log, Metrics: b.m.Metrics, Backoff: 100 * time.Millisecond,
		Session:      b.runSession,
		Resubscribed: func() { b.handler.HandleResubscribed() },
		// A recreated log is replayed from its start at once.
		Immediate: func(err error) bool { return errors.Is(err, errLogReset) },
	}
	// Check the URL and the server now, so a wrong --broker fails at start.
	conn, err := b.dial()
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("amqp broker: connect: %w", err)
	}
	if err := b.declare(conn); err != nil {
		_ = conn.Close()
		b.cancel()
		return nil, err
	}
	_ = conn.Close()
	return b, nil
}

// logTTL is the log's x-max-age: whole seconds, as declared.
func (b *Broker) logTTL() time.Duration {
	return (b.cfg.Retention.TTL + time.Second - 1).Truncate(time.Second)
}

func (b *Broker) dial() (*amqp.Connection, error) {
	return amqp.DialConfig(b.url, amqp.Config{
		Heartbeat:  b.cfg.Heartbeat,
		Locale:     "en_US",
		Dial:       amqp.DefaultDial(3 * time.Second),
		Properties: amqp.Table{"connection_name": "rtlab"},
	})
}

// declare declares the log.
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
	return nil
}

// Run connects, replays the log into the replica and returns once the node has caught up (or
// ctx ends, or 60 s pass). Deliveries continue until Close.
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
		return hub.Unavailable("amqp", errors.New("not caught up with the log after 60 s"))
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
	return nil
}

// Ready reports whether the node is connected and caught up with the log.
func (b *Broker) Ready() bool { return b.conn.Ready() }

// History answers from the replica.
func (b *Broker) History(_ context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	if b.ctx.Err() != nil {
		return hub.HistoryResult{}, ErrClosed
	}
	if b.rebuilding.Load() {
		return hub.HistoryResult{}, hub.Unavailable("amqp", errors.New("replaying the log"))
	}
	return b.rep.History(topic, since, limit, time.Now()), nil
}

// Publish appends the publication to the log and returns it once this node has read it back,
// with the offset and epoch every node counts for it.
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
	ch := b.await(id)
	defer b.unawait(id)
	// fail counts a publish that did not complete and says why: late is the reason when ctx
	// ran out.
	fail := func(late string) (*hub.Publication, error) {
		b.m.PublishErrors.Inc()
		switch {
		case s.ctx.Err() != nil:
			return nil, hub.Unavailable("amqp", errors.New("connection lost while publishing"))
		case errors.Is(ctx.Err(), context.Canceled):
			return nil, fmt.Errorf("amqp broker: publish to %s: %w", req.Topic, ctx.Err())
		}
		return nil, hub.Unavailable("amqp", errors.New(late))
	}
	// No publisher confirm: reading the entry back is the proof that it was appended. If the
	// append fails, the session ends.
	select {
	case s.appends <- appendPub(nil, id, req.Topic, req.Time.Truncate(time.Millisecond), req.Sender, req.Type, req.Data):
	case <-s.ctx.Done():
		return fail("")
	case <-ctx.Done():
		return fail("the log did not take the publication in time")
	}
	select {
	case p := <-ch:
		b.m.Publish.Observe(time.Since(start).Seconds())
		return p, nil
	case <-s.ctx.Done():
		return fail("")
	case <-ctx.Done():
		return fail("the publication did not come back from the log in time")
	}
}

// await registers interest in the log entry with id.
func (b *Broker) await(id string) <-chan *hub.Publication {
	ch := make(chan *hub.Publication, 1)
	b.waitMu.Lock()
	b.waiting[id] = ch
	b.waitMu.Unlock()
	return ch
}

func (b *Broker) unawait(id string) {
	b.waitMu.Lock()
	delete(b.waiting, id)
	b.waitMu.Unlock()
}

// notify hands p (nil for a marker) to whoever waits for id.
func (b *Broker) notify(id string, p *hub.Publication) {
	b.waitMu.Lock()
	ch := b.waiting[id]
	delete(b.waiting, id)
	b.waitMu.Unlock()
	if ch != nil {
		ch <- p
	}
}
