package app

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker"
	amqpbroker "github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/broker/memory"
	natsbroker "github.com/rtlab/rtlab/internal/broker/nats"
	redisbroker "github.com/rtlab/rtlab/internal/broker/redis"
	"github.com/rtlab/rtlab/internal/broker/shard"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/store"
)

// brokerKind is a shared broker: the URL schemes it serves and how it opens. Adding a broker
// is its package's Open and one line in brokerKinds.
type brokerKind struct {
	schemes []string
	open    broker.OpenFunc
	example string // for error messages
}

func brokerKinds() []brokerKind {
	return []brokerKind{
		{[]string{"redis", "rediss", "redis+cluster", "rediss+cluster"}, redisbroker.Open, "redis://host:port/db, redis+cluster://host:port"},
		{[]string{"nats"}, natsbroker.Open, "nats://host:port"},
		{[]string{"amqp", "amqps"}, amqpbroker.Open, "amqp://user:pass@host:port/vhost"},
	}
}

// opened is the node's broker with what it needs beside it: the state store (rooms,
// revocations; never nil) and, for the memory broker with --data-dir, the durable topics' store.
type opened struct {
	broker hub.Broker
	state  state.Store
	store  *store.Store // nil unless the memory broker keeps durable topics
}

// close releases what was opened, the state store before the broker whose connection it shares.
func (o opened) close() {
	if o.state != nil {
		_ = o.state.Close()
	}
	_ = o.broker.Close()
	if o.store != nil {
		_ = o.store.Close()
	}
}

// openBrokers opens the broker cfg.Broker names and the state beside it.
func openBrokers(ctx context.Context, cfg Config, policy func(string) hub.HistoryPolicy, durable func(string) bool, reg prometheus.Registerer) (opened, error) {
	if cfg.Broker == "memory" {
		return openMemory(cfg, policy, durable, reg)
	}
	return openShared(ctx, cfg, policy, reg)
}

// openMemory is the embedded broker: durable topics in rtlab.db and the state in state.db under
// --data-dir (in memory without one).
func openMemory(cfg Config, policy func(string) hub.HistoryPolicy, durable func(string) bool, reg prometheus.Registerer) (opened, error) {
	var o opened
	mc := memory.Config{Policy: policy, MaxBytes: cfg.HistoryMaxBytes, MaxTopics: cfg.MaxTopics, DurableMaxBytes: cfg.DurableMaxBytes}
	if cfg.DataDir != "" && len(cfg.Durable) > 0 {
		st, err := store.Open(store.Config{
			Path: filepath.Join(cfg.DataDir, "rtlab.db"),
			Keep: func(string) int { return cfg.DurableHistory },
		})
		if err != nil {
			return o, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
		}
		mc.Store, mc.Durable = st, durable
		o.store = st
	}
	mb := memory.New(mc)
	registerMemoryStats(reg, mb)
	o.broker = mb
	if cfg.DataDir == "" {
		o.state = state.NewMemory()
		return o, nil
	}
	bs, err := state.OpenBolt(filepath.Join(cfg.DataDir, "state.db"))
	if err != nil {
		o.close()
		return opened{}, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, err)
	}
	o.state = bs
	return o, nil
}

// openShared connects to the broker cfg.Broker names: one URL, or several of one kind,
// space-separated (a comma separates brokers in rtlab bench's list): independent servers (or
// RabbitMQ vhosts) over which topics are sharded by a consistent hash of their names
// (internal/broker/shard), so each orders only its topics. The state lives on the first.
func openShared(ctx context.Context, cfg Config, policy func(string) hub.HistoryPolicy, reg prometheus.Registerer) (opened, error) {
	urls := strings.Fields(cfg.Broker)
	o := broker.Options{Policy: policy, DurableSize: cfg.DurableHistory, State: true,
		AMQPLinger: cfg.AMQPLinger, AMQPDirect: cfg.AMQPDirect, Logger: cfg.Logger, Registerer: reg}
	if len(urls) == 1 {
		b, err := openOne(ctx, urls[0], o)
		if err != nil {
			return opened{}, err
		}
		return mirrored(ctx, cfg, opened{broker: b.Broker, state: b.State})
	}
	var (
		shards []hub.Broker
		st     state.Store
	)
	fail := func(err error) (opened, error) {
		if st != nil {
			_ = st.Close()
		}
		for _, s := range shards {
			_ = s.Close()
		}
		return opened{}, err
	}
	// RabbitMQ shards spread their sequencers over the nodes by this count.
	o.Roles = broker.NewRoles(len(urls))
	first, _, _ := strings.Cut(urls[0], "://")
	for i, u := range urls {
		if scheme, _, _ := strings.Cut(u, "://"); scheme != first {
			return fail(fmt.Errorf("--broker %q: shards are servers of one kind: want \"redis://host:port/db redis://host:port/db …\" (or nats://…, amqp://…)", redactedURL(cfg.Broker)))
		}
		so := o
		so.State = i == 0
		so.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(i + 1)}, reg)
		if i > 0 {
			// Each RabbitMQ shard has a sequencer of its own, perhaps on this node: the next port.
			if host, port, err := net.SplitHostPort(cfg.AMQPDirect); err == nil && port != "0" {
				if p, err := strconv.Atoi(port); err == nil {
					so.AMQPDirect = net.JoinHostPort(host, strconv.Itoa(p+i))
				}
			}
		}
		b, err := openOne(ctx, u, so)
		if err != nil {
			return fail(fmt.Errorf("%w (shard %d)", err, i+1))
		}
		shards = append(shards, b.Broker)
		if b.State != nil {
			st = b.State
		}
	}
	sb, err := shard.New(shards)
	if err != nil {
		return fail(err)
	}
	return mirrored(ctx, cfg, opened{broker: sb, state: st})
}

// stateCheck is how often a node checks that a Redis still holds the state (its epoch marker).
const stateCheck = time.Second

// mirrored keeps a copy of the state beside a Redis, which may run without persistence and
// come back empty: the nodes that ran through write their copies back (state.Mirror).
func mirrored(ctx context.Context, cfg Config, o opened) (opened, error) {
	if !strings.HasPrefix(cfg.Broker, "redis") {
		return o, nil
	}
	m, err := state.NewMirror(ctx, o.state, stateCheck, cfg.Logger)
	if err != nil {
		o.close()
		return opened{}, fmt.Errorf("--broker %s: state: %w", redactedURL(cfg.Broker), err)
	}
	o.state = m
	return o, nil
}

// openOne opens the broker at raw, one URL, with the kind its scheme names.
func openOne(ctx context.Context, raw string, o broker.Options) (broker.Opened, error) {
	scheme, _, _ := strings.Cut(raw, "://")
	var want []string
	for _, k := range brokerKinds() {
		for _, s := range k.schemes {
			if s == scheme {
				b, err := k.open(ctx, raw, o)
				if err != nil {
					return broker.Opened{}, fmt.Errorf("--broker: %w", err)
				}
				return b, nil
			}
		}
		want = append(want, k.example)
	}
	return broker.Opened{}, fmt.Errorf("--broker %q: want memory, %s", redactedURL(raw), strings.Join(want, ", "))
}
