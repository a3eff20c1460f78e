package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rtlab/rtlab/internal/state"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// State is a state.Store on RabbitMQ, which has no compare-and-set: every change is a record appended
// to a stream queue, and every node folds the whole stream, in its order, into memory. A Put
// applies when the record's expected revision is the record's current one at that point of
// the stream, so all nodes decide alike; its new revision is the stream offset. The writer
// waits until its own record comes back through the fold to learn the outcome.
//
// Reads answer from the node's fold: a node sees another node's change once it has read it
// (usually within a millisecond), its own changes at once. The stream keeps every change (no
// retention limit), which is what lets a starting node rebuild the state; it grows with each
// change (a few hundred bytes) and is read whole at start.
type State struct {
	conns *shared // the connection, shared with the node's broker unless own
	own   bool    // the store owns conns and closes it
	queue string
	node  string

	conn   *amqp.Connection
	pubMu  sync.Mutex    // serializes publishes on pubCh
	pubCh  *amqp.Channel // guarded by pubMu
	cancel context.CancelFunc
	done   chan struct{}
	opened atomic.Bool // caught up once: from then on a lost connection fails waiting writers

	mu      sync.Mutex
	recs    map[string]map[string]state.Record // guarded by mu
	seq     uint64                             // last record id of this node; guarded by mu
	waiters map[uint64]chan amqpResult         // by record id; guarded by mu
	next    int64                              // stream offset to read from after a reconnect; guarded by mu
}

type amqpResult struct {
	rev uint64
	err error
}

// amqpRecord is one change in the stream.
type amqpRecord struct {
	Op    string `json:"op"` // put, del, mark
	Kind  string `json:"k,omitempty"`
	Name  string `json:"n,omitempty"`
	Value []byte `json:"v,omitempty"`
	Rev   uint64 `json:"r,omitempty"` // expected revision (put)
	Node  string `json:"node"`
	Seq   uint64 `json:"seq"`
}

var _ state.Store = (*State)(nil)

// errReopen fails the catch-up marker of a store still opening whose connection was lost.
var errReopen = errors.New("reconnected while opening")

// OpenState connects, declares the stream queue and folds it up to its current end, on a
// connection of its own.
func OpenState(ctx context.Context, url, queue string) (*State, error) {
	return openState(ctx, newShared(url, 2*time.Second, slog.New(slog.DiscardHandler)), true, queue)
}

