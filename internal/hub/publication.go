package hub

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"
)

// Publication is one message on a topic. Once handed to the hub it is shared by every
// subscriber and must not be modified.
type Publication struct {
	Topic  string
	Offset uint64 // 1 for the first publication of an epoch, +1 for each after
	Epoch  string // names the history Offset belongs to; changes when history is lost
	Time   time.Time
	Sender string // authenticated user or member name; may be empty
	Type   string // application type such as ENTER, TALK, LEAVE; may be empty
	Data   json.RawMessage
	// Key is the publisher's idempotency key (PublishRequest.Key), kept where a broker finds
	// retries in its history; empty when none.
	Key string
	// Duplicate marks an answer to a retry: the publication was published before, at Offset.
	// Only answers carry it; delivered publications never do.
	Duplicate bool

	// cache holds encodings computed once and shared by all subscribers of one transport kind.
	cache [cacheSlots]atomic.Pointer[[]byte]
}

// cacheSlots is how many encodings a publication can carry; transports pick a slot each.
const cacheSlots = 4

// Cached returns the bytes cached in slot, computing them with encode on first use. Fan-out
// calls this once per subscriber, so encoding happens once per publication, not per receiver.
// encode may run more than once under a race; it must be deterministic.
func (p *Publication) Cached(slot int, encode func(*Publication) []byte) []byte {
	if b := p.cache[slot].Load(); b != nil {
		return *b
	}
	b := encode(p)
	p.cache[slot].Store(&b)
	return b
}

// JSON returns the publication as a JSON object (the shape clients see). It is cached.
func (p *Publication) JSON() []byte {
	return p.Cached(0, func(p *Publication) []byte { return p.AppendJSON(nil) })
}

// AppendJSON appends the publication's JSON object to dst. It is written by hand because it runs
// once per publication on the hot path and reflection-based encoding dominated profiles.
func (p *Publication) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"topic":`...)
	dst = strconv.AppendQuote(dst, p.Topic) // topic chars never need JSON escaping beyond quotes
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendUint(dst, p.Offset, 10)
	dst = append(dst, `,"epoch":`...)
	dst = appendJSONString(dst, p.Epoch)
	dst = append(dst, `,"time":"`...)
	dst = p.Time.UTC().AppendFormat(dst, TimeFormat)
	dst = append(dst, '"')
	if p.Sender != "" {
		dst = append(dst, `,"sender":`...)
		dst = appendJSONString(dst, p.Sender)
	}
	if p.Type != "" {
		dst = append(dst, `,"type":`...)
		dst = appendJSONString(dst, p.Type)
	}
	dst = append(dst, `,"data":`...)
	if len(p.Data) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, p.Data...)
	}
	return append(dst, '}')
}

// TimeFormat is RFC 3339 with milliseconds, the format of Publication.Time on the wire.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// appendJSONString appends s as a JSON string, escaping what JSON requires.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s) // rare path: names with escapes or non-ASCII
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// AppendJSONString appends s as a JSON string. Exported for transports that hand-build frames.
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

// Position is where a topic's history stands: the offset of its latest publication and the epoch
// that offset belongs to. Offset 0 means no publication yet in this epoch.
type Position struct {
	Offset uint64 `json:"offset"`
	Epoch  string `json:"epoch"`
}
