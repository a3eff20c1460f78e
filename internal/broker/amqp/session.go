package amqp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// errLogReset ends a session whose log went back: RabbitMQ lost the stream and recreated it.
var errLogReset = errors.New("amqp broker: the log was recreated")

// reader is the log consumer's state. It is owned by the goroutine consuming the log (one
// session at a time).
type reader struct {
	next  int64 // log offset to resume from; -1 means from the start
	count *counter
	first int64  // offset of the first entry of a replay from the start
	held  []held // publications read before the node could count them
	since int    // publications read since the latest checkpoint
}

type held struct {
	off int64
	e   entry
}

// runSession runs one connection: it resumes the log, catches up with a marker, declares the
// node ready, and returns when anything fails.
func (b *Broker) runSession(onReady func()) error {
	conn, err := b.dial()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // fails publishes waiting on this connection
		_ = conn.Close()
		wg.Wait()
	}()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	if err := b.declare(conn); err != nil {
		return err
	}
	pub, err := conn.Channel()
	if err != nil {
		return err
	}
	logCh, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := logCh.Qos(1000, 0, false); err != nil {
		return err
	}
	r := &b.reader
	if r.next >= 0 {
		// Resuming: make sure the log is still the one this node read. RabbitMQ attaches a
		// consumer at exactly the offset asked for, even past the end of a log that was deleted
		// and declared anew, where it would wait forever.
		end, err := b.logEnd(ctx, conn, pub)
		if err != nil {
			return err
		}
		if end < r.next {
			b.log.Warn("amqp log is shorter than what this node read: it was recreated; replaying it", "end", end, "next", r.next)
			b.restart()
		}
	}
	var from any = "first"
	if r.next >= 0 {
		from = r.next
	}
	entries, err := logCh.Consume(b.logQ, "", false, false, false, false, amqp.Table{"x-stream-offset": from})
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.logQ, err)
	}

	s := &session{pub: pub, ctx: ctx, close: cancel, snapshot: make(chan chan []byte), appends: make(chan []byte, maxBatch)}
	s.lastCheckpoint.Store(-1)
	b.session.Store(s)
	defer b.session.CompareAndSwap(s, nil)
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errc <- b.consumeLog(ctx, s, entries)
		cancel()
	}()
	go func() {
		defer wg.Done()
		errc <- b.appendLoop(s)
		cancel()
	}()

	// Everything in the log before this marker is applied once the marker is read back.
	if err := b.mark(ctx, pub); err != nil {
		select {
		case e := <-errc:
			return e
		default:
		}
		return err
	}
	if !b.counting.Load() {
		if err := b.startCounting(ctx, pub); err != nil {
			return err
		}
	}
	b.rebuilding.Store(false)
	onReady()
	select {
	case e := <-closed:
		if e == nil {
			return errors.New("connection closed")
		}
		return e
	case err := <-errc:
		return err
	case <-b.ctx.Done():
		return ErrClosed
	}
}

// restart forgets what was read, to replay the log from its start.
func (b *Broker) restart() {
	b.reader = reader{next: -1, count: newCounter(b.logTTL())}
	b.counting.Store(false)
	b.rebuilding.Store(true)
	b.rep.Reset()
}

// startCounting is for a node that read the log from a start RabbitMQ had cut: it asks the
// running nodes for a checkpoint and, if none comes within CheckpointWait, appends a reset.
func (b *Broker) startCounting(ctx context.Context, pub *amqp.Channel) error {
	b.log.Info("amqp log starts after entries RabbitMQ dropped: asking for a checkpoint")
	if err := b.append(ctx, pub, appendSimple(kindRequest, newID())); err != nil {
		return fmt.Errorf("ask for a checkpoint: %w", err)
	}
	deadline := time.Now().Add(b.cfg.CheckpointWait)
	for !b.counting.Load() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if b.counting.Load() {
		return nil
	}
	b.log.Warn("amqp broker: no node answered with a checkpoint; appending a reset: every topic starts a new epoch")
	if err := b.append(ctx, pub, appendReset(newID(), time.Now().UnixMilli())); err != nil {
		return fmt.Errorf("append a reset: %w", err)
	}
	if err := b.mark(ctx, pub); err != nil {
		return err
	}
	if !b.counting.Load() {
		return errors.New("amqp broker: cannot count the log after a reset")
	}
	return nil
}

