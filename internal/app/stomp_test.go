package app

import (
	"strings"
	"testing"
	"time"
)

func TestSTOMPSeedScriptsQuirks(t *testing.T) {
	s := startServer(t, nil)
	base := subscriptions(s)
	sub := dialSTOMP(t, s.ws("/location"))
	// Like the seed scripts: no host, no content-length, a newline after the NUL, and
	// SUBSCRIBE sent right behind CONNECT without waiting for CONNECTED.
	sub.sendFrame("CONNECT\naccept-version:1.2,1.1,1.0\nheart-beat:0,0\n\n\x00\n")
	sub.sendFrame("SUBSCRIBE\nid:sub-0\ndestination:/sub/location/7\n\n\x00\n")
	if f := sub.expect("CONNECTED"); func() string { v, _ := f.Get("version"); return v }() != "1.2" {
		t.Fatalf("CONNECTED: %+v", f)
	}
	subscriptionsReach(t, s, base+1)

	pub := dialSTOMP(t, s.ws("/location"))
	pub.sendFrame("CONNECT\naccept-version:1.2\n\n\x00\n")
	pub.expect("CONNECTED")
	pub.sendFrame("SEND\ndestination:/pub/share/7\ncontent-type:application/json\n\n{\"x\":1,\"y\":2}\x00\n")
	pub.sendFrame("SEND\ndestination:/pub/share/7\n\n\x00") // empty body: a generated position
	m := sub.expect("MESSAGE")
	if string(m.Body) != `{"x":1,"y":2}` {
		t.Fatalf("MESSAGE body %q", m.Body)
	}
	for _, h := range []string{"destination", "subscription", "message-id", "offset", "epoch", "time"} {
		if _, ok := m.Get(h); !ok {
			t.Fatalf("MESSAGE lacks %s: %+v", h, m.Headers)
		}
	}
	if d, _ := m.Get("destination"); d != "/sub/location/7" {
		t.Fatalf("destination %q", d)
	}
	if m2 := sub.expect("MESSAGE"); !strings.Contains(string(m2.Body), `"x":`) {
		t.Fatalf("generated position %q", m2.Body)
	}
}

func TestSTOMPSeedChat(t *testing.T) {
	s := startServer(t, nil)
	c := dialSTOMP(t, s.ws("/stomp/chat"))
	c.sendFrame("CONNECT\naccept-version:1.1,1.2\nhost:localhost\n\n\x00")
	c.expect("CONNECTED")
	c.sendFrame("SUBSCRIBE\nid:0\ndestination:/sub/chat/42\nreceipt:r1\n\n\x00")
	c.expect("RECEIPT")
	c.sendFrame("SEND\ndestination:/pub/chat/message/42\n\n{\"type\":\"ENTER\",\"sender\":\"ann\",\"roomId\":\"42\"}\x00")
	c.sendFrame("SEND\ndestination:/pub/chat/message/42\n\n{\"type\":\"TALK\",\"sender\":\"ann\",\"message\":\"hi\",\"roomId\":\"42\"}\x00")
	if m := c.expect("MESSAGE"); !strings.Contains(string(m.Body), `"ENTER"`) {
		t.Fatalf("ENTER MESSAGE %q", m.Body)
	}
	m := c.expect("MESSAGE")
	if !strings.Contains(string(m.Body), `"message":"hi"`) {
		t.Fatalf("chat MESSAGE %q", m.Body)
	}
	var ans pollAnswer
	s.get(t, "/api/poll/chat/42?since=0", &ans)
	if len(ans.Publications) != 2 || ans.Publications[1].Type != "TALK" || ans.Publications[1].Sender != "ann" {
		t.Fatalf("chat/42 history: %+v", ans)
	}
}

