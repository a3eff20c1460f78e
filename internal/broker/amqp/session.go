package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// errLogReset ends a session whose log went back: RabbitMQ lost the stream and recreated it.
var errLogReset = errors.New("amqp broker: the log was recreated")

// runSession runs one connection: it resumes the log, joins the sequencer queue, catches up
// with a marker, declares the node ready, and returns when anything fails.
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
	if b.next >= 0 {
		// Resuming: make sure the log is still the one this node read. RabbitMQ attaches a
		// consumer at exactly the offset asked for, even past the end of a log that was deleted
		// and declared anew, where it would wait forever.
		end, err := b.logEnd(ctx, conn, pub)
		if err != nil {
			return err
		}
		if end < b.next {
			b.log.Warn("amqp log is shorter than what this node read: it was recreated; replaying it", "end", end, "next", b.next)
			b.next = -1
			b.rep.Reset()
		}
	}
	var from any = "first"
	if b.next >= 0 {
		from = b.next
	}
	entries, err := logCh.Consume(b.logQ, "", false, false, false, false, amqp.Table{"x-stream-offset": from})
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.logQ, err)
	}
	seqCh, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := seqCh.Qos(256, 0, false); err != nil {
		return err
	}
	requests, err := seqCh.Consume(b.seqQ, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.seqQ, err)
	}
	appendCh, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := appendCh.Confirm(false); err != nil {
		return err
	}

	s := &session{conn: conn, pub: pub, ctx: ctx, close: cancel}
	b.session.Store(s)
	defer b.session.CompareAndSwap(s, nil)
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errc <- b.consumeLog(ctx, entries)
		cancel()
	}()
	go func() {
		defer wg.Done()
		errc <- b.sequence(ctx, requests, appendCh, pub)
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

// mark appends a marker to the log and waits until this node's consumer reads it.
func (b *Broker) mark(ctx context.Context, pub *amqp.Channel) error {
	id := newID()
	ch := b.await(id)
	defer b.unawait(id)
	err := pub.PublishWithContext(ctx, "", b.logQ, false, false, amqp.Publishing{
		Headers:      amqp.Table{hdrKind: kindMarker, hdrRequest: id},
		DeliveryMode: amqp.Persistent,
	})
	if err != nil {
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
	if err := pub.PublishWithContext(ctx, "", b.logQ, false, false, amqp.Publishing{
		Headers:      amqp.Table{hdrKind: kindMarker, hdrRequest: id},
		DeliveryMode: amqp.Persistent,
	}); err != nil {
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
			if r, _ := d.Headers[hdrRequest].(string); r == id {
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

// consumeLog applies log entries in order and hands new publications to the hub.
func (b *Broker) consumeLog(ctx context.Context, entries <-chan amqp.Delivery) error {
	unacked := 0
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-entries:
			if !ok {
				return errors.New("log consumer closed")
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		off, isOff := d.Headers["x-stream-offset"].(int64)
		if !isOff {
			_ = d.Ack(false)
			continue
		}
		if b.next >= 0 && off < b.next {
			// RabbitMQ starts a consumer exactly at the offset asked for, so an earlier one means
			// the log is not the one this node read: start over from the new log's start.
			b.log.Warn("amqp log went back; replaying it from the start", "offset", off, "expected", b.next)
			b.next = -1
			b.rep.Reset()
			return errLogReset
		}
		b.next = off + 1
		b.apply(d, off)
		if unacked++; unacked >= 64 || len(entries) == 0 {
			_ = d.Ack(true) // stream consumers ack only to grant credit
			unacked = 0
		}
	}
}

func (b *Broker) apply(d amqp.Delivery, off int64) {
	kind, _ := d.Headers[hdrKind].(string)
	id, _ := d.Headers[hdrRequest].(string)
	switch kind {
	case kindMarker:
		b.notify(id, nil)
	case kindPub:
		topic, _ := d.Headers[hdrTopic].(string)
		p, err := replica.Decode(topic, d.Body)
		if err != nil || hub.ValidateTopic(topic) != nil {
			b.log.Error("amqp broker: undecodable log entry", "offset", off, "topic", topic, "err", err)
			return
		}
		if !b.rep.Apply(p, uint64(off)) {
			b.m.rejected.Inc()
			return
		}
		b.reqs.add(id, time.Now())
		b.handler.HandlePublication(p)
		b.notify(id, p)
	}
}

// seqState is what the sequencer knows of a topic it assigned offsets to in its current term.
type seqState struct {
	epoch  string
	offset uint64
	time   time.Time
}

// pendingAppend is a log append waiting for its confirm before its request is acked.
type pendingAppend struct {
	conf *amqp.DeferredConfirmation
	req  amqp.Delivery
}

// sequence consumes publish requests. RabbitMQ delivers them to one node at a time (single
// active consumer); the first request starts this node's term as the sequencer, which begins
// by catching up with the log. The term ends with the session.
func (b *Broker) sequence(ctx context.Context, requests <-chan amqp.Delivery, appendCh, pub *amqp.Channel) error {
	appended := make(chan pendingAppend, 1024)
	ackErr := make(chan error, 1)
	go func() {
		// Acks requests once their log entry is confirmed, in order.
		for {
			select {
			case pa := <-appended:
				ok, err := pa.conf.WaitContext(ctx)
				if err != nil {
					return
				}
				if !ok {
					ackErr <- errors.New("log append refused by RabbitMQ")
					return
				}
				_ = pa.req.Ack(false)
			case <-ctx.Done():
				return
			}
		}
	}()
	var term map[string]seqState // nil until this node is the sequencer
	assigned := 0
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-requests:
			if !ok {
				return errors.New("sequencer consumer closed")
			}
		case err := <-ackErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		if term == nil {
			if err := b.mark(ctx, pub); err != nil {
				return fmt.Errorf("catch up as sequencer: %w", err)
			}
			term = make(map[string]seqState)
			b.m.sequencer.Set(1)
			b.log.Info("amqp broker: this node is the sequencer")
		}
		if err := b.assign(ctx, term, d, appendCh, appended); err != nil {
			return err
		}
		if assigned++; assigned%1024 == 0 {
			b.pruneTerm(term)
		}
	}
}

// assign gives request d its topic's next offset and appends it to the log.
func (b *Broker) assign(ctx context.Context, term map[string]seqState, d amqp.Delivery, appendCh *amqp.Channel, appended chan<- pendingAppend) error {
	topic, _ := d.Headers[hdrTopic].(string)
	id, _ := d.Headers[hdrRequest].(string)
	deadline, _ := d.Headers[hdrDeadline].(int64)
	now := time.Now()
	t, err := replica.TailTime(d.Body)
	switch {
	case err != nil || id == "" || hub.ValidateTopic(topic) != nil:
		b.log.Error("amqp broker: dropping a malformed publish request", "topic", topic)
		return d.Ack(false)
	case deadline != 0 && now.UnixMilli() > deadline-200:
		return d.Ack(false) // its publisher has given up (or will before it could see the answer)
	case b.reqs.seen(id):
		return d.Ack(false) // appended by the previous sequencer, which did not get to ack it
	}
	pol := b.cfg.Policy(topic)
	st, known := term[topic]
	if !known {
		if lp, ok := b.rep.Last(topic, now); ok {
			st, known = seqState{epoch: lp.Epoch, offset: lp.Offset, time: lp.Time}, true
		}
	}
	if !known || now.Sub(st.time) > pol.TTL {
		st = seqState{epoch: replica.NewEpoch()} // unknown, or its history expired: a new epoch
	}
	st.offset++
	st.time = t
	term[topic] = st
	body := replica.AppendHead(make([]byte, 0, len(d.Body)+24), st.offset, st.epoch)
	body = append(body, d.Body...)
	conf, err := appendCh.PublishWithDeferredConfirmWithContext(ctx, "", b.logQ, false, false, amqp.Publishing{
		Headers:      amqp.Table{hdrKind: kindPub, hdrTopic: topic, hdrRequest: id},
		DeliveryMode: amqp.Persistent,
		Body:         body,
	})
	if err != nil {
		return fmt.Errorf("append to the log: %w", err)
	}
	select {
	case appended <- pendingAppend{conf: conf, req: d}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pruneTerm drops topics the replica has caught up with: for them it knows as much.
func (b *Broker) pruneTerm(term map[string]seqState) {
	now := time.Now()
	for topic, st := range term {
		if lp, ok := b.rep.Last(topic, now); ok && lp.Epoch == st.epoch && lp.Offset >= st.offset {
			delete(term, topic)
		}
	}
}
