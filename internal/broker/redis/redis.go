// Package redis is a hub.Broker on Redis (5.0 or newer; tested with 7.0), for several rtlab
// nodes sharing one Redis.
//
// Each publish runs one Lua script that increments the topic's offset, appends the publication
// to the topic's stream (trimmed to the history size, expiring with the TTL) and PUBLISHes it
// on the topic's channel; concurrent publishes go to Redis in one pipeline (pipeline.go). Redis runs scripts one at a time, so offsets are contiguous, the
// channel carries a topic's publications in offset order, and a publication is in history
// before any node receives it. History reads the stream in another script, atomically with the
// topic's position.
//
// Each node holds one pub/sub connection (one per master of a Redis Cluster: cluster.go) and
// SUBSCRIBEs to the channels of topics it has local subscribers for; Subscribe returns once
// Redis confirmed the subscription. When the connection
// drops, Ready is false and publishes fail at once; the node reconnects with backoff,
// resubscribes every channel, and calls Handler.HandleResubscribed so the hub fetches from
// history what was published meanwhile. A topic's offset and epoch live in a hash that outlives
// its history by IdleTTL. If Redis loses them (a restart without persistence, FLUSHALL, an
// eviction), the next publication starts a new epoch at offset 1, so clients are told that
// history is gone instead of seeing offsets silently reused.
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
	"github.com/rtlab/rtlab/internal/broker/reconnect"
	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// Config configures a Broker.
type Config struct {
	// Policy gives each topic's history size and TTL. Nil means hub.HistoryPolicy{} defaults
	// (100 publications, 10 minutes). Every node sharing a Redis should use the same policy.
	Policy func(topic string) hub.HistoryPolicy
	// Prefix starts every key and channel name, so several deployments can share one Redis.
	// Zero means "rtlab". Nodes that share topics use the same prefix.
	Prefix string
	// IdleTTL is how long a topic keeps its offset and epoch after its history expired and
	// nothing was published or read. Zero means 1 hour.
	IdleTTL time.Duration
	// PingInterval is how often an idle pub/sub connection is checked; a connection silent for
	// two intervals is considered lost. Zero means 2 s.
	PingInterval time.Duration
	// Logger receives connection losses and recoveries. Nil means no logging.
	Logger *slog.Logger
	// Registerer receives the broker's Prometheus collectors (rtlab_broker_*{broker="redis"}).
	// Nil means they are not registered.
	Registerer prometheus.Registerer
}

// Errors returned by the broker.
var (
	ErrClosed = errors.New("redis broker: closed")
)

// Broker is a hub.Broker on Redis. It is safe for concurrent use.
type Broker struct {
	cfg     Config
	client  goredis.UniversalClient // a *goredis.Client, or a *goredis.ClusterClient (cluster.go)
	sharded bool                    // a cluster: hash-tagged channels, SPUBLISH and SSUBSCRIBE
	log     *slog.Logger
	m       *brokermetrics.Metrics
	handler hub.Handler // set by Run before the pub/sub loop starts
	pub     *publisher  // batches concurrent publishes (pipeline.go)

	conn   reconnect.Loop  // the pub/sub connection; ready when subscribed
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the pub/sub loop has exited

	// mu guards the subscription state. Lock order: mu, then go-redis's PubSub lock.
	mu       sync.Mutex
	subs     *subs                     // current connections; nil between sessions
	channels map[string]struct{}       // channels this node wants
	pending  map[string][]chan<- error // per channel, one entry per SUBSCRIBE sent on subs, in order; nil entries expect no one
	unsubs   map[string]int            // per channel, SUNSUBSCRIBEs sent on subs and not yet answered
	closed   bool

	onBroadcast func(msg []byte) // set by OnBroadcast before Run; broadcast.go
}

var _ hub.Broker = (*Broker)(nil)

// New connects to the Redis at url (redis://[user:password@]host:port/db or rediss:// for TLS),
// or to the Redis Cluster at redis+cluster://host:port (cluster.go), and checks it answers. Call
// Run to start delivering.
func New(ctx context.Context, url string, cfg Config) (*Broker, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	client, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	return newBroker(client, IsCluster(url), cfg), nil
}

// fill sets cfg's zero fields to their defaults and checks the prefix.
func (cfg *Config) fill() error {
	if cfg.Prefix == "" {
		cfg.Prefix = "rtlab"
	}
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = time.Hour
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 2 * time.Second
	}
	if cfg.Policy == nil {
		cfg.Policy = func(string) hub.HistoryPolicy { return hub.HistoryPolicy{} } // resolved where used
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if strings.ContainsAny(cfg.Prefix, "{} ") {
		return fmt.Errorf("redis broker: Prefix %q: must not contain braces or spaces", cfg.Prefix)
	}
	return nil
}

