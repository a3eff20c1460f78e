package stomp

import "testing"

// sendFrame is a typical client publication as stompjs writes it.
var sendFrame = []byte("SEND\ndestination:/topic/location/7\ncontent-type:application/json\n" +
	"content-length:39\n\n{\"x\":123,\"y\":456,\"member\":\"user-00042\"}\x00")

func BenchmarkParseSEND(b *testing.B) {
	p := NewParser(Limits{})
	b.SetBytes(int64(len(sendFrame)))
	b.ReportAllocs()
	for b.Loop() {
		p.Feed(sendFrame)
		f, ok, err := p.Next()
		if !ok || err != nil || len(f.Body) != 39 {
			b.Fatalf("%v %v %q", ok, err, f)
		}
	}
}

// BenchmarkParseMESSAGE is the load generator's side: several MESSAGE frames per Feed.
func BenchmarkParseMESSAGE(b *testing.B) {
	msg := AppendFrame(nil, &messageFrame)
	batch := append(append(append([]byte(nil), msg...), msg...), msg...)
	p := NewParser(Limits{})
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		p.Feed(batch)
		for range 3 {
			if _, ok, err := p.Next(); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
}

var messageFrame = Frame{
	Command: CmdMessage,
	Headers: []Header{
		{"destination", "/topic/location/7"},
		{"subscription", "sub-0"},
		{"message-id", "location/7-1234"},
		{"content-type", "application/json"},
		{"offset", "1234"},
		{"epoch", "mq3k9x"},
		{"time", "2026-11-21T19:40:01.123Z"},
		{"sender", "alice"},
	},
	Body: []byte(`{"x":123,"y":456,"member":"user-00042"}`),
}

func BenchmarkAppendMESSAGE(b *testing.B) {
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], &messageFrame)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendMESSAGEHand builds the same frame with AppendHeader, as a hot path would.
func BenchmarkAppendMESSAGEHand(b *testing.B) {
	var buf []byte
	body := messageFrame.Body
	b.ReportAllocs()
	for b.Loop() {
		buf = append(buf[:0], "MESSAGE\n"...)
		buf = AppendHeader(buf, "destination", "/topic/location/7")
		buf = AppendHeader(buf, "subscription", "sub-0")
		buf = AppendHeader(buf, "message-id", "location/7-1234")
		buf = AppendHeader(buf, "content-type", "application/json")
		buf = AppendHeaderInt(buf, "offset", 1234)
		buf = AppendHeader(buf, "epoch", "mq3k9x")
		buf = AppendHeader(buf, "time", "2026-11-21T19:40:01.123Z")
		buf = AppendHeader(buf, "sender", "alice")
		buf = AppendHeaderInt(buf, HdrContentLength, int64(len(body)))
		buf = append(buf, '\n')
		buf = append(buf, body...)
		buf = append(buf, 0)
	}
	b.SetBytes(int64(len(buf)))
}
