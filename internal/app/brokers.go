package app

import (
	"context"
	"fmt"
	"slices"
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
)

// brokerKind is a broker: the URL schemes it serves and how it opens. Adding a broker is its
// package's Open and one row in brokerKinds.
type brokerKind struct {
	schemes []string
	open    broker.OpenFunc
	example string // for error messages
	shared  bool   // several nodes share it, and a node may spread topics over several (shards)
	mirror  bool   // it may come back empty (Redis without persistence): keep a copy of the state
}

// brokerKinds is the table of brokers, each opened with the node's settings for it. One table
// opens all of a node's shards: RabbitMQ's share a count of sequencer roles.
func brokerKinds(cfg Config, durable func(string) bool) []brokerKind {
	if len(cfg.Durable) == 0 {
		durable = nil
	}
	mem := memory.Settings{DataDir: cfg.DataDir, Durable: durable, MaxBytes: cfg.HistoryMaxBytes, MaxTopics: cfg.MaxTopics, DurableMaxBytes: cfg.DurableMaxBytes}
	amqp := amqpbroker.Settings{Linger: cfg.AMQPLinger, Direct: cfg.AMQPDirect, RetryIDs: cfg.AMQPRetryIDs}
	return []brokerKind{
		{[]string{"memory"}, mem.Open, "memory", false, false},
		{[]string{"redis", "rediss", "redis+cluster", "rediss+cluster"}, redisbroker.Open, "redis://host:port/db, redis+cluster://host:port", true, true},
		{[]string{"nats"}, natsbroker.Open, "nats://host:port", true, false},
		{[]string{"amqp", "amqps"}, amqp.Opener(), "amqp://user:pass@host:port/vhost", true, false},
	}
}

// opened is the node's broker with what it needs beside it: the state store (rooms,
// revocations; never nil) and the files the broker keeps beside itself.
type opened struct {
	broker.Opened
	kind brokerKind
}

// close releases what was opened: the state store before the broker whose connection it
// shares, the broker's files after it.
func (o opened) close() {
	if o.State != nil {
		_ = o.State.Close()
	}
	_ = o.Broker.Close()
	for _, f := range o.Files {
		_ = f.Close()
	}
}

// openBrokers opens the broker cfg.Broker names, one URL or several of one shared kind,
// space-separated (a comma separates brokers in rtlab bench's list): independent servers (or
// RabbitMQ vhosts) over which topics are sharded by a consistent hash of their names
// (internal/broker/shard), so each orders only its topics. The state lives on the first.
func openBrokers(ctx context.Context, cfg Config, policy func(string) hub.HistoryPolicy, durable func(string) bool, reg prometheus.Registerer) (opened, error) {
	kinds := brokerKinds(cfg, durable)
	urls := strings.Fields(cfg.Broker)
	o := broker.Options{Policy: policy, DurableSize: cfg.DurableHistory, State: true, Shards: len(urls), Logger: cfg.Logger, Registerer: reg}
	switch len(urls) {
	case 0:
		_, err := kindOf(kinds, "") // only blanks: the error says what is wanted
		return opened{}, err
	case 1:
		b, err := openOne(ctx, kinds, urls[0], o)
		if err != nil {
			return opened{}, err
		}
		return mirrored(ctx, cfg, b)
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
	first, _, _ := strings.Cut(urls[0], "://")
	var kind brokerKind
	for i, u := range urls {
		if scheme, _, _ := strings.Cut(u, "://"); scheme != first {
			return fail(fmt.Errorf("--broker %q: shards are servers of one kind: want \"redis://host:port/db redis://host:port/db …\" (or nats://…, amqp://…)", redactedURL(cfg.Broker)))
		}
		so := o
		so.State, so.Shard = i == 0, i
		so.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"shard": strconv.Itoa(i + 1)}, reg)
		b, err := openOne(ctx, kinds, u, so)
		if err != nil {
			return fail(fmt.Errorf("%w (shard %d)", err, i+1))
		}
		shards, kind = append(shards, b.Broker), b.kind
		if b.State != nil {
			st = b.State
		}
	}
	sb, err := shard.New(shards)
	if err != nil {
		return fail(err)
	}
	return mirrored(ctx, cfg, opened{Opened: broker.Opened{Broker: sb, State: st}, kind: kind})
}

// stateCheck is how often a node checks that a Redis still holds the state (its epoch marker).
const stateCheck = time.Second

// mirrored keeps a copy of the state beside a Redis, which may run without persistence and
// come back empty: the nodes that ran through write their copies back (state.Mirror).
func mirrored(ctx context.Context, cfg Config, o opened) (opened, error) {
	if !o.kind.mirror {
		return o, nil
	}
	m, err := state.NewMirror(ctx, o.State, stateCheck, cfg.Logger)
	if err != nil {
		o.close()
		return opened{}, fmt.Errorf("--broker %s: state: %w", redactedURL(cfg.Broker), err)
	}
	o.State = m
	return o, nil
}

// openOne opens the broker at raw, one URL, with the kind its scheme names.
func openOne(ctx context.Context, kinds []brokerKind, raw string, o broker.Options) (opened, error) {
	k, err := kindOf(kinds, raw)
	if err != nil {
		return opened{}, err
	}
	if o.Shards > 1 && !k.shared {
		return opened{}, fmt.Errorf("--broker %q: shards are servers of a shared broker: want \"redis://host:port/db redis://host:port/db …\" (or nats://…, amqp://…)", redactedURL(raw))
	}
	b, err := k.open(ctx, raw, o)
	if err != nil {
		if !k.shared {
			return opened{}, err // its own files: the error names the flag
		}
		return opened{}, fmt.Errorf("--broker: %w", err)
	}
	return opened{Opened: b, kind: k}, nil
}

// kindOf is the kind of broker raw's scheme names.
func kindOf(kinds []brokerKind, raw string) (brokerKind, error) {
	scheme, _, _ := strings.Cut(raw, "://")
	var want []string
	for _, k := range kinds {
		if slices.Contains(k.schemes, scheme) {
			return k, nil
		}
		want = append(want, k.example)
	}
	return brokerKind{}, fmt.Errorf("--broker %q: want %s", redactedURL(raw), strings.Join(want, ", "))
}
