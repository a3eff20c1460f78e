// Package amqp is a hub.Broker on RabbitMQ (3.9 or newer, for stream queues; tested with 3.10)
// over AMQP 0.9.1, for several rtlab nodes sharing one RabbitMQ.
//
// RabbitMQ has no conditional append, so a topic's offsets need a single writer. The design:
//
//   - The log is a stream queue (<name>.log). Every node consumes all of it, in order, from its
//     start, and applies it to a replica: each topic's position and latest publications. History
//     answers from the replica, and the node's handler is called from that consumer. Every node
//     applies the same log in the same order, so all have the same offsets, epochs and history.
//   - Publishing sends a request to a queue with a single active consumer (<name>.seq). Every
//     node consumes it; RabbitMQ lets one at a time receive: the sequencer. It assigns each
//     request its topic's next offset (a new epoch at 1 when the topic is unknown or its history
//     expired), appends the publication to the log with publisher confirms, and then acks the
//     request. The publishing node answers its client once its own consumer has applied the
//     publication, so a publish is acknowledged only once it is in the log and in the node's
//     history.
//   - A node that becomes the sequencer first appends a marker to the log and waits until its
//     consumer reads it: its replica then holds everything the previous sequencer appended, and
//     requests the previous one appended but did not ack (they come back) are recognized by
//     their request id and not appended twice. As a last guard every node ignores a log entry
//     whose offset its topic already has in that epoch, alike on every node.
//
// The log keeps Retention.TTL of publications (x-max-age) up to MaxBytes (x-max-length-bytes);
// a node replays what it keeps at start. A topic whose publications have all expired is
// forgotten; its next publication starts a new epoch. When the connection drops, Ready is false
// and publishes fail at once; the node reconnects with backoff, resumes the log after the last
// entry it applied, catches up, and calls Handler.HandleResubscribed.
package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// replica, and TTL as the log's x-max-age. Zero fields are taken from Policy(""), then
	// default to 100 and 10 minutes.
	Retention hub.HistoryPolicy
	// MaxBytes bounds the log (x-max-length-bytes). Zero means 1 GiB. RabbitMQ drops whole
	// segments of SegmentBytes at a time.
	MaxBytes int64
	// SegmentBytes is the log's segment size (x-stream-max-segment-size-bytes). Zero means
	// MaxBytes/8, at most 64 MiB.
	SegmentBytes int64
	// Name prefixes the queues: <Name>.log and <Name>.seq. Zero means "rtlab". Nodes that share
	// topics use the same name. Letters, digits, '_', '-' and '.'.
	Name string
	// PublishTimeout bounds how long Publish waits for the sequencer when ctx has no earlier
	// deadline. Zero means 5 s.
	PublishTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval, which bounds how fast a dead connection is
	// noticed. Zero means 2 s.
	Heartbeat time.Duration
	// Logger receives connection losses and recoveries. Nil means no logging.
	Logger *slog.Logger
	// Registerer receives the broker's Prometheus collectors (rtlab_broker_*{broker="amqp"}).
	// Nil means they are not registered.
	Registerer prometheus.Registerer
}

// Errors returned by the broker.
var (
	ErrClosed = errors.New("amqp broker: closed")
)

