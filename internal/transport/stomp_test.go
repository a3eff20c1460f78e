package transport_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestSTOMPLenientClients: clients as scripts write them are served: no host header, no
// content-length, a newline after the NUL, SUBSCRIBE right behind CONNECT without waiting for
// CONNECTED, and a SEND without CONNECT at all.
func TestSTOMPLenientClients(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	base := s.Subscriptions()
	sub := tt.DialSTOMP(t, s.WS("/api/stomp"))
	sub.Send("CONNECT\naccept-version:1.2,1.1,1.0\nheart-beat:0,0\n\n\x00\n")
	sub.Send("SUBSCRIBE\nid:sub-0\ndestination:/topic/group/7\n\n\x00\n")
	if f := sub.Expect("CONNECTED"); tt.Header(f, "version") != "1.2" {
		t.Fatalf("CONNECTED: %+v", f)
	}
	s.AwaitSubscriptions(t, base+1)

	pub := tt.DialSTOMP(t, s.WS("/api/stomp"))
	pub.Send("SEND\ndestination:/topic/group/7\ncontent-type:application/json\n\n{\"x\":1,\"y\":2}\x00\n")
	m := sub.Expect("MESSAGE")
	if string(m.Body) != `{"x":1,"y":2}` {
		t.Fatalf("MESSAGE body %q", m.Body)
	}
	for _, h := range []string{"destination", "subscription", "message-id", "offset", "epoch", "time"} {
		if _, ok := m.Get(h); !ok {
			t.Fatalf("MESSAGE lacks %s: %+v", h, m.Headers)
		}
	}
	if d := tt.Header(m, "destination"); d != "/topic/group/7" {
		t.Fatalf("destination %q", d)
	}
}

// TestSTOMPResumeAckReceipt: SUBSCRIBE with since replays; client-individual acknowledgement
// with NACK redelivering; receipts carry a SEND's position.
func TestSTOMPResumeAckReceipt(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	for range 3 {
		s.Publish(t, "news", `{"n":1}`)
	}
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Send("CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
	c.Expect("CONNECTED")
	c.Send("SUBSCRIBE\nid:s1\ndestination:/topic/news\nack:client-individual\nsince:1\n\n\x00")
	var ackID string
	for want := 2; want <= 3; want++ {
		m := c.Expect("MESSAGE")
		if off := tt.Header(m, "offset"); off != string(rune('0'+want)) {
			t.Fatalf("replay offset %s, want %d", off, want)
		}
		ackID = tt.Header(m, "ack")
	}
	if ackID == "" {
		t.Fatal("client-individual MESSAGE without ack header")
	}
	// NACK redelivers that message once.
	c.Send("NACK\nid:" + ackID + "\nreceipt:n1\n\n\x00")
	if m := c.Expect("MESSAGE"); tt.Header(m, "redelivered") != "true" {
		t.Fatalf("want redelivery, got %+v", m.Headers)
	}
	c.Expect("RECEIPT")
	c.Send("ACK\nid:" + ackID + "\n\n\x00")
	// SEND with receipt answers with the offset; text that is not JSON is published as a string.
	c.Send("SEND\ndestination:/topic/news\nreceipt:p1\n\nplain text\x00")
	var rcpt, msg bool
	for !rcpt || !msg {
		f := c.Frame(5 * time.Second)
		switch f.Command {
		case "RECEIPT":
			if off := tt.Header(f, "offset"); off != "4" {
				t.Fatalf("receipt offset %q", off)
			}
			rcpt = true
		case "MESSAGE":
			if string(f.Body) != `"plain text"` {
				t.Fatalf("text body delivered as %q, want a JSON string", f.Body)
			}
			msg = true
		}
	}
	c.Send("DISCONNECT\nreceipt:bye\n\n\x00")
	if f := c.Expect("RECEIPT"); tt.Header(f, "receipt-id") != "bye" {
		t.Fatalf("disconnect receipt %+v", f)
	}
}

// TestSTOMPTransactions: SENDs in a transaction are published at COMMIT, not before.
func TestSTOMPTransactions(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Connect("")
	c.Send("SUBSCRIBE\nid:a\ndestination:/topic/tx\nreceipt:sub\n\n\x00")
	c.Expect("RECEIPT")
	c.Send("BEGIN\ntransaction:t1\n\n\x00")
	c.Send("SEND\ndestination:/topic/tx\ntransaction:t1\nreceipt:held\n\n{\"in\":\"tx\"}\x00")
	// A publication would be delivered before the receipt that follows its SEND.
	if f := c.Frame(5 * time.Second); f.Command != "RECEIPT" {
		t.Fatalf("SEND in an open transaction: %s %q before its receipt", f.Command, f.Body)
	}
	if res, err := s.Hub.Read(context.Background(), "tx", hub.ReadOptions{}); err != nil || res.Top.Offset != 0 {
		t.Fatalf("the topic stands at %v (%v) while the transaction is open", res.Top, err)
	}
	c.Send("COMMIT\ntransaction:t1\nreceipt:c\n\n\x00")
	if m := c.Expect("MESSAGE"); string(m.Body) != `{"in":"tx"}` {
		t.Fatalf("committed: %q", m.Body)
	}
}

func TestSTOMPHeartBeats(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{StompHeartbeat: 100 * time.Millisecond}})
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Send("CONNECT\naccept-version:1.2\nheart-beat:0,100\n\n\x00")
	if hb := tt.Header(c.Expect("CONNECTED"), "heart-beat"); hb != "100,0" {
		t.Fatalf("negotiated heart-beat %q", hb)
	}
	// The server sends EOLs while idle.
	for i := range 2 {
		if b, err := c.Next(2 * time.Second); err != nil || string(b) != "\n" {
			t.Fatalf("heart-beat %d: %q %v", i, b, err)
		}
	}
	// A client that promised heart-beats and goes silent is dropped.
	d := tt.DialSTOMP(t, s.WS("/api/stomp"))
	d.Send("CONNECT\naccept-version:1.2\nheart-beat:100,0\n\n\x00")
	d.Expect("CONNECTED")
	d.Closed(3 * time.Second)
}

