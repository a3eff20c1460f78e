package socketio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Engine.IO v4 packet types, the first byte of every packet.
const (
	eioOpen    = '0'
	eioClose   = '1'
	eioPing    = '2'
	eioPong    = '3'
	eioMessage = '4'
	eioUpgrade = '5'
	eioNoop    = '6'
)

// Socket.IO v5 packet types, the first byte of an Engine.IO message's data.
const (
	sioConnect      = '0'
	sioDisconnect   = '1'
	sioEvent        = '2'
	sioAck          = '3'
	sioConnectError = '4'
	sioBinaryEvent  = '5'
	sioBinaryAck    = '6'
)

// recordSep separates the packets of an HTTP long-polling payload.
const recordSep = 0x1e

// maxAckDigits bounds an acknowledgement id (the JS client counts from 0 in a JavaScript number).
const maxAckDigits = 15

// ErrBinary is returned for binary packets, which this client does not support.
var ErrBinary = errors.New("socketio: binary packets are not supported")

// packet is a decoded Socket.IO packet. data aliases the input.
type packet struct {
	typ  byte
	nsp  string
	ack  int64 // -1 when the packet carries no id
	data []byte
}

// splitPayload splits an HTTP long-polling payload into its Engine.IO packets (aliasing p).
func splitPayload(p []byte) ([][]byte, error) {
	if len(p) == 0 {
		return nil, errors.New("socketio: empty polling payload")
	}
	out := bytes.Split(p, []byte{recordSep})
	for _, rec := range out {
		if len(rec) == 0 {
			return nil, errors.New("socketio: empty packet in polling payload")
		}
		if rec[0] == 'b' {
			return nil, ErrBinary
		}
	}
	return out, nil
}

// decodePacket decodes the Socket.IO packet p (an Engine.IO message's data):
// <type>[<attachments>-][<namespace>,][<ack id>][<JSON data>].
func decodePacket(p []byte) (packet, error) {
	pk := packet{nsp: "/", ack: -1}
	if len(p) == 0 {
		return pk, errors.New("socketio: empty packet")
	}
	pk.typ = p[0]
	switch pk.typ {
	case sioConnect, sioDisconnect, sioEvent, sioAck, sioConnectError:
	case sioBinaryEvent, sioBinaryAck:
		return pk, ErrBinary
	default:
		return pk, fmt.Errorf("socketio: unknown packet type %q", pk.typ)
	}
	p = p[1:]
	if len(p) > 0 && p[0] == '/' {
		i := bytes.IndexByte(p, ',')
		if i < 0 {
			i = len(p)
		}
		pk.nsp = string(p[:i])
		p = p[min(i+1, len(p)):]
	}
	d := 0
	for d < len(p) && p[d] >= '0' && p[d] <= '9' {
		d++
	}
	if d > maxAckDigits {
		return pk, fmt.Errorf("socketio: acknowledgement id of %d digits", d)
	}
	if d > 0 {
		pk.ack, _ = strconv.ParseInt(string(p[:d]), 10, 64)
		p = p[d:]
	}
	if len(p) > 0 && !json.Valid(p) {
		return pk, fmt.Errorf("socketio: packet %q: data is not JSON: %.40q", pk.typ, p)
	}
	pk.data = p
	return pk, nil
}

// eventArgs splits an EVENT's data, ["name", arg...], into the name and the arguments.
func eventArgs(data []byte) (string, []json.RawMessage, error) {
	var all []json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil || len(all) == 0 {
		return "", nil, fmt.Errorf("socketio: event data is not a non-empty array: %.40q", data)
	}
	var name string
	if err := json.Unmarshal(all[0], &name); err != nil {
		return "", nil, fmt.Errorf("socketio: event name is not a string: %.40q", all[0])
	}
	return name, all[1:], nil
}

// ackArgs decodes an ACK's data, a JSON array of arguments.
func ackArgs(data []byte) ([]json.RawMessage, error) {
	var all []json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("socketio: ack data is not an array: %.40q", data)
	}
	return all, nil
}

// connectError turns a CONNECT_ERROR's data into the server's message: an object with a
// message (v5), or a bare string (older servers).
func connectError(data []byte) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var s string
	if json.Unmarshal(data, &s) == nil && s != "" {
		return s
	}
	return fmt.Sprintf("%.80s", data)
}

// appendPrefix appends an Engine.IO message carrying a Socket.IO packet of type typ for
// namespace nsp, up to its data.
func appendPrefix(b []byte, typ byte, nsp string, ack int64) []byte {
	b = append(b, eioMessage, typ)
	if nsp != "/" {
		b = append(b, nsp...)
		b = append(b, ',')
	}
	if ack >= 0 {
		b = strconv.AppendInt(b, ack, 10)
	}
	return b
}

// encodeEvent encodes EVENT [event, args...] as an Engine.IO message. Each argument must be
// one JSON value.
func encodeEvent(nsp string, ack int64, event string, args []json.RawMessage) ([]byte, error) {
	name, err := json.Marshal(event)
	if err != nil {
		return nil, fmt.Errorf("socketio: event name: %w", err)
	}
	n := 24 + len(nsp) + len(name)
	for _, a := range args {
		n += len(a) + 1
	}
	b := appendPrefix(make([]byte, 0, n), sioEvent, nsp, ack)
	b = append(b, '[')
	b = append(b, name...)
	for i, a := range args {
		if !json.Valid(a) {
			return nil, fmt.Errorf("socketio: argument %d of %q is not JSON", i, event)
		}
		b = append(b, ',')
		b = append(b, a...)
	}
	return append(b, ']'), nil
}

// encodeConnect encodes CONNECT for nsp with the auth payload (none when empty).
func encodeConnect(nsp string, auth json.RawMessage) ([]byte, error) {
	if len(auth) > 0 && !json.Valid(auth) {
		return nil, errors.New("socketio: auth payload is not JSON")
	}
	return append(appendPrefix(nil, sioConnect, nsp, -1), auth...), nil
}
