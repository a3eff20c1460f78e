package amqp

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/broker/replica"
	"github.com/rtlab/rtlab/internal/hub"
)

// An entry is one AMQP message body, with no headers (RabbitMQ converts headers when it stores
// a message in a stream; a plain body costs it least). Fields are separated by spaces; topics,
// ids and epochs never contain one.
//
//	p <id> <reply> <topic> <tail>      a request to publish, to the sequencer; tail as replica.AppendTail
//	g <id> <reply> <topic> <since> <limit>  a request for a topic's history, to the sequencer
//	l <id> <reply> <since-ms>          a request for the durable topics published to since, to the sequencer
//	a <id> <topic> <head><tail>        a publication with its offset and epoch (head as replica.AppendHead)
//	k <id> <topic> <head><tail>        the same, sent to the node that asked for it (its answer)
//	d <id> <topic> <head><tail>        the answer to a retry of a keyed request: its original's head
//	r <id> <topic> <head><oldest>      the answer to g: the topic's top and oldest offset, then its publications as a entries
//	t <id> <topic> <topic>…            the answer to l
//	m <id>                             a marker: whoever appended it to the log waits to read it back
//	s <token> <addr>                   the sequencer takes requests at addr (host:port), with token
//	b <len> <entry><len> <entry>…      entries sent together, each <len> bytes long
//
// <reply> is the queue of the node that asked: the sequencer sends its answer there.
const (
	kindRequest   = 'p'
	kindHistory   = 'g'
	kindList      = 'l'
	kindAssigned  = 'a'
	kindAck       = 'k'
	kindDuplicate = 'd'
	kindReply     = 'r'
	kindTopics    = 't'
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

// keyedID is the id of a request with an idempotency key: the same for every retry of it, so
// the sequencer finds a retry among the ids it remembers. It starts with '0', which random ids
// (base32) never hold.
func keyedID(topic, sender, key string) string {
	h := sha256.Sum256([]byte(strconv.Itoa(len(topic)) + ":" + topic + strconv.Itoa(len(sender)) + ":" + sender + key))
	return "0" + string(bytes.ToLower([]byte(idText.EncodeToString(h[:15]))))[:idLen-1]
}

// keyed reports whether id is a keyedID.
func keyed(id string) bool { return len(id) > 0 && id[0] == '0' }

// entry is a parsed entry. Its byte slices point into the message body.
type entry struct {
	kind  byte
	id    string // the sequencer's token in a sequencer entry
	reply string // requests: the queue to answer on
	topic string
	// request: the tail; publication: head and tail; sequencer: its address; history request:
	// since and limit; reply: head and oldest; list request: the time; list answer: the topics
	rest []byte
}

// appendWords appends an entry's kind and its words, each followed by a space.
func appendWords(dst []byte, kind byte, words ...string) []byte {
	dst = append(dst, kind, ' ')
	for _, w := range words {
		dst = append(dst, w...)
		dst = append(dst, ' ')
	}
	return dst
}

// appendRequest appends a request to publish, answered on queue reply.
func appendRequest(dst []byte, id, reply, topic string, t time.Time, sender, typ string, data []byte) []byte {
	dst = appendWords(dst, kindRequest, id, reply, topic)
	return replica.AppendTail(dst, t, sender, typ, data)
}

// appendHistoryRequest appends a request for topic's history after since, at most limit.
func appendHistoryRequest(dst []byte, id, reply, topic string, since uint64, limit int) []byte {
	dst = appendWords(dst, kindHistory, id, reply, topic)
	dst = strconv.AppendUint(dst, since, 10)
	dst = append(dst, ' ')
	return strconv.AppendInt(dst, int64(max(limit, 0)), 10)
}

// appendListRequest appends a request for the durable topics published to since since.
func appendListRequest(dst []byte, id, reply string, since time.Time) []byte {
	dst = appendWords(dst, kindList, id, reply)
	return strconv.AppendInt(dst, since.UnixMilli(), 10)
}

// appendReply appends the head of an answer to a history request: hr's top and oldest offset.
// Its publications follow as publication entries.
func appendReply(dst []byte, id, topic string, hr hub.HistoryResult) []byte {
	dst = appendWords(dst, kindReply, id, topic)
	epoch := hr.Top.Epoch
	if epoch == "" {
		epoch = "-"
	}
	dst = replica.AppendHead(dst, hr.Top.Offset, epoch)
	return strconv.AppendUint(dst, hr.Oldest, 10)
}

// appendTopics appends the answer to a list request.
func appendTopics(dst []byte, id string, topics []string) []byte {
	dst = append(dst, kindTopics, ' ')
	dst = append(dst, id...)
	for _, t := range topics {
		dst = append(dst, ' ')
		dst = append(dst, t...)
	}
	return dst
}

// appendAssigned appends publication p, whose request had id.
func appendAssigned(dst []byte, id string, p *hub.Publication) []byte {
	return appendPublication(dst, kindAssigned, id, p)
}

// appendDuplicate appends publication p, a retry of request id answered with its original's
// offset, epoch and time.
func appendDuplicate(dst []byte, id string, p *hub.Publication) []byte {
	return appendPublication(dst, kindDuplicate, id, p)
}

// appendAck appends publication p as the answer to its request, id.
func appendAck(dst []byte, id string, p *hub.Publication) []byte {
	return appendPublication(dst, kindAck, id, p)
}

func appendPublication(dst []byte, kind byte, id string, p *hub.Publication) []byte {
	dst = append(dst, kind, ' ')
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
	case kindTopics:
		for rest := rest; more && len(rest) > 0; {
			var t []byte
			t, rest, more = cut(rest)
			if hub.ValidateTopic(string(t)) != nil {
				return entry{}, errEntry
			}
		}
		e.rest = rest
		return e, nil
	case kindRequest, kindHistory, kindList:
		reply, r, ok := cut(rest)
		if !more || !ok || len(reply) == 0 || len(reply) > maxAddrLen {
			return entry{}, errEntry
		}
		e.reply, rest = string(reply), r
		if e.kind == kindList {
			if _, err := strconv.ParseInt(string(rest), 10, 64); err != nil {
				return entry{}, errEntry
			}
			e.rest = rest
			return e, nil
		}
	case kindAssigned, kindAck, kindDuplicate, kindReply:
	default:
		return entry{}, errEntry
	}
	topic, rest, ok := cut(rest)
	if !ok || !more || hub.ValidateTopic(string(topic)) != nil {
		return entry{}, errEntry
	}
	e.topic, e.rest = string(topic), rest
	switch e.kind {
	case kindRequest:
		if _, err := replica.TailTime(rest); err != nil {
			return entry{}, errEntry
		}
	case kindHistory:
		if _, _, err := e.historyRequest(); err != nil {
			return entry{}, errEntry
		}
	case kindReply:
		if _, err := e.historyHead(); err != nil {
			return entry{}, errEntry
		}
	}
	return e, nil
}