// dial returns a client for url that answered a PING. A publish is not idempotent: the client
// never resends it after a network error (NewClient).
func dial(ctx context.Context, url string) (goredis.UniversalClient, error) {
	client, err := NewClient(url)
	if err != nil {
		return nil, fmt.Errorf("redis broker: %w", err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis broker: connect to %s: %w", addrOf(client), err)
	}
	return client, nil
}

// newBroker returns a broker on client, which it owns (Close closes it); cfg is filled in.
func newBroker(client goredis.UniversalClient, sharded bool, cfg Config) *Broker {
	addr := addrOf(client)
	bctx, cancel := context.WithCancel(context.Background())
	m := brokermetrics.New("redis")
	m.Register(cfg.Registerer)
	b := &Broker{
		cfg: cfg, client: client, sharded: sharded, log: cfg.Logger.With("broker", "redis", "addr", addr),
		m: m, ctx: bctx, cancel: cancel, done: make(chan struct{}),
		channels: make(map[string]struct{}), pending: make(map[string][]chan<- error), unsubs: make(map[string]int),
	}
	b.pub = &publisher{client: client, ctx: bctx, ready: b.Ready}
	b.conn = reconnect.Loop{
		Name: "redis pub/sub", Log: b.log, Metrics: m, Backoff: 50 * time.Millisecond,
		Session:      b.session,
		Resubscribed: func() { b.handler.HandleResubscribed() },
	}
	return b
}

// Run starts the pub/sub connection and returns once it is established, or with an error when
// that does not happen before ctx ends or 10 s pass. Deliveries continue until ctx ends or Close.
func (b *Broker) Run(ctx context.Context, h hub.Handler) error {
	b.handler = h
	up := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			b.cancel()
		case <-b.ctx.Done():
		}
	}()
	go func() {
		defer close(b.done)
		b.conn.Run(b.ctx, up)
	}()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-b.ctx.Done():
		return ErrClosed
	case <-time.After(10 * time.Second):
		return hub.Unavailable("redis", errors.New("no pub/sub connection after 10 s"))
	}
}

// Close stops deliveries and closes the connections.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	subs := b.subs
	b.mu.Unlock()
	b.cancel()
	if subs != nil {
		subs.close() // unblocks the receive loops
	}
	if b.handler != nil {
		<-b.done
	}
	return b.client.Close()
}

// Ready reports whether the pub/sub connection is up with every subscription in place.
func (b *Broker) Ready() bool { return b.conn.Ready() }

func (b *Broker) keys(topic string) (stream, meta string) {
	return b.cfg.Prefix + ":s:{" + topic + "}", b.cfg.Prefix + ":m:{" + topic + "}"
}

// channel is topic's pub/sub channel; on a cluster it carries the topic's hash tag, so the
// publish script may SPUBLISH on it.
func (b *Broker) channel(topic string) string {
	if b.sharded {
		return b.cfg.Prefix + ":c:{" + topic + "}"
	}
	return b.cfg.Prefix + ":c:" + topic
}

// topicOf is the topic of channel ch, false when ch is no topic's.
func (b *Broker) topicOf(ch string) (string, bool) {
	topic, ok := strings.CutPrefix(ch, b.cfg.Prefix+":c:")
	if ok && b.sharded {
		topic, ok = strings.CutPrefix(topic, "{")
		if ok {
			topic, ok = strings.CutSuffix(topic, "}")
		}
	}
	return topic, ok
}

