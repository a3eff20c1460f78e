package app

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// seedChat is the raw /chat message a seed script sends, with no ENTER before it.
func seedChat(sender, message string) string {
	return `{"type":"CHAT","sender":"` + sender + `","message":"` + message + `","roomId":8,"createdAt":"10:00:00"}`
}

// chatData is a seed chat message as members receive it.
type chatData struct {
	Type    string `json:"type"`
	Sender  string `json:"sender"`
	Message string `json:"message"`
}

func readChat(t *testing.T, c *wsClient) chatData {
	t.Helper()
	b, err := c.read(5 * time.Second)
	if err != nil {
		t.Fatalf("chat read: %v", err)
	}
	var d chatData
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("chat message %q: %v", b, err)
	}
	return d
}

func expectChat(t *testing.T, c *wsClient, typ, sender, message string) {
	t.Helper()
	if d := readChat(t, c); d.Type != typ || d.Sender != sender || d.Message != message {
		t.Fatalf("got %+v, want %s from %s %q", d, typ, sender, message)
	}
}

// chatHistory is the room's history as type:sender pairs.
func chatHistory(t *testing.T, s *testServer, room, token string) []string {
	t.Helper()
	var ans pollAnswer
	_, body := do(t, s, "GET", "/api/poll/chat/"+room+"?since=0", token, "")
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		t.Fatalf("history of %s: %v in %s", room, err, body)
	}
	var out []string
	for _, p := range ans.Publications {
		out = append(out, p.Type+":"+p.Sender)
	}
	return out
}

func roomMembers(t *testing.T, s *testServer, room, token string) []string {
	t.Helper()
	var ri roomInfo
	_, body := do(t, s, "GET", "/api/chat/"+room+"/members", token, "")
	_ = json.Unmarshal([]byte(body), &ri)
	var out []string
	for _, m := range ri.Members {
		out = append(out, m.User)
	}
	return out
}

// TestSeedRawChatFirstMessageJoins: the seed script's first and only message on /chat joins
// room 8; members receive the ENTER, then each message, in order; the native API keeps its
// ENTER-first rule.
func TestSeedRawChatFirstMessageJoins(t *testing.T) {
	s := startServer(t, nil)
	won := dialWS(t, s.ws("/chat"))
	bob := dialWS(t, s.ws("/chat"))
	won.send(seedChat("won11111", "Hello"))
	expectChat(t, won, "ENTER", "won11111", "")
	expectChat(t, won, "CHAT", "won11111", "Hello")
	bob.send(seedChat("bob", "hi won"))
	for _, c := range []*wsClient{won, bob} {
		expectChat(t, c, "ENTER", "bob", "")
		expectChat(t, c, "CHAT", "bob", "hi won")
	}
	won.send(seedChat("won11111", "again")) // a member already: no second ENTER
	for _, c := range []*wsClient{won, bob} {
		expectChat(t, c, "CHAT", "won11111", "again")
	}
	want := "ENTER:won11111 TALK:won11111 ENTER:bob TALK:bob TALK:won11111"
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
	if got := strings.Join(roomMembers(t, s, "8", ""), ","); got != "bob,won11111" {
		t.Fatalf("members %s", got)
	}
	// The connection that joined implicitly counts as the member's: its drop leaves.
	won.conn.Close()
	expectChat(t, bob, "LEAVE", "won11111", "")

	// A first message that is refused joins nobody.
	big := dialWS(t, s.ws("/chat"))
	big.send(seedChat("big", strings.Repeat("x", 5000)))
	if m := big.readJSON(5 * time.Second); m.Op != "error" || m.Code != "too_large" {
		t.Fatalf("oversized first message: %+v", m)
	}
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); strings.Contains(got, "big") {
		t.Fatalf("history after a refused first message: %s", got)
	}

	// The native API still wants ENTER before TALK.
	n := dialWS(t, s.ws("/api/ws"))
	n.expectOp("connected")
	n.send(`{"op":"publish","topic":"chat/8","data":{"sender":"carl","message":"hi"}}`)
	if m := n.readJSON(5 * time.Second); m.Op != "error" || m.Code != "forbidden" {
		t.Fatalf("native TALK without ENTER: %+v", m)
	}
	if code, body := do(t, s, "POST", "/api/publish/chat/8", "", `{"sender":"carl","message":"hi"}`); code != 403 {
		t.Fatalf("HTTP TALK without ENTER: %d %s", code, body)
	}
}