// historyRequest returns a history request's since and limit.
func (e *entry) historyRequest() (since uint64, limit int, err error) {
	s, l, ok := cut(e.rest)
	if !ok {
		return 0, 0, errEntry
	}
	since, err1 := strconv.ParseUint(string(s), 10, 64)
	limit, err2 := strconv.Atoi(string(l))
	if err1 != nil || err2 != nil || limit < 0 {
		return 0, 0, errEntry
	}
	return since, limit, nil
}

// historyHead returns the top and oldest offset of an answer to a history request.
func (e *entry) historyHead() (hub.HistoryResult, error) {
	off, rest, ok1 := cut(e.rest)
	epoch, oldest, ok2 := cut(rest)
	o, err1 := strconv.ParseUint(string(off), 10, 64)
	old, err2 := strconv.ParseUint(string(oldest), 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || len(epoch) == 0 {
		return hub.HistoryResult{}, errEntry
	}
	hr := hub.HistoryResult{Top: hub.Position{Offset: o, Epoch: string(epoch)}, Oldest: old}
	if hr.Top.Epoch == "-" {
		hr.Top.Epoch = ""
	}
	return hr, nil
}

// topics returns the topics of a list answer.
func (e *entry) topics() []string {
	if len(e.rest) == 0 {
		return nil
	}
	return strings.Split(string(e.rest), " ")
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
// hold requests, publications and answers, never markers, announcements or batches.
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
		if err != nil || e.kind == kindMarker || e.kind == kindSequencer {
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
