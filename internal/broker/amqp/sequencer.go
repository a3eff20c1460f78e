package amqp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// seqTopic is what the sequencer knows of a topic it assigned offsets in.
type seqTopic struct {
	epoch string
	top   uint64
	last  time.Time
}

// outMsg is one message the sequencer sends: publications of one routing key to a live
// exchange, or the answers to one node's publishes.
type outMsg struct {
	x, key  string
	entries [][]byte
}

// declineWindow is how soon after declining the sequencer queue this node takes it whatever
// its share: it came back because every other node declined it too, or the count of consumers
// the share was worked out from was stale (a node gone and not yet noticed by RabbitMQ).
const declineWindow = 10 * time.Second

const (
	// balanceEvery is how often a sequencer checks that its node holds no more than its share
	// of the shards' sequencers (Config.Roles), a node having started since.
	balanceEvery = 5 * time.Second
	// forcedHold is how long a role taken whatever the share is kept before it may be handed
	// over: it came back because no other node would take it.
	forcedHold = time.Minute
	// confirmWait bounds waiting for the log to confirm what a sequencer handing over sent.
	confirmWait = 10 * time.Second
)

// sequencer assigns offsets. It is owned by the goroutine running sequence.
type sequencer struct {
	b        *Broker
	s        *session
	c        seqConsumer
	topics   map[string]seqTopic // topics assigned in this session; the replica knows the rest
	assigned recentIDs           // ids of the latest requests assigned in this session
	// out are the messages to send, by exchange and routing key (msgs indexes them); n counts
	// their entries.
	out  []*outMsg
	msgs map[[2]string]*outMsg
	n    int
	// acks are the answers to other nodes' publishes, by reply queue, sent after out.
	acks  []*outMsg
	byQ   map[string]*outMsg
	buf   []byte
	batch []entry
	// tag is the latest delivery taken in this round, acked with all before it; size is what
	// the round took.
	tag  uint64
	size int
	// held is true while this node counts the role in Config.Roles; declined is when it last
	// declined or handed over the role, forced when it last took it whatever the share.
	held             bool
	declined, forced time.Time
	// stopRole ends what the role runs beside the session (the direct listener); handedOver is
	// true once this node handed a role over in this session, and answering counts the history
	// answers under way.
	stopRole   context.CancelFunc
	handedOver bool
	answering  sync.WaitGroup
	// token and addr are where this sequencer takes requests directly, once it is the
	// sequencer and listens (Config.Direct).
	token, addr string
}

// seqConsumer is this node's consumer of the sequencer queue, on a channel of its own. The
// sequencer sends its publications and acks the requests on it, so a request is acked after
// what it produced; and closing it hands every request delivered and not acked back to the
// queue, in order, before RabbitMQ makes the next consumer active.
type seqConsumer struct {
	ch     *amqp.Channel
	reqs   <-chan amqp.Delivery
	closed chan *amqp.Error
}

// consumeSequencer registers this node as a consumer of the sequencer queue, after those
// already registered.
func (b *Broker) consumeSequencer(s *session) (seqConsumer, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return seqConsumer{}, fmt.Errorf("open a channel for %s: %w", b.seqQ, err)
	}
	c := seqConsumer{ch: ch, closed: ch.NotifyClose(make(chan *amqp.Error, 1))}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		_ = ch.Close()
		return seqConsumer{}, fmt.Errorf("prefetch of %s: %w", b.seqQ, err)
	}
	if c.reqs, err = ch.Consume(b.seqQ, "", false, false, false, false, nil); err != nil {
		_ = ch.Close()
		return seqConsumer{}, fmt.Errorf("consume %s: %w", b.seqQ, err)
	}
	return c, nil
}

// sequence runs the sequencer: RabbitMQ delivers the sequencer queue to one node at a time,
// and this node's own requests join once it is that node.
func (b *Broker) sequence(s *session, c seqConsumer) error {
	q := &sequencer{b: b, s: s, c: c, topics: make(map[string]seqTopic), msgs: make(map[[2]string]*outMsg), byQ: make(map[string]*outMsg)}
	q.assigned.init(recentSize, b.cfg.RetryIDs, b.retryWindow())
	defer func() {
		if q.held {
			b.cfg.Roles.Release()
		}
	}()
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	announce := time.NewTicker(announceEvery)
	defer announce.Stop()
	balance := time.NewTicker(balanceEvery)
	defer balance.Stop()
	for {
		if err := q.round(sweep.C, announce.C, balance.C); err != nil {
			return err
		}
	}
}