// publishCommand is what the publish script sends a publication with: SPUBLISH to the topic's
// shard on a cluster; PUBLISH otherwise, which Redis before 7.0 also knows.
func (b *Broker) publishCommand() string {
	if b.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

func (b *Broker) policy(topic string) hub.HistoryPolicy {
	return b.cfg.Policy(topic).Resolved() // a negative TTL: durable, kept until trimmed by Size
}

// ttls are the scripts' TTL arguments for pol at now: the stream's TTL, the meta key's and the
// cutoff before which publications expire, all in ms; zeros for a durable topic.
func (b *Broker) ttls(pol hub.HistoryPolicy, now time.Time) (ttl, metaTTL, cutoff int64) {
	if pol.TTL < 0 {
		return 0, 0, 0
	}
	return pol.TTL.Milliseconds(), (pol.TTL + b.cfg.IdleTTL).Milliseconds(), now.Add(-pol.TTL).UnixMilli()
}

func (b *Broker) durableKey() string { return b.cfg.Prefix + ":durable" }

// TopicsSince names the durable topics published to since since (all of them for the zero
// time), for archive sweeps.
func (b *Broker) TopicsSince(ctx context.Context, since time.Time) ([]string, error) {
	lo := "-inf"
	if !since.IsZero() {
		lo = strconv.FormatInt(since.UnixMilli(), 10)
	}
	topics, err := b.client.ZRangeByScore(ctx, b.durableKey(), &goredis.ZRangeBy{Min: lo, Max: "+inf"}).Result()
	if err != nil {
		return nil, b.wrap("list durable topics", err)
	}
	return topics, nil
}

// Publish stores and publishes req in one script run.
func (b *Broker) Publish(ctx context.Context, req hub.PublishRequest) (*hub.Publication, error) {
	if !b.conn.Ready() {
		b.m.PublishErrors.Inc()
		return nil, hub.Unavailable("redis", errors.New("pub/sub connection down"))
	}
	start := time.Now()
	if req.Time.IsZero() {
		req.Time = start
	}
	t := req.Time.Truncate(time.Millisecond)
	pol := b.policy(req.Topic)
	keys, inSet, err := b.publishKeys(ctx, req, pol, t)
	if err != nil {
		b.m.PublishErrors.Inc()
		return nil, err
	}
	ttl, metaTTL, cutoff := b.ttls(pol, start)
	res, err := b.pub.run(ctx, keys, []any{
		b.channel(req.Topic), replica.NewEpoch(), pol.Size, ttl, metaTTL, cutoff, t.UnixMilli(),
		replica.AppendTail(nil, t, req.Sender, req.Type, req.Data), req.Topic, b.publishCommand(),
		keyTTL(req.Key, pol), inSet})
	if err != nil {
		b.m.PublishErrors.Inc()
		return nil, b.publishFailed(err)
	}
	if len(res) != 2 && len(res) != 4 {
		b.m.PublishErrors.Inc()
		return nil, fmt.Errorf("redis broker: publish: unexpected script result %v", res)
	}
	off, _ := res[0].(int64)
	epoch, _ := res[1].(string)
	b.m.Publish.Observe(time.Since(start).Seconds())
	p := &hub.Publication{Topic: req.Topic, Offset: uint64(off), Epoch: epoch, Time: t,
		Sender: req.Sender, Type: req.Type, Data: req.Data}
	if len(res) == 4 { // a retry: the original's position and time
		ms, _ := res[3].(int64)
		p.Time, p.Duplicate = time.UnixMilli(ms), true
	}
	return p, nil
}

// publishKeys are the publish script's keys for req, and '1' when the durable set is among
// them. On a cluster the durable set is on another slot than the topic's keys, so it cannot be
// in the script: a durable topic is listed there first, and so is never published but not
// listed.
func (b *Broker) publishKeys(ctx context.Context, req hub.PublishRequest, pol hub.HistoryPolicy, t time.Time) ([]string, any, error) {
	stream, meta := b.keys(req.Topic)
	keys, inSet := []string{stream, meta}, any("0") // constants: boxing them allocates nothing
	if pol.TTL < 0 {
		if !b.sharded {
			keys, inSet = append(keys, b.durableKey()), any("1")
		} else if err := b.client.ZAdd(ctx, b.durableKey(), goredis.Z{Score: float64(t.UnixMilli()), Member: req.Topic}).Err(); err != nil {
			return nil, nil, b.wrap("publish", err)
		}
	}
	if req.Key != "" {
		keys = append(keys, b.cfg.Prefix+":i:{"+req.Topic+"}:"+strconv.Itoa(len(req.Sender))+":"+req.Sender+":"+req.Key)
	}
	return keys, inSet, nil
}

// keyTTL is how long a publication's idempotency key is kept, in ms: the topic's history TTL,
// ten minutes for a durable topic; 0 for no key.
func keyTTL(key string, pol hub.HistoryPolicy) int64 {
	switch {
	case key == "":
		return 0
	case pol.TTL < 0:
		return hub.DefaultHistoryTTL.Milliseconds()
	}
	return pol.Resolved().TTL.Milliseconds()
}

// publishFailed classifies a failed publish script: not run when Redis answered so, or when it
// was never sent (not ready, queued behind a batch that found Redis gone, no connection to be
// had); outcome unknown when it was sent and no answer came, since it may still run (a
// blackholed connection delivers it when it heals).
func (b *Broker) publishFailed(err error) error {
	var rerr goredis.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, hub.ErrNotReady), errors.As(err, &rerr), errors.Is(err, context.Canceled):
		return b.wrap("publish", err)
	case errors.As(err, &oe) && oe.Op == "dial", errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrClosed):
		return hub.Unavailable("redis", fmt.Errorf("publish not sent: %w", err))
	}
	return hub.OutcomeUnknown("redis", fmt.Errorf("publish: %w", err))
}