// TestSeedChatOneEnterPerMember: a member's first messages on several connections at once
// publish one ENTER, and the member leaves only when the last of them drops.
func TestSeedChatOneEnterPerMember(t *testing.T) {
	s := startServer(t, nil)
	conns := make([]*wsClient, 3)
	for i := range conns {
		conns[i] = dialWS(t, s.ws("/chat"))
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.send(seedChat("zed", "hello")) }()
	}
	wg.Wait()
	eventually(t, 5*time.Second, "three messages", func() bool { return len(chatHistory(t, s, "8", "")) == 4 })
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); got != "ENTER:zed TALK:zed TALK:zed TALK:zed" {
		t.Fatalf("history %s", got)
	}
	conns[0].conn.Close()
	conns[1].conn.Close()
	eventually(t, 5*time.Second, "two connections of zed gone", func() bool { return memberConns(s, "chat/8", "zed") == 1 })
	conns[2].conn.Close()
	eventually(t, 5*time.Second, "zed's LEAVE", func() bool { return len(chatHistory(t, s, "8", "")) == 5 })
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); got != "ENTER:zed TALK:zed TALK:zed TALK:zed LEAVE:zed" {
		t.Fatalf("history %s", got)
	}
}

// memberConns is how many connections on this node entered a room as member.
func memberConns(s *testServer, topic, member string) int {
	cr := s.app.chat
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.online[[2]string{topic, member}]
}

// stompMessage is a MESSAGE frame's body, type, sender and offset.
func stompMessage(t *testing.T, c *stompClient) (body, typ, sender string, offset uint64) {
	t.Helper()
	f := c.expect("MESSAGE")
	typ, _ = f.Get("type")
	sender, _ = f.Get("sender")
	off, _ := f.Get("offset")
	offset, _ = strconv.ParseUint(off, 10, 64)
	return string(f.Body), typ, sender, offset
}

// seedSTOMPChat connects to /stomp/chat and subscribes to room 8 exactly as the seed script.
func seedSTOMPChat(t *testing.T, s *testServer, connectHeaders string) *stompClient {
	t.Helper()
	c := dialSTOMP(t, s.ws("/stomp/chat"))
	c.sendFrame("CONNECT\naccept-version:1.2\nheart-beat:10000,10000\n" + connectHeaders + "\n\x00")
	c.expect("CONNECTED")
	c.sendFrame("SUBSCRIBE\ndestination:/sub/chat/8\nid:sub-8\n\n\x00")
	return c
}

func seedSTOMPSend(c *stompClient, sender string) {
	c.sendFrame("SEND\ndestination:/pub/chat/message/8\ncontent-type:application/json\n\n{\"sender\":\"" + sender + "\",\"message\":\"Hello STOMP!\"}\x00")
}

// TestSTOMPSeedChatFirstSendJoins: the seed STOMP chat script (CONNECT, SUBSCRIBE, SEND with no
// ENTER and no type) gets its message delivered to every member, after an implicit ENTER.
func TestSTOMPSeedChatFirstSendJoins(t *testing.T) {
	s := startServer(t, nil)
	won := seedSTOMPChat(t, s, "")
	seedSTOMPSend(won, "won11111")
	var last uint64
	expect := func(c *stompClient, wantBody, wantType, wantSender string) {
		t.Helper()
		body, typ, sender, off := stompMessage(t, c)
		if (wantBody != "" && body != wantBody) || typ != wantType || sender != wantSender {
			t.Fatalf("MESSAGE %s from %s: %s; want %s from %s: %s", typ, sender, body, wantType, wantSender, wantBody)
		}
		if off <= last && c == won {
			t.Fatalf("offset %d after %d", off, last)
		}
		if c == won {
			last = off
		}
	}
	expect(won, "", "ENTER", "won11111")
	expect(won, `{"sender":"won11111","message":"Hello STOMP!"}`, "TALK", "won11111")
	bob := seedSTOMPChat(t, s, "")
	seedSTOMPSend(bob, "bob")
	for _, c := range []*stompClient{won, bob} {
		expect(c, "", "ENTER", "bob")
		expect(c, `{"sender":"bob","message":"Hello STOMP!"}`, "TALK", "bob")
	}
	if got := strings.Join(roomMembers(t, s, "8", ""), ","); got != "bob,won11111" {
		t.Fatalf("members %s", got)
	}
	// The native destination on the same endpoint keeps the explicit rule.
	carl := dialSTOMP(t, s.ws("/stomp/chat"))
	carl.sendFrame("CONNECT\naccept-version:1.2\n\n\x00")
	carl.expect("CONNECTED")
	carl.sendFrame("SEND\ndestination:/topic/chat/8\n\n{\"sender\":\"carl\",\"message\":\"hi\"}\x00")
	if f := carl.frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(string(f.Body), "ENTER first") {
		t.Fatalf("native TALK without ENTER: %s %q", f.Command, f.Body)
	}
}