// round waits for one request, takes those already waiting up to a batch, sends what they
// produced, and acks the requests taken from the queue.
func (q *sequencer) round(sweep, announce, balance <-chan time.Time) error {
	q.tag, q.size = 0, 0
	select {
	case d, ok := <-q.c.reqs:
		if taken, err := q.first(d, ok); err != nil || !taken {
			return err
		}
	case body := <-q.s.local:
		if !q.s.sequencer.Load() {
			return q.forward(body)
		}
		q.takeLocal(body)
	case <-balance:
		return q.balance()
	case now := <-sweep:
		q.sweep(now)
		return nil
	case <-announce:
		if q.token == "" {
			return nil
		}
		return q.b.announce(q.s, q.token, q.addr)
	case <-q.s.ctx.Done():
		return q.s.ctx.Err()
	}
	// Take those already waiting, up to a batch.
	for more := true; more && q.n < maxBatch && q.size < maxBatchBytes; {
		select {
		case d, ok := <-q.c.reqs:
			if err := q.take(d, ok); err != nil {
				return err
			}
		case body := <-q.s.local:
			q.takeLocal(body)
		default:
			more = false
		}
	}
	if err := q.send(); err != nil {
		return err
	}
	if q.tag > 0 {
		if err := q.c.ch.Ack(q.tag, true); err != nil {
			return fmt.Errorf("ack %s: %w", q.b.seqQ, err)
		}
	}
	return nil
}

// first takes a request delivered while waiting. The first one of the session makes this node
// the sequencer, unless it declines the role (claim); it reports false then.
func (q *sequencer) first(d amqp.Delivery, ok bool) (bool, error) {
	if ok && !q.s.sequencer.Load() {
		now := time.Now()
		if !q.claim(now) {
			return false, q.decline(now)
		}
		if err := q.become(); err != nil {
			return false, err
		}
	}
	return true, q.take(d, ok)
}

// take takes a request from the queue (ok false: its consumer closed).
func (q *sequencer) take(d amqp.Delivery, ok bool) error {
	if !ok {
		select {
		case e := <-q.c.closed:
			if e != nil {
				return fmt.Errorf("sequencer queue consumer closed: %w", e)
			}
		default:
		}
		return errors.New("sequencer queue consumer closed")
	}
	q.request(d.Body)
	q.tag, q.size = d.DeliveryTag, q.size+len(d.Body)
	return nil
}

func (q *sequencer) takeLocal(body []byte) {
	q.request(body)
	q.size += len(body)
}

// become makes this node the sequencer, and opens and announces its listener for requests.
func (q *sequencer) become() error {
	if q.handedOver {
		// What this node kept of the topics it does not follow stopped at the hand-over: forget
		// it, once the answers taken from it are sent, and take it again from the log.
		q.answering.Wait()
		q.b.rep.Retain(q.b.following)
	}
	if err := q.b.takeOver(q.s); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(q.s.ctx)
	q.stopRole = cancel
	if q.token, q.addr = q.b.listenDirect(ctx, q.s); q.token != "" {
		return q.b.announce(q.s, q.token, q.addr)
	}
	return nil
}

// claim decides whether this node, made the active consumer of the sequencer queue, takes the
// sequencer's role. With one shard (no Config.Roles) it does. With S shards, RabbitMQ's
// single active consumer being the first registered, the node that started first would order
// every shard; so a node takes a shard's role while it holds fewer than ceil(S/N), N being the
// consumers of the queue (every node consumes it), and declines otherwise, unless it declined
// this queue within declineWindow.
func (q *sequencer) claim(now time.Time) bool {
	r := q.b.cfg.Roles
	if r == nil {
		return true
	}
	if !q.declined.IsZero() && now.Sub(q.declined) < declineWindow {
		return q.force(now)
	}
	n, err := q.b.consumers(q.s)
	if err != nil {
		q.b.log.Warn("amqp broker: cannot count the sequencer queue's consumers; taking the role", "err", err)
		return q.force(now)
	}
	q.held = r.Take(r.Share(n))
	if !q.held {
		q.b.log.Info("amqp broker: leaving the sequencer's role to another node", "held", r.Held(), "shards", r.Shards(), "nodes", n)
	}
	return q.held
}

// force takes the sequencer's role whatever this node's share, and reports true.
func (q *sequencer) force(now time.Time) bool {
	q.b.cfg.Roles.Force()
	q.held, q.forced = true, now
	return true
}

// consumers asks RabbitMQ how many consumers the sequencer queue has, at least 1.
func (b *Broker) consumers(s *session) (int, error) {
	ch, err := s.conn.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	sq, err := ch.QueueDeclarePassive(b.seqQ, false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("count the consumers of %s: %w", b.seqQ, err)
	}
	return max(sq.Consumers, 1), nil
}