// History reads the topic's retained publications after since and its position.
func (b *Broker) History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	pol := b.policy(topic)
	stream, meta := b.keys(topic)
	first := since + 1
	if since >= math.MaxInt64/2 {
		first = math.MaxInt64 / 2 // beyond any offset; since+1 would overflow
	}
	if limit < 0 {
		limit = 0
	}
	_, metaTTL, cutoff := b.ttls(pol, time.Now())
	res, err := historyScript.Run(ctx, b.client, []string{stream, meta},
		replica.NewEpoch(), first, limit, cutoff, metaTTL).Slice()
	if err != nil {
		return hub.HistoryResult{}, b.wrap("history of "+topic, err)
	}
	if len(res) < 3 {
		return hub.HistoryResult{}, fmt.Errorf("redis broker: history of %s: unexpected script result %v", topic, res)
	}
	epoch, _ := res[0].(string)
	top, _ := res[1].(int64)
	oldest, _ := res[2].(int64)
	hr := hub.HistoryResult{Top: hub.Position{Offset: uint64(top), Epoch: epoch}, Oldest: uint64(oldest)}
	if len(res) > 3 {
		hr.Publications = make([]*hub.Publication, 0, len(res)-3)
		for _, v := range res[3:] {
			s, _ := v.(string)
			p, err := replica.Decode(topic, s)
			if err != nil {
				return hub.HistoryResult{}, fmt.Errorf("redis broker: history of %s: %w", topic, err)
			}
			hr.Publications = append(hr.Publications, p)
		}
	}
	return hr, nil
}

// wrap classifies err: Redis error replies are returned as they are, except those saying Redis
// cannot serve for now; those and anything else mean Redis could not be reached.
func (b *Broker) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redis broker: %s: %w", op, err)
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) && !unavailableReply(rerr.Error()) {
		return fmt.Errorf("redis broker: %s: %w", op, err)
	}
	return hub.Unavailable("redis", fmt.Errorf("%s: %w", op, err))
}

// unavailableReply reports whether a Redis error reply means the server cannot serve for now: a
// cluster not yet (or no longer) covering the slot, or moving it to another master (the
// client does not follow redirects: cluster.go), a replica without its master, a server
// loading its data.
func unavailableReply(msg string) bool {
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING", "MOVED ", "ASK "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Subscribe subscribes this node to topic's channel and returns once Redis confirmed it: from
// then on, every publication a later History call does not show is delivered.
func (b *Broker) Subscribe(ctx context.Context, topic string) error {
	ch := b.channel(topic)
	done := make(chan error, 1)
	b.mu.Lock()
	subs := b.subs
	if subs == nil || b.closed {
		b.mu.Unlock()
		return hub.Unavailable("redis", errors.New("pub/sub connection down"))
	}
	b.channels[ch] = struct{}{}
	b.pending[ch] = append(b.pending[ch], done)
	err := subs.subscribe(ctx, ch)
	b.mu.Unlock()
	if err != nil {
		b.forget(ch)
		b.drop(subs.of(ch), err)
		return hub.Unavailable("redis", err)
	}
	select {
	case err := <-done:
		if err != nil {
			b.forget(ch)
			return err
		}
		return nil
	case <-ctx.Done():
		b.forget(ch)
		return ctx.Err()
	}
}

// forget undoes a failed Subscribe: the hub does not call Unsubscribe for it.
func (b *Broker) forget(ch string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.channels, ch)
	if b.subs != nil {
		_ = b.unsubscribe(context.Background(), ch)
	}
}

// Unsubscribe stops delivery of topic to this node.
func (b *Broker) Unsubscribe(ctx context.Context, topic string) error {
	ch := b.channel(topic)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.channels, ch)
	if b.subs == nil {
		return nil // not subscribed on the next connection either
	}
	if err := b.unsubscribe(ctx, ch); err != nil {
		return hub.Unavailable("redis", err)
	}
	return nil
}

// unsubscribe sends the UNSUBSCRIBE (SUNSUBSCRIBE) of ch; with b.mu held.
func (b *Broker) unsubscribe(ctx context.Context, ch string) error {
	if b.sharded {
		b.unsubs[ch]++
	}
	return b.subs.unsubscribe(ctx, ch)
}

// drop ends the connection ps after a write error; the loop reconnects.
func (b *Broker) drop(ps *goredis.PubSub, err error) {
	b.log.Warn("redis pub/sub write failed", "err", err)
	_ = ps.Close()
}