func TestSTOMPNativeResumeAckReceipt(t *testing.T) {
	s := startServer(t, nil)
	for i := 0; i < 3; i++ {
		s.post(t, "/api/publish/news", `{"n":1}`, nil)
	}
	c := dialSTOMP(t, s.ws("/api/stomp"))
	c.sendFrame("CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
	c.expect("CONNECTED")
	c.sendFrame("SUBSCRIBE\nid:s1\ndestination:/topic/news\nack:client-individual\nsince:1\n\n\x00")
	var ackID string
	for want := 2; want <= 3; want++ {
		m := c.expect("MESSAGE")
		if off, _ := m.Get("offset"); off != string(rune('0'+want)) {
			t.Fatalf("replay offset %s, want %d", off, want)
		}
		ackID, _ = m.Get("ack")
	}
	if ackID == "" {
		t.Fatal("client-individual MESSAGE without ack header")
	}
	// NACK redelivers that message once.
	c.sendFrame("NACK\nid:" + ackID + "\nreceipt:n1\n\n\x00")
	m := c.expect("MESSAGE")
	if r, _ := m.Get("redelivered"); r != "true" {
		t.Fatalf("want redelivery, got %+v", m.Headers)
	}
	c.expect("RECEIPT")
	c.sendFrame("ACK\nid:" + ackID + "\n\n\x00")
	// SEND with receipt answers with the offset.
	c.sendFrame("SEND\ndestination:/topic/news\nreceipt:p1\n\nplain text\x00")
	var rcpt, msg bool
	for !rcpt || !msg {
		f := c.frame(5 * time.Second)
		switch f.Command {
		case "RECEIPT":
			if off, _ := f.Get("offset"); off != "4" {
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
	c.sendFrame("DISCONNECT\nreceipt:bye\n\n\x00")
	if f := c.expect("RECEIPT"); func() string { v, _ := f.Get("receipt-id"); return v }() != "bye" {
		t.Fatalf("disconnect receipt %+v", f)
	}
}

func TestSTOMPGapAndTransactions(t *testing.T) {
	s := startServer(t, func(c *Config) { c.HistorySize = 2 })
	for i := 0; i < 5; i++ {
		s.post(t, "/api/publish/tx", `{}`, nil)
	}
	c := dialSTOMP(t, s.ws("/api/stomp"))
	c.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
	c.expect("CONNECTED")
	c.sendFrame("SUBSCRIBE\nid:a\ndestination:/topic/tx\nsince:0\n\n\x00")
	g := c.expect("MESSAGE")
	if v, _ := g.Get("gap"); v != "true" || !strings.Contains(string(g.Body), "fell out of history") {
		t.Fatalf("gap notice: %+v %q", g.Headers, g.Body)
	}
	c.expect("MESSAGE") // offset 4
	c.expect("MESSAGE") // offset 5
	c.sendFrame("BEGIN\ntransaction:t1\n\n\x00")
	c.sendFrame("SEND\ndestination:/topic/tx\ntransaction:t1\n\n{\"in\":\"tx\"}\x00")
	if f, ok := tryFrame(c, 200*time.Millisecond); ok {
		t.Fatalf("SEND in an open transaction was published: %+v", f)
	}
	c.sendFrame("COMMIT\ntransaction:t1\nreceipt:c\n\n\x00")
	if m := c.expect("MESSAGE"); string(m.Body) != `{"in":"tx"}` {
		t.Fatalf("committed: %q", m.Body)
	}
}

func tryFrame(c *stompClient, d time.Duration) (f struct{}, ok bool) {
	b, err := c.read(d)
	if err != nil {
		return f, false
	}
	c.p.Feed(b)
	return f, true
}

func TestSTOMPHeartBeats(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Limits.StompHeartbeat = 100 * time.Millisecond })
	c := dialSTOMP(t, s.ws("/api/stomp"))
	c.sendFrame("CONNECT\naccept-version:1.2\nheart-beat:0,100\n\n\x00")
	f := c.expect("CONNECTED")
	if hb, _ := f.Get("heart-beat"); hb != "100,0" {
		t.Fatalf("negotiated heart-beat %q", hb)
	}
	// The server sends EOLs while idle.
	for i := 0; i < 2; i++ {
		b, err := c.read(2 * time.Second)
		if err != nil || string(b) != "\n" {
			t.Fatalf("heart-beat %d: %q %v", i, b, err)
		}
	}
	// A client that promised heart-beats and goes silent is dropped.
	d := dialSTOMP(t, s.ws("/api/stomp"))
	d.sendFrame("CONNECT\naccept-version:1.2\nheart-beat:100,0\n\n\x00")
	d.expect("CONNECTED")
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := d.read(time.Until(deadline)); err != nil {
			if time.Now().After(deadline) {
				t.Fatal("silent client was not dropped")
			}
			break
		}
	}
}

func TestSTOMPBadInput(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Limits.MaxFrame = 2048 })
	watcher := dialSTOMP(t, s.ws("/api/stomp"))
	watcher.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
	watcher.expect("CONNECTED")
	watcher.sendFrame("SUBSCRIBE\nid:w\ndestination:/topic/safe\nreceipt:w\n\n\x00")
	watcher.expect("RECEIPT")
	cases := map[string]string{
		"unknown command":     "FLY\n\n\x00",
		"bad header":          "SEND\nno colon here\n\nx\x00",
		"missing destination": "SEND\n\n{}\x00",
		"unknown destination": "SUBSCRIBE\nid:1\ndestination:/queue/x\n\n\x00",
		"server frame":        "MESSAGE\ndestination:/topic/a\n\n\x00",
		"bad content-length":  "SEND\ndestination:/topic/a\ncontent-length:zz\n\n{}\x00",
		"oversized":           "SEND\ndestination:/topic/a\n\n\"" + strings.Repeat("a", 4000) + "\"\x00",
		"bad topic":           "SUBSCRIBE\nid:1\ndestination:/topic/a b\n\n\x00",
		"bad ack mode":        "SUBSCRIBE\nid:1\ndestination:/topic/a\nack:maybe\n\n\x00",
		"bad escape":          "SEND\ndestination:/topic/a\nx:\\q\n\n{}\x00",
	}
	for name, raw := range cases {
		c := dialSTOMP(t, s.ws("/api/stomp"))
		c.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
		c.expect("CONNECTED")
		c.sendFrame(raw)
		f := c.frame(5 * time.Second)
		if msg, ok := f.Get("message"); f.Command != "ERROR" || !ok || msg == "" {
			t.Errorf("%s: got %s %+v, want ERROR with a message", name, f.Command, f.Headers)
			continue
		}
		if _, err := c.read(2 * time.Second); err == nil {
			t.Errorf("%s: connection stayed open after ERROR", name)
		}
	}
	s.post(t, "/api/publish/safe", `{"ok":1}`, nil)
	if m := watcher.expect("MESSAGE"); string(m.Body) != `{"ok":1}` {
		t.Fatalf("other client after bad input: %q", m.Body)
	}
}
