package amqp

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strconv"
	"time"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// A log entry is one AMQP message body, with no headers (RabbitMQ converts headers when it
// stores a message in a stream; a plain body costs it least). Fields are separated by spaces;
// topics, ids and epochs never contain one.
//
//	p <id> <topic> <tail>            a publication; tail as replica.AppendTail
//	m <id>                           a marker: whoever appended it waits to read it back
//	q <id>                           a request for a checkpoint, from a node that cannot count yet
//	c <id> <at> <clock> <topics>     a checkpoint: the counting state after log offset <at>
//	r <id> <clock>                   a reset: every topic starts a new epoch after this entry
//	b <len> <p entry><len> <p entry>…  publications appended together, each <len> bytes long
//
// A checkpoint's topics are lines "<topic> <epoch> <offset> <last>\n"; clock and last are unix
// milliseconds of the log clock (see counter).
const (
	kindPub        = 'p'
	kindMarker     = 'm'
	kindRequest    = 'q'
	kindCheckpoint = 'c'
	kindReset      = 'r'
	kindBatch      = 'b'
)

// idLen is the length of an entry id: 15 random bytes in base32. A publication's id doubles
// as its topic's new epoch (its first epochLen characters) when it starts one.
const (
	idLen    = 24
	epochLen = 8
)

var (
	errEntry = errors.New("amqp broker: malformed log entry")
	idText   = base32.StdEncoding.WithPadding(base32.NoPadding)
)

func newID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return string(bytes.ToLower([]byte(idText.EncodeToString(b[:]))))
}

// entry is a parsed log entry. Its byte slices point into the message body.
type entry struct {
	kind  byte
	id    string
	topic string
	tail  []byte // publication: time, sender, type, data
	at    int64  // checkpoint: the log offset it describes
	clock int64  // checkpoint, reset: the log clock
	state []byte // checkpoint: topic lines
}

func appendPub(dst []byte, id, topic string, t time.Time, sender, typ string, data []byte) []byte {
	dst = append(dst, kindPub, ' ')
	dst = append(dst, id...)
	dst = append(dst, ' ')
	dst = append(dst, topic...)
	dst = append(dst, ' ')
	return replica.AppendTail(dst, t, sender, typ, data)
}

func appendSimple(kind byte, id string) []byte {
	return append([]byte{kind, ' '}, id...)
}

func appendReset(id string, clock int64) []byte {
	dst := append(appendSimple(kindReset, id), ' ')
	return strconv.AppendInt(dst, clock, 10)
}

// cut returns b up to the first space and what follows it.
func cut(b []byte) (field, rest []byte, ok bool) {
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

func parseEntry(b []byte) (entry, error) {
	if len(b) < 2+idLen || b[1] != ' ' {
		return entry{}, errEntry
	}
	e := entry{kind: b[0]}
	id, rest, more := cut(b[2:])
	if len(id) != idLen {
		return entry{}, errEntry
	}
	e.id = string(id)
	switch e.kind {
	case kindMarker, kindRequest:
		if more {
			return entry{}, errEntry
		}
		return e, nil
	case kindPub:
		topic, tail, ok := cut(rest)
		if !ok || !more || hub.ValidateTopic(string(topic)) != nil {
			return entry{}, errEntry
		}
		if _, err := replica.TailTime(tail); err != nil {
			return entry{}, errEntry
		}
		e.topic, e.tail = string(topic), tail
		return e, nil
	case kindReset:
		clock, err := strconv.ParseInt(string(rest), 10, 64)
		if !more || err != nil {
			return entry{}, errEntry
		}
		e.clock = clock
		return e, nil
	case kindCheckpoint:
		at, rest, ok1 := cut(rest)
		clock, state, ok2 := cut(rest)
		var err1, err2 error
		e.at, err1 = strconv.ParseInt(string(at), 10, 64)
		e.clock, err2 = strconv.ParseInt(string(clock), 10, 64)
		if !more || !ok1 || !ok2 || err1 != nil || err2 != nil || e.at < 0 {
			return entry{}, errEntry
		}
		e.state = state
		return e, nil
	}
	return entry{}, errEntry
}

// appendBatch appends a batch of publication entries (each made by appendPub). RabbitMQ's
// cost is per message, not per byte: a node that has several publications to append sends
// them as one.
func appendBatch(dst []byte, pubs [][]byte) []byte {
	dst = append(dst, kindBatch)
	for _, p := range pubs {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(p)), 10)
		dst = append(dst, ' ')
		dst = append(dst, p...)
	}
	return dst
}

// parseMessage parses one log message onto dst: a batch's publications, or a single entry.
// A batch with any malformed part is malformed as a whole, so that every node skips all of it.
func parseMessage(b []byte, dst []entry) ([]entry, error) {
	if len(b) == 0 || b[0] != kindBatch {
		e, err := parseEntry(b)
		if err != nil {
			return dst, err
		}
		return append(dst, e), nil
	}
	n := len(dst)
	for rest := b[1:]; len(rest) > 0; {
		if rest[0] != ' ' {
			return dst[:n], errEntry
		}
		size, body, ok := cut(rest[1:])
		l, err := strconv.Atoi(string(size))
		if !ok || err != nil || l <= 0 || l > len(body) || size[0] == '+' {
			return dst[:n], errEntry
		}
		e, err := parseEntry(body[:l])
		if err != nil || e.kind != kindPub {
			return dst[:n], errEntry
		}
		dst = append(dst, e)
		rest = body[l:]
	}
	if len(dst) == n {
		return dst, errEntry
	}
	return dst, nil
}

// publication decodes a publication entry's tail, with the offset and epoch counted for it.
func (e *entry) publication(offset uint64, epoch string) (*hub.Publication, error) {
	head := replica.AppendHead(make([]byte, 0, len(e.tail)+32), offset, epoch)
	return replica.Decode(e.topic, append(head, e.tail...))
}
