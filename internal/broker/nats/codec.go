package nats

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

// A topic's subject is "<stream>.<topic with '.' replaced by '%'>": one token, because '.'
// separates NATS subject tokens and '%' never occurs in topic names.

func subject(stream, topic string) string {
	return stream + "." + strings.ReplaceAll(topic, ".", "%")
}

func topicOf(stream, subj string) (string, bool) {
	enc, ok := strings.CutPrefix(subj, stream+".")
	if !ok || enc == "" {
		return "", false
	}
	return strings.ReplaceAll(enc, "%", "."), true
}

// A message's payload is the publication:
// "<offset> <epoch> <time-ms> <len(sender)> <len(type)> " then sender, type and data.

func appendPayload(dst []byte, offset uint64, epoch string, t time.Time, sender, typ string, data []byte) []byte {
	dst = strconv.AppendUint(dst, offset, 10)
	dst = append(dst, ' ')
	dst = append(dst, epoch...)
	dst = append(dst, ' ')
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

var errFormat = errors.New("nats broker: malformed publication")

func decodePayload(topic string, b []byte) (*hub.Publication, error) {
	var f [5][]byte
	for i := range f {
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			return nil, errFormat
		}
		f[i], b = b[:j], b[j+1:]
	}
	off, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	ms, err2 := strconv.ParseInt(string(f[2]), 10, 64)
	ls, err3 := strconv.Atoi(string(f[3]))
	lt, err4 := strconv.Atoi(string(f[4]))
	if err := errors.Join(err1, err2, err3, err4); err != nil || ls < 0 || lt < 0 || ls+lt > len(b) {
		return nil, errFormat
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

// newEpoch returns a short random epoch name, as the memory broker's.
func newEpoch() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}
