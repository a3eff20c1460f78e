package amqp

import (
	"errors"
	"fmt"
	"strconv"
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

// sequencer assigns offsets. It is owned by the goroutine running sequence.
type sequencer struct {
	b        *Broker
	s        *session
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
	// token and addr are where this sequencer takes requests directly, once it is the
	// sequencer and listens (Config.Direct).
	token, addr string
}

// sequence runs the sequencer: RabbitMQ delivers the sequencer queue to one node at a time,
// and this node's own requests join once it is that node.
func (b *Broker) sequence(s *session, reqs <-chan amqp.Delivery) error {
	q := &sequencer{b: b, s: s, topics: make(map[string]seqTopic), msgs: make(map[[2]string]*outMsg), byQ: make(map[string]*outMsg)}
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
		for more := err == nil; more && q.n < maxBatch && size < maxBatchBytes; {
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
		if err := q.send(); err != nil {
			return err
		}
		if tag > 0 {
			if err := s.pub.Ack(tag, true); err != nil {
				return fmt.Errorf("ack %s: %w", b.seqQ, err)
			}
		}
	}
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
			go q.b.answerHistory(q.s, e.id, e.reply, e.topic, since, limit, q.topics[e.topic])
			continue
		case kindList:
			ms, _ := strconv.ParseInt(string(e.rest), 10, 64)
			go q.b.answerList(q.s, e.id, e.reply, time.UnixMilli(ms))
			continue
		}
		if e.kind != kindRequest || q.assigned.has(e.id) || q.b.recent.has(e.id) {
			continue
		}
		p, err := e.request()
		if err != nil {
			q.b.m.malformed.Inc()
			continue
		}
		q.assign(p, now)
		q.assigned.add(e.id)
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
	if err := q.s.pub.PublishWithContext(q.s.ctx, m.x, m.key, false, false, amqp.Publishing{Body: body}); err != nil {
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
