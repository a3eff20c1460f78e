package stomp

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// fuzzLimits are small so the fuzzer reaches every limit quickly.
var fuzzLimits = Limits{MaxFrame: 512, MaxHeaders: 6, MaxHeaderLine: 64}

// fuzzSeeds are frames as real clients and servers write them.
var fuzzSeeds = []string{
	// stompjs
	"CONNECT\naccept-version:1.2,1.1,1.0\nheart-beat:10000,10000\n\n\x00",
	"SUBSCRIBE\nid:sub-0\ndestination:/topic/chat/lobby\n\n\x00",
	"SEND\ndestination:/topic/chat/lobby\ncontent-length:13\n\n{\"text\":\"hi\"}\x00",
	"ACK\nid:location/7-14\n\n\x00",
	"\n",
	// stomp.py
	"STOMP\naccept-version:1.2\nhost:localhost\nlogin:guest\npasscode:guest\nheart-beat:0,0\n\n\x00",
	"SEND\ncontent-length:5\ndestination:/queue/test\n\nhello\x00",
	"DISCONNECT\nreceipt:77\n\n\x00",
	// seed scripts
	"CONNECT\naccept-version:1.1,1.0\nheart-beat:10000,10000\n\n\x00\n",
	"SEND\ndestination:/pub/share/7\n\n{\"x\":10,\"y\":20}\x00\n",
	"SUBSCRIBE\nid:sub-0\ndestination:/sub/chat/1\n\n\x00\nSEND\ndestination:/pub/chat/message/1\n\n{\"type\":\"TALK\"}\x00\n",
	// server side
	"CONNECTED\nversion:1.2\nsession:s-1\nserver:rtlab/dev\nheart-beat:10000,10000\n\n\x00",
	"MESSAGE\ndestination:/topic/a\nsubscription:0\nmessage-id:a-1\ncontent-type:application/json\noffset:1\nepoch:e\ncontent-length:2\n\n{}\x00",
	"RECEIPT\nreceipt-id:77\noffset:3\nepoch:e\n\n\x00",
	"ERROR\nmessage:stomp\\c bad header\ncontent-length:3\n\nbad\x00",
	// odd but valid
	"\r\nSEND\r\ndestination:/a\\c\\n\\r\\\\b\r\n\r\nhi\x00\r\n",
	"SEND\ncontent-length:3\n\na\x00b\x00",
	"DISCONNECT\n\x00",
	"MESSAGE\nfoo:1\nfoo:2\n\n\x00",
	// invalid
	"FOO\n\n\x00",
	"SEND\na:\\t\n\n\x00",
	"SEND\ncontent-length:-1\n\n\x00",
	"SEND\ncontent-length:1\n\nab\x00",
	"SEND\n" + strings.Repeat("a:b\n", 10) + "\n\x00",
	"SEND\n\n" + strings.Repeat("x", 600) + "\x00",
}

// FuzzParse checks that parsing never panics, that accepted frames respect the limits, and that
// every accepted frame survives AppendFrame and a second parse unchanged (up to the canonical
// content-length AppendFrame writes).
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := NewParser(fuzzLimits)
		p.Feed(data)
		for {
			fr, ok, err := p.Next()
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %T %v is not a *ParseError", err, err)
				}
				if msg := err.Error(); strings.ContainsAny(msg, "\r\n\x00") || len(msg) > 200 {
					t.Fatalf("bad message %q", msg)
				}
				if _, _, again := p.Next(); again != err {
					t.Fatal("parser usable after error")
				}
				return
			}
			if !ok {
				return
			}
			if p.last > fuzzLimits.MaxFrame {
				t.Fatalf("accepted a %d-byte frame", p.last)
			}
			if len(fr.Headers) > fuzzLimits.MaxHeaders {
				t.Fatalf("accepted %d headers", len(fr.Headers))
			}
			for _, h := range fr.Headers {
				// Decoding only shrinks, so the decoded line bounds the raw one from below.
				if len(h.Key)+1+len(h.Value) > fuzzLimits.MaxHeaderLine || h.Key == "" {
					t.Fatalf("accepted header %q", h)
				}
			}
			if !ClientCommand(fr.Command) && !ServerCommand(fr.Command) {
				t.Fatalf("accepted command %q", fr.Command)
			}

			enc := AppendFrame(nil, &fr)
			checkGrammar(t, fr, enc)
			q := NewParser(Limits{MaxFrame: 1 << 20, MaxHeaders: 1000, MaxHeaderLine: 1 << 20})
			q.Feed(enc)
			back, ok, err := q.Next()
			if err != nil || !ok {
				t.Fatalf("re-parse of %q: %v %v", enc, ok, err)
			}
			if want := canonical(fr); !frameEqual(back, want) {
				t.Fatalf("round trip\n got %q\nwant %q\n via %q", back, want, enc)
			}
			if _, ok, err := q.Next(); ok || err != nil || q.Buffered() != 0 {
				t.Fatalf("re-parse of %q left %d bytes", enc, q.Buffered())
			}
		}
	})
}

// FuzzSplit checks that the frames and the error do not depend on how the input is split over
// Feed calls.
func FuzzSplit(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(i*7))
	}
	f.Fuzz(func(t *testing.T, data []byte, at uint16) {
		k := 0
		if len(data) > 0 {
			k = int(at) % (len(data) + 1)
		}
		whole, werr := feedAll(NewParser(fuzzLimits), data)
		split, serr := feedAll(NewParser(fuzzLimits), data[:k], data[k:])
		check := func(how string, frames []Frame, err error) {
			if !framesEqual(frames, whole) {
				t.Fatalf("%s: frames differ\n got %q\nwant %q", how, frames, whole)
			}
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
				t.Fatalf("%s: error %v, whole gave %v", how, err, werr)
			}
		}
		check("split at "+strconv.Itoa(k), split, serr)
		if len(data) <= 1024 {
			chunks := make([][]byte, len(data))
			for i := range data {
				chunks[i] = data[i : i+1]
			}
			bytewise, berr := feedAll(NewParser(fuzzLimits), chunks...)
			check("byte by byte", bytewise, berr)
		}
	})
}

// checkGrammar checks an encoded frame against STOMP 1.2's header grammar: one header line per
// header, no raw CR, and, except in CONNECT, STOMP and CONNECTED frames (whose values are
// literal), exactly one raw colon a line: every colon, CR, LF and backslash of a name or value
// escaped.
func checkGrammar(t *testing.T, fr Frame, enc []byte) {
	t.Helper()
	head, _, ok := strings.Cut(string(enc), "\n\n")
	if !ok {
		t.Fatalf("no blank line after the headers in %q", enc)
	}
	lines := strings.Split(head, "\n")[1:]
	if head == fr.Command {
		lines = nil
	}
	want := len(fr.Headers)
	if _, has := fr.Get(HdrContentLength); !has && len(fr.Body) > 0 {
		want++
	}
	if len(lines) != want {
		t.Fatalf("%d header lines for %d headers in %q", len(lines), want, enc)
	}
	for _, line := range lines {
		colons := strings.Count(line, ":")
		if strings.ContainsRune(line, '\r') || colons == 0 || colons > 1 && !literalHeaders(fr.Command) {
			t.Fatalf("header line %q of %s breaks the 1.2 grammar", line, fr.Command)
		}
	}
}
