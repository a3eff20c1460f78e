package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/notify"
	"github.com/rtlab/rtlab/internal/stomp"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

const testSecret = "test-secret-0123456789abcdef"

// loginAs returns a token for user: minted with testSecret as an application's backend would
// when the server has a secret (login is off then), else from POST /api/login (open dev mode).
func loginAs(t testing.TB, s *testServer, user string) string {
	t.Helper()
	if secret := s.app.cfg.Auth.Secret; secret != "" {
		return mintWith(t, secret, user, time.Hour)
	}
	var ans struct{ Token, User string }
	if code := s.post(t, "/api/login", `{"user":"`+user+`"}`, &ans); code != 200 || ans.Token == "" || ans.User != user {
		t.Fatalf("login %s: %d %+v", user, code, ans)
	}
	return ans.Token
}

func TestAuthRequiredOnEveryTransport(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	tok := loginAs(t, s, "ann")
	// Anonymous: refused clearly everywhere.
	for _, path := range []string{"/api/poll/a", "/api/sse?topic=a", "/api/topics/a/history", "/cur/1"} {
		if code, body := do(t, s, "GET", path, "", ""); code != 401 || !strings.Contains(body, "unauthorized") {
			t.Errorf("GET %s anonymous: %d %s", path, code, body)
		}
	}
	if code, _ := do(t, s, "POST", "/api/publish/a", "", `{}`); code != 401 {
		t.Errorf("anonymous publish: %d", code)
	}
	if _, err := (tt.Dialer{}).TryWS(t.Context(), s.ws("/api/ws")); err == nil {
		t.Error("anonymous WebSocket accepted")
	}
	st := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st.Send("CONNECT\naccept-version:1.2\n\n\x00")
	if f := st.Frame(5 * time.Second); f.Command != "ERROR" {
		t.Errorf("anonymous STOMP CONNECT: %+v", f)
	}
	// Forged and expired-looking tokens.
	for _, bad := range []string{"garbage", tok[:len(tok)-2] + "xx", strings.Replace(tok, tok[2:4], "zz", 1)} {
		if code, _ := do(t, s, "GET", "/api/poll/a", bad, ""); code != 401 {
			t.Errorf("forged token %q: %d", bad, code)
		}
	}
	// With the token: every transport works.
	if code, _ := do(t, s, "GET", "/api/poll/a", tok, ""); code != 200 {
		t.Errorf("poll with token: %d", code)
	}
	if code, _ := do(t, s, "GET", "/api/poll/a?access_token="+tok, "", ""); code != 200 {
		t.Errorf("poll with access_token: %d", code)
	}
	w := tt.DialWS(t, s.ws("/api/ws?access_token="+tok))
	if m := w.Op("connected"); m.Code != "" {
		t.Fatal(m)
	}
	st2 := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st2.Send("CONNECT\naccept-version:1.2\nlogin:ann\npasscode:" + tok + "\n\n\x00")
	if f := st2.Expect("CONNECTED"); func() string { v, _ := f.Get("user-name"); return v }() != "ann" {
		t.Errorf("STOMP user: %+v", f.Headers)
	}
	tt.OpenSSE(t, s.URL+"/api/sse?topic=a&access_token="+tok)
	// Logout revokes the token; replaying it is refused.
	if code, _ := do(t, s, "POST", "/api/logout", tok, ""); code != 200 {
		t.Fatalf("logout: %d", code)
	}
	if code, body := do(t, s, "GET", "/api/poll/a", tok, ""); code != 401 || !strings.Contains(body, "revoked") {
		t.Errorf("token after logout: %d %s", code, body)
	}
	if code, body := do(t, s, "POST", "/api/login", "", `{"user":"admin"}`); code != 404 || !strings.Contains(body, "backend") {
		t.Errorf("login for a bare name with a secret: %d %s", code, body)
	}
}

