package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/replica"
)

// Timing of the catch-ups, see catchUpLog and takeOver.
const (
	// catchUpMargin is how far before the last publication it read a reconnecting node reads
	// the log again, and how far back a new sequencer reads it: more than the time RabbitMQ
	// takes to notice a dead connection (a few heartbeats).
	catchUpMargin = time.Minute
	// catchUpTimeout bounds one catch-up.
	catchUpTimeout = time.Minute
	// recentSize is how many publication ids a node remembers, so that a new sequencer does
	// not assign a request again that the previous one had published: more than the
	// sequencer queue's prefetch.
	recentSize = 16384
	// prefetch is how many requests RabbitMQ sends the sequencer before an ack.
	prefetch = 1024
)

// session is one AMQP connection and what runs on it.
type session struct {
	conn  *amqp.Connection
	pub   *amqp.Channel // requests, the sequencer's publications and acks, markers
	ctx   context.Context
	close context.CancelFunc
	// requests queues this node's requests for the sequencer queue (requestLoop).
	requests chan []byte
	// local queues this node's requests straight to its own sequencer, once it is the one.
	local chan []byte
	// sequencer is true once this node's sequencer received a request: RabbitMQ keeps a single
	// active consumer until its channel closes, so it stays true for the session.
	sequencer atomic.Bool
	// catchUp asks the applier, which owns applying, to catch up with the log.
	catchUp chan catchUpReq
	// bcast is the channel broadcasts are sent on (broadcast.go); nil until it is open.
	bcast atomic.Pointer[amqp.Channel]
}

// catchUpReq asks the applier to catch up with the log from an x-stream-offset, and to
// answer on reply when it has.
type catchUpReq struct {
	from  any
	reply chan error
}

// runSession runs one connection: it catches up with the log, declares the node ready, and
// returns when anything fails.
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
	// RabbitMQ closes a channel that appended to a stream queue deleted since: the session
	// ends, and the next one declares the log again.
	pubClosed := pub.NotifyClose(make(chan *amqp.Error, 1))
	// The live queue first, then the log: whatever the log does not hold up to the catch-up's
	// marker, the live queue does.
	liveCh, err := conn.Channel()
	if err != nil {
		return err
	}
	q, err := liveCh.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fmt.Errorf("declare this node's live queue: %w", err)
	}
	for _, x := range []string{b.liveX, b.dliveX} {
		if err := liveCh.QueueBind(q.Name, "", x, false, nil); err != nil {
			return fmt.Errorf("bind this node's live queue to %s: %w", x, err)
		}
	}
	live, err := liveCh.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume this node's live queue: %w", err)
	}

	s := &session{
		conn: conn, pub: pub, ctx: ctx, close: cancel,
		requests: make(chan []byte, maxBatch), local: make(chan []byte, maxBatch),
		catchUp: make(chan catchUpReq),
	}
	var from any = "first"
	if last := b.lastRead.Load(); last > 0 {
		from = interval(time.Since(time.UnixMilli(last)) + catchUpMargin)
	}
	if err := b.catchUpLog(s, from); err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	b.session.Store(s)
	defer b.session.CompareAndSwap(s, nil)
	defer b.m.sequencer.Set(0)

	errc := make(chan error, 4) // one per goroutine started with run
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- f()
			cancel()
		}()
	}
	run(func() error { return b.applyLoop(s, live) })
	run(func() error { return b.requestLoop(s) })
	if err := b.startBroadcast(s, run); err != nil {
		return err
	}
	// Only a node that caught up may become the sequencer: it continues every topic from its
	// replica.
	if err := pub.Qos(prefetch, 0, false); err != nil {
		return err
	}
	reqs, err := pub.Consume(b.seqQ, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", b.seqQ, err)
	}
	run(func() error { return b.sequence(s, reqs) })
	onReady()
	select {
	case e := <-closed:
		if e == nil {
			return errors.New("connection closed")
		}
		return e
	case e := <-pubClosed:
		if e == nil {
			return errors.New("channel closed")
		}
		return fmt.Errorf("channel closed: %w", e)
	case err := <-errc:
		// A closed channel ends its consumer first: say why it closed.
		select {
		case e := <-pubClosed:
			if e != nil {
				return fmt.Errorf("%w (channel closed: %w)", err, e)
			}
		case <-time.After(10 * time.Millisecond):
		}
		return err
	case <-b.ctx.Done():
		return ErrClosed
	}
}

