package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/hub"
)

const (
	// catchUpTimeout bounds one catch-up with the log.
	catchUpTimeout = time.Minute
	// recentSize is the fewest publication ids a node remembers, so that a new sequencer does
	// not assign a request again that the previous one had published: more than the
	// sequencer queue's prefetch. Config.RetryIDs bounds the most.
	recentSize = 16384
	// prefetch is how many requests RabbitMQ sends the sequencer before an ack.
	prefetch = 1024
)

// session is one AMQP connection and what runs on it.
type session struct {
	conn  *amqp.Connection
	pub   *amqp.Channel // requests, markers, announcements, answers
	ctx   context.Context
	close context.CancelFunc
	// liveQ is this node's queue: the live copies of the topics it follows (all of them while
	// it is the sequencer), announcements, and the sequencer's answers to its publishes.
	liveQ string
	// replyQ is this node's queue for the answers to its history requests, read apart from
	// liveQ so that History may wait for one while a delivery is under way.
	replyQ string
	// bindMu serializes bindCh, the channel liveQ's bindings change on.
	bindMu sync.Mutex
	bindCh *amqp.Channel
	// requests queues this node's requests for the sequencer queue (requestLoop).
	requests chan []byte
	// local queues this node's requests straight to its own sequencer, once it is the one.
	local chan []byte
	// sequencer is true while this node holds the sequencer's role: from the first request
	// RabbitMQ delivered it (unless it declined: sequencer.go, claim) until it hands the role
	// over (handOver) or the session ends. RabbitMQ keeps a single active consumer until its
	// channel closes.
	sequencer atomic.Bool
	// all is true once this node, taking over as the sequencer, applies every topic.
	all atomic.Bool
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

// runSession runs one connection: it binds this node's queue to the topics it follows, takes
// their history again, declares the node ready, and returns when anything fails.
func (b *Broker) runSession(onReady func()) error {
	conn, err := b.conns.get()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // fails publishes waiting on this connection
		// Closed, not only left: this node's queues go with it. The state store sharing it
		// moves to the next one.
		b.conns.drop(conn)
		wg.Wait()
	}()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	lost := b.conns.lost(conn)
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
	s := &session{
		conn: conn, pub: pub, ctx: ctx, close: cancel,
		requests: make(chan []byte, maxBatch), local: make(chan []byte, maxBatch),
		catchUp: make(chan catchUpReq),
	}
	live, replies, err := b.nodeQueues(s)
	if err != nil {
		return err
	}
	// What this node kept from a session as the sequencer, or of topics no longer followed,
	// is not kept up to date: forget it. The followed topics' history is taken again below.
	b.rep.Retain(b.following)
	b.unseedAll()
	b.session.Store(s)
	defer b.session.CompareAndSwap(s, nil)
	defer b.m.sequencer.Set(0)

	errc := make(chan error, 5) // one per goroutine started with run
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- f()
			cancel()
		}()
	}
	run(func() error { return b.applyLoop(s, live) })
	run(func() error { return b.replyLoop(s, replies) })
	run(func() error { return b.requestLoop(s) })
	if err := b.startBroadcast(s, run); err != nil {
		return err
	}
	seq, err := b.consumeSequencer(s)
	if err != nil {
		return err
	}
	run(func() error { return b.sequence(s, seq) })
	if err := b.followAll(s); err != nil {
		return fmt.Errorf("follow this node's topics again: %w", err)
	}
	onReady()
	select {
	case <-lost:
		return errors.New("connection lost: RabbitMQ silent or not reading")
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

// nodeQueues declares this node's live and reply queues (exclusive: they go with the
// connection), binds the live queue to the announcements, and starts consuming both.
func (b *Broker) nodeQueues(s *session) (live, replies <-chan amqp.Delivery, err error) {
	if s.bindCh, err = s.conn.Channel(); err != nil {
		return nil, nil, err
	}
	q, err := s.bindCh.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("declare this node's live queue: %w", err)
	}
	s.liveQ = q.Name
	if err := s.bindCh.QueueBind(s.liveQ, controlKey, b.liveX, false, nil); err != nil {
		return nil, nil, fmt.Errorf("bind this node's live queue to %s: %w", b.liveX, err)
	}
	if live, err = s.bindCh.Consume(s.liveQ, "", true, true, false, false, nil); err != nil {
		return nil, nil, fmt.Errorf("consume this node's live queue: %w", err)
	}
	replyCh, err := s.conn.Channel()
	if err != nil {
		return nil, nil, err
	}
	if q, err = replyCh.QueueDeclare("", false, true, true, false, nil); err != nil {
		return nil, nil, fmt.Errorf("declare this node's reply queue: %w", err)
	}
	s.replyQ = q.Name
	if replies, err = replyCh.Consume(s.replyQ, "", true, true, false, false, nil); err != nil {
		return nil, nil, fmt.Errorf("consume this node's reply queue: %w", err)
	}
	return live, replies, nil
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
		if batch, found = b.applyMessage(s, d.Body, batch, id); found {
			return nil
		}
	}
}