// TestSTOMPBadInput: each bad frame gets an ERROR with a message and the session is closed;
// another client goes on receiving.
func TestSTOMPBadInput(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{Limits: transport.Limits{MaxFrame: 2048}})
	watcher := tt.DialSTOMP(t, s.WS("/api/stomp"))
	watcher.Connect("")
	watcher.Send("SUBSCRIBE\nid:w\ndestination:/topic/safe\nreceipt:w\n\n\x00")
	watcher.Expect("RECEIPT")
	cases := map[string]string{
		"unknown command":     "FLY\n\n\x00",
		"bad header":          "SEND\nno colon here\n\nx\x00",
		"missing destination": "SEND\n\n{}\x00",
		"unknown destination": "SUBSCRIBE\nid:1\ndestination:/nowhere/x\n\n\x00",
		"server frame":        "MESSAGE\ndestination:/topic/a\n\n\x00",
		"bad content-length":  "SEND\ndestination:/topic/a\ncontent-length:zz\n\n{}\x00",
		"oversized":           "SEND\ndestination:/topic/a\n\n\"" + strings.Repeat("a", 4000) + "\"\x00",
		"bad topic":           "SUBSCRIBE\nid:1\ndestination:/topic/a b\n\n\x00",
		"bad ack mode":        "SUBSCRIBE\nid:1\ndestination:/topic/a\nack:maybe\n\n\x00",
		"bad escape":          "SEND\ndestination:/topic/a\nx:\\q\n\n{}\x00",
		"empty SEND":          "SEND\ndestination:/topic/a\n\n\x00",
	}
	for name, raw := range cases {
		c := tt.DialSTOMP(t, s.WS("/api/stomp"))
		c.Connect("")
		c.Send(raw)
		f := c.Frame(5 * time.Second)
		if msg, ok := f.Get("message"); f.Command != "ERROR" || !ok || msg == "" || strings.Contains(msg, "internal") {
			t.Errorf("%s: got %s %+v, want ERROR with a message", name, f.Command, f.Headers)
			continue
		}
		if _, err := c.Next(2 * time.Second); err == nil {
			t.Errorf("%s: connection stayed open after ERROR", name)
		}
	}
	s.Publish(t, "safe", `{"ok":1}`)
	if m := watcher.Expect("MESSAGE"); string(m.Body) != `{"ok":1}` {
		t.Fatalf("other client after bad input: %q", m.Body)
	}
}

// TestSTOMPHeadersEscaped: every header the server writes outside CONNECTED is escaped as STOMP
// 1.2 requires, the ones it generates too (message-id and ack hold a colon: s0:1 is s0\c1), so
// each header line holds one raw colon; clients unescape and ACK by the id as it was.
func TestSTOMPHeadersEscaped(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{})
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Connect("")
	c.Send("SUBSCRIBE\nid:s\\c1\ndestination:/topic/esc\nack:client-individual\nreceipt:r\n\n\x00")
	c.Expect("RECEIPT")
	c.Send("SEND\ndestination:/topic/esc\ntype:a\\cb\n\n{}\x00")
	var raw string
	for raw == "" {
		msg, err := c.WSConn.Next(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.TrimLeft(string(msg), "\n"); strings.HasPrefix(f, "MESSAGE\n") {
			raw = f
		}
	}
	head, _, _ := strings.Cut(raw, "\n\n")
	for _, line := range strings.Split(head, "\n")[1:] {
		if strings.Count(line, ":") != 1 || strings.ContainsRune(line, '\r') {
			t.Errorf("header line %q is not escaped", line)
		}
	}
	if !strings.Contains(head, "\nmessage-id:s\\c1\\c1\n") || !strings.Contains(head, "\nack:s\\c1\\c1\n") {
		t.Fatalf("MESSAGE head %q", head)
	}
	c.Send("ACK\nid:s\\c1\\c1\nreceipt:a\n\n\x00")
	c.Expect("RECEIPT")
}