func TestChatRulesAndMembers(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.ChatMaxBytes = 512 })
	ann, bob := loginAs(t, s, "ann"), loginAs(t, s, "bob")
	if code, body := do(t, s, "POST", "/api/publish/chat/r?type=TALK", bob, `{"message":"sneak"}`); code != 403 || !strings.Contains(body, "ENTER") {
		t.Fatalf("TALK before ENTER: %d %s", code, body)
	}
	if code, _ := do(t, s, "POST", "/api/publish/chat/r?type=LEAVE", bob, `{}`); code != 400 {
		t.Fatalf("LEAVE without ENTER: %d", code)
	}
	if code, _ := do(t, s, "GET", "/api/chat/r/members", ann, ""); code != 404 {
		t.Fatalf("unknown room: %d", code)
	}
	do(t, s, "POST", "/api/publish/chat/r?type=ENTER", ann, `{}`)
	do(t, s, "POST", "/api/publish/chat/r?type=ENTER", bob, `{}`)
	if code, body := do(t, s, "POST", "/api/publish/chat/r?type=TALK", bob, `{"message":"hi"}`); code != 200 {
		t.Fatalf("TALK after ENTER: %d %s", code, body)
	}
	if code, _ := do(t, s, "POST", "/api/publish/chat/r?type=TALK", bob, `{"message":"`+strings.Repeat("x", 600)+`"}`); code != 413 {
		t.Fatalf("oversized chat message: %d", code)
	}
	var ri chat.RoomInfo
	_, body := do(t, s, "GET", "/api/chat/r/members", ann, "")
	_ = json.Unmarshal([]byte(body), &ri)
	if ri.Owner != "ann" || len(ri.Members) != 2 || ri.Members[1].User != "bob" {
		t.Fatalf("members: %s", body)
	}
	// Only the owner hands the room over.
	if code, _ := do(t, s, "POST", "/api/chat/r/owner", bob, `{"owner":"bob"}`); code != 403 {
		t.Fatalf("non-owner set owner: %d", code)
	}
	if code, _ := do(t, s, "POST", "/api/chat/r/owner", ann, `{"owner":"bob"}`); code != 200 {
		t.Fatalf("owner hand-over: %d", code)
	}
	do(t, s, "POST", "/api/publish/chat/r?type=LEAVE", bob, `{}`)
	_, body = do(t, s, "GET", "/api/chat/r/members", ann, "")
	_ = json.Unmarshal([]byte(body), &ri)
	if ri.Owner != "bob" || len(ri.Members) != 1 {
		t.Fatalf("after LEAVE: %s", body)
	}
	// Clients may not publish notifications, nor read someone else's.
	if code, _ := do(t, s, "POST", "/api/publish/notify/ann", bob, `{}`); code != 403 {
		t.Fatalf("publish to notify/: %d", code)
	}
	if code, _ := do(t, s, "GET", "/api/sse?topic=notify/ann", bob, ""); code != 403 {
		t.Fatalf("SSE on another's notifications: %d", code)
	}
	w := tt.DialWS(t, s.ws("/api/ws?access_token="+bob))
	w.Op("connected")
	w.Send(`{"op":"subscribe","topic":"notify/ann"}`)
	if e := w.Msg(); e.Op != "error" || e.Code != "forbidden" {
		t.Fatalf("ws subscribe to another's notifications: %+v", e)
	}
	st := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + bob + "\n\n\x00SUBSCRIBE\nid:1\ndestination:/topic/notify/ann\n\n\x00")
	st.Expect("CONNECTED")
	// Refused alone: a MESSAGE naming the code, and the session goes on.
	if f := st.Frame(5 * time.Second); f.Command != "MESSAGE" || !hasHeader(f, "refused", "forbidden") {
		t.Fatalf("stomp subscribe to another's notifications: %+v", f)
	}
	st.Send("SUBSCRIBE\nid:2\ndestination:/topic/notify/bob\nreceipt:r2\n\n\x00")
	if f := st.Frame(5 * time.Second); f.Command != "RECEIPT" {
		t.Fatalf("stomp subscribe to one's own notifications after a refusal: %+v", f)
	}
	for transport, least := range map[string]float64{"http": 3, "ws": 1, "stomp": 1} {
		if n := metricValue(t, s, `rtlab_refused_total{reason="forbidden",transport="`+transport+`"}`); n < least {
			t.Errorf("%s refusals counted: %v, want at least %v", transport, n, least)
		}
	}
}

