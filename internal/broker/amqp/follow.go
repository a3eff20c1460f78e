package amqp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rtlab/rtlab/internal/hub"
)

// A node follows the topics it has subscribers for: its queue is bound to each one's routing
// key, and its replica holds only those, seeded from the sequencer when it starts following
// one and fed by the live copies after. The sequencer's node follows every topic: it has
// read the whole log when it took over, and its queue is bound to every key. History of a
// topic a node does not follow, and the durable topics for archive sweeps, are asked of the
// sequencer, which answers on the node's reply queue.

// controlKey routes what every node reads (sequencer announcements). Topic keys are hex.
const controlKey = "control"

// answerWait bounds how long the sequencer waits for its own live copies before answering a
// history request.
const answerWait = 5 * time.Second

// routingKey is topic's routing key: a hash, as a topic may be longer than a key and holds
// the topic exchange's separator. Topics that share a key (rarely) reach each other's nodes,
// which skip what they do not follow.
func routingKey(topic string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(topic))
	return strconv.FormatUint(h.Sum64(), 16)
}

// follow is a topic this node has subscribers for.
type follow struct {
	seeded bool // its history in the replica is complete
}

// following reports whether this node follows topic.
func (b *Broker) following(topic string) bool {
	b.followMu.RLock()
	defer b.followMu.RUnlock()
	return b.follows[topic] != nil
}

// seeded reports whether the replica holds topic's whole history.
func (b *Broker) seeded(topic string) bool {
	b.followMu.RLock()
	defer b.followMu.RUnlock()
	f := b.follows[topic]
	return f != nil && f.seeded
}

// unseed marks topic's history as to be taken again: its cache has a hole.
func (b *Broker) unseed(topic string) {
	b.followMu.Lock()
	if f := b.follows[topic]; f != nil {
		f.seeded = false
	}
	b.followMu.Unlock()
}

// unseedAll marks every followed topic's history as to be taken again (a new session).
func (b *Broker) unseedAll() {
	b.followMu.Lock()
	defer b.followMu.Unlock()
	for _, f := range b.follows {
		f.seeded = false
	}
}

// exchange is the live exchange topic goes through.
func (b *Broker) exchange(topic string) string {
	if b.durable(topic) {
		return b.dliveX
	}
	return b.liveX
}

// bind binds the session's live queue to exchange x with key.
func (s *session) bind(x, key string) error {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	return s.bindCh.QueueBind(s.liveQ, key, x, false, nil)
}

func (s *session) unbind(x, key string) error {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	return s.bindCh.QueueUnbind(s.liveQ, key, x, nil)
}

// Subscribe makes this node follow topic: its queue is bound to the topic, then it takes the
// topic's history from the sequencer, so what it did not take arrives on the queue. While
// disconnected it only notes the topic: the next connection follows it. If the sequencer does
// not answer in time, the next History asks again.
func (b *Broker) Subscribe(ctx context.Context, topic string) error {
	b.followMu.Lock()
	if b.follows[topic] == nil {
		b.follows[topic] = &follow{}
	}
	b.m.followed.Set(float64(len(b.follows)))
	b.followMu.Unlock()
	s := b.session.Load()
	if s == nil {
		return nil
	}
	if err := s.bind(b.exchange(topic), routingKey(topic)); err != nil {
		if s.ctx.Err() != nil {
			return nil // the connection is going: the next one follows the topic
		}
		return hub.Unavailable("amqp", fmt.Errorf("bind %s: %w", topic, err))
	}
	if err := b.seed(ctx, s, topic); err != nil {
		b.log.Info("amqp broker: a topic's history is taken at its next read", "topic", topic, "err", err)
	}
	return nil
}