// decline leaves the sequencer's role to the next consumer. This node consumes again first,
// so that it stays counted, last; then closing the active consumer's channel hands what
// RabbitMQ delivered to it back to the queue, in order, and makes the next consumer active,
// before RabbitMQ answers the close.
func (q *sequencer) decline(now time.Time) error {
	q.declined = now
	q.b.m.declined.Inc()
	if err := q.requeue(); err != nil {
		return fmt.Errorf("decline the sequencer's role: %w", err)
	}
	return nil
}

// requeue consumes the sequencer queue again and closes the channel of the consumer before.
func (q *sequencer) requeue() error {
	c, err := q.b.consumeSequencer(q.s)
	if err != nil {
		return err
	}
	old := q.c
	q.c = c
	return old.ch.Close()
}

// forward sends a request that came for this node's sequencer after it handed the role over
// to the queue, as any node's.
func (q *sequencer) forward(body []byte) error {
	select {
	case q.s.requests <- body:
		return nil
	case <-q.s.ctx.Done():
		return q.s.ctx.Err()
	}
}

// balance hands the role over when this node holds more than its share of the shards'
// sequencers, ceil(S/N): a node started since, or back from a restart, holds fewer. A role
// taken whatever the share is kept forcedHold first.
func (q *sequencer) balance() error {
	r := q.b.cfg.Roles
	if r == nil || !q.s.sequencer.Load() || time.Since(q.forced) < forcedHold {
		return nil
	}
	n, err := q.b.consumers(q.s)
	if err != nil {
		q.b.log.Warn("amqp broker: cannot count the sequencer queue's consumers", "err", err)
		return nil
	}
	if !r.Leave(r.Share(n)) {
		return nil
	}
	q.held = false
	return q.handOver()
}

// takeOver makes this node the sequencer. It has followed only its own topics so far: it
// binds its queue to every topic, then reads the whole log, so that it continues every topic
// where the previous sequencer stopped (what that one sent last may not have reached this
// node's queue, but it is in the log).
func (b *Broker) takeOver(s *session) error {
	s.all.Store(true)
	for _, x := range []string{b.liveX, b.dliveX} {
		if err := s.bind(x, "#"); err != nil {
			return fmt.Errorf("take over as sequencer: bind to every topic: %w", err)
		}
	}
	reply := make(chan error, 1)
	select {
	case s.catchUp <- catchUpReq{from: "first", reply: reply}:
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

// request takes the requests in body: it assigns offsets to publications and starts answering
// history requests. A publication request that this sequencer assigned already, or whose
// publication this node applied, is skipped: one delivered again (its sequencer went before
// acking it) or sent again (its link broke), whichever copy comes first.
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
		switch e.kind {
		case kindHistory:
			since, limit, _ := e.historyRequest() // checked by parseEntry
			// Answered once this node applied everything assigned before the request.
			q.answering.Add(1)
			go func(id, reply, topic string, after seqTopic) {
				defer q.answering.Done()
				q.b.answerHistory(q.s, id, reply, topic, since, limit, after)
			}(e.id, e.reply, e.topic, q.topics[e.topic])
			continue
		case kindList:
			ms, _ := strconv.ParseInt(string(e.rest), 10, 64)
			go q.b.answerList(q.s, e.id, e.reply, time.UnixMilli(ms))
			continue
		}
		if e.kind != kindRequest {
			continue
		}
		if pos, ok := q.seen(e.id); ok {
			if keyed(e.id) {
				q.answerRetry(e, pos)
			}
			continue
		}
		p, err := e.request()
		if err != nil {
			q.b.m.malformed.Inc()
			continue
		}
		q.assign(p, now)
		q.assigned.add(e.id, p)
		x := q.b.liveX
		if q.b.durable(p.Topic) {
			x = q.b.dliveX
		}
		q.add(x, routingKey(p.Topic), appendAssigned(nil, e.id, p))
		if e.reply != q.s.liveQ {
			// This node gets the publication from its own queue, bound to every topic.
			q.ack(e.reply, appendAck(nil, e.id, p))
		}
	}
}

// seen returns where the publication of request id went, if this sequencer assigned it or
// this node applied it.
func (q *sequencer) seen(id string) (idPos, bool) {
	if pos, ok := q.assigned.get(id); ok {
		return pos, true
	}
	return q.b.recent.get(id)
}

// answerRetry answers a retry of a keyed request, published before at pos, with that position:
// nothing is published again.
func (q *sequencer) answerRetry(e *entry, pos idPos) {
	p, err := e.request()
	if err != nil {
		q.b.m.malformed.Inc()
		return
	}
	p.Offset, p.Epoch, p.Time = pos.offset, pos.epoch, pos.time
	if e.reply == q.s.liveQ {
		p.Duplicate = true
		q.b.notify(e.id, p)
		return
	}
	q.ack(e.reply, appendDuplicate(nil, e.id, p))
}

