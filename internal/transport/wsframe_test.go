package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gobwas/ws"
)

// clientFrame encodes one client frame; rsv and masked let tests break the rules.
func clientFrame(op ws.OpCode, fin bool, p string, opts ...func(*ws.Header)) []byte {
	h := ws.Header{Fin: fin, OpCode: op, Length: int64(len(p)), Masked: true, Mask: [4]byte{7, 1, 9, 3}}
	for _, o := range opts {
		o(&h)
	}
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, h)
	pb := []byte(p)
	if h.Masked {
		ws.Cipher(pb, h.Mask, 0)
	}
	b.Write(pb)
	return b.Bytes()
}

func unmasked(h *ws.Header) { h.Masked = false }
func rsv1(h *ws.Header)     { h.Rsv = 4 }

// readers are the two implementations, each built on a fresh stream.
var readers = map[string]func(br *bufio.Reader, max int, pong func([]byte)) messageReader{
	"own": func(br *bufio.Reader, max int, pong func([]byte)) messageReader {
		return &wsReader{br: br, max: max, pong: pong}
	},
	"wsutil": func(br *bufio.Reader, max int, pong func([]byte)) messageReader { return newWSLibReader(br, max, pong) },
}

func join(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// TestReadMessageRFC6455: both readers accept what RFC 6455 allows and refuse what it
// forbids, each with the error that picks the close code (1002, 1007, 1009).
func TestReadMessageRFC6455(t *testing.T) {
	big := string(make([]byte, 200))
	cases := []struct {
		name  string
		in    []byte
		want  string // the message, when one is expected
		err   error  // else the error
		pongs int
	}{
		{"text", clientFrame(ws.OpText, true, `{"op":"ping"}`), `{"op":"ping"}`, nil, 0},
		{"binary not UTF-8", clientFrame(ws.OpBinary, true, "\xff\xfe"), "\xff\xfe", nil, 0},
		{"fragments with a ping between", join(clientFrame(ws.OpText, false, "hel"), clientFrame(ws.OpPing, true, "p"), clientFrame(ws.OpContinuation, true, "lo")), "hello", nil, 1},
		{"UTF-8 split over fragments", join(clientFrame(ws.OpText, false, "\xc3"), clientFrame(ws.OpContinuation, true, "\xa9")), "é", nil, 0},
		{"empty text", clientFrame(ws.OpText, true, ""), "", nil, 0},
		{"close", clientFrame(ws.OpClose, true, "\x03\xe8bye"), "", errCloseFrame, 0},
		{"empty close", clientFrame(ws.OpClose, true, ""), "", errCloseFrame, 0},
		{"unmasked", clientFrame(ws.OpText, true, "x", unmasked), "", errProtocol, 0},
		{"RSV bit", clientFrame(ws.OpText, true, "x", rsv1), "", errProtocol, 0},
		{"reserved opcode", clientFrame(ws.OpCode(3), true, "x"), "", errProtocol, 0},
		{"control over 125 bytes", clientFrame(ws.OpPing, true, string(make([]byte, 126))), "", errProtocol, 0},
		{"fragmented control", clientFrame(ws.OpPing, false, "p"), "", errProtocol, 0},
		{"continuation first", clientFrame(ws.OpContinuation, true, "x"), "", errProtocol, 0},
		{"text inside a fragmented message", join(clientFrame(ws.OpText, false, "a"), clientFrame(ws.OpText, true, "b")), "", errProtocol, 0},
		{"close of one byte", clientFrame(ws.OpClose, true, "\x03"), "", errProtocol, 0},
		{"close with a reserved code", clientFrame(ws.OpClose, true, "\x03\xed"), "", errProtocol, 0},
		{"text not UTF-8", clientFrame(ws.OpText, true, "{\"message\":\"\xff\xfe\"}"), "", errInvalidUTF8, 0},
		{"text not UTF-8 over fragments", join(clientFrame(ws.OpText, false, "ok"), clientFrame(ws.OpContinuation, true, "\xff")), "", errInvalidUTF8, 0},
		{"too large", clientFrame(ws.OpText, true, big), "", errFrameTooLarge, 0},
		{"too large over fragments", join(clientFrame(ws.OpText, false, big[:100]), clientFrame(ws.OpContinuation, true, big[:100])), "", errFrameTooLarge, 0},
	}
	for name, newReader := range readers {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				pongs := 0
				r := newReader(bufio.NewReader(bytes.NewReader(tc.in)), 150, func([]byte) { pongs++ })
				_, msg, err := r.readMessage()
				if tc.err != nil {
					if !errors.Is(err, tc.err) {
						t.Fatalf("got %q, %v; want error %v", msg, err, tc.err)
					}
					return
				}
				if err != nil || string(msg) != tc.want || pongs != tc.pongs {
					t.Fatalf("got %q, %v, %d pongs; want %q, %d pongs", msg, err, pongs, tc.want, tc.pongs)
				}
			})
		}
	}
}

// TestReadCloseReasons: each reader error closes the socket with the code RFC 6455 gives it.
func TestReadCloseReasons(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code uint16
	}{
		{fmt.Errorf("%w: x", errProtocol), 1002},
		{errInvalidUTF8, 1007},
		{fmt.Errorf("%w: x", errFrameTooLarge), 1009},
		{io.EOF, 1000},
	} {
		if r, _ := wsReadCloseReason(tc.err, 10); r.WSCode != tc.code || r.Text == "" {
			t.Errorf("%v closes with %+v, want code %d and a reason", tc.err, r, tc.code)
		}
	}
}

// BenchmarkWSReaders compares this package's frame reader with gobwas/ws's wsutil.Reader on a
// stream of masked client text messages (what a publishing client sends).
func BenchmarkWSReaders(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 60 << 10} {
		payload := bytes.Repeat([]byte("a"), size)
		frame := clientFrame(ws.OpText, true, string(payload))
		const perStream = 64
		stream := bytes.Repeat(frame, perStream)
		for _, name := range []string{"own", "wsutil"} {
			b.Run(fmt.Sprintf("%s/bytes=%d", name, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				src := bytes.NewReader(stream)
				br := bufio.NewReaderSize(src, wsReadBuf)
				r := readers[name](br, 64<<10, func([]byte) {})
				for i := 0; i < b.N; i++ {
					if i%perStream == 0 {
						src.Reset(stream)
						br.Reset(src)
						r = readers[name](br, 64<<10, func([]byte) {})
					}
					if _, _, err := r.readMessage(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
