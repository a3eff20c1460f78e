package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rtlab/rtlab/internal/stomp"

	"github.com/rtlab/rtlab/internal/peers"
)

// sockjsMessages decodes an 'a' frame's array with appendSockJSArray.
func sockjsMessages(p []byte) ([]string, error) {
	b, ends, err := appendSockJSArray(nil, nil, p)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ends))
	from := 0
	for _, e := range ends {
		out = append(out, string(b[from:e]))
		from = e
	}
	return out, nil
}

// TestSockJSCodec: what the client sends decodes with encoding/json (as the server reads it)
// to the frame it was, and what the server writes (json.Marshal) decodes to its messages.
func TestSockJSCodec(t *testing.T) {
	msgs := []string{
		"CONNECT\naccept-version:1.2\nhost:127.0.0.1:1\n\n\x00",
		`SEND` + "\ndestination:/topic/a\n\n" + `{"x":"q\"uote\\","t":"tab	"}` + "\x00\r\x1f",
		"grüße 😀 <&>", "",
	}
	for _, m := range msgs {
		var got []string
		if err := json.Unmarshal(appendSockJSSend(nil, []byte(m)), &got); err != nil || len(got) != 1 || got[0] != m {
			t.Errorf("send of %q decodes to %q, %v", m, got, err)
		}
	}
	enc, _ := json.Marshal(msgs)
	if got, err := sockjsMessages(enc); err != nil || fmt.Sprint(got) != fmt.Sprint(msgs) {
		t.Errorf("array %s decodes to %q, %v", enc, got, err)
	}
	for in, want := range map[string]string{
		`["\ud83d\ude00"]`: "😀", `["\ud83d"]`: "\ufffd", `["\ud83dx"]`: "\ufffdx", `["\u00e9\/"]`: "é/",
		` [ "a" , "b" ] `: "ab", `[]`: "",
	} {
		got, err := sockjsMessages([]byte(in))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(jsonStrings(t, in)) || joined(got) != want {
			t.Errorf("%s decodes to %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, `[`, `["a"`, `["a",]`, `["a" "b"]`, `["\x"]`, `["\u12"]`, "[\"\n\"]", `["a"]x`, `[1]`, `{}`} {
		if got, err := sockjsMessages([]byte(in)); err == nil {
			t.Errorf("%q decodes to %q; want an error", in, got)
		}
	}
}

func jsonStrings(t *testing.T, in string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	return v
}

func joined(s []string) string {
	var b bytes.Buffer
	for _, x := range s {
		b.WriteString(x)
	}
	return b.String()
}

// FuzzSockJSArray: an array the client decodes is one encoding/json decodes to the same
// strings; what the client encodes decodes back exactly.
func FuzzSockJSArray(f *testing.F) {
	for _, s := range []string{`["a","b"]`, `["\u0000\n\"\\"]`, `["\ud83d\ude00\ud83d"]`, `[]`, `["x",]`, "hello"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := sockjsMessages(p)
		if err == nil && utf8.Valid(p) {
			var want []string
			if jerr := json.Unmarshal(p, &want); jerr != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Errorf("%q: client %q, encoding/json %q, %v", p, got, want, jerr)
			}
		}
		back, err := sockjsMessages(appendSockJSSend(nil, p))
		if err != nil || len(back) != 1 || back[0] != string(p) {
			t.Errorf("%q sent decodes to %q, %v", p, back, err)
		}
	})
}

// TestSockJSSessionOutlivesItsStreams runs one SockJS session against a real server past the
// 128 KiB after which the server ends a streaming response: the client opens the next one and
// every message arrives once, in order, with the frames larger than the reader's buffer whole.
func TestSockJSSessionOutlivesItsStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := peers.StartRTLab(ctx, buildRTLab(t), "memory", nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := &cell{opts: &Options{}, nodes: []string{srv.Addr}}
	v := &vu{id: 7}
	conn, err := c.dial(ctx, v)
	if err != nil {
		t.Fatal(err)
	}
	s := newSockJSConn(c, ctx, v, conn, peers.SockJSPath)
	defer s.Close()
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(30 * time.Second))
	p := stomp.NewParser(stomp.Limits{})
	received := 0
	read := func(want string) stomp.Frame {
		t.Helper()
		for {
			if f, ok, err := p.Next(); err != nil {
				t.Fatal(err)
			} else if ok {
				if f.Command != want {
					t.Fatalf("%s %v %q; want %s", f.Command, f.Headers, f.Body, want)
				}
				return f
			}
			m, err := s.next(nil)
			if err != nil {
				t.Fatalf("waiting for %s after %d bytes: %v", want, received, err)
			}
			received += len(m)
			p.Feed(m)
		}
	}
	send := func(f string) {
		t.Helper()
		if _, err := s.Write([]byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	send("CONNECT\naccept-version:1.2\nhost:" + srv.Addr + "\n\n\x00")
	read(stomp.CmdConnected)
	send("SUBSCRIBE\nid:0\ndestination:/topic/location/77\nreceipt:sub\n\n\x00")
	read(stomp.CmdReceipt)
	const n, size = 40, 8 << 10 // 320 KiB: three streaming responses
	pad := bytes.Repeat([]byte("x"), size)
	for i := range n {
		send(fmt.Sprintf("SEND\ndestination:/topic/location/77\ncontent-type:application/json\n\n{\"i\":%d,\"pad\":\"%s\"}\x00", i, pad))
	}
	for i := range n {
		var m struct{ I int }
		body := read(stomp.CmdMessage).Body
		if err := json.Unmarshal(body, &m); err != nil || m.I != i {
			t.Fatalf("message %d: %.40q, %v", i, body, err)
		}
	}
	if received < 2*sockjsStreamLimit {
		t.Errorf("%d bytes received; want over %d to cross streaming responses", received, 2*sockjsStreamLimit)
	}
}

// sockjsStreamLimit is the bytes after which rtlab ends an xhr-streaming response.
const sockjsStreamLimit = 128 << 10