// session runs one pub/sub session: a connection to the Redis, or one to each master of a
// cluster. It subscribes every wanted channel, marks the broker ready once each connection
// answered a PING sent after those subscriptions, and delivers messages until any connection
// fails; then all are closed, and the next session reads the cluster's slot map again.
func (b *Broker) session(onReady func()) error {
	subs, err := b.dialSubs(b.ctx)
	if err != nil {
		return err
	}
	defer subs.close()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	chans := make([]string, 0, len(b.channels))
	for ch := range b.channels {
		chans = append(chans, ch)
		b.pending[ch] = append(b.pending[ch], nil)
	}
	if len(chans) > 0 {
		err = subs.subscribe(b.ctx, chans...)
	}
	for _, ps := range subs.conns {
		if err == nil {
			err = ps.Ping(b.ctx) // dials a connection that has no channel
		}
	}
	if err == nil {
		b.subs = subs
	}
	b.mu.Unlock()
	defer b.endSession()
	if err != nil {
		return err
	}
	errs := make(chan error, len(subs.conns))
	var pending sync.WaitGroup // connections not yet ready
	pending.Add(len(subs.conns))
	for _, ps := range subs.conns {
		go func() { errs <- b.receive(ps, pending.Done) }()
	}
	ready := make(chan struct{})
	go func() { pending.Wait(); close(ready) }()
	select {
	case <-ready:
		onReady()
	case err = <-errs:
		subs.close()
		b.drain(errs, len(subs.conns)-1)
		return err
	}
	err = <-errs
	subs.close() // ends the other connections' loops
	b.drain(errs, len(subs.conns)-1)
	return err
}

func (b *Broker) drain(errs <-chan error, n int) {
	for range n {
		<-errs
	}
}

// receive reads one connection's messages until it fails; ready is called once Redis answered
// a PING sent after its subscriptions.
func (b *Broker) receive(ps *goredis.PubSub, ready func()) error {
	if err := ps.Ping(b.ctx, "ready"); err != nil {
		return err
	}
	isReady, idle := false, false
	for {
		msg, err := ps.ReceiveTimeout(b.ctx, b.cfg.PingInterval)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !idle {
				idle = true
				if err := ps.Ping(b.ctx); err != nil {
					return err
				}
				continue
			}
			return err
		}
		idle = false
		switch m := msg.(type) {
		case *goredis.Message:
			b.deliver(m)
		case *goredis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				b.confirm(m.Channel)
			case "sunsubscribe":
				// Unasked, this is Redis moving the channel's slot to another master: read the
				// slot map again in a new session.
				if b.movedAway(m.Channel) {
					return fmt.Errorf("channel %s moved to another master", m.Channel)
				}
			}
		case *goredis.Pong:
			if !isReady && m.Payload == "ready" {
				isReady = true
				ready()
			}
		}
	}
}

// movedAway reports whether a SUNSUBSCRIBE of ch came from Redis while ch is wanted, rather
// than answering this node's own.
func (b *Broker) movedAway(ch string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.unsubs[ch]; n > 0 {
		if n == 1 {
			delete(b.unsubs, ch)
		} else {
			b.unsubs[ch] = n - 1
		}
		return false
	}
	_, ok := b.channels[ch]
	return ok
}

// endSession forgets the connection and fails the Subscribe calls still waiting on it.
func (b *Broker) endSession() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = nil
	clear(b.unsubs)
	for ch, waiters := range b.pending {
		for _, w := range waiters {
			if w != nil {
				w <- hub.Unavailable("redis", errors.New("pub/sub connection lost while subscribing"))
			}
		}
		delete(b.pending, ch)
	}
}

// confirm hands a subscribe confirmation to the oldest SUBSCRIBE of ch still unanswered.
func (b *Broker) confirm(ch string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.pending[ch]
	if len(q) == 0 {
		return
	}
	if q[0] != nil {
		q[0] <- nil
	}
	if len(q) == 1 {
		delete(b.pending, ch)
	} else {
		b.pending[ch] = q[1:]
	}
}

func (b *Broker) deliver(m *goredis.Message) {
	if m.Channel == b.broadcastChannel() {
		b.receiveBroadcast(m.Payload)
		return
	}
	topic, ok := b.topicOf(m.Channel)
	if !ok {
		return
	}
	p, err := replica.Decode(topic, m.Payload)
	if err != nil {
		b.log.Error("redis broker: undecodable publication", "topic", topic, "err", err)
		return
	}
	b.handler.HandlePublication(p)
}
