package stomp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// h builds a header list from key, value pairs.
func h(kv ...string) []Header {
	var hs []Header
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, Header{kv[i], kv[i+1]})
	}
	return hs
}

type parseTest struct {
	name    string
	raw     string
	lim     Limits
	frames  []Frame
	err     error // sentinel expected after the frames; nil: clean
	partial bool  // input ends inside a frame
	beats   int   // heart-beats when fed whole; -1: do not check
}

var parseTests = []parseTest{
	// Real clients.
	{
		name: "stompjs CONNECT",
		raw:  "CONNECT\naccept-version:1.2,1.1,1.0\nheart-beat:10000,10000\n\n\x00",
		frames: []Frame{{Command: "CONNECT", Headers: h(
			"accept-version", "1.2,1.1,1.0", "heart-beat", "10000,10000")}},
	},
	{
		name: "stompjs SUBSCRIBE",
		raw:  "SUBSCRIBE\nid:sub-0\ndestination:/topic/chat/lobby\nack:client-individual\n\n\x00",
		frames: []Frame{{Command: "SUBSCRIBE", Headers: h(
			"id", "sub-0", "destination", "/topic/chat/lobby", "ack", "client-individual")}},
	},
	{
		name: "stompjs SEND with content-length",
		raw:  "SEND\ndestination:/topic/chat/lobby\ncontent-type:application/json\ncontent-length:13\n\n{\"text\":\"hi\"}\x00",
		frames: []Frame{{Command: "SEND", Headers: h(
			"destination", "/topic/chat/lobby", "content-type", "application/json", "content-length", "13"),
			Body: []byte(`{"text":"hi"}`)}},
	},
	{
		name:  "stompjs heart-beat message",
		raw:   "\n",
		beats: 1,
	},
	{
		name: "stomp.py STOMP connect",
		raw:  "STOMP\naccept-version:1.2\nhost:localhost\nlogin:guest\npasscode:p\\ss:w\nheart-beat:0,0\n\n\x00",
		frames: []Frame{{Command: "STOMP", Headers: h(
			"accept-version", "1.2", "host", "localhost", "login", "guest", "passcode", `p\ss:w`, "heart-beat", "0,0")}},
	},
	{
		name: "stomp.py SEND",
		raw:  "SEND\ncontent-length:5\ndestination:/queue/test\n\nhello\x00",
		frames: []Frame{{Command: "SEND", Headers: h(
			"content-length", "5", "destination", "/queue/test"), Body: []byte("hello")}},
	},
	{
		name: "seed script SEND without host or content-length, NUL+LF",
		raw:  "SEND\ndestination:/pub/share/7\n\n{\"x\":10,\"y\":20}\x00\n",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/pub/share/7"),
			Body: []byte(`{"x":10,"y":20}`)}},
	},
	{
		name: "seed script CONNECT then SUBSCRIBE in one message",
		raw: "CONNECT\naccept-version:1.1,1.0\nheart-beat:10000,10000\n\n\x00\n" +
			"SUBSCRIBE\nid:sub-0\ndestination:/sub/chat/1\n\n\x00\n",
		frames: []Frame{
			{Command: "CONNECT", Headers: h("accept-version", "1.1,1.0", "heart-beat", "10000,10000")},
			{Command: "SUBSCRIBE", Headers: h("id", "sub-0", "destination", "/sub/chat/1")},
		},
	},
	{
		name: "server MESSAGE",
		raw: "MESSAGE\ndestination:/topic/location/7\nsubscription:sub-0\nmessage-id:location/7-14\n" +
			"content-type:application/json\noffset:14\nepoch:mq3k9x\ncontent-length:7\n\n{\"x\":1}\x00",
		frames: []Frame{{Command: "MESSAGE", Headers: h(
			"destination", "/topic/location/7", "subscription", "sub-0", "message-id", "location/7-14",
			"content-type", "application/json", "offset", "14", "epoch", "mq3k9x", "content-length", "7"),
			Body: []byte(`{"x":1}`)}},
	},
	{
		name:   "CONNECTED literal",
		raw:    "CONNECTED\nversion:1.2\nserver:rtlab/dev\nsession:a\\b\n\n\x00",
		frames: []Frame{{Command: "CONNECTED", Headers: h("version", "1.2", "server", "rtlab/dev", "session", `a\b`)}},
	},

	// Framing.
	{
		name:   "minimal",
		raw:    "SEND\n\n\x00",
		frames: []Frame{{Command: "SEND"}},
	},
	{
		name: "all commands",
		raw: "CONNECT\n\n\x00STOMP\n\n\x00SEND\n\n\x00SUBSCRIBE\n\n\x00UNSUBSCRIBE\n\n\x00BEGIN\n\n\x00" +
			"COMMIT\n\n\x00ABORT\n\n\x00ACK\n\n\x00NACK\n\n\x00DISCONNECT\n\n\x00" +
			"CONNECTED\n\n\x00MESSAGE\n\n\x00RECEIPT\n\n\x00ERROR\n\n\x00",
		frames: []Frame{{Command: "CONNECT"}, {Command: "STOMP"}, {Command: "SEND"}, {Command: "SUBSCRIBE"},
			{Command: "UNSUBSCRIBE"}, {Command: "BEGIN"}, {Command: "COMMIT"}, {Command: "ABORT"},
			{Command: "ACK"}, {Command: "NACK"}, {Command: "DISCONNECT"}, {Command: "CONNECTED"},
			{Command: "MESSAGE"}, {Command: "RECEIPT"}, {Command: "ERROR"}},
	},
	{
		name:   "CRLF everywhere",
		raw:    "\r\nSEND\r\ndestination:/a\r\nreceipt:1\r\n\r\nhi\x00\r\n\r\n",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/a", "receipt", "1"), Body: []byte("hi")}},
		beats:  1,
	},
	{
		name:   "mixed LF and CRLF",
		raw:    "SEND\r\ndestination:/a\n\r\nhi\x00",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/a"), Body: []byte("hi")}},
	},
	{
		name:  "heart-beats only",
		raw:   "\n\n\r\n\n",
		beats: 4,
	},
	{
		name:   "heart-beats before a frame, trailer after",
		raw:    "\n\r\n\nSEND\n\n\x00\n\r\n\n",
		frames: []Frame{{Command: "SEND"}},
		beats:  3,
	},
	{
		name:   "several frames in one message",
		raw:    "SEND\ndestination:/a\n\none\x00SEND\ndestination:/b\ncontent-length:3\n\ntwo\x00\n\nACK\nid:7\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/a"), Body: []byte("one")}, {Command: "SEND", Headers: h("destination", "/b", "content-length", "3"), Body: []byte("two")}, {Command: "ACK", Headers: h("id", "7")}},
	},
	{
		name:   "body with EOLs",
		raw:    "SEND\n\nline1\nline2\r\n\n\x00",
		frames: []Frame{{Command: "SEND", Body: []byte("line1\nline2\r\n\n")}},
	},
	{
		name:   "content-length body holds NUL",
		raw:    "SEND\ncontent-length:3\n\na\x00b\x00",
		frames: []Frame{{Command: "SEND", Headers: h("content-length", "3"), Body: []byte("a\x00b")}},
	},
	{
		name:   "content-length zero",
		raw:    "SEND\ncontent-length:0\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("content-length", "0")}},
	},
	{
		name:   "content-length leading zeros",
		raw:    "SEND\ncontent-length:002\n\nab\x00",
		frames: []Frame{{Command: "SEND", Headers: h("content-length", "002"), Body: []byte("ab")}},
	},
	{
		name:   "first content-length wins",
		raw:    "SEND\ncontent-length:1\ncontent-length:junk\n\na\x00",
		frames: []Frame{{Command: "SEND", Headers: h("content-length", "1", "content-length", "junk"), Body: []byte("a")}},
	},
	{
		name:   "missing blank line before NUL",
		raw:    "DISCONNECT\nreceipt:77\n\x00\nDISCONNECT\n\x00",
		frames: []Frame{{Command: "DISCONNECT", Headers: h("receipt", "77")}, {Command: "DISCONNECT"}},
	},

	// Headers.
	{
		name:   "repeated header kept in order",
		raw:    "MESSAGE\nfoo:1\nfoo:2\n\n\x00",
		frames: []Frame{{Command: "MESSAGE", Headers: h("foo", "1", "foo", "2")}},
	},
	{
		name:   "escapes decoded",
		raw:    "SEND\ndestination:/a\\c\\n\\r\\\\b\nx\\cy:z\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/a:\n\r\\b", "x:y", "z")}},
	},
	{
		name:   "CONNECT values literal",
		raw:    "CONNECT\npasscode:a\\b\\t\\\nAuthorization:Bearer x:y\n\n\x00",
		frames: []Frame{{Command: "CONNECT", Headers: h("passcode", `a\b\t\`, "Authorization", "Bearer x:y")}},
	},
	{
		name:   "unescaped colon in value",
		raw:    "SEND\ndestination:/a:b\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("destination", "/a:b")}},
	},
	{
		name:   "empty value and spaces kept",
		raw:    "SEND\nreceipt:\n k : v \n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("receipt", "", " k ", " v ")}},
	},

	// Limits, at and over.
	{
		name:   "frame exactly MaxFrame",
		lim:    Limits{MaxFrame: 16},
		raw:    "SEND\n\n123456789\x00",
		frames: []Frame{{Command: "SEND", Body: []byte("123456789")}},
	},
	{
		name: "frame over MaxFrame",
		lim:  Limits{MaxFrame: 16},
		raw:  "SEND\n\n1234567890\x00",
		err:  ErrFrameTooLarge,
	},
	{
		name:   "frame with content-length exactly MaxFrame",
		lim:    Limits{MaxFrame: 33},
		raw:    "SEND\ncontent-length:9\n\n123456789\x00",
		frames: []Frame{{Command: "SEND", Headers: h("content-length", "9"), Body: []byte("123456789")}},
	},
	{
		name: "content-length over MaxFrame fails before the body arrives",
		lim:  Limits{MaxFrame: 33},
		raw:  "SEND\ncontent-length:10\n\n",
		err:  ErrFrameTooLarge,
	},
	{
		name: "content-length far over MaxFrame",
		raw:  "SEND\ncontent-length:99999999999999999999999999\n",
		err:  ErrFrameTooLarge,
	},
	{
		name: "unterminated body over MaxFrame",
		lim:  Limits{MaxFrame: 32},
		raw:  "SEND\n\n" + strings.Repeat("x", 26),
		err:  ErrFrameTooLarge,
	},
	{
		name:    "unterminated body at MaxFrame is still partial",
		lim:     Limits{MaxFrame: 32},
		raw:     "SEND\n\n" + strings.Repeat("x", 25),
		partial: true,
	},
	{
		name: "headers over MaxFrame",
		lim:  Limits{MaxFrame: 32},
		raw:  "SEND\na:1\nb:2\nc:3\nd:4\ne:5\nf:6\ng:7\n",
		err:  ErrFrameTooLarge,
	},
	{
		name:   "MaxHeaders headers",
		lim:    Limits{MaxHeaders: 2},
		raw:    "SEND\na:1\nb:2\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("a", "1", "b", "2")}},
	},
	{
		name: "too many headers",
		lim:  Limits{MaxHeaders: 2},
		raw:  "SEND\na:1\nb:2\nc:3\n\n\x00",
		err:  ErrTooManyHeaders,
	},
	{
		name:   "header line exactly MaxHeaderLine, CR not counted",
		lim:    Limits{MaxHeaderLine: 8},
		raw:    "SEND\na:123456\r\nb:123456\n\n\x00",
		frames: []Frame{{Command: "SEND", Headers: h("a", "123456", "b", "123456")}},
	},
	{
		name: "header line too long",
		lim:  Limits{MaxHeaderLine: 8},
		raw:  "SEND\na:1234567\n\n\x00",
		err:  ErrHeaderLineTooLong,
	},
	{
		name: "header line too long without LF yet",
		lim:  Limits{MaxHeaderLine: 8},
		raw:  "SEND\na:123456789",
		err:  ErrHeaderLineTooLong,
	},
	{
		name: "command line too long",
		lim:  Limits{MaxHeaderLine: 8},
		raw:  "SUBSCRIBEXX",
		err:  ErrHeaderLineTooLong,
	},

	// Errors.
	{
		name: "unknown command",
		raw:  "FOO\n\n\x00",
		err:  ErrUnknownCommand,
	},
	{
		name: "lower-case command",
		raw:  "send\n\n\x00",
		err:  ErrUnknownCommand,
	},
	{
		name: "command with trailing space",
		raw:  "SEND \n\n\x00",
		err:  ErrUnknownCommand,
	},
	{
		name:   "stray NUL between frames",
		raw:    "SEND\n\n\x00\x00",
		frames: []Frame{{Command: "SEND"}},
		err:    ErrUnknownCommand,
	},
	{
		name: "bare CR before a command",
		raw:  "\rSEND\n\n\x00",
		err:  ErrUnknownCommand,
	},
	{
		name: "NUL in command line",
		raw:  "SE\x00ND\n",
		err:  ErrUnknownCommand,
	},
	{
		name: "header without colon",
		raw:  "SEND\ndestination\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "empty header name",
		raw:  "SEND\n:v\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "CR inside header line",
		raw:  "SEND\na:b\rc\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "NUL inside header line",
		raw:  "SEND\na:b\x00SEND\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "header value not UTF-8",
		raw:  "SEND\nreceipt:\xff\xfe\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "header name not UTF-8",
		raw:  "SEND\n\xc3:v\n\n\x00",
		err:  ErrBadHeader,
	},
	{
		name: "unknown escape",
		raw:  "SEND\na:\\t\n\n\x00",
		err:  ErrBadEscape,
	},
	{
		name: "trailing backslash",
		raw:  "SEND\na:b\\\n\n\x00",
		err:  ErrBadEscape,
	},
	{
		name: "bad escape in name",
		raw:  "MESSAGE\na\\x:b\n\n\x00",
		err:  ErrBadEscape,
	},
	{
		name: "escaped colon is not a separator",
		raw:  "SEND\na\\:b\n\n\x00",
		err:  ErrBadEscape,
	},
	{name: "content-length not a number", raw: "SEND\ncontent-length:abc\n\n\x00", err: ErrBadContentLength},
	{name: "content-length negative", raw: "SEND\ncontent-length:-1\n\n\x00", err: ErrBadContentLength},
	{name: "content-length plus sign", raw: "SEND\ncontent-length:+1\n\na\x00", err: ErrBadContentLength},
	{name: "content-length empty", raw: "SEND\ncontent-length:\n\n\x00", err: ErrBadContentLength},
	{name: "content-length with space", raw: "SEND\ncontent-length: 1\n\na\x00", err: ErrBadContentLength},
	{name: "content-length but frame ends early", raw: "SEND\ncontent-length:2\n\x00", err: ErrBadContentLength},
	{
		name: "content-length shorter than body",
		raw:  "SEND\ncontent-length:1\n\nab\x00",
		err:  ErrMissingNUL,
	},
	{
		name:   "frames before an error are delivered",
		raw:    "SEND\n\na\x00BOGUS\n\n\x00SEND\n\nb\x00",
		frames: []Frame{{Command: "SEND", Body: []byte("a")}},
		err:    ErrUnknownCommand,
	},

	// Incomplete input.
	{name: "partial command", raw: "SEN", partial: true},
	{name: "partial CR heart-beat", raw: "\r", partial: true},
	{name: "partial headers", raw: "SEND\ndestination:/a\n", partial: true},
	{name: "partial body", raw: "SEND\ndestination:/a\n\n{\"x\":", partial: true},
	{name: "partial content-length body", raw: "SEND\ncontent-length:4\n\nab\x00", partial: true},
	{
		name:    "frame then partial",
		raw:     "SEND\n\n\x00SEND\n",
		frames:  []Frame{{Command: "SEND"}},
		partial: true,
	},
}

// feedAll feeds the chunks one by one, draining Next after each as a transport does.
func feedAll(p *Parser, chunks ...[]byte) ([]Frame, error) {
	var frames []Frame
	for _, c := range chunks {
		p.Feed(c)
		for {
			f, ok, err := p.Next()
			if err != nil {
				return frames, err
			}
			if !ok {
				break
			}
			frames = append(frames, f)
		}
	}
	return frames, nil
}

func framesEqual(a, b []Frame) bool {
	return slices.EqualFunc(a, b, frameEqual)
}

func frameEqual(a, b Frame) bool {
	return a.Command == b.Command && slices.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body)
}

// check verifies one way of feeding tt.raw.
func (tt *parseTest) check(t *testing.T, how string, chunks ...[]byte) *Parser {
	t.Helper()
	p := NewParser(tt.lim)
	frames, err := feedAll(p, chunks...)
	if !framesEqual(frames, tt.frames) {
		t.Fatalf("%s: frames\n got %q\nwant %q", how, frames, tt.frames)
	}
	switch {
	case tt.err == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", how, err)
	case tt.err != nil && !errors.Is(err, tt.err):
		t.Fatalf("%s: error %v, want %v", how, err, tt.err)
	}
	if tt.err == nil {
		if got := p.Buffered() > 0; got != tt.partial {
			t.Fatalf("%s: %d bytes left buffered, partial=%v", how, p.Buffered(), tt.partial)
		}
	}
	return p
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			p := tt.check(t, "whole", raw)
			if tt.beats >= 0 && p.HeartBeats() != uint64(tt.beats) {
				t.Errorf("whole: %d heart-beats, want %d", p.HeartBeats(), tt.beats)
			}
			var bytewise [][]byte
			for i := range raw {
				bytewise = append(bytewise, raw[i:i+1])
			}
			tt.check(t, "byte by byte", bytewise...)
			for k := 0; k <= len(raw); k++ {
				tt.check(t, fmt.Sprintf("split at %d", k), raw[:k], raw[k:])
			}
		})
	}
}

// TestParseErrorMessage checks what the transport will put in an ERROR frame.
func TestParseErrorMessage(t *testing.T) {
	for _, tt := range parseTests {
		if tt.err == nil {
			continue
		}
		p := NewParser(tt.lim)
		_, err := feedAll(p, []byte(tt.raw))
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %T is not a *ParseError", tt.name, err)
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\r\n\x00") || len(msg) > 160 {
			t.Errorf("%s: message not short and single-line: %q", tt.name, msg)
		}
		if !strings.HasPrefix(msg, tt.err.Error()) || !strings.Contains(msg, " in "+pe.State) {
			t.Errorf("%s: message %q should start with %q and name state %q", tt.name, msg, tt.err, pe.State)
		}
		if pe.Offset < 0 || pe.Offset > int64(len(tt.raw)) {
			t.Errorf("%s: offset %d out of input", tt.name, pe.Offset)
		}
	}

	p := NewParser(Limits{})
	_, err := feedAll(p, []byte("SEND\n\nok\x00SEND\na:\\t"+strings.Repeat("x", 100)+"\n\n\x00"))
	want := `stomp: bad header escape (\t) in header line: "a:\\txxxxxxxxxxxxxxxxxxxxxxxxxxxx"...`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if pe := err.(*ParseError); pe.Offset != 14 {
		t.Errorf("offset %d, want 14", pe.Offset)
	}
}

func TestParserUnusableAfterError(t *testing.T) {
	p := NewParser(Limits{})
	p.Feed([]byte("FOO\n\n\x00"))
	_, _, err1 := p.Next()
	p.Feed([]byte("SEND\n\n\x00"))
	f, ok, err2 := p.Next()
	if err1 == nil || err2 != err1 || ok || f.Command != "" {
		t.Fatalf("after error: %v, %v, %v, %v", f, ok, err1, err2)
	}
	if p.Buffered() != 0 {
		t.Errorf("parser kept %d bytes after an error", p.Buffered())
	}
}

// TestLimitsEnforcedAsBytesArrive feeds endless input one chunk at a time and checks that the
// parser gives up as soon as the unfinished frame is over the limit, not later.
func TestLimitsEnforcedAsBytesArrive(t *testing.T) {
	const maxFrame = 1024
	for _, start := range []string{"SEND\n\n", "SEND\n", "SEND\ndestination:", "SEND", ""} {
		p := NewParser(Limits{MaxFrame: maxFrame, MaxHeaderLine: 4096})
		fed := 0
		in := []byte(start)
		if start == "" {
			in = []byte("S") // a command that never ends
		}
		var err error
		for fed <= 10*maxFrame && err == nil {
			p.Feed(in)
			fed += len(in)
			_, _, err = p.Next()
			in = []byte("xxxxxxx")
			if p.Buffered() > maxFrame+len(in) {
				t.Fatalf("%q: buffered %d bytes", start, p.Buffered())
			}
		}
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("%q: after %d bytes: %v", start, fed, err)
		}
		if fed < maxFrame || fed > maxFrame+len(in) {
			t.Errorf("%q: failed after %d bytes, want about %d", start, fed, maxFrame)
		}
	}

	// A line limit trips before the frame limit.
	p := NewParser(Limits{MaxHeaderLine: 100})
	p.Feed([]byte("SEND\nk:" + strings.Repeat("v", 99)))
	if _, _, err := p.Next(); !errors.Is(err, ErrHeaderLineTooLong) {
		t.Fatalf("got %v", err)
	}
}

// TestFeedDoesNotRetain checks that Feed copies.
func TestFeedDoesNotRetain(t *testing.T) {
	p := NewParser(Limits{})
	in := []byte("SEND\ndestination:/a\n\nbody")
	p.Feed(in)
	if _, ok, _ := p.Next(); ok {
		t.Fatal("frame before NUL")
	}
	for i := range in {
		in[i] = 'X'
	}
	p.Feed([]byte("\x00"))
	f, ok, err := p.Next()
	if !ok || err != nil || !frameEqual(f, Frame{Command: "SEND", Headers: h("destination", "/a"), Body: []byte("body")}) {
		t.Fatalf("got %q %v %v", f, ok, err)
	}
}

// TestFrameOwnsMemory checks that a returned frame survives later parsing.
func TestFrameOwnsMemory(t *testing.T) {
	p := NewParser(Limits{})
	p.Feed([]byte("SEND\ndestination:/a\n\none\x00"))
	f1, _, _ := p.Next()
	p.Feed([]byte("SEND\ndestination:/b\n\ntwo\x00"))
	f2, _, _ := p.Next()
	if v, _ := f1.Get("destination"); v != "/a" || string(f1.Body) != "one" {
		t.Errorf("first frame changed: %q", f1)
	}
	if v, _ := f2.Get("destination"); v != "/b" || string(f2.Body) != "two" {
		t.Errorf("second frame wrong: %q", f2)
	}
}

// TestHeartBeatsAcrossMessages follows a stompjs session: frames end with a bare NUL and
// heart-beats come as separate "\n" messages; and a seed script whose frames end with "\x00\n".
func TestHeartBeatsAcrossMessages(t *testing.T) {
	p := NewParser(Limits{})
	msgs := []string{"CONNECT\n\n\x00", "\n", "SEND\n\nx\x00", "\n", "\n", "\r\n\n"}
	for _, m := range msgs {
		if _, err := feedAll(p, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if p.HeartBeats() != 5 {
		t.Errorf("stompjs: %d heart-beats, want 5", p.HeartBeats())
	}

	p = NewParser(Limits{})
	msgs = []string{"CONNECT\n\n\x00\n", "SEND\n\nx\x00\n", "SEND\n\nx\x00\n", "\n"}
	for _, m := range msgs {
		if _, err := feedAll(p, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if p.HeartBeats() != 1 {
		t.Errorf("seed: %d heart-beats, want 1", p.HeartBeats())
	}
}

// TestSplitLargeFrame mimics stompjs splitLargeFrames: one big SEND in 8 KiB messages, with a
// buffer the caller reuses between messages.
func TestSplitLargeFrame(t *testing.T) {
	body := bytes.Repeat([]byte(`{"x":1},`), 5000)
	raw := AppendFrame(nil, &Frame{Command: "SEND", Headers: h("destination", "/topic/a"), Body: body})
	p := NewParser(Limits{MaxFrame: 1 << 20})
	chunk := make([]byte, 8<<10)
	var frames []Frame
	for len(raw) > 0 {
		n := copy(chunk, raw)
		raw = raw[n:]
		fs, err := feedAll(p, chunk[:n])
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, fs...)
		clear(chunk)
	}
	if len(frames) != 1 || !bytes.Equal(frames[0].Body, body) {
		t.Fatalf("got %d frames", len(frames))
	}
	if n, _ := frames[0].Get(HdrContentLength); n != strconv.Itoa(len(body)) {
		t.Errorf("content-length %q", n)
	}
}

// TestBufferCompaction runs many frames through one parser, split awkwardly, and checks the
// buffer stays small.
func TestBufferCompaction(t *testing.T) {
	frame := []byte("SEND\ndestination:/topic/a\n\n{\"x\":1}\x00\n")
	stream := bytes.Repeat(frame, 1000)
	p := NewParser(Limits{})
	n := 0
	for i := 0; i < len(stream); i += 77 {
		fs, err := feedAll(p, stream[i:min(i+77, len(stream))])
		if err != nil {
			t.Fatal(err)
		}
		n += len(fs)
		if cap(p.buf) > 4*len(frame)+77 {
			t.Fatalf("buffer grew to %d", cap(p.buf))
		}
	}
	if n != 1000 {
		t.Fatalf("%d frames", n)
	}
}

func TestFrameGetSetDel(t *testing.T) {
	f := Frame{Command: "SEND", Headers: h("a", "1", "b", "2", "a", "3")}
	if v, ok := f.Get("a"); !ok || v != "1" {
		t.Errorf("Get a = %q, %v", v, ok)
	}
	if _, ok := f.Get("c"); ok {
		t.Error("Get c found")
	}
	f.Set("a", "x")
	f.Set("c", "y")
	if want := h("a", "x", "b", "2", "a", "3", "c", "y"); !slices.Equal(f.Headers, want) {
		t.Errorf("after Set: %q", f.Headers)
	}
	f.Del("a")
	if want := h("b", "2", "c", "y"); !slices.Equal(f.Headers, want) {
		t.Errorf("after Del: %q", f.Headers)
	}
}

func TestCommandKinds(t *testing.T) {
	for _, c := range []string{"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK", "DISCONNECT"} {
		if !ClientCommand(c) || ServerCommand(c) {
			t.Errorf("%s", c)
		}
	}
	for _, c := range []string{"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"} {
		if ClientCommand(c) || !ServerCommand(c) {
			t.Errorf("%s", c)
		}
	}
}

func TestAppendFrame(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
		want string
	}{
		{"no body, no content-length", Frame{Command: "SUBSCRIBE", Headers: h("id", "0", "destination", "/topic/a")},
			"SUBSCRIBE\nid:0\ndestination:/topic/a\n\n\x00"},
		{"content-length added", Frame{Command: "SEND", Headers: h("destination", "/a"), Body: []byte("hi")},
			"SEND\ndestination:/a\ncontent-length:2\n\nhi\x00"},
		{"stale content-length corrected in place", Frame{Command: "SEND", Headers: h("content-length", "9", "x", "y", "content-length", "z"), Body: []byte("hi")},
			"SEND\ncontent-length:2\nx:y\ncontent-length:z\n\nhi\x00"},
		{"content-length kept for empty body", Frame{Command: "SEND", Headers: h("content-length", "")},
			"SEND\ncontent-length:0\n\n\x00"},
		{"escapes", Frame{Command: "MESSAGE", Headers: h("a:b", "x\ny\\z\r:")},
			"MESSAGE\na\\cb:x\\ny\\\\z\\r\\c\n\n\x00"},
		{"CONNECT literal", Frame{Command: "CONNECT", Headers: h("passcode", `a\b:c`, "a:b", "x\ny")},
			"CONNECT\npasscode:a\\b:c\na\\cb:x\\ny\n\n\x00"},
		{"binary body", Frame{Command: "MESSAGE", Body: []byte{0, 1, 0}},
			"MESSAGE\ncontent-length:3\n\n\x00\x01\x00\x00"},
	}
	for _, tt := range tests {
		got := AppendFrame([]byte("prefix"), &tt.f)
		if string(got) != "prefix"+tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, "prefix"+tt.want)
		}
	}
}

// TestRoundTrip encodes every frame of the parse table and parses it back.
func TestRoundTrip(t *testing.T) {
	for _, tt := range parseTests {
		for _, f := range tt.frames {
			enc := AppendFrame(nil, &f)
			p := NewParser(Limits{})
			got, err := feedAll(p, enc)
			if err != nil || len(got) != 1 || !frameEqual(got[0], canonical(f)) || p.Buffered() != 0 {
				t.Errorf("%s: %q -> %q -> %q, %v", tt.name, f, enc, got, err)
			}
		}
	}
}

// canonical is f as AppendFrame writes it: content-length set to the body's length.
func canonical(f Frame) Frame {
	f.Headers = slices.Clone(f.Headers)
	if _, ok := f.Get(HdrContentLength); ok || len(f.Body) > 0 {
		f.Set(HdrContentLength, strconv.Itoa(len(f.Body)))
	}
	return f
}

func TestAppendHeader(t *testing.T) {
	got := AppendHeader(nil, "destination", "/topic/a")
	got = AppendHeader(got, "k:\\", "v\r\n:")
	got = AppendHeaderInt(got, "offset", -42)
	want := "destination:/topic/a\nk\\c\\\\:v\\r\\n\\c\noffset:-42\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// ExampleAppendHeader builds a MESSAGE frame by hand, as a server's hot path would.
func ExampleAppendHeader() {
	body := []byte(`{"x":10,"y":20}`)
	buf := append([]byte(nil), "MESSAGE\n"...)
	buf = AppendHeader(buf, "destination", "/topic/location/7")
	buf = AppendHeader(buf, "subscription", "sub-0")
	buf = AppendHeaderInt(buf, "offset", 14)
	buf = AppendHeaderInt(buf, HdrContentLength, int64(len(body)))
	buf = append(buf, '\n')
	buf = append(buf, body...)
	buf = append(buf, 0)
	fmt.Printf("%q\n", buf)
	// Output: "MESSAGE\ndestination:/topic/location/7\nsubscription:sub-0\noffset:14\ncontent-length:15\n\n{\"x\":10,\"y\":20}\x00"
}
