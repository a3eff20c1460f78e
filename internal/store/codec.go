package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// Record and meta encodings. Both start with a version byte so the format can change without
// a migration of old rows.
//
//	record: version(1) seconds(varint) nanos(uvarint) len(sender)(uvarint) sender len(type)(uvarint) type data
//	meta:   version(1) top(8, big-endian) epoch
//
// A record holds neither topic, offset nor epoch: the key has the first two, and a topic's
// records all belong to the epoch in its meta row (a new epoch deletes the old records).
// A typical chat message costs its data plus about 16 bytes.
const (
	recordVersion = 1
	metaVersion   = 1
)

// ErrCorrupt means a stored row does not decode: the file was damaged or written by
// something else. Load and ForEach return it wrapped; a broker may then start the topic over in
// a new epoch rather than refuse to serve it.
var ErrCorrupt = errors.New("store: corrupt record")

// appendPrefix appends the key prefix shared by all of topic's records.
func appendPrefix(dst []byte, topic string) []byte {
	dst = append(dst, topic...)
	return append(dst, 0)
}

// appendKey appends the key of topic's record at off.
func appendKey(dst []byte, topic string, off uint64) []byte {
	return binary.BigEndian.AppendUint64(appendPrefix(dst, topic), off)
}

func appendMeta(dst []byte, top uint64, epoch string) []byte {
	dst = append(dst, metaVersion)
	dst = binary.BigEndian.AppendUint64(dst, top)
	return append(dst, epoch...)
}

func parseMeta(v []byte) (top uint64, epoch string, err error) {
	if len(v) < 9 || v[0] != metaVersion {
		return 0, "", fmt.Errorf("%w: meta row of %d bytes", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v[1:9]), string(v[9:]), nil
}

func appendRecord(dst []byte, p *hub.Publication) []byte {
	dst = append(dst, recordVersion)
	dst = binary.AppendVarint(dst, p.Time.Unix())
	dst = binary.AppendUvarint(dst, uint64(p.Time.Nanosecond()))
	dst = binary.AppendUvarint(dst, uint64(len(p.Sender)))
	dst = append(dst, p.Sender...)
	dst = binary.AppendUvarint(dst, uint64(len(p.Type)))
	dst = append(dst, p.Type...)
	return append(dst, p.Data...)
}

// decoder turns records back into publications. It interns senders and types, which repeat
// across a topic's history, so a loaded history does not hold a copy of each per record.
type decoder struct {
	strs map[string]string
}

func (d *decoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := d.strs[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if d.strs == nil {
		d.strs = make(map[string]string)
	}
	s := string(b)
	d.strs[s] = s
	return s
}

// decode returns the publication stored in v. v belongs to bbolt and is only valid inside the
// transaction, so everything is copied out.
func (d *decoder) decode(topic, epoch string, off uint64, v []byte) (*hub.Publication, error) {
	if len(v) == 0 || v[0] != recordVersion {
		return nil, fmt.Errorf("%w: %s offset %d: version", ErrCorrupt, topic, off)
	}
	v = v[1:]
	sec, n := binary.Varint(v)
	if n <= 0 {
		return nil, fmt.Errorf("%w: %s offset %d: time", ErrCorrupt, topic, off)
	}
	v = v[n:]
	nsec, n := binary.Uvarint(v)
	if n <= 0 || nsec >= 1e9 {
		return nil, fmt.Errorf("%w: %s offset %d: time", ErrCorrupt, topic, off)
	}
	v = v[n:]
	sender, v, ok := cutString(v)
	if !ok {
		return nil, fmt.Errorf("%w: %s offset %d: sender", ErrCorrupt, topic, off)
	}
	typ, v, ok := cutString(v)
	if !ok {
		return nil, fmt.Errorf("%w: %s offset %d: type", ErrCorrupt, topic, off)
	}
	p := &hub.Publication{
		Topic:  topic,
		Offset: off,
		Epoch:  epoch,
		Time:   time.Unix(sec, int64(nsec)).UTC(),
		Sender: d.intern(sender),
		Type:   d.intern(typ),
	}
	if len(v) > 0 {
		p.Data = append([]byte(nil), v...)
	}
	return p, nil
}

// cutString splits a uvarint-length-prefixed byte string off the front of v.
func cutString(v []byte) (s, rest []byte, ok bool) {
	l, n := binary.Uvarint(v)
	if n <= 0 || l > uint64(len(v)-n) {
		return nil, nil, false
	}
	return v[n : n+int(l)], v[n+int(l):], true
}