// Unsubscribe stops following topic.
func (b *Broker) Unsubscribe(_ context.Context, topic string) error {
	b.followMu.Lock()
	delete(b.follows, topic)
	b.m.followed.Set(float64(len(b.follows)))
	b.followMu.Unlock()
	s := b.session.Load()
	if s == nil {
		return nil
	}
	if !s.all.Load() {
		b.rep.Forget(topic) // the sequencer keeps every topic
	}
	// Unbound even by the sequencer, bound to every topic: it may hand its role over.
	key := routingKey(topic)
	b.followMu.RLock()
	for t := range b.follows {
		if routingKey(t) == key {
			b.followMu.RUnlock()
			return nil // another followed topic has the key
		}
	}
	b.followMu.RUnlock()
	if err := s.unbind(b.exchange(topic), key); err != nil {
		return hub.Unavailable("amqp", fmt.Errorf("unbind %s: %w", topic, err))
	}
	return nil
}

// seed takes topic's history from the sequencer into the replica, merged with the live copies
// already applied.
func (b *Broker) seed(ctx context.Context, s *session, topic string) error {
	if s.sequencer.Load() {
		b.markSeeded(topic)
		return nil
	}
	hr, err := b.ask(ctx, s, func(id string) []byte { return appendHistoryRequest(nil, id, s.replyQ, topic, 0, 0) })
	if err != nil {
		return err
	}
	if !b.following(topic) {
		return nil // unsubscribed meanwhile
	}
	if b.rep.Seed(topic, hr.hr.Publications) {
		b.markSeeded(topic)
	}
	return nil
}

func (b *Broker) markSeeded(topic string) {
	b.followMu.Lock()
	if f := b.follows[topic]; f != nil {
		f.seeded = true
	}
	b.followMu.Unlock()
}

// followAll binds a new session's queue to every followed topic and takes their history
// again, all requests at once. A history not taken in time is taken at the topic's next read.
func (b *Broker) followAll(s *session) error {
	b.followMu.RLock()
	topics := make([]string, 0, len(b.follows))
	for t := range b.follows {
		topics = append(topics, t)
	}
	b.followMu.RUnlock()
	for _, t := range topics {
		if err := s.bind(b.exchange(t), routingKey(t)); err != nil {
			return fmt.Errorf("bind %s: %w", t, err)
		}
	}
	errc := make(chan error, len(topics))
	for _, t := range topics {
		go func() { errc <- b.seed(s.ctx, s, t) }()
	}
	var err error
	for range topics {
		err = errors.Join(err, <-errc)
	}
	if err != nil && s.ctx.Err() == nil {
		b.log.Info("amqp broker: some topics' history is taken at their next read", "err", err)
	}
	return s.ctx.Err()
}

// History answers from the replica for a topic this node follows, and asks the sequencer
// for the others.
func (b *Broker) History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	if b.ctx.Err() != nil {
		return hub.HistoryResult{}, ErrClosed
	}
	s := b.session.Load()
	if (s != nil && s.sequencer.Load()) || b.seeded(topic) {
		return b.rep.History(topic, since, limit, time.Now()), nil
	}
	if s == nil {
		return hub.HistoryResult{}, hub.Unavailable("amqp", errors.New("not connected"))
	}
	if b.following(topic) {
		// Subscribed, and its history not taken yet (or again): take it now.
		if err := b.seed(ctx, s, topic); err != nil {
			return hub.HistoryResult{}, err
		}
		if b.seeded(topic) {
			return b.rep.History(topic, since, limit, time.Now()), nil
		}
		// Live copies overtook the answer with a hole between them: ask for this read.
	}
	a, err := b.ask(ctx, s, func(id string) []byte { return appendHistoryRequest(nil, id, s.replyQ, topic, since, limit) })
	return a.hr, err
}

// TopicsSince names the durable topics published to since since, for archive sweeps: the
// sequencer knows them all.
func (b *Broker) TopicsSince(ctx context.Context, since time.Time) ([]string, error) {
	s := b.session.Load()
	if s != nil && s.sequencer.Load() {
		return b.rep.DurableTopicsSince(since), nil
	}
	if s == nil {
		return nil, hub.Unavailable("amqp", errors.New("not connected"))
	}
	a, err := b.ask(ctx, s, func(id string) []byte { return appendListRequest(nil, id, s.replyQ, since) })
	return a.topics, err
}