// applyMessage applies the publications of one message from the log or the live queue, with
// batch as scratch space, and reports whether the message holds marker id.
func (b *Broker) applyMessage(s *session, body []byte, batch []entry, id string) ([]entry, bool) {
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
			b.apply(s, e)
		case kindAck, kindDuplicate:
			if p, err := e.publication(); err == nil {
				p.Duplicate = e.kind == kindDuplicate
				b.notify(e.id, p)
			}
		case kindMarker:
			found = found || e.id == id
		case kindSequencer:
			b.announced(announcement{token: e.id, addr: string(e.rest)})
		}
	}
	return batch, found
}

// apply applies a publication entry of a topic this node follows (all of them while it is
// the sequencer), and delivers it if it is new to this node and followed.
func (b *Broker) apply(s *session, e *entry) {
	following := b.following(e.topic)
	if !following && !s.all.Load() {
		return // the queue still held it when this node stopped following the topic
	}
	p, err := e.publication()
	if err != nil {
		b.m.malformed.Inc()
		b.log.Error("amqp broker: skipping an undecodable publication", "topic", e.topic)
		return
	}
	applied, jumped := b.rep.ApplyLive(p)
	if !applied {
		return
	}
	if jumped && following && !s.all.Load() {
		// Live copies were missed (one overtook a re-seed after a reconnect): the cache now
		// starts after a hole, so the topic's history is taken again at its next read.
		b.unseed(e.topic)
	}
	b.recent.add(e.id, p)
	if following {
		b.handler.HandlePublication(p)
	}
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
			batch, _ = b.applyMessage(s, d.Body, batch, "")
			for i := range batch {
				if batch[i].kind == kindAssigned {
					b.m.received.Inc()
				}
			}
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

// recentIDs remembers the ids of the publications of the last keep (by their time), at least
// the latest min and at most the latest max, with the position each publication got (a retry
// of a keyed request is answered with it). It is safe for concurrent use.
type recentIDs struct {
	mu       sync.Mutex
	set      map[string]idPos
	order    []recentID // oldest first from head
	head     int
	min, max int
	keep     time.Duration
}

// recentID is an id and its publication's time.
type recentID struct {
	id string
	at time.Time
}

// idPos is where a request's publication went.
type idPos struct {
	offset uint64
	epoch  string
	time   time.Time
}

func (r *recentIDs) init(fewest, most int, keep time.Duration) {
	r.set = make(map[string]idPos, fewest)
	r.order = make([]recentID, 0, fewest)
	r.min, r.max, r.keep = fewest, max(fewest, most), keep
}

// add remembers id, whose publication is p, and forgets the ids past the window.
func (r *recentIDs) add(id string, p *hub.Publication) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[id]; !ok {
		r.order = append(r.order, recentID{id, p.Time})
	}
	r.set[id] = idPos{offset: p.Offset, epoch: p.Epoch, time: p.Time}
	for n := len(r.order) - r.head; n > r.min && (n > r.max || p.Time.Sub(r.order[r.head].at) > r.keep); n-- {
		delete(r.set, r.order[r.head].id)
		r.order[r.head] = recentID{}
		r.head++
	}
	if r.head >= 1024 && r.head > len(r.order)/2 { // move the window down: amortized O(1)
		n := copy(r.order, r.order[r.head:])
		clear(r.order[n:])
		r.order, r.head = r.order[:n], 0
	}
}

// count is the number of ids remembered.
func (r *recentIDs) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.set)
}

func (r *recentIDs) has(id string) bool {
	_, ok := r.get(id)
	return ok
}

// get returns where id's publication went.
func (r *recentIDs) get(id string) (idPos, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos, ok := r.set[id]
	return pos, ok
}
