package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

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
		var req wsRequest
		if err := decodeRequest(msg, &req); err != nil {
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

// FuzzRawFrame: a raw socket's frame is either a protocol op or, through AsJSON, valid JSON;
// bytes that are not UTF-8 stay as they are, for the hub to refuse (never turned into U+FFFD).
func FuzzRawFrame(f *testing.F) {
	for _, s := range append(wsSeeds, "hello", `{"x":1}`, "\xff\xfe", `{"op":"subscribe"`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if isProtocolOp(msg) {
			return
		}
		if out := AsJSON(msg); !utf8.Valid(msg) {
			if !bytes.Equal(out, msg) {
				t.Fatalf("AsJSON(%q) = %q: invalid UTF-8 changed", msg, out)
			}
		} else if !json.Valid(out) {
			t.Fatalf("AsJSON(%q) = %q, not JSON", msg, out)
		}
	})
}

// FuzzReadMessage feeds arbitrary bytes to the WebSocket frame reader: it must never panic,
// never return a message larger than the limit or a text message that is not UTF-8, and it
// must agree with gobwas/ws's wsutil.Reader, which applies the same rules, on every message
// and on which class of error ends the stream.
func FuzzReadMessage(f *testing.F) {
	f.Add(clientFrame(ws.OpText, true, `{"op":"ping"}`))
	f.Add(join(clientFrame(ws.OpText, false, "hel"), clientFrame(ws.OpContinuation, true, "lo")))
	f.Add(join(clientFrame(ws.OpPing, true, "p"), clientFrame(ws.OpText, true, "x")))
	f.Add(clientFrame(ws.OpClose, true, "\x03\xe8"))
	f.Add(clientFrame(ws.OpText, true, string(make([]byte, 300))))
	f.Add(clientFrame(ws.OpText, true, "\xff\xfe"))
	f.Add(clientFrame(ws.OpBinary, true, "\xff\xfe"))
	f.Add(clientFrame(ws.OpText, true, "x", rsv1))
	f.Add(clientFrame(ws.OpText, true, "x", unmasked))
	f.Add(clientFrame(ws.OpPing, false, "p"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		own := &wsReader{br: bufio.NewReader(bytes.NewReader(data)), max: max, pong: func([]byte) {}}
		lib := newWSLibReader(bufio.NewReader(bytes.NewReader(data)), max, func([]byte) {})
		for i := 0; i < 16; i++ {
			op, msg, err := own.readMessage()
			lop, lmsg, lerr := lib.readMessage()
			if c, lc := class(err), class(lerr); c != lc && !(lc == errInvalidUTF8.Error() && err != nil) {
				// wsutil checks UTF-8 as each fragment streams in, so it may refuse a message
				// before this reader, which checks whole messages, meets a later fault or close.
				t.Fatalf("message %d: own reader %v, wsutil %v", i, err, lerr)
			}
			if err != nil {
				return
			}
			if op != lop || !bytes.Equal(msg, lmsg) {
				t.Fatalf("message %d: own reader %v %q, wsutil %v %q", i, op, msg, lop, lmsg)
			}
			if len(msg) > max {
				t.Fatalf("message of %d bytes over the %d limit", len(msg), max)
			}
			if op == ws.OpText && !utf8.Valid(msg) {
				t.Fatalf("text message %q is not UTF-8", msg)
			}
		}
	})
}

// class names what a reader error means for the connection; plain read errors (the input
// ended, at a frame's start or inside one) are one class whatever their text.
func class(err error) string {
	for _, e := range []error{errProtocol, errInvalidUTF8, errFrameTooLarge, errCloseFrame} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "read error"
	}
	return "ok"
}
