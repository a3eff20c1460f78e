package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gobwas/ws"
)

var wsSeeds = []string{
	`{"op":"subscribe","topic":"location/7","since":3,"epoch":"abc"}`,
	`{"op":"unsubscribe","topic":"chat/lobby"}`,
	`{"op":"publish","topic":"chat/lobby","data":{"text":"hi"},"type":"TALK","id":1}`,
	`{"op":"ping","id":"x"}`,
	`{"op":"publish","topic":"a","data":null}`,
	`{"op":"subscribe","topic":"a","since":-1}`,
	`{"op":"subscribe","topic":"a","since":18446744073709551616}`,
	`{"op":"fly"}`, `{}`, `[]`, `null`, `"op"`, `{"op":1}`, `{"op":"publish","data":{}}`,
	"{\"op\":\"ping\",\"id\":\"\\ud800\"}",
}

// FuzzDecodeRequest: any client message either decodes to a valid request or yields an error
// that maps to a client error code (never a panic, never an internal error).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range wsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, err := decodeRequest(msg)
		if err != nil {
			if code, status := errorCode(err); code != "bad_request" || status != 400 {
				t.Fatalf("error %v maps to %s/%d", err, code, status)
			}
			return
		}
		switch req.Op {
		case "subscribe", "unsubscribe", "publish", "ping":
		default:
			t.Fatalf("accepted op %q", req.Op)
		}
		if req.Op == "publish" && (req.Topic == "" || !json.Valid(req.Data)) {
			t.Fatalf("accepted publish without topic or valid data: %+v", req)
		}
	})
}

// FuzzSeedFrame: a seed socket's frame is either a protocol op or published as valid JSON.
func FuzzSeedFrame(f *testing.F) {
	for _, s := range append(wsSeeds, "hello", `{"x":1}`, "\xff\xfe", `{"op":"subscribe"`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if isProtocolOp(msg) {
			return
		}
		if out := asJSON(msg); !json.Valid(out) {
			t.Fatalf("asJSON(%q) = %q, not JSON", msg, out)
		}
	})
}

// FuzzReadMessage feeds arbitrary bytes to the WebSocket frame reader: it must never panic and
// never return a message larger than the limit.
func FuzzReadMessage(f *testing.F) {
	frame := func(op ws.OpCode, fin bool, p string) []byte {
		var b bytes.Buffer
		h := ws.Header{Fin: fin, OpCode: op, Length: int64(len(p)), Masked: true, Mask: [4]byte{1, 2, 3, 4}}
		_ = ws.WriteHeader(&b, h)
		pb := []byte(p)
		ws.Cipher(pb, h.Mask, 0)
		b.Write(pb)
		return b.Bytes()
	}
	f.Add(frame(ws.OpText, true, `{"op":"ping"}`))
	f.Add(append(frame(ws.OpText, false, "hel"), frame(ws.OpContinuation, true, "lo")...))
	f.Add(append(frame(ws.OpPing, true, "p"), frame(ws.OpText, true, "x")...))
	f.Add(frame(ws.OpClose, true, "\x03\xe8"))
	f.Add(frame(ws.OpText, true, string(make([]byte, 300))))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		r := &wsReader{br: bufio.NewReader(bytes.NewReader(data)), max: max, pong: func([]byte) {}}
		for i := 0; i < 16; i++ {
			_, msg, err := r.readMessage()
			if err != nil {
				if errors.Is(err, errFrameTooLarge) {
					return
				}
				return
			}
			if len(msg) > max {
				t.Fatalf("message of %d bytes over the %d limit", len(msg), max)
			}
		}
	})
}
