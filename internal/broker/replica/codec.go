package replica

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// A publication in the log is encoded as
//
//	"<offset> <epoch> <time-ms> <len(sender)> <len(type)> " then sender, type and data
//
// with no separators after the lengths. The head is "<offset> <epoch> ", which only the writer
// that assigns offsets knows; the tail is the rest, which the publishing node builds. The topic
// travels beside the payload (in the subject or a header).

// ErrFormat is returned for a payload that is not an encoded publication.
var ErrFormat = errors.New("replica: malformed publication")

// AppendHead appends a publication's head: its offset and epoch.
func AppendHead(dst []byte, offset uint64, epoch string) []byte {
	dst = strconv.AppendUint(dst, offset, 10)
	dst = append(dst, ' ')
	dst = append(dst, epoch...)
	return append(dst, ' ')
}

// AppendTail appends a publication's tail: time (in milliseconds), sender, type and data.
func AppendTail(dst []byte, t time.Time, sender, typ string, data []byte) []byte {
	dst = strconv.AppendInt(dst, t.UnixMilli(), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(sender)), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(typ)), 10)
	dst = append(dst, ' ')
	dst = append(dst, sender...)
	dst = append(dst, typ...)
	return append(dst, data...)
}

// TailTime returns the publication time at the start of a tail.
func TailTime(tail []byte) (time.Time, error) {
	i := bytes.IndexByte(tail, ' ')
	if i < 0 {
		return time.Time{}, ErrFormat
	}
	ms, err := strconv.ParseInt(string(tail[:i]), 10, 64)
	if err != nil {
		return time.Time{}, ErrFormat
	}
	return time.UnixMilli(ms), nil
}

// Decode parses a head followed by a tail into a publication of topic. It takes the bytes of a
// log entry or the string that Redis returns, and copies what it keeps, so b may be reused.
func Decode[B ~string | ~[]byte](topic string, b B) (*hub.Publication, error) {
	var f [5]B
	for i := range f {
		j := indexSpace(b)
		if j < 0 {
			return nil, ErrFormat
		}
		f[i], b = b[:j], b[j+1:]
	}
	off, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	ms, err2 := strconv.ParseInt(string(f[2]), 10, 64)
	ls, err3 := strconv.Atoi(string(f[3]))
	lt, err4 := strconv.Atoi(string(f[4]))
	if err := errors.Join(err1, err2, err3, err4); err != nil || ls < 0 || lt < 0 || ls+lt > len(b) {
		return nil, ErrFormat
	}
	return &hub.Publication{
		Topic:  topic,
		Offset: off,
		Epoch:  string(f[1]),
		Time:   time.UnixMilli(ms),
		Sender: string(b[:ls]),
		Type:   string(b[ls : ls+lt]),
		Data:   append([]byte(nil), b[ls+lt:]...),
	}, nil
}

// indexSpace returns the index of the first ' ' in b, or -1. The fields it looks through are
// short numbers and the epoch.
func indexSpace[B ~string | ~[]byte](b B) int {
	for i := 0; i < len(b); i++ {
		if b[i] == ' ' {
			return i
		}
	}
	return -1
}

// NewEpoch returns a short random epoch name, as the memory broker's.
func NewEpoch() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
