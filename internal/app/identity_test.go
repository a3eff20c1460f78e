package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// tokenFor mints an HS256 token for user with testSecret, valid for ttl.
func tokenFor(t testing.TB, user string, ttl time.Duration) string {
	t.Helper()
	return mintWith(t, testSecret, user, ttl)
}

// mintWith mints an HS256 token for user with secret, valid for ttl.
func mintWith(t testing.TB, secret, user string, ttl time.Duration) string {
	t.Helper()
	sg, err := auth.NewSigner([]byte(secret), ttl, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := sg.Issue(user)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTokenExpiryAndRefresh: a WebSocket whose token runs out is told token_expired and closed;
// one that refreshes in time lives on; a refresh naming another user is refused.
func TestTokenExpiryAndRefresh(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	short := tokenFor(t, "ann", 2*time.Second)

	expiring := tt.DialWS(t, s.ws("/api/ws?access_token="+short))
	expiring.Op("connected")
	m := expiring.Op("disconnect")
	if m.Code != "token_expired" || !m.Reconnect {
		t.Fatalf("expired connection told %+v", m)
	}

	w := tt.DialWS(t, s.ws("/api/ws?access_token="+tokenFor(t, "ann", 2*time.Second)))
	w.Op("connected")
	w.Send(`{"op":"refresh","token":"` + tokenFor(t, "bob", time.Hour) + `"}`)
	if e := w.Msg(); e.Op != "error" || e.Code != "unauthorized" || !strings.Contains(e.Reason, "bob") {
		t.Fatalf("refresh as another user: %+v", e)
	}
	w.Send(`{"op":"refresh","token":"garbage"}`)
	if e := w.Msg(); e.Op != "error" || e.Code != "unauthorized" {
		t.Fatalf("refresh with garbage: %+v", e)
	}
	w.Send(`{"op":"refresh","token":"` + tokenFor(t, "ann", time.Hour) + `"}`)
	var ans struct{ Op, Expires string }
	b, _ := w.Next(5 * time.Second)
	if json.Unmarshal(b, &ans); ans.Op != "refreshed" {
		t.Fatalf("refresh answered %s", b)
	}
	if exp, err := time.Parse(time.RFC3339, ans.Expires); err != nil || time.Until(exp) < 50*time.Minute {
		t.Fatalf("refreshed expiry %q: %v", ans.Expires, err)
	}
	// Past the first token's expiry the connection still serves.
	w.Send(`{"op":"subscribe","topic":"news/x"}`)
	w.Op("subscribed")
	eventually.True(t, 5*time.Second, "the old token's expiry to pass", func() bool { return s.app.tr.ConnCount() == 1 && expiredBy(short) })
	do(t, s, "POST", "/api/publish/news/x", tokenFor(t, "bob", time.Hour), `{"n":1}`)
	if m := w.Op("message"); m.Topic != "news/x" {
		t.Fatalf("after refresh: %+v", m)
	}
}

// expiredBy reports whether the token's exp has passed.
func expiredBy(tok string) bool {
	v, _ := auth.New(auth.Config{Secret: []byte(testSecret)})
	_, err := v.Verify(tok)
	return err != nil
}

// TestSTOMPRefreshAndSSEExpiry: STOMP refreshes with SEND /rtlab/refresh; an SSE stream ends at
// its token's expiry with event: disconnect.
func TestSTOMPRefreshAndSSEExpiry(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	st := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + tokenFor(t, "ann", 2*time.Second) + "\n\n\x00")
	st.Expect("CONNECTED")
	st.Send("SEND\ndestination:/rtlab/refresh\npasscode:" + tokenFor(t, "ann", time.Hour) + "\nreceipt:r1\n\n\x00")
	f := st.Expect("RECEIPT")
	if exp, _ := f.Get("expires"); exp == "" {
		t.Fatalf("refresh receipt without expires: %+v", f.Headers)
	}
	st2 := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st2.Send("CONNECT\naccept-version:1.2\npasscode:" + tokenFor(t, "ann", time.Hour) + "\n\n\x00")
	st2.Expect("CONNECTED")
	st2.Send("SEND\ndestination:/rtlab/refresh\npasscode:" + tokenFor(t, "bob", time.Hour) + "\nreceipt:r1\n\n\x00")
	if f := st2.Frame(5 * time.Second); f.Command != "ERROR" {
		t.Fatalf("refresh as another user: %+v", f)
	}

	sse := tt.OpenSSE(t, s.URL+"/api/sse?topic=news/y&access_token="+tokenFor(t, "ann", 2*time.Second))
	ev := sse.Next(5 * time.Second)
	if ev.Event != "disconnect" || !strings.Contains(ev.Data, `"token_expired"`) {
		t.Fatalf("SSE at expiry: %+v", ev)
	}
	// The refreshed STOMP session is still there after the short token's end.
	st.Send("SEND\ndestination:/topic/news/y\nreceipt:r2\n\n{}\x00")
	st.Expect("RECEIPT")
}

// TestLogoutClosesConnections: revoking a token closes its WebSocket, STOMP and SSE
// connections with token_revoked, and the token is refused afterwards; another token of the
// same user is untouched.
func TestLogoutClosesConnections(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	tok, other := tokenFor(t, "ann", time.Hour), tokenFor(t, "ann", time.Hour)
	w := tt.DialWS(t, s.ws("/api/ws?access_token="+tok))
	w.Op("connected")
	keep := tt.DialWS(t, s.ws("/api/ws?access_token="+other))
	keep.Op("connected")
	st := tt.DialSTOMP(t, s.ws("/api/stomp"))
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + tok + "\n\n\x00")
	st.Expect("CONNECTED")
	sse := tt.OpenSSE(t, s.URL+"/api/sse?topic=news/z&access_token="+tok)
	if code, body := do(t, s, "POST", "/api/logout", tok, ""); code != 200 {
		t.Fatalf("logout: %d %s", code, body)
	}
	if m := w.Op("disconnect"); m.Code != "token_revoked" {
		t.Fatalf("WebSocket told %+v", m)
	}
	if f := st.Frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(fmt.Sprint(f.Headers), "token_revoked") {
		t.Fatalf("STOMP told %+v", f)
	}
	if ev := sse.Next(5 * time.Second); ev.Event != "disconnect" || !strings.Contains(ev.Data, "token_revoked") {
		t.Fatalf("SSE told %+v", ev)
	}
	if code, _ := do(t, s, "POST", "/api/publish/news/z", tok, `{}`); code != 401 {
		t.Fatalf("publish with the revoked token: %d", code)
	}
	keep.Send(`{"op":"ping","id":1}`)
	keep.Op("pong")
	if code, _ := do(t, s, "POST", "/api/logout", tok, ""); code != 200 {
		t.Fatalf("second logout: %d", code)
	}
}

