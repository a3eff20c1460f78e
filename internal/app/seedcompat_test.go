package app

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
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

func readChat(t *testing.T, c *tt.WSConn) chatData {
	t.Helper()
	b, err := c.Next(5 * time.Second)
	if err != nil {
		t.Fatalf("chat read: %v", err)
	}
	var d chatData
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("chat message %q: %v", b, err)
	}
	return d
}

func expectChat(t *testing.T, c *tt.WSConn, typ, sender, message string) {
	t.Helper()
	if d := readChat(t, c); d.Type != typ || d.Sender != sender || d.Message != message {
		t.Fatalf("got %+v, want %s from %s %q", d, typ, sender, message)
	}
}

// chatHistory is the room's history as type:sender pairs.
func chatHistory(t *testing.T, s *testServer, room, token string) []string {
	t.Helper()
	var ans tt.PollAnswer
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
	var ri chat.RoomInfo
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
	won := tt.DialWS(t, s.ws("/chat"))
	bob := tt.DialWS(t, s.ws("/chat"))
	won.Send(seedChat("won11111", "Hello"))
	expectChat(t, won, "ENTER", "won11111", "")
	expectChat(t, won, "CHAT", "won11111", "Hello")
	bob.Send(seedChat("bob", "hi won"))
	for _, c := range []*tt.WSConn{won, bob} {
		expectChat(t, c, "ENTER", "bob", "")
		expectChat(t, c, "CHAT", "bob", "hi won")
	}
	won.Send(seedChat("won11111", "again")) // a member already: no second ENTER
	for _, c := range []*tt.WSConn{won, bob} {
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
	won.Close()
	expectChat(t, bob, "LEAVE", "won11111", "")

	// A first message that is refused joins nobody.
	big := tt.DialWS(t, s.ws("/chat"))
	big.Send(seedChat("big", strings.Repeat("x", 5000)))
	if m := big.Msg(); m.Op != "error" || m.Code != "too_large" {
		t.Fatalf("oversized first message: %+v", m)
	}
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); strings.Contains(got, "big") {
		t.Fatalf("history after a refused first message: %s", got)
	}

	// The native API still wants ENTER before TALK.
	n := tt.DialWS(t, s.ws("/api/ws"))
	n.Op("connected")
	n.Send(`{"op":"publish","topic":"chat/8","data":{"sender":"carl","message":"hi"}}`)
	if m := n.Msg(); m.Op != "error" || m.Code != "forbidden" {
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
	conns := make([]*tt.WSConn, 3)
	for i := range conns {
		conns[i] = tt.DialWS(t, s.ws("/chat"))
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.Send(seedChat("zed", "hello")) }()
	}
	wg.Wait()
	eventually.True(t, 5*time.Second, "three messages", func() bool { return len(chatHistory(t, s, "8", "")) == 4 })
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); got != "ENTER:zed TALK:zed TALK:zed TALK:zed" {
		t.Fatalf("history %s", got)
	}
	conns[0].Close()
	conns[1].Close()
	eventually.True(t, 5*time.Second, "two connections of zed gone", func() bool { return memberConns(s, "chat/8", "zed") == 1 })
	conns[2].Close()
	eventually.True(t, 5*time.Second, "zed's LEAVE", func() bool { return len(chatHistory(t, s, "8", "")) == 5 })
	if got := strings.Join(chatHistory(t, s, "8", ""), " "); got != "ENTER:zed TALK:zed TALK:zed TALK:zed LEAVE:zed" {
		t.Fatalf("history %s", got)
	}
}

// memberConns is how many connections on this node entered a room as member.
func memberConns(s *testServer, topic, member string) int {
	return s.app.chat.Conns(topic, member)
}

// stompMessage is a MESSAGE frame's body, type, sender and offset.
func stompMessage(t *testing.T, c *tt.STOMPConn) (body, typ, sender string, offset uint64) {
	t.Helper()
	f := c.Expect("MESSAGE")
	typ, _ = f.Get("type")
	sender, _ = f.Get("sender")
	off, _ := f.Get("offset")
	offset, _ = strconv.ParseUint(off, 10, 64)
	return string(f.Body), typ, sender, offset
}

// seedSTOMPChat connects to /stomp/chat and subscribes to room 8 exactly as the seed script.
func seedSTOMPChat(t *testing.T, s *testServer, connectHeaders string) *tt.STOMPConn {
	t.Helper()
	c := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	c.Send("CONNECT\naccept-version:1.2\nheart-beat:10000,10000\n" + connectHeaders + "\n\x00")
	c.Expect("CONNECTED")
	c.Send("SUBSCRIBE\ndestination:/sub/chat/8\nid:sub-8\n\n\x00")
	return c
}