func TestLeaveWhenLastConnectionDrops(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ann := loginAs(t, s, "ann")
	a1 := tt.DialWS(t, s.ws("/api/ws?access_token="+ann))
	a2 := tt.DialWS(t, s.ws("/api/ws?access_token="+ann))
	for _, c := range []*tt.WSConn{a1, a2} {
		c.Op("connected")
		c.Send(`{"op":"publish","topic":"chat/x","type":"ENTER","data":{}}`)
		c.Op("ack")
	}
	members := func() int {
		var ri chat.RoomInfo
		_, body := do(t, s, "GET", "/api/chat/x/members", ann, "")
		_ = json.Unmarshal([]byte(body), &ri)
		return len(ri.Members)
	}
	a1.Close()
	eventually.True(t, 5*time.Second, "the first connection's end", func() bool { return memberConns(s, "chat/x", "ann") == 1 })
	if members() != 1 {
		t.Fatal("ann left although a second connection is open")
	}
	a2.Close()
	var last tt.Publication
	eventually.True(t, 5*time.Second, "the automatic LEAVE", func() bool {
		var ans tt.PollAnswer
		s.get(t, "/api/poll/chat/x?since=0&access_token="+ann, &ans)
		last = ans.Publications[len(ans.Publications)-1]
		return last.Type != "ENTER"
	})
	if last.Type != "LEAVE" || last.Sender != "ann" || members() != 0 {
		t.Fatalf("last chat publication: %+v; %d members", last, members())
	}
}

// TestNotificationOnEveryTransport: a TALK alarms the room owner on every transport; unread
// counts and mark-as-read work.
func TestNotificationOnEveryTransport(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	owner, guest := loginAs(t, s, "owner"), loginAs(t, s, "guest")
	do(t, s, "POST", "/api/publish/chat/n?type=ENTER", owner, `{}`)
	do(t, s, "POST", "/api/publish/chat/n?type=ENTER", guest, `{}`)
	var clients []tt.Client
	for _, k := range tt.Kinds {
		c := tt.New(t, k, tt.Options{Nodes: []string{s.URL}, Dialer: tt.Dialer{}.Bearer(owner)})
		c.Subscribe("notify/owner", nil)
		tt.AwaitUp(t, c)
		clients = append(clients, c)
	}
	do(t, s, "POST", "/api/publish/chat/n?type=TALK", guest, `{"message":"are you there?"}`)
	for _, c := range clients {
		data := tt.Messages(t, c, 1, 5*time.Second)[0].Data
		var d struct{ Room, From, Message string }
		if err := json.Unmarshal(data, &d); err != nil || d.Room != "n" || d.From != "guest" || d.Message != "are you there?" {
			t.Fatalf("%s notification %s: %v", c.Kind(), data, err)
		}
	}
	// The owner's own TALK does not notify the owner.
	do(t, s, "POST", "/api/publish/chat/n?type=TALK", owner, `{"message":"yes"}`)
	var ns notify.State
	_, body := do(t, s, "GET", "/api/notifications", owner, "")
	_ = json.Unmarshal([]byte(body), &ns)
	if ns.Unread != 1 || len(ns.Notifications) != 1 {
		t.Fatalf("unread: %s", body)
	}
	_, body = do(t, s, "POST", "/api/notifications/read", owner, "")
	_ = json.Unmarshal([]byte(body), &ns)
	if ns.Unread != 0 || ns.Read != 1 {
		t.Fatalf("after mark-as-read: %s", body)
	}
	if code, _ := do(t, s, "GET", "/api/notifications?user=owner", guest, ""); code != 403 {
		t.Fatalf("guest reading owner's notifications: %d", code)
	}
}

func hasHeader(f stomp.Frame, key, want string) bool {
	v, _ := f.Get(key)
	return v == want
}