// openState opens the store on conns: the broker's connection, or its own.
func openState(ctx context.Context, conns *shared, own bool, queue string) (*State, error) {
	a := &State{conns: conns, own: own, queue: queue, node: strconv.FormatInt(time.Now().UnixNano(), 36),
		recs: make(map[string]map[string]state.Record), waiters: make(map[uint64]chan amqpResult), done: make(chan struct{})}
	for {
		err := a.connect()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond): // see run: declaring races at a fresh start
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go a.run(rctx)
	// Fold up to now: append a marker and wait for it.
	for {
		_, err := a.append(ctx, amqpRecord{Op: "mark"})
		if err == nil {
			break
		}
		if !errors.Is(err, errReopen) || ctx.Err() != nil {
			_ = a.Close()
			return nil, fmt.Errorf("state: amqp: catch up with %s: %w", queue, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.opened.Store(true)
	return a, nil
}

// connect opens the store's channel on the current connection and declares the stream.
func (a *State) connect() error {
	conn, err := a.conns.get()
	if err != nil {
		return fmt.Errorf("state: amqp: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		if _, err = ch.QueueDeclare(a.queue, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
			_ = ch.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("state: amqp: declare %s: %w", a.queue, err)
	}
	a.pubMu.Lock()
	old := a.pubCh
	a.conn, a.pubCh = conn, ch
	a.pubMu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// run consumes the stream for as long as the store is open, reconnecting after a loss.
func (a *State) run(ctx context.Context) {
	defer close(a.done)
	for ctx.Err() == nil {
		err := a.consume(ctx)
		if ctx.Err() != nil {
			return
		}
		lost := fmt.Errorf("state: amqp: connection lost: %v", err)
		if !a.opened.Load() {
			// Several nodes starting at once on a fresh broker race to declare the stream,
			// and the losers see it without a leader for a moment (RESOURCE_ERROR "Stream
			// not found", INTERNAL_ERROR), which closes the connection: the catch-up marker,
			// perhaps lost with it, is sent again.
			lost = fmt.Errorf("%w: %v", errReopen, err)
		}
		a.failWaiters(lost)
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			if a.connect() == nil {
				break
			}
		}
	}
}

func (a *State) consume(ctx context.Context) error {
	a.pubMu.Lock()
	conn := a.conn
	a.pubMu.Unlock()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(1000, 0, false); err != nil {
		return err
	}
	a.mu.Lock()
	var from any = "first"
	if a.next > 0 {
		from = a.next
	}
	a.mu.Unlock()
	ds, err := ch.ConsumeWithContext(ctx, a.queue, "", false, false, false, false, amqp.Table{"x-stream-offset": from})
	if err != nil {
		return err
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	n := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-closed:
			return e
		case d, ok := <-ds:
			if !ok {
				return errors.New("stream consumer ended")
			}
			off, _ := d.Headers["x-stream-offset"].(int64)
			a.apply(off, d.Body)
			if n++; n%500 == 0 || len(ds) == 0 {
				_ = d.Ack(true)
			}
		}
	}
}

// apply folds one record at stream offset off.
func (a *State) apply(off int64, body []byte) {
	var r amqpRecord
	if json.Unmarshal(body, &r) != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if off < a.next {
		return // read again after a reconnect
	}
	a.next = off + 1
	res := amqpResult{rev: uint64(off) + 1}
	switch r.Op {
	case "put":
		m := a.recs[r.Kind]
		if m[r.Name].Rev != r.Rev {
			res.err = state.ErrConflict
			break
		}
		if m == nil {
			m = make(map[string]state.Record)
			a.recs[r.Kind] = m
		}
		m[r.Name] = state.Record{Value: r.Value, Rev: res.rev}
	case "del":
		delete(a.recs[r.Kind], r.Name)
	}
	if r.Node == a.node {
		if w := a.waiters[r.Seq]; w != nil {
			delete(a.waiters, r.Seq)
			w <- res
		}
	}
}

// append publishes r and waits until the fold has applied it.
func (a *State) append(ctx context.Context, r amqpRecord) (uint64, error) {
	a.mu.Lock()
	a.seq++
	r.Node, r.Seq = a.node, a.seq
	w := make(chan amqpResult, 1)
	a.waiters[r.Seq] = w
	a.mu.Unlock()
	body, _ := json.Marshal(r)
	a.pubMu.Lock()
	err := a.pubCh.PublishWithContext(ctx, "", a.queue, false, false, amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body})
	a.pubMu.Unlock()
	if err != nil {
		a.dropWaiter(r.Seq)
		if !a.opened.Load() {
			return 0, fmt.Errorf("state: amqp: %w: %v", errReopen, err)
		}
		return 0, fmt.Errorf("state: amqp: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	select {
	case res := <-w:
		return res.rev, res.err
	case <-ctx.Done():
		a.dropWaiter(r.Seq)
		return 0, fmt.Errorf("state: amqp: waiting for the record: %w", ctx.Err())
	}
}

func (a *State) dropWaiter(seq uint64) {
	a.mu.Lock()
	delete(a.waiters, seq)
	a.mu.Unlock()
}

func (a *State) failWaiters(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for seq, w := range a.waiters {
		delete(a.waiters, seq)
		w <- amqpResult{err: err}
	}
}

func (a *State) Get(_ context.Context, kind, name string) (state.Record, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.recs[kind][name], nil
}

func (a *State) Put(ctx context.Context, kind, name string, value []byte, rev uint64) (uint64, error) {
	if len(value) > state.MaxValue {
		return 0, state.ErrTooLarge
	}
	return a.append(ctx, amqpRecord{Op: "put", Kind: kind, Name: name, Value: value, Rev: rev})
}

func (a *State) Delete(ctx context.Context, kind, name string) error {
	_, err := a.append(ctx, amqpRecord{Op: "del", Kind: kind, Name: name})
	return err
}

func (a *State) List(_ context.Context, kind string, fn func(string, []byte)) error {
	a.mu.Lock()
	recs := make(map[string][]byte, len(a.recs[kind]))
	for n, r := range a.recs[kind] {
		recs[n] = r.Value
	}
	a.mu.Unlock()
	for n, v := range recs {
		fn(n, v)
	}
	return nil
}

// Close stops the store; it closes the connection only if it is the store's own.
func (a *State) Close() error {
	a.cancel()
	a.pubMu.Lock()
	ch := a.pubCh
	a.pubMu.Unlock()
	if a.own {
		a.conns.close()
	} else if ch != nil {
		_ = ch.Close()
	}
	<-a.done
	return nil
}