func seedSTOMPSend(c *tt.STOMPConn, sender string) {
	c.Send("SEND\ndestination:/pub/chat/message/8\ncontent-type:application/json\n\n{\"sender\":\"" + sender + "\",\"message\":\"Hello STOMP!\"}\x00")
}

// TestSTOMPSeedChatFirstSendJoins: the seed STOMP chat script (CONNECT, SUBSCRIBE, SEND with no
// ENTER and no type) gets its message delivered to every member, after an implicit ENTER.
func TestSTOMPSeedChatFirstSendJoins(t *testing.T) {
	s := startServer(t, nil)
	won := seedSTOMPChat(t, s, "")
	seedSTOMPSend(won, "won11111")
	var last uint64
	expect := func(c *tt.STOMPConn, wantBody, wantType, wantSender string) {
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
	for _, c := range []*tt.STOMPConn{won, bob} {
		expect(c, "", "ENTER", "bob")
		expect(c, `{"sender":"bob","message":"Hello STOMP!"}`, "TALK", "bob")
	}
	if got := strings.Join(roomMembers(t, s, "8", ""), ","); got != "bob,won11111" {
		t.Fatalf("members %s", got)
	}
	// The native destination on the same endpoint keeps the explicit rule.
	carl := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	carl.Send("CONNECT\naccept-version:1.2\n\n\x00")
	carl.Expect("CONNECTED")
	carl.Send("SEND\ndestination:/topic/chat/8\n\n{\"sender\":\"carl\",\"message\":\"hi\"}\x00")
	if f := carl.Frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(string(f.Body), "ENTER first") {
		t.Fatalf("native TALK without ENTER: %s %q", f.Command, f.Body)
	}
}

// TestSeedChatJoinsAsLoggedInUser: with --auth-secret the implicit ENTER is the logged-in
// user's, whatever the message's "sender" says, on both seed chat routes.
func TestSeedChatJoinsAsLoggedInUser(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ann, bob := loginAs(t, s, "ann"), loginAs(t, s, "bob")
	a := tt.DialWS(t, s.ws("/chat?access_token="+ann))
	a.Send(seedChat("mallory", "Hello"))
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
	err := s.app.seed.Join(t.Context(), transport.Client{ID: "x"}, hub.PublishRequest{Topic: "chat/8", Data: []byte(`{"sender":"eve"}`)})
	if !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("anonymous implicit ENTER: %v", err)
	}
}

// TestSeedChatMembersOnlyRoom: in a members-only room the implicit ENTER is refused to a user
// the room does not admit, and so is the message.
func TestSeedChatMembersOnlyRoom(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Auth.Secret, c.APIKey, c.PrivateRooms = testSecret, "backend-key", []string{"chat/private/"}
	})
	ann, bob := loginAs(t, s, "ann"), loginAs(t, s, "bob")
	// A members-only room is the backend's to create.
	if code := do2(t, s, "POST", "/api/server/rooms", "apikey backend-key", `{"room":"private/x","owner":"ann"}`, nil); code != 200 {
		t.Fatalf("server API creates the room: %d", code)
	}
	send := func(c *tt.STOMPConn) {
		c.Send("SEND\ndestination:/pub/chat/message/private/x\ncontent-type:application/json\n\n{\"sender\":\"won11111\",\"message\":\"Hello STOMP!\"}\x00")
	}
	a := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	a.Send("CONNECT\naccept-version:1.2\npasscode:" + ann + "\n\n\x00")
	a.Expect("CONNECTED")
	send(a) // ann, its owner, enters with her first message
	eventually.True(t, 5*time.Second, "ann's message", func() bool { return len(chatHistory(t, s, "private/x", ann)) == 2 })
	b := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	b.Send("CONNECT\naccept-version:1.2\npasscode:" + bob + "\n\n\x00")
	b.Expect("CONNECTED")
	send(b)
	if f := b.Frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(string(f.Body), "members-only") {
		t.Fatalf("bob's first message to a members-only room: %s %q", f.Command, f.Body)
	}
	if got := strings.Join(chatHistory(t, s, "private/x", ann), " "); got != "ENTER:ann TALK:ann" {
		t.Fatalf("history %s", got)
	}
}
