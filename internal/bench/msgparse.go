package bench

import (
	"strconv"

	"github.com/rtlab/rtlab/internal/jsonscan"
)

// The generator reads tens of thousands of messages a second on a machine it shares with the
// server, so it does not unmarshal them: a small allocation-free scanner walks the JSON and
// picks out the few fields the accounting needs (topic, offset, epoch, and the publisher's vu,
// seq and ts inside data). Byte slices in the results point into the input and are valid
// only until the input buffer is reused.

// wireMsg is what the generator needs from any server message: a publication, a WebSocket
// protocol message, or a poll answer.
type wireMsg struct {
	op        []byte // WebSocket op
	topic     []byte
	epoch     []byte
	offset    uint64
	hasOffset bool
	id        int64 // WebSocket request id (we send integers)
	hasID     bool
	recovered bool // poll answer or subscribed: false when history was lost
	hasRecov  bool
	code      []byte // error / disconnect code
	reason    []byte
	pubs      []byte // poll answer: the publications array, raw
	token     []byte // login answer
	data      dataFields
}

// dataFields are the fields every bench publication carries in its data.
type dataFields struct {
	vu, seq, ts int64
	ok          bool // all three were present
}

// parseMsg scans one JSON object.
func parseMsg(b []byte, m *wireMsg) error {
	*m = wireMsg{}
	_, err := walkObject(b, 0, func(key, val []byte) error {
		switch string(key) {
		case "op":
			m.op = unquote(val)
		case "topic":
			m.topic = unquote(val)
		case "epoch":
			m.epoch = unquote(val)
		case "offset":
			n, err := strconv.ParseUint(string(val), 10, 64)
			if err != nil {
				return errJSON
			}
			m.offset, m.hasOffset = n, true
		case "id":
			if n, err := strconv.ParseInt(string(val), 10, 64); err == nil {
				m.id, m.hasID = n, true
			}
		case "recovered":
			m.recovered, m.hasRecov = string(val) == "true", true
		case "code":
			m.code = unquote(val)
		case "reason":
			m.reason = unquote(val)
		case "publications":
			m.pubs = val
		case "token":
			m.token = unquote(val)
		case "data":
			m.data = parseData(val)
		}
		return nil
	})
	return err
}

// parseData picks vu, seq and ts from a publication's data object, or, failing that, from its
// "message" text ("vu=17 seq=4 ts=…", which is what a NOTIFY carries of the TALK behind it).
// Data that is not ours (another client publishing on the topic, ENTER, LEAVE) comes back with
// ok false.
func parseData(b []byte) dataFields {
	var d dataFields
	var seen uint8
	if len(b) == 0 || b[0] != '{' {
		return d
	}
	var msg []byte
	_, err := walkObject(b, 0, func(key, val []byte) error {
		var dst *int64
		var bit uint8
		switch string(key) {
		case "vu":
			dst, bit = &d.vu, 1
		case "seq":
			dst, bit = &d.seq, 2
		case "ts":
			dst, bit = &d.ts, 4
		case "message":
			msg = unquote(val)
			return nil
		default:
			return nil
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return nil
		}
		*dst = n
		seen |= bit
		return nil
	})
	d.ok = err == nil && seen == 7
	if err == nil && !d.ok && msg != nil {
		return parseTalkText(msg)
	}
	return d
}

// parseTalkText reads "vu=17 seq=4 ts=1795383601123000000" (appendTalkText).
func parseTalkText(b []byte) dataFields {
	var d dataFields
	for i, key := range [3]string{"vu=", "seq=", "ts="} {
		if i > 0 {
			if len(b) == 0 || b[0] != ' ' {
				return dataFields{}
			}
			b = b[1:]
		}
		if len(b) < len(key) || string(b[:len(key)]) != key {
			return dataFields{}
		}
		b = b[len(key):]
		j := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		n, err := strconv.ParseInt(string(b[:j]), 10, 64)
		if err != nil {
			return dataFields{}
		}
		switch i {
		case 0:
			d.vu = n
		case 1:
			d.seq = n
		case 2:
			d.ts = n
		}
		b = b[j:]
	}
	if len(b) != 0 {
		return dataFields{}
	}
	d.ok = true
	return d
}

// eachElement calls fn with every element of a JSON array (jsonscan.EachElement, with the
// bench's error).
func eachElement(b []byte, fn func(elem []byte) error) error {
	return benchJSONErr(jsonscan.EachElement(b, fn))
}

// walkObject calls fn for every member of the object starting at b[i] with the raw key (no
// quotes, escapes left as they are) and the raw value. It returns the index after the object
// (jsonscan.WalkObject, with the bench's error).
func walkObject(b []byte, i int, fn func(key, val []byte) error) (int, error) {
	end, err := jsonscan.WalkObject(b, i, fn)
	return end, benchJSONErr(err)
}

// benchJSONErr gives the scanner's malformed-JSON error the bench's text (errJSON), the label
// it has in the results' error counts.
func benchJSONErr(err error) error {
	if err == jsonscan.ErrMalformed {
		return errJSON
	}
	return err
}

// unquote strips the quotes of a raw JSON string value; escapes are left as they are (the
// values compared here, topics and epochs, never contain any). Non-strings give nil.
func unquote(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' {
		return v[1 : len(v)-1]
	}
	return nil
}