// TestSenderIsTheAuthenticatedUser: a sender field naming someone else is overwritten on the
// native API, the seed /chat socket and STOMP /stomp/chat.
func TestSenderIsTheAuthenticatedUser(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ann, mallory := tokenFor(t, "ann", time.Hour), tokenFor(t, "mallory", time.Hour)
	watch := tt.DialWS(t, s.ws("/chat?access_token="+ann))
	watch.Send(`{"type":"ENTER","sender":"ann","roomId":"s","message":""}`)
	data := func() map[string]any {
		b, err := watch.Next(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	if m := data(); m["type"] != "ENTER" {
		t.Fatalf("ENTER echo: %v", m)
	}
	m := tt.DialWS(t, s.ws("/chat?access_token="+mallory))
	m.Send(`{"type":"ENTER","sender":"ann","roomId":"s","message":""}`)
	m.Send(`{"type":"TALK","sender":"ann","roomId":"s","message":"raw"}`)
	for _, want := range []string{"ENTER", "TALK"} {
		if got := data(); got["sender"] != "mallory" || got["type"] != want {
			t.Fatalf("seed /chat %s arrived as %v", want, got)
		}
	}
	st := tt.DialSTOMP(t, s.ws("/stomp/chat"))
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + mallory + "\n\n\x00")
	st.Expect("CONNECTED")
	st.Send("SEND\ndestination:/pub/chat/message/s\ncontent-type:application/json\nreceipt:r\n\n{\"type\":\"TALK\",\"sender\":\"ann\",\"send\\u0065r\":\"ann\",\"message\":\"stomp\"}\x00")
	st.Expect("RECEIPT")
	got := data()
	if got["sender"] != "mallory" || got["message"] != "stomp" {
		t.Fatalf("STOMP /stomp/chat arrived as %v", got)
	}
	code, _ := do(t, s, "POST", "/api/publish/chat/s?type=TALK", mallory, `{"sender":"ann","message":"native"}`)
	if got := data(); code != 200 || got["sender"] != "mallory" {
		t.Fatalf("native publish (%d) arrived as %v", code, got)
	}
}

// TestMembersOnlyRoom: the owner makes a room members-only; a non-member cannot read its
// history, members or live messages until invited; a removed member's live socket is closed.
func TestMembersOnlyRoom(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.PrivateRooms = []string{"chat/private/"} })
	ann, bob, eve := tokenFor(t, "ann", time.Hour), tokenFor(t, "bob", time.Hour), tokenFor(t, "eve", time.Hour)
	do(t, s, "POST", "/api/publish/chat/team?type=ENTER", ann, `{}`)
	do(t, s, "POST", "/api/publish/chat/team?type=ENTER", bob, `{}`)
	do(t, s, "POST", "/api/publish/chat/team?type=TALK", ann, `{"message":"secret"}`)
	// Open room: eve may read (subscribe first, then ENTER, as the seed servers allowed).
	if code, _ := do(t, s, "GET", "/api/topics/chat/team/history", eve, ""); code != 200 {
		t.Fatalf("open room history: %d", code)
	}
	if code, _ := do(t, s, "POST", "/api/chat/team/private", bob, `{"private":true}`); code != 403 {
		t.Fatalf("non-owner makes private: %d", code)
	}
	if code, body := do(t, s, "POST", "/api/chat/team/private", ann, `{"private":true}`); code != 200 {
		t.Fatalf("owner makes private: %d %s", code, body)
	}
	for _, path := range []string{"/api/topics/chat/team/history", "/api/chat/team/members", "/api/poll/chat/team?since=0", "/api/sse?topic=chat/team"} {
		if code, body := do(t, s, "GET", path, eve, ""); code != 403 {
			t.Errorf("eve GET %s: %d %s", path, code, body)
		}
	}
	if code, _ := do(t, s, "POST", "/api/publish/chat/team?type=ENTER", eve, `{}`); code != 403 {
		t.Fatalf("eve ENTERs a members-only room: %d", code)
	}
	// bob was in the room when it turned members-only: he stays; he is removed later.
	bw := tt.DialWS(t, s.ws("/api/ws?access_token="+bob))
	bw.Op("connected")
	bw.Send(`{"op":"subscribe","topic":"chat/team"}`)
	bw.Op("subscribed")
	if code, _ := do(t, s, "POST", "/api/chat/team/members", ann, `{"user":"eve"}`); code != 200 {
		t.Fatalf("invite: %d", code)
	}
	if code, _ := do(t, s, "GET", "/api/topics/chat/team/history", eve, ""); code != 200 {
		t.Fatalf("invited eve reads history: %d", code)
	}
	if code, body := do(t, s, "DELETE", "/api/chat/team/members/bob", ann, ""); code != 200 {
		t.Fatalf("remove: %d %s", code, body)
	}
	do(t, s, "POST", "/api/publish/chat/team?type=TALK", ann, `{"message":"after bob"}`)
	for {
		b, err := bw.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("bob's socket: %v", err)
		}
		var m tt.Msg
		_ = json.Unmarshal(b, &m)
		if m.Op == "message" && strings.Contains(string(m.Data), "after bob") {
			t.Fatal("removed member received a live message")
		}
		if m.Op == "disconnect" {
			if m.Code != "forbidden" {
				t.Fatalf("bob told %+v", m)
			}
			break
		}
	}
	// A --private-rooms room exists only once the backend creates it: a first ENTER is refused
	// (test/hostile creates one with rtlab.own and the server API).
	if code, body := do(t, s, "POST", "/api/publish/chat/private/x?type=ENTER", ann, `{}`); code != 403 || !strings.Contains(body, "does not exist yet") {
		t.Fatalf("first ENTER into a --private-rooms room: %d %s", code, body)
	}
	if code, _ := do(t, s, "GET", "/api/topics/chat/private/x/history", eve, ""); code != 403 {
		t.Fatalf("prefix-private room history for a non-member: %d", code)
	}
}

// TestRoomLookupsLeaveNothing: member lists of rooms that do not exist answer 404 and leave no
// view, subscription or topic behind; nobody can claim such a room.
func TestRoomLookupsLeaveNothing(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret })
	ann := tokenFor(t, "ann", time.Hour)
	before := s.app.hub.Stats().Topics.Load()
	for i := range 200 {
		if code, _ := do(t, s, "GET", fmt.Sprintf("/api/chat/r%d/members", i), ann, ""); code != 404 {
			t.Fatalf("missing room %d: %d", i, code)
		}
	}
	if code, _ := do(t, s, "POST", "/api/chat/r1/owner", ann, `{"owner":"ann"}`); code != 404 {
		t.Fatalf("claiming a room nobody entered: %d", code)
	}
	if n := s.app.chat.ViewCount(); n != 0 {
		t.Fatalf("%d room views after lookups of missing rooms", n)
	}
	if after := s.app.hub.Stats().Topics.Load(); after != before {
		t.Fatalf("topics with subscribers %d → %d after lookups", before, after)
	}
}