// assign gives p the next offset of its topic.
func (q *sequencer) assign(p *hub.Publication, now time.Time) {
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
}

// add queues entry for exchange x with routing key key.
func (q *sequencer) add(x, key string, entry []byte) {
	k := [2]string{x, key}
	m := q.msgs[k]
	if m == nil {
		m = &outMsg{x: x, key: key}
		q.msgs[k] = m
		q.out = append(q.out, m)
	}
	m.entries = append(m.entries, entry)
	q.n++
}

// ack queues the answer to a publish for the node whose queue is reply.
func (q *sequencer) ack(reply string, entry []byte) {
	m := q.byQ[reply]
	if m == nil {
		m = &outMsg{key: reply}
		q.byQ[reply] = m
		q.acks = append(q.acks, m)
	}
	m.entries = append(m.entries, entry)
}

// send sends the assigned publications, one message per topic (per routing key: RabbitMQ
// copies it to the log and to the queue of every node that follows the topic), then the
// answers to each publishing node. A topic always goes through the same exchange and key, so
// its publications reach every node in order, and a node's answer comes after the live copy
// it may also get.
func (q *sequencer) send() error {
	defer func() {
		q.out, q.acks, q.n = q.out[:0], q.acks[:0], 0
		clear(q.msgs)
		clear(q.byQ)
	}()
	for _, m := range q.out {
		q.b.m.batch.Observe(float64(len(m.entries)))
		if err := q.publish(m); err != nil {
			return err
		}
	}
	for _, m := range q.acks {
		if err := q.publish(m); err != nil {
			return err
		}
	}
	return nil
}

func (q *sequencer) publish(m *outMsg) error {
	body := m.entries[0]
	if len(m.entries) > 1 {
		q.buf = appendBatch(q.buf[:0], m.entries)
		body = q.buf
	}
	if err := q.c.ch.PublishWithContext(q.s.ctx, m.x, m.key, false, false, amqp.Publishing{Body: body}); err != nil {
		return fmt.Errorf("send to %s: %w", m.x, err)
	}
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

// handOver gives the sequencer's role to the next consumer of the queue, so that its takeover
// finds everything this node sent: this node stops taking requests (its own, and those that
// reach it, go to the queue as any node's; its listener closes, so other nodes send what they
// wait for through the queue again, and the next sequencer skips what it finds assigned in the
// log), waits until the log confirms what it sent, consumes again, last, and closes the
// channel it sequenced on, which hands the requests not taken back to the queue in order;
// RabbitMQ makes the next consumer active only then. Then it stops applying every topic.
func (q *sequencer) handOver() error {
	q.s.sequencer.Store(false)
	q.b.m.sequencer.Set(0)
	if q.stopRole != nil {
		q.stopRole()
	}
	q.token, q.addr = "", ""
	if err := q.confirmSent(); err != nil {
		return fmt.Errorf("hand the sequencer's role over: %w", err)
	}
	q.declined, q.handedOver = time.Now(), true
	if err := q.requeue(); err != nil {
		return fmt.Errorf("hand the sequencer's role over: %w", err)
	}
	clear(q.topics)
	q.s.all.Store(false)
	for _, x := range []string{q.b.liveX, q.b.dliveX} {
		if err := q.s.unbind(x, "#"); err != nil {
			return fmt.Errorf("hand the sequencer's role over: unbind from every topic: %w", err)
		}
	}
	q.b.m.handedOver.Inc()
	q.b.log.Info("amqp broker: handed the sequencer's role over, holding more than this node's share", "held", q.b.cfg.Roles.Held(), "shards", q.b.cfg.Roles.Shards())
	return nil
}

// confirmSent waits until both logs confirm a marker sent after everything this sequencer
// sent on its channel: RabbitMQ writes a channel's messages to a log in order.
func (q *sequencer) confirmSent() error {
	ch := q.c.ch
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("confirm mode: %w", err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 2))
	for _, logQ := range []string{q.b.dlogQ, q.b.logQ} {
		if err := ch.PublishWithContext(q.s.ctx, "", logQ, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: appendMarker(newID())}); err != nil {
			return fmt.Errorf("append a marker to %s: %w", logQ, err)
		}
	}
	timeout := time.NewTimer(confirmWait)
	defer timeout.Stop()
	for range 2 {
		select {
		case c, ok := <-confirms:
			if !ok || !c.Ack {
				return errors.New("the log did not confirm what the sequencer sent")
			}
		case <-timeout.C:
			return fmt.Errorf("the log did not confirm what the sequencer sent within %v", confirmWait)
		case <-q.s.ctx.Done():
			return q.s.ctx.Err()
		}
	}
	return nil
}
