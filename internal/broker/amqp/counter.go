package amqp

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// counter gives each publication in the log its topic's offset and epoch. Every node runs one
// over the same log, in the same order, from the same starting state (the log's start or a
// checkpoint), so every node counts the same: no node has to assign offsets for the others, and
// a publish costs one append and one read back.
//
// Everything it decides depends only on the log: time is the log clock, the largest
// publication time read so far, and a topic starts a new epoch when its last publication is
// older than ttl on that clock. ttl is the log's own retention (x-max-age), which RabbitMQ
// keeps equal on every node: a node declaring the log with another one is refused.
//
// A counter is owned by the goroutine that reads the log.
type counter struct {
	ttl    int64 // milliseconds
	clock  int64 // unix milliseconds
	topics map[string]topicCount
}

type topicCount struct {
	epoch  string
	offset uint64
	last   int64 // log clock at the topic's latest publication
}

func newCounter(ttl time.Duration) *counter {
	return &counter{ttl: ttl.Milliseconds(), topics: make(map[string]topicCount)}
}

// next counts a publication of topic at time t (unix ms) whose entry id is id.
func (c *counter) next(topic, id string, t int64) (uint64, string) {
	c.clock = max(c.clock, t)
	tc, ok := c.topics[topic]
	if !ok || c.clock-tc.last > c.ttl {
		tc = topicCount{epoch: id[:epochLen]} // unknown, or its history expired: a new epoch
	}
	tc.offset++
	tc.last = c.clock
	c.topics[topic] = tc
	return tc.offset, tc.epoch
}

// reset forgets every topic: each starts a new epoch at its next publication.
func (c *counter) reset(clock int64) {
	clear(c.topics)
	c.clock = max(c.clock, clock)
}

// prune forgets topics that would start a new epoch anyway, so checkpoints stay small.
func (c *counter) prune() {
	for topic, tc := range c.topics {
		if c.clock-tc.last > c.ttl {
			delete(c.topics, topic)
		}
	}
}

// appendCheckpoint appends a checkpoint entry for the state after log offset at.
func (c *counter) appendCheckpoint(dst []byte, id string, at int64) []byte {
	c.prune()
	dst = append(dst, kindCheckpoint, ' ')
	dst = append(dst, id...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, at, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, c.clock, 10)
	dst = append(dst, ' ')
	for topic, tc := range c.topics {
		dst = append(dst, topic...)
		dst = append(dst, ' ')
		dst = append(dst, tc.epoch...)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, tc.offset, 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, tc.last, 10)
		dst = append(dst, '\n')
	}
	return dst
}

// restore replaces the state with a checkpoint's.
func (c *counter) restore(e entry) error {
	topics := make(map[string]topicCount)
	for line := range bytes.Lines(e.state) {
		f := bytes.Fields(line)
		if len(f) != 4 || line[len(line)-1] != '\n' {
			return errors.New("amqp broker: malformed checkpoint")
		}
		offset, err1 := strconv.ParseUint(string(f[2]), 10, 64)
		last, err2 := strconv.ParseInt(string(f[3]), 10, 64)
		if err1 != nil || err2 != nil || len(f[1]) == 0 {
			return errors.New("amqp broker: malformed checkpoint")
		}
		topics[string(f[0])] = topicCount{epoch: string(f[1]), offset: offset, last: last}
	}
	c.topics, c.clock = topics, e.clock
	return nil
}