// TestSeedChatJoinsAsLoggedInUser: with --auth-secret the implicit ENTER is the logged-in
// user's, whatever the message's "sender" says, on both seed chat routes.
func TestSeedChatJoinsAsLoggedInUser(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ann, bob := login(t, s, "ann"), login(t, s, "bob")
	a := dialWS(t, s.ws("/chat?access_token="+ann))
	a.send(seedChat("mallory", "Hello"))
	if d := readChat(t, a); d.Type != "ENTER" || d.Sender != "ann" {
		t.Fatalf("implicit ENTER %+v, want ann's", d)
	}
	readChat(t, a) // ann's message
	b := seedSTOMPChat(t, s, "passcode:"+bob+"\n")
	seedSTOMPSend(b, "won11111")
	if _, typ, sender, _ := stompMessage(t, b); typ != "ENTER" || sender != "bob" {
		t.Fatalf("implicit ENTER over STOMP: %s by %s, want bob's", typ, sender)
	}
	if _, typ, sender, _ := stompMessage(t, b); typ != "TALK" || sender != "bob" {
		t.Fatalf("message over STOMP: %s by %s, want bob's", typ, sender)
	}
	want := "ENTER:ann TALK:ann ENTER:bob TALK:bob"
	if got := strings.Join(chatHistory(t, s, "8", ann), " "); got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
	if got := strings.Join(roomMembers(t, s, "8", ann), ","); got != "ann,bob" {
		t.Fatalf("members %s", got)
	}
	// No user, no implicit ENTER (the transports refuse anonymous clients before this).
	err := s.app.policy.SeedJoin(t.Context(), transport.Client{ID: "x"}, hub.PublishRequest{Topic: "chat/8", Data: []byte(`{"sender":"eve"}`)})
	if !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("anonymous implicit ENTER: %v", err)
	}
}

// TestSeedChatMembersOnlyRoom: in a members-only room the implicit ENTER is refused to a user
// the room does not admit, and so is the message.
func TestSeedChatMembersOnlyRoom(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.PrivateRooms = []string{"chat/private/"} })
	ann, bob := login(t, s, "ann"), login(t, s, "bob")
	send := func(c *stompClient) {
		c.sendFrame("SEND\ndestination:/pub/chat/message/private/x\ncontent-type:application/json\n\n{\"sender\":\"won11111\",\"message\":\"Hello STOMP!\"}\x00")
	}
	a := dialSTOMP(t, s.ws("/stomp/chat"))
	a.sendFrame("CONNECT\naccept-version:1.2\npasscode:" + ann + "\n\n\x00")
	a.expect("CONNECTED")
	send(a) // ann creates the room: she owns it
	eventually(t, 5*time.Second, "ann's message", func() bool { return len(chatHistory(t, s, "private/x", ann)) == 2 })
	b := dialSTOMP(t, s.ws("/stomp/chat"))
	b.sendFrame("CONNECT\naccept-version:1.2\npasscode:" + bob + "\n\n\x00")
	b.expect("CONNECTED")
	send(b)
	if f := b.frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(string(f.Body), "members-only") {
		t.Fatalf("bob's first message to a members-only room: %s %q", f.Command, f.Body)
	}
	if got := strings.Join(chatHistory(t, s, "private/x", ann), " "); got != "ENTER:ann TALK:ann" {
		t.Fatalf("history %s", got)
	}
}

// sseBody reads one SSE response to its end: the events, the stream's last line, and the last
// event id.
func sseBody(t *testing.T, url, lastEventID string) (events []sseEvent, lastLine string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			lastLine = line
		}
		if ev.add(line) {
			events = append(events, ev)
			ev = sseEvent{}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("GET %s: the stream did not end cleanly: %v", url, err)
	}
	return events, lastLine
}