// unavailableError is returned while RabbitMQ cannot be reached or no sequencer answers. It
// wraps hub.ErrNotReady (clients get 503 "unavailable") and the cause; its text leaves out the
// cause, which may carry addresses.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string   { return "amqp broker unavailable" }
func (e *unavailableError) Unwrap() []error { return []error{hub.ErrNotReady, e.cause} }

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,200}$`)

// A log entry's body is a publication encoded by package replica (head, then tail). A publish
// request's body is the tail alone: the sequencer prepends the head (offset and epoch) without
// decoding the rest. The topic travels in a header.

// Header names of log entries and requests.
const (
	hdrKind     = "k" // log entry: "p" publication, "m" marker
	hdrTopic    = "t"
	hdrRequest  = "r" // request id (publication) or marker id
	hdrDeadline = "d" // request: unix ms after which the publisher no longer waits
	kindPub     = "p"
	kindMarker  = "m"
)

// Broker is a hub.Broker on RabbitMQ. It is safe for concurrent use.
type Broker struct {
	replica.EveryTopic // every node reads the whole log: nothing to subscribe to

	cfg     Config
	url     string
	logQ    string
	seqQ    string
	log     *slog.Logger
	m       *metrics
	rep     *replica.Replica
	reqs    *recentRequests
	handler hub.Handler // set by Run

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the connection loop exits

	conn    reconnect.Loop          // the connection; ready once caught up with the log
	session atomic.Pointer[session] // current connection; nil between connections

	// next is the log offset to resume from; -1 means from the start. Owned by the log consumer.
	next int64

	waitMu  sync.Mutex
	waiting map[string]chan *hub.Publication // request or marker id → its waiter; guarded by waitMu
}

// session is one AMQP connection and the channels the publish path uses.
type session struct {
	conn  *amqp.Connection
	pub   *amqp.Channel // requests and markers
	ctx   context.Context
	close context.CancelFunc
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
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Retention, cfg.Policy = replica.Policies(cfg.Retention, cfg.Policy)
	b := &Broker{
		cfg: cfg, url: url, logQ: cfg.Name + ".log", seqQ: cfg.Name + ".seq",
		log: cfg.Logger.With("broker", "amqp"), m: newMetrics(cfg.Registerer),
		rep: replica.New(cfg.Policy), reqs: newRecentRequests(time.Minute),
		done: make(chan struct{}), next: -1, waiting: make(map[string]chan *hub.Publication),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.conn = reconnect.Loop{
		Name: "amqp", Log: b.log, Metrics: b.m.Metrics, Backoff: 100 * time.Millisecond,
		Session:      b.runSession,
		Resubscribed: func() { b.handler.HandleResubscribed() },
		Down:         func() { b.m.sequencer.Set(0) },
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

func (b *Broker) dial() (*amqp.Connection, error) {
	return amqp.DialConfig(b.url, amqp.Config{
		Heartbeat:  b.cfg.Heartbeat,
		Locale:     "en_US",
		Dial:       amqp.DefaultDial(3 * time.Second),
		Properties: amqp.Table{"connection_name": "rtlab"},
	})
}

// declare declares the log and the sequencer queue.
func (b *Broker) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqp broker: open channel: %w", err)
	}
	defer ch.Close()
	maxAge := int64((b.cfg.Retention.TTL + time.Second - 1) / time.Second)
	if _, err := ch.QueueDeclare(b.logQ, true, false, false, false, amqp.Table{
		"x-queue-type":                    "stream",
		"x-max-age":                       strconv.FormatInt(maxAge, 10) + "s",
		"x-max-length-bytes":              b.cfg.MaxBytes,
		"x-stream-max-segment-size-bytes": b.cfg.SegmentBytes,
	}); err != nil {
		return fmt.Errorf("amqp broker: declare %s: %w", b.logQ, err)
	}
	// Not durable: requests are only worth something to a publisher that is still waiting,
	// and a RabbitMQ restart ends those waits anyway.
	if _, err := ch.QueueDeclare(b.seqQ, false, false, false, false, amqp.Table{
		"x-single-active-consumer": true,
	}); err != nil {
		return fmt.Errorf("amqp broker: declare %s: %w", b.seqQ, err)
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
		return &unavailableError{cause: errors.New("not caught up with the log after 60 s")}
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
	return b.rep.History(topic, since, limit, time.Now()), nil
}

// Publish sends a request to the sequencer and returns the publication once this node has
// applied it from the log.
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	s := b.session.Load()
	if !b.conn.Ready() || s == nil {
		b.m.PublishErrors.Inc()
		return nil, &unavailableError{cause: errors.New("not connected")}
	}
	start := time.Now()
	if req.Time.IsZero() {
		req.Time = start
	}
	deadline := start.Add(b.cfg.PublishTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	id := newID()
	ch := b.await(id)
	defer b.unawait(id)
	err := s.pub.PublishWithContext(ctx, "", b.seqQ, false, false, amqp.Publishing{
		Headers: amqp.Table{
			hdrTopic:    req.Topic,
			hdrRequest:  id,
			hdrDeadline: deadline.UnixMilli(),
		},
		// RabbitMQ drops the request if no sequencer took it by the deadline.
		Expiration: strconv.FormatInt(max(time.Until(deadline).Milliseconds(), 1), 10),
		Body:       replica.AppendTail(nil, req.Time.Truncate(time.Millisecond), req.Sender, req.Type, req.Data),
	})
	if err != nil {
		b.m.PublishErrors.Inc()
		return nil, &unavailableError{cause: fmt.Errorf("send request: %w", err)}
	}
	select {
	case p := <-ch:
		b.m.Publish.Observe(time.Since(start).Seconds())
		return p, nil
	case <-s.ctx.Done():
		b.m.PublishErrors.Inc()
		return nil, &unavailableError{cause: errors.New("connection lost while publishing")}
	case <-ctx.Done():
		b.m.PublishErrors.Inc()
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, fmt.Errorf("amqp broker: publish to %s: %w", req.Topic, ctx.Err())
		}
		return nil, &unavailableError{cause: fmt.Errorf("no sequencer answered within %v", b.cfg.PublishTimeout)}
	}
}

// await registers interest in the log entry with request or marker id.
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

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