// interval is d as an x-stream-offset interval, in whole seconds.
func interval(d time.Duration) string {
	return fmt.Sprintf("%ds", int64((d+time.Second-1)/time.Second))
}

func (b *Broker) appendLog(s *session, logQ string, body []byte) error {
	return s.pub.PublishWithContext(s.ctx, "", logQ, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
}

// catchUpLog reads both logs, the durable topics' and the others', from `from` (an
// x-stream-offset) up to a marker it appends to each, and applies what it reads. Only the
// goroutine that applies may call it.
func (b *Broker) catchUpLog(s *session, from any) error {
	for _, q := range []string{b.dlogQ, b.logQ} {
		if err := b.catchUpOne(s, q, from); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	b.lastRead.Store(time.Now().UnixMilli())
	return nil
}

func (b *Broker) catchUpOne(s *session, logQ string, from any) error {
	ch, err := s.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(1000, 0, false); err != nil {
		return err
	}
	entries, err := ch.Consume(logQ, "", false, false, false, false, amqp.Table{"x-stream-offset": from})
	if err != nil {
		return fmt.Errorf("consume %s: %w", logQ, err)
	}
	id := newID()
	if err := b.appendLog(s, logQ, appendMarker(id)); err != nil {
		return fmt.Errorf("append a marker: %w", err)
	}
	timeout := time.NewTimer(catchUpTimeout)
	defer timeout.Stop()
	var batch []entry
	for n := 1; ; n++ {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-entries:
			if !ok {
				return errors.New("log consumer closed")
			}
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("marker not read back within %v", catchUpTimeout)
		}
		// Stream consumers ack only to grant credit (the prefetch of 1000).
		if n%256 == 0 {
			_ = d.Ack(true)
		}
		var found bool
		if batch, found = b.applyMessage(d.Body, batch, id); found {
			return nil
		}
	}
}

// applyMessage applies the publications of one message from the log or the live queue, with
// batch as scratch space, and reports whether the message holds marker id.
func (b *Broker) applyMessage(body []byte, batch []entry, id string) ([]entry, bool) {
	batch, err := parseMessage(body, batch[:0])
	if err != nil {
		b.m.malformed.Inc()
		b.log.Error("amqp broker: skipping a malformed message")
		return batch, false
	}
	found := false
	for i := range batch {
		switch e := &batch[i]; e.kind {
		case kindAssigned:
			b.apply(e)
		case kindMarker:
			found = found || e.id == id
		case kindSequencer:
			b.announced(announcement{token: e.id, addr: string(e.rest)})
		}
	}
	return batch, found
}

// apply applies a publication entry, and delivers it if it is new to this node.
func (b *Broker) apply(e *entry) {
	p, err := e.publication()
	if err != nil {
		b.m.malformed.Inc()
		b.log.Error("amqp broker: skipping an undecodable publication", "topic", e.topic)
		return
	}
	if !b.rep.ApplyNewer(p, 0) {
		return
	}
	b.recent.add(e.id)
	b.handler.HandlePublication(p)
	b.notify(e.id, p)
}

// applyLoop applies the live queue, and catches up with the log when the sequencer asks.
func (b *Broker) applyLoop(s *session, live <-chan amqp.Delivery) error {
	var batch []entry
	for {
		select {
		case d, ok := <-live:
			if !ok {
				return errors.New("live consumer closed")
			}
			batch, _ = b.applyMessage(d.Body, batch, "")
			b.lastRead.Store(time.Now().UnixMilli())
		case req := <-s.catchUp:
			err := b.catchUpLog(s, req.from)
			req.reply <- err
			if err != nil {
				return err
			}
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// requestLoop sends this node's requests to the sequencer queue, or straight to the
// sequencer's node (Config.Direct), several in one message when more than one is waiting. With
// Config.Linger it holds the first request that long for others to join it.
func (b *Broker) requestLoop(s *session) error {
	var (
		reqs  [][]byte
		size  int
		buf   []byte // a batch's message, reused
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	add := func(p []byte) {
		reqs = append(reqs, p)
		size += len(p)
	}
	full := func() bool { return len(reqs) >= maxBatch || size >= maxBatchBytes }
	direct := &directLinks{b: b, s: s, dialed: make(chan dialResult, 1)}
	defer direct.close()
	for {
		reqs, size = reqs[:0], 0
		select {
		case p := <-s.requests:
			add(p)
		case <-b.seqNews:
			direct.use() // dial a new sequencer before requests need it
			continue
		case r := <-direct.dialed:
			direct.took(r)
			continue
		case <-direct.down():
			direct.drop()
			continue
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if b.cfg.Linger > 0 {
			timer.Reset(b.cfg.Linger)
		linger:
			for !full() {
				select {
				case p := <-s.requests:
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
			case p := <-s.requests:
				add(p)
			default:
				break drain
			}
		}
		body := reqs[0]
		if len(reqs) > 1 {
			buf = appendBatch(buf[:0], reqs)
			body = buf
		}
		b.m.requests.Observe(float64(len(reqs)))
		if l := direct.use(); l != nil {
			// Noted first: if the link fails, drop sends these to the queue too.
			b.sentOn(l, reqs)
			if err := l.send(body); err != nil {
				direct.drop()
			} else {
				b.m.direct.Inc()
			}
			continue
		}
		if err := s.pub.PublishWithContext(s.ctx, "", b.seqQ, false, false, amqp.Publishing{Body: body}); err != nil {
			return fmt.Errorf("send to %s: %w", b.seqQ, err)
		}
	}
}

// seqTopic is what the sequencer knows of a topic it assigned offsets in.
type seqTopic struct {
	epoch string
	top   uint64
	last  time.Time
}

// sequencer assigns offsets. It is owned by the goroutine running sequence.
type sequencer struct {
	b        *Broker
	topics   map[string]seqTopic // topics assigned in this session; the replica knows the rest
	assigned recentIDs           // ids of the latest requests assigned in this session
	out      [][]byte            // publications to send to the live exchange
	dout     [][]byte            // publications of durable topics, for the durable live exchange
	buf      []byte
	batch    []entry
	// token and addr are where this sequencer takes requests directly, once it is the
	// sequencer and listens (Config.Direct).
	token, addr string
}

// sequence runs the sequencer: RabbitMQ delivers the sequencer queue to one node at a time,
// and this node's own requests join once it is that node.
func (b *Broker) sequence(s *session, reqs <-chan amqp.Delivery) error {
	q := &sequencer{b: b, topics: make(map[string]seqTopic)}
	q.assigned.init(recentSize)
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	announce := time.NewTicker(announceEvery)
	defer announce.Stop()
	// becomeSequencer makes this node the sequencer, and opens and announces its listener for
	// requests.
	becomeSequencer := func() error {
		if err := b.takeOver(s); err != nil {
			return err
		}
		if q.token, q.addr = b.listenDirect(s); q.token != "" {
			return b.announce(s, q.token, q.addr)
		}
		return nil
	}
	for {
		q.out = q.out[:0]
		var (
			tag  uint64 // the latest delivery taken, acked with all before it
			size int
		)
		// take takes a request from the queue (ok false: its consumer closed).
		take := func(d amqp.Delivery, ok bool) error {
			if !ok {
				return errors.New("sequencer queue consumer closed")
			}
			if !s.sequencer.Load() {
				if err := becomeSequencer(); err != nil {
					return err
				}
			}
			q.request(d.Body)
			tag, size = d.DeliveryTag, size+len(d.Body)
			return nil
		}
		takeLocal := func(body []byte) {
			q.request(body)
			size += len(body)
		}
		// Wait for one request, then take those already waiting, up to a batch.
		var err error
		select {
		case d, ok := <-reqs:
			err = take(d, ok)
		case body := <-s.local:
			takeLocal(body)
		case now := <-sweep.C:
			q.sweep(now)
			continue
		case <-announce.C:
			if q.token != "" {
				if err := b.announce(s, q.token, q.addr); err != nil {
					return err
				}
			}
			continue
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		for more := err == nil; more && len(q.out)+len(q.dout) < maxBatch && size < maxBatchBytes; {
			select {
			case d, ok := <-reqs:
				err = take(d, ok)
				more = err == nil
			case body := <-s.local:
				takeLocal(body)
			default:
				more = false
			}
		}
		if err != nil {
			return err
		}
		if err := q.send(s); err != nil {
			return err
		}
		if tag > 0 {
			if err := s.pub.Ack(tag, true); err != nil {
				return fmt.Errorf("ack %s: %w", b.seqQ, err)
			}
		}
	}
}

// takeOver makes this node the sequencer. What the previous one sent may not have reached this
// node's live queue yet, but it is in the log: this node reads the log's latest part first, so
// that it continues every topic where the previous one stopped.
func (b *Broker) takeOver(s *session) error {
	reply := make(chan error, 1)
	select {
	case s.catchUp <- catchUpReq{from: interval(catchUpMargin), reply: reply}:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	select {
	case err := <-reply:
		if err != nil {
			return fmt.Errorf("take over as sequencer: %w", err)
		}
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	s.sequencer.Store(true)
	b.m.sequencer.Set(1)
	b.log.Info("amqp broker: this node is the sequencer")
	return nil
}

// request assigns offsets to the requests in body. A request that this sequencer assigned
// already, or whose publication this node applied, is skipped: one delivered again (its
// sequencer went before acking it) or sent again (its link broke), whichever copy comes first.
func (q *sequencer) request(body []byte) {
	var err error
	if q.batch, err = parseMessage(body, q.batch[:0]); err != nil {
		q.b.m.malformed.Inc()
		q.b.log.Error("amqp broker: skipping a malformed request")
		return
	}
	now := time.Now()
	for i := range q.batch {
		e := &q.batch[i]
		if e.kind != kindRequest || q.assigned.has(e.id) || q.b.recent.has(e.id) {
			continue
		}
		p, err := e.request()
		if err != nil {
			q.b.m.malformed.Inc()
			continue
		}
		t, ok := q.topics[p.Topic]
		if !ok {
			var last replica.Last
			if last, ok = q.b.rep.Last(p.Topic, now); ok {
				t = seqTopic{epoch: last.Epoch, top: last.Offset, last: last.Time}
			}
		}
		// A topic idle for longer than its TTL starts a new epoch, as its history is gone; a
		// durable topic (negative TTL) never does.
		if ttl := q.b.cfg.Policy(p.Topic).TTL; ok && (ttl < 0 || now.Sub(t.last) <= ttl) {
			t.top++
		} else {
			t = seqTopic{epoch: replica.NewEpoch(), top: 1}
		}
		// Times never go back within a topic, so that a node reading a publication twice can
		// tell an old epoch from a new one (replica.ApplyNewer).
		if p.Time.Before(t.last) {
			p.Time = t.last
		}
		t.last = p.Time
		q.topics[p.Topic] = t
		p.Offset, p.Epoch = t.top, t.epoch
		q.assigned.add(e.id)
		if q.b.durable(p.Topic) {
			q.dout = append(q.dout, appendAssigned(nil, e.id, p))
		} else {
			q.out = append(q.out, appendAssigned(nil, e.id, p))
		}
	}
}

// send sends the assigned publications, as one message per live exchange: to every node and
// the log (the durable topics' to theirs). A topic always goes through the same exchange, so
// its publications reach every node in order.
func (q *sequencer) send(s *session) error {
	for _, o := range []struct {
		out [][]byte
		x   string
	}{{q.out, q.b.liveX}, {q.dout, q.b.dliveX}} {
		if len(o.out) == 0 {
			continue
		}
		body := o.out[0]
		if len(o.out) > 1 {
			q.buf = appendBatch(q.buf[:0], o.out)
			body = q.buf
		}
		q.b.m.batch.Observe(float64(len(o.out)))
		if err := s.pub.PublishWithContext(s.ctx, o.x, "", false, false, amqp.Publishing{Body: body}); err != nil {
			return fmt.Errorf("send to %s: %w", o.x, err)
		}
	}
	q.dout = q.dout[:0]
	return nil
}

// sweep forgets topics idle for longer than their TTL: their next publication starts a new
// epoch whatever the map says.
func (q *sequencer) sweep(now time.Time) {
	for name, t := range q.topics {
		if ttl := q.b.cfg.Policy(name).TTL; ttl >= 0 && now.Sub(t.last) > ttl {
			delete(q.topics, name)
		}
	}
}

// recentIDs remembers the latest ids added, up to a fixed number. It is safe for concurrent use.
type recentIDs struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

func (r *recentIDs) init(n int) {
	r.set = make(map[string]struct{}, n)
	r.ring = make([]string, n)
}

func (r *recentIDs) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}

func (r *recentIDs) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[id]
	return ok
}