// answer is the sequencer's answer to a history or list request.
type answer struct {
	hr     hub.HistoryResult
	topics []string
}

// ask sends the request that build makes with a new id to the sequencer, and waits for its
// answer.
func (b *Broker) ask(ctx context.Context, s *session, build func(id string) []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	id := newID()
	body := build(id)
	ch := make(chan answer, 1)
	b.waitMu.Lock()
	b.waiting[id] = &waiter{answer: ch, req: body}
	b.waitMu.Unlock()
	defer b.unawait(id)
	fail := func() (answer, error) {
		if s.ctx.Err() != nil {
			return answer{}, hub.Unavailable("amqp", errors.New("connection lost while asking the sequencer"))
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return answer{}, fmt.Errorf("amqp broker: ask the sequencer: %w", ctx.Err())
		}
		return answer{}, hub.Unavailable("amqp", errors.New("the sequencer did not answer in time"))
	}
	select {
	case s.requests <- body:
	case <-s.ctx.Done():
		return fail()
	case <-ctx.Done():
		return fail()
	}
	select {
	case a := <-ch:
		return a, nil
	case <-s.ctx.Done():
		return fail()
	case <-ctx.Done():
		return fail()
	}
}

// replyLoop reads the sequencer's answers to this node's history and list requests.
func (b *Broker) replyLoop(s *session, replies <-chan amqp.Delivery) error {
	var batch []entry
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-replies:
			if !ok {
				return errors.New("reply consumer closed")
			}
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		var err error
		if batch, err = parseMessage(d.Body, batch[:0]); err != nil || len(batch) == 0 {
			b.m.malformed.Inc()
			continue
		}
		e := &batch[0]
		var a answer
		switch e.kind {
		case kindTopics:
			a.topics = e.topics()
		case kindReply:
			a.hr, _ = e.historyHead()
			for i := range batch[1:] {
				p, err := batch[1+i].publication()
				if err != nil {
					b.m.malformed.Inc()
					continue
				}
				a.hr.Publications = append(a.hr.Publications, p)
			}
		default:
			b.m.malformed.Inc()
			continue
		}
		b.waitMu.Lock()
		w := b.waiting[e.id]
		delete(b.waiting, e.id)
		b.waitMu.Unlock()
		if w != nil && w.answer != nil {
			w.answer <- a
		}
	}
}

// answerHistory answers a history request on the asking node's reply queue, once this node
// applied the topic up to after, what it had assigned when it took the request: a node that
// asks after binding its queue to the topic gets, from the answer or its queue, every
// publication.
func (b *Broker) answerHistory(s *session, id, reply, topic string, since uint64, limit int, after seqTopic) {
	if after.top > 0 {
		deadline := time.Now().Add(answerWait)
		for time.Now().Before(deadline) && s.ctx.Err() == nil {
			if last, ok := b.rep.Last(topic, time.Now()); ok && last.Epoch == after.epoch && last.Offset >= after.top {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	hr := b.rep.History(topic, since, limit, time.Now())
	entries := [][]byte{appendReply(nil, id, topic, hr)}
	for _, p := range hr.Publications {
		entries = append(entries, appendAssigned(nil, id, p))
	}
	b.reply(s, reply, entries)
}

// answerList answers a list request.
func (b *Broker) answerList(s *session, id, reply string, since time.Time) {
	b.reply(s, reply, [][]byte{appendTopics(nil, id, b.rep.DurableTopicsSince(since))})
}

func (b *Broker) reply(s *session, queue string, entries [][]byte) {
	body := entries[0]
	if len(entries) > 1 {
		body = appendBatch(nil, entries)
	}
	// A lost answer (the session ends) fails the request when it times out.
	_ = s.pub.PublishWithContext(s.ctx, "", queue, false, false, amqp.Publishing{Body: body})
}
