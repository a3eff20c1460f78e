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

// An entry is one AMQP message body, with no headers (RabbitMQ converts headers when it stores
// a message in a stream; a plain body costs it least). Fields are separated by spaces; topics,
// ids and epochs never contain one.
//
//	p <id> <topic> <tail>              a request to publish, to the sequencer; tail as replica.AppendTail
//	a <id> <topic> <head><tail>        a publication with its offset and epoch (head as replica.AppendHead)
//	m <id>                             a marker: whoever appended it to the log waits to read it back
//	s <token> <addr>                   the sequencer takes requests at addr (host:port), with token
//	b <len> <entry><len> <entry>…      requests or publications sent together, each <len> bytes long
const (
	kindRequest   = 'p'
	kindAssigned  = 'a'
	kindMarker    = 'm'
	kindSequencer = 's'
	kindBatch     = 'b'
)

// maxAddrLen bounds the address in a sequencer entry.
const maxAddrLen = 255

// idLen is the length of an entry id: 15 random bytes in base32.
const idLen = 24

var (
	errEntry = errors.New("amqp broker: malformed entry")
	idText   = base32.StdEncoding.WithPadding(base32.NoPadding)
)

func newID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return string(bytes.ToLower([]byte(idText.EncodeToString(b[:]))))
}

// entry is a parsed entry. Its byte slices point into the message body.
type entry struct {
	kind  byte
	id    string // the sequencer's token in a sequencer entry
	topic string
	rest  []byte // request: the tail; publication: head and tail; sequencer: its address
}

// appendRequest appends a request to publish.
func appendRequest(dst []byte, id, topic string, t time.Time, sender, typ string, data []byte) []byte {
	dst = append(dst, kindRequest, ' ')
	dst = append(dst, id...)
	dst = append(dst, ' ')
	dst = append(dst, topic...)
	dst = append(dst, ' ')
	return replica.AppendTail(dst, t, sender, typ, data)
}

// appendAssigned appends publication p, whose request had id.
func appendAssigned(dst []byte, id string, p *hub.Publication) []byte {
	dst = append(dst, kindAssigned, ' ')
	dst = append(dst, id...)
	dst = append(dst, ' ')
	dst = append(dst, p.Topic...)
	dst = append(dst, ' ')
	dst = replica.AppendHead(dst, p.Offset, p.Epoch)
	return replica.AppendTail(dst, p.Time, p.Sender, p.Type, p.Data)
}

// requestID returns the id of request req, as appendRequest wrote it.
func requestID(req []byte) string {
	if len(req) < 2+idLen {
		return ""
	}
	return string(req[2 : 2+idLen])
}

func appendMarker(id string) []byte {
	return append([]byte{kindMarker, ' '}, id...)
}

// appendSequencer appends the announcement of a sequencer that takes requests at addr from
// whoever presents token.
func appendSequencer(token, addr string) []byte {
	b := append([]byte{kindSequencer, ' '}, token...)
	b = append(b, ' ')
	return append(b, addr...)
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
	case kindMarker:
		if more {
			return entry{}, errEntry
		}
		return e, nil
	case kindSequencer:
		if !more || len(rest) == 0 || len(rest) > maxAddrLen || bytes.IndexByte(rest, ' ') >= 0 {
			return entry{}, errEntry
		}
		e.rest = rest
		return e, nil
	case kindRequest, kindAssigned:
		topic, rest, ok := cut(rest)
		if !ok || !more || hub.ValidateTopic(string(topic)) != nil {
			return entry{}, errEntry
		}
		if _, err := replica.TailTime(rest); e.kind == kindRequest && err != nil {
			return entry{}, errEntry
		}
		e.topic, e.rest = string(topic), rest
		return e, nil
	}
	return entry{}, errEntry
}

// request decodes a request's publication, without offset and epoch.
func (e *entry) request() (*hub.Publication, error) {
	return e.decode(replica.AppendHead(make([]byte, 0, len(e.rest)+8), 0, "-"))
}

// publication decodes a publication entry.
func (e *entry) publication() (*hub.Publication, error) {
	return e.decode(nil)
}

func (e *entry) decode(head []byte) (*hub.Publication, error) {
	b := e.rest
	if head != nil {
		b = append(head, e.rest...)
	}
	p, err := replica.Decode(e.topic, b)
	if err != nil {
		return nil, errEntry
	}
	return p, nil
}

// appendBatch appends several entries as one: RabbitMQ's cost is per message, not per byte.
func appendBatch(dst []byte, entries [][]byte) []byte {
	dst = append(dst, kindBatch)
	for _, p := range entries {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(p)), 10)
		dst = append(dst, ' ')
		dst = append(dst, p...)
	}
	return dst
}

// parseMessage parses one message onto dst: a batch's entries, or a single entry. A batch
// with any malformed part is malformed as a whole, so that every node skips all of it. Batches
// hold requests or publications, never markers or batches.
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
		if err != nil || (e.kind != kindRequest && e.kind != kindAssigned) {
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