// TestSSEStreamAgeAndResume: a seed SSE stream ends cleanly after --seed-sse-timeout and a
// native one after --sse-max-age; each body holds every event published while it was open and
// ends with a retry: line, and a reconnect with Last-Event-ID loses nothing while publications
// keep coming.
func TestSSEStreamAgeAndResume(t *testing.T) {
	for _, tc := range []struct {
		name, url, publish  string
		other, otherPublish string // a stream of the other kind, which stays open
		cfg                 func(*Config)
	}{
		{"seed", "/location/sse/connect?group=5", "/location/sse/share?group=5",
			"/api/sse?topic=news/open", "/api/publish/news/open",
			func(c *Config) { c.Limits.SeedSSETimeout = 150 * time.Millisecond }},
		{"native", "/api/sse?topic=news/5", "/api/publish/news/5",
			"/location/sse/connect?group=open", "/location/sse/share?group=open",
			func(c *Config) { c.Limits.SSEMaxAge = 150 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, func(c *Config) { c.HistorySize = 100_000; tc.cfg(c) })
			open := dialSSE(t, s.URL+tc.other, nil)

			var published atomic.Int64
			streams := atomic.Int64{}
			done := make(chan struct{})
			var stop atomic.Bool
			t.Cleanup(func() { stop.Store(true); <-done })
			go func() { // publishes until the client has read three whole streams
				defer close(done)
				for i := 1; streams.Load() < 3 && i <= 20_000 && !stop.Load(); i++ {
					resp, err := http.Post(s.URL+tc.publish, "application/json", strings.NewReader(fmt.Sprintf(`{"i":%d}`, i)))
					if err != nil {
						t.Errorf("publish %d: %v", i, err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Errorf("publish %d: %d", i, resp.StatusCode)
						return
					}
					published.Store(int64(i))
				}
			}()
			var got []int
			lastID := ""
			for n := 0; ; n++ {
				if n > 1000 {
					t.Fatalf("still missing events after %d streams: got %d of %d", n, len(got), published.Load())
				}
				url := s.URL + tc.url
				if lastID == "" {
					url += "&since=0" // from the first publication, however early it came
				}
				events, lastLine := sseBody(t, url, lastID)
				if !strings.HasPrefix(lastLine, "retry:") {
					t.Fatalf("stream %d ends with %q, want a retry: line", n, lastLine)
				}
				for _, ev := range events {
					switch ev.Event {
					case "":
					case "disconnect":
						if tc.name == "seed" || !strings.Contains(ev.Data, `"code":"max_age"`) {
							t.Fatalf("stream %d: %+v", n, ev)
						}
						continue
					default:
						t.Fatalf("stream %d: unexpected %+v", n, ev)
					}
					var d struct{ I int }
					data := ev.Data
					if tc.name == "native" {
						var p pubMsg
						_ = json.Unmarshal([]byte(data), &p)
						data = string(p.Data)
					}
					if err := json.Unmarshal([]byte(data), &d); err != nil || d.I != len(got)+1 {
						t.Fatalf("stream %d: event %s after %d events (lost or reordered)", n, ev.Data, len(got))
					}
					got = append(got, d.I)
					lastID = ev.ID
				}
				streams.Add(1)
				select {
				case <-done:
					if len(got) == int(published.Load()) {
						t.Logf("%d publications over %d streams", len(got), n+1)
						if len(got) < 3 {
							t.Fatalf("only %d publications", len(got))
						}
						// The stream of the other kind is still open and delivering.
						s.post(t, tc.otherPublish, `{"i":0}`, nil)
						for {
							if ev := open.next(5 * time.Second); strings.Contains(ev.Data, `{"i":0}`) {
								return
							}
						}
					}
				default:
				}
			}
		})
	}
}

// subscriptions counts the hub's subscriptions. The server holds some of its own, so tests
// compare with a count taken before their clients joined.
func subscriptions(s *testServer) int64 { return s.app.hub.Stats().Subscriptions.Load() }

// subscriptionsReach waits until the hub holds n subscriptions (a client has joined).
func subscriptionsReach(t *testing.T, s *testServer, n int64) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("%d subscriptions", n), func() bool { return subscriptions(s) == n })
}
