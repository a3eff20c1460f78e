package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/history"
	"github.com/rtlab/rtlab/internal/hub"
)

// Reads of one topic from the stream, for History of a topic this node does not follow, the
// cache of one it starts following, and what a followed topic missed. They are direct gets
// (the stream allows them), one message each, by subject: nats-server 2.9 has no batch of them.

// storedMsg is one publication read from the stream, with its sequence.
type storedMsg struct {
	seq uint64
	pub *hub.Publication
}

// maxRead bounds one read of a topic: what the stream keeps of it, and as much again published
// while reading.
func (b *Broker) maxRead(l *streamLog) int {
	if l.durable {
		return 2 * b.cfg.DurableSize
	}
	return 2 * b.cfg.Retention.Size
}

// readSubject reads topic's messages stored after sequence after, in stream order, at most most.
func (b *Broker) readSubject(ctx context.Context, l *streamLog, topic, subj string, after uint64, most int) ([]storedMsg, error) {
	s := b.streamOf(l)
	var out []storedMsg
	for seq := after + 1; len(out) < most; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, b.wrap("read "+topic, err)
		}
		p, err := replica.Decode(topic, m.Data)
		if err != nil {
			b.log.Error("nats broker: undecodable publication", "subject", subj, "seq", m.Sequence, "err", err)
		} else {
			out = append(out, storedMsg{seq: m.Sequence, pub: p})
		}
		seq = m.Sequence + 1
	}
	return out, nil
}

// readLast reads topic's latest message; nil when the stream holds none.
func (b *Broker) readLast(ctx context.Context, l *streamLog, topic, subj string) (*hub.Publication, uint64, error) {
	m, err := b.streamOf(l).GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, b.wrap("read latest of "+topic, err)
	}
	p, err := replica.Decode(topic, m.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("nats broker: read latest of %s: %w", topic, err)
	}
	return p, m.Sequence, nil
}

// readHistory answers History from the stream. A read that asks only for what follows the
// latest publication (short polling with nothing new, the position alone) costs two gets: the
// latest message and the oldest.
func (b *Broker) readHistory(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error) {
	l := b.logFor(topic)
	subj := subject(l.name, topic)
	pol := b.cfg.Policy(topic)
	now := time.Now()
	expired := func(p *hub.Publication) bool { return pol.TTL >= 0 && now.Sub(p.Time) > pol.TTL }
	last, _, err := b.readLast(ctx, l, topic, subj)
	if err != nil {
		return hub.HistoryResult{}, err
	}
	if last == nil || expired(last) {
		return hub.HistoryResult{}, nil // the topic is unused, or all of it expired
	}
	if since >= last.Offset {
		// Offsets are contiguous within an epoch: the oldest retained follows from the first
		// message, unless it is of an older epoch or expired.
		first, err := b.readSubject(ctx, l, topic, subj, 0, 1)
		if err != nil {
			return hub.HistoryResult{}, err
		}
		if len(first) == 1 && first[0].pub.Epoch == last.Epoch && !expired(first[0].pub) {
			oldest := first[0].pub.Offset
			if pol.Size > 0 && last.Offset >= uint64(pol.Size) {
				oldest = max(oldest, last.Offset-uint64(pol.Size)+1)
			}
			return hub.HistoryResult{Top: hub.Position{Offset: last.Offset, Epoch: last.Epoch}, Oldest: oldest}, nil
		}
	}
	msgs, err := b.readSubject(ctx, l, topic, subj, 0, b.maxRead(l))
	if err != nil {
		return hub.HistoryResult{}, err
	}
	ring := history.NewRing(pol.Size)
	var epoch string
	var top uint64
	for _, m := range msgs {
		p := m.pub
		if epoch == p.Epoch && p.Offset <= top {
			continue
		}
		if epoch != p.Epoch || p.Offset != top+1 {
			ring.Clear()
		}
		epoch, top = p.Epoch, p.Offset
		ring.Append(p)
	}
	if pol.TTL >= 0 {
		ring.Expire(now.Add(-pol.TTL))
	}
	if ring.Len() == 0 {
		return hub.HistoryResult{}, nil
	}
	return hub.HistoryResult{Top: hub.Position{Offset: top, Epoch: epoch}, Oldest: ring.Oldest(),
		Publications: ring.After(since, limit)}, nil
}

// TopicsSince names the durable topics published to since since, for archive sweeps: it reads
// the headers of the durable stream from since with a short-lived ordered consumer.
func (b *Broker) TopicsSince(ctx context.Context, since time.Time) ([]string, error) {
	l := b.logs[1]
	info, err := b.streamOf(l).Info(ctx)
	if err != nil {
		return nil, b.wrap("stream info", err)
	}
	if info.State.Msgs == 0 || info.State.LastTime.Before(since) {
		return nil, nil
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	c, err := b.js.OrderedConsumer(ctx, l.name, cfg)
	if err != nil {
		return nil, b.wrap("list durable topics", err)
	}
	seen := map[string]bool{}
	var out []string
	for {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, b.wrap("list durable topics", err)
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			if topic, ok := topicOf(l.name, m.Subject()); ok && !seen[topic] && b.logFor(topic) == l {
				seen[topic] = true
				out = append(out, topic)
			}
			if md, err := m.Metadata(); err == nil && (md.NumPending == 0 || md.Sequence.Stream >= info.State.LastSeq) {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, b.wrap("list durable topics", err)
		}
		if done || n == 0 {
			return out, nil
		}
	}
}