func (b *Broker) append(ctx context.Context, pub *amqp.Channel, body []byte) error {
	return pub.PublishWithContext(ctx, "", b.logQ, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
}

// mark appends a marker to the log and waits until this node's consumer reads it.
func (b *Broker) mark(ctx context.Context, pub *amqp.Channel) error {
	id := newID()
	ch := b.await(id)
	defer b.unawait(id)
	if err := b.append(ctx, pub, appendSimple(kindMarker, id)); err != nil {
		return fmt.Errorf("append marker: %w", err)
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("marker not read back within 30 s")
	}
}

// logEnd appends a marker and returns its offset, read by a consumer attached at the log's
// last chunk: the log's end.
func (b *Broker) logEnd(ctx context.Context, conn *amqp.Connection, pub *amqp.Channel) (int64, error) {
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	if err := ch.Qos(100, 0, false); err != nil {
		return 0, err
	}
	entries, err := ch.Consume(b.logQ, "", false, false, false, false, amqp.Table{"x-stream-offset": "last"})
	if err != nil {
		return 0, fmt.Errorf("probe the end of %s: %w", b.logQ, err)
	}
	id := newID()
	if err := b.append(ctx, pub, appendSimple(kindMarker, id)); err != nil {
		return 0, fmt.Errorf("append marker: %w", err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case d, ok := <-entries:
			if !ok {
				return 0, errors.New("log probe closed")
			}
			_ = d.Ack(false)
			if e, err := parseEntry(d.Body); err == nil && e.kind == kindMarker && e.id == id {
				off, _ := d.Headers["x-stream-offset"].(int64)
				return off, nil
			}
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout:
			return 0, errors.New("log probe: marker not read back within 30 s")
		}
	}
}

// consumeLog reads log entries in order.
func (b *Broker) consumeLog(ctx context.Context, s *session, entries <-chan amqp.Delivery) error {
	r := &b.reader
	unacked := 0
	var batch []entry
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-entries:
			if !ok {
				return errors.New("log consumer closed")
			}
		case reply := <-s.snapshot:
			reply <- b.snapshot()
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		// Stream consumers ack only to grant credit (the prefetch of 1000): every 256 entries
		// is enough, and spares RabbitMQ an ack per entry.
		if unacked++; unacked >= 256 {
			_ = d.Ack(true)
			unacked = 0
		}
		off, isOff := d.Headers["x-stream-offset"].(int64)
		if !isOff {
			continue
		}
		if r.next >= 0 && off < r.next {
			// RabbitMQ starts a consumer exactly at the offset asked for, so an earlier one means
			// the log is not the one this node read: start over from the new log's start.
			b.log.Warn("amqp log went back; replaying it from the start", "offset", off, "expected", r.next)
			b.restart()
			return errLogReset
		}
		if r.next < 0 {
			// The first entry of a replay. Only a log read from offset 0 can be counted at once.
			r.first = off
			b.counting.Store(off == 0)
		}
		r.next = off + 1
		var err error
		if batch, err = parseMessage(d.Body, batch[:0]); err != nil {
			b.m.malformed.Inc()
			b.log.Error("amqp broker: skipping a malformed log entry", "offset", off)
			continue
		}
		for _, e := range batch {
			if b.counting.Load() {
				b.apply(s, off, e)
			} else {
				b.hold(s, off, e)
			}
		}
	}
}

// appendLoop appends the publications queued on s.appends, several in one message when more
// than one is waiting: each message costs RabbitMQ the same, whatever its size. With
// Config.Linger it holds the first publication that long for others to join it.
func (b *Broker) appendLoop(s *session) error {
	var (
		pubs  [][]byte
		size  int
		buf   []byte // a batch's message, reused
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	add := func(p []byte) {
		pubs = append(pubs, p)
		size += len(p)
	}
	full := func() bool { return len(pubs) >= maxBatch || size >= maxBatchBytes }
	for {
		pubs, size = pubs[:0], 0
		select {
		case p := <-s.appends:
			add(p)
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if b.cfg.Linger > 0 {
			timer.Reset(b.cfg.Linger)
		linger:
			for !full() {
				select {
				case p := <-s.appends:
					add(p)
				case <-timer.C:
					break linger
				case <-s.ctx.Done():
					return s.ctx.Err()
				}
			}
			timer.Stop() // since Go 1.23 a stopped timer delivers nothing stale after Reset
		}
	drain:
		for !full() {
			select {
			case p := <-s.appends:
				add(p)
			default:
				break drain
			}
		}
		body := pubs[0]
		if len(pubs) > 1 {
			buf = appendBatch(buf[:0], pubs)
			body = buf
		}
		b.m.batch.Observe(float64(len(pubs)))
		if err := b.append(s.ctx, s.pub, body); err != nil {
			return fmt.Errorf("append to the log: %w", err)
		}
	}
}

// hold handles an entry read before the node can count: publications wait for a checkpoint
// (or a reset) to give them offsets.
func (b *Broker) hold(s *session, off int64, e entry) {
	r := &b.reader
	switch e.kind {
	case kindMarker:
		b.notify(e.id, nil)
	case kindPub:
		r.held = append(r.held, held{off: off, e: e})
	case kindCheckpoint:
		// It counts the entries up to e.at: usable if this node read everything after that.
		if e.at < r.first-1 || e.at >= off {
			return
		}
		if err := r.count.restore(e); err != nil {
			b.m.malformed.Inc()
			b.log.Error("amqp broker: skipping a malformed checkpoint", "offset", off, "err", err)
			return
		}
		b.log.Info("amqp broker: counting from a checkpoint", "offset", off, "at", e.at, "topics", len(r.count.topics))
		held := r.held
		r.held = nil
		b.counting.Store(true)
		for _, h := range held {
			if h.off > e.at {
				b.apply(s, h.off, h.e)
			}
		}
		b.apply(s, off, e)
	case kindReset:
		r.held = nil
		b.counting.Store(true)
		b.apply(s, off, e)
	}
}

// apply handles an entry of a log the node can count.
func (b *Broker) apply(s *session, off int64, e entry) {
	r := &b.reader
	switch e.kind {
	case kindMarker:
		b.notify(e.id, nil)
	case kindPub:
		// Decode before counting: an undecodable entry is skipped by every node alike.
		p, err := e.publication(1, "x")
		if err != nil {
			b.m.malformed.Inc()
			b.log.Error("amqp broker: skipping an undecodable publication", "offset", off, "topic", e.topic)
			return
		}
		p.Offset, p.Epoch = r.count.next(e.topic, e.id, p.Time.UnixMilli())
		b.rep.Apply(p, uint64(off))
		b.handler.HandlePublication(p)
		b.notify(e.id, p)
		if r.since++; r.since >= b.cfg.CheckpointEvery {
			r.since = 0
			b.checkpoint(s, off, 500*time.Millisecond)
		}
	case kindRequest:
		b.checkpoint(s, off, 100*time.Millisecond)
	case kindCheckpoint:
		r.since = 0
		s.lastCheckpoint.Store(off)
	case kindReset:
		b.log.Warn("amqp broker: the log was reset: every topic starts a new epoch", "offset", off)
		r.count.reset(e.clock)
		r.since = 0
		b.rep.Reset()
		b.m.resets.Inc()
	}
}

// checkpoint appends a checkpoint after the entry at offset due, unless another node's is read
// first: it waits up to jitter so that nodes reading the same log rarely both write. The state
// is taken when the wait is over, from the log consumer, so the checkpoint describes the log up
// to about where it lands: a stale one could fall before the start of a cut log.
func (b *Broker) checkpoint(s *session, due int64, jitter time.Duration) {
	wait := rand.N(jitter)
	go func() {
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return
		}
		if s.lastCheckpoint.Load() > due {
			return
		}
		reply := make(chan []byte, 1)
		select {
		case s.snapshot <- reply:
		case <-s.ctx.Done():
			return
		}
		var body []byte
		select {
		case body = <-reply:
		case <-s.ctx.Done():
			return
		}
		if body == nil {
			return
		}
		if err := b.append(s.ctx, s.pub, body); err == nil {
			b.m.checkpoints.Inc()
		}
	}()
}

// snapshot is the checkpoint of what the consumer has read, or nil while it cannot count.
func (b *Broker) snapshot() []byte {
	if !b.counting.Load() {
		return nil
	}
	return b.reader.count.appendCheckpoint(nil, newID(), b.reader.next-1)
}
