package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// secret is the --auth-secret of the identity tests' servers: an application's backend mints
// tokens with it, as these tests do with golang-jwt.
const secret = "hostile-suite-secret-0123456789"

func mint(t testing.TB, user string, ttl time.Duration) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": user, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": fmt.Sprintf("%s-%d", user, now.UnixNano()),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// call makes an HTTP request with an optional bearer token and returns status and body.
func call(t testing.TB, p *servertest.Proc, method, path, token, body string) (int, string) {
	t.Helper()
	d := tt.Dialer{}
	if token != "" {
		d = d.Bearer(token)
	}
	code, b := d.Call(t, method, p.URL()+path, body)
	return code, string(b)
}

// check waits until the bystander has published n times, then checks it.
func check(t testing.TB, b *servertest.Bystander, n int) {
	t.Helper()
	eventually.Within(10*time.Second, func() bool { return b.Published() >= n })
	b.Check(n)
}

func authed(t testing.TB, args ...string) *servertest.Proc {
	return servertest.Start(t, bin, append([]string{"--auth-secret", secret}, args...)...)
}

// TestLoginForAnyNameRefused: with a secret, POST /api/login mints nothing for a bare name.
func TestLoginForAnyNameRefused(t *testing.T) {
	p := authed(t)
	b := servertest.StartBystander(t, p, "news/login", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	for _, name := range []string{"admin", "ann", "root"} {
		code, body := call(t, p, "POST", "/api/login", "", `{"user":"`+name+`"}`)
		if code != http.StatusNotFound || strings.Contains(body, "token\":") {
			t.Fatalf("login as %s: %d %s", name, code, body)
		}
	}
	if code, _ := call(t, p, "GET", "/api/notifications", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("notifications without a token: %d", code)
	}
	check(t, b, 5)
}

// TestLogoutClosesOpenConnections: after POST /api/logout, the token's open WebSocket, STOMP
// and SSE connections are closed with token_revoked, and the token publishes nothing more.
func TestLogoutClosesOpenConnections(t *testing.T) {
	p := authed(t)
	b := servertest.StartBystander(t, p, "news/logout", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	tok := mint(t, "ann", time.Hour)

	w := tt.DialWS(t, p.WS("/api/ws?access_token="+tok))
	w.Until(`"connected"`, 5*time.Second)
	w.Send(`{"op":"subscribe","topic":"notify/ann"}`)
	w.Until(`"subscribed"`, 5*time.Second)
	st := tt.DialWS(t, p.WS("/api/stomp"), "v12.stomp")
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + tok + "\n\n\x00")
	st.Until("CONNECTED", 5*time.Second)
	sseReq, _ := http.NewRequest("GET", p.URL()+"/api/sse?topic=notify/ann&access_token="+tok, nil)
	sseRes, err := http.DefaultClient.Do(sseReq)
	if err != nil || sseRes.StatusCode != 200 {
		t.Fatalf("SSE: %v %v", sseRes, err)
	}
	defer sseRes.Body.Close()

	if code, body := call(t, p, "POST", "/api/logout", tok, ""); code != 200 {
		t.Fatalf("logout: %d %s", code, body)
	}
	if said, _ := w.Closed(5 * time.Second); !strings.Contains(said, `"code":"token_revoked"`) {
		t.Fatalf("WebSocket closed saying %q", said)
	}
	if said, _ := st.Closed(5 * time.Second); !strings.Contains(said, "ERROR") || !strings.Contains(said, "token_revoked") {
		t.Fatalf("STOMP closed saying %q", said)
	}
	rest, _ := io.ReadAll(bufio.NewReader(sseRes.Body)) // ends when the server closes
	if !strings.Contains(string(rest), "event: disconnect") || !strings.Contains(string(rest), "token_revoked") {
		t.Fatalf("SSE ended with %q", rest)
	}
	if code, _ := call(t, p, "POST", "/api/publish/news/logout", tok, `{"after":"logout"}`); code != http.StatusUnauthorized {
		t.Fatalf("publish with the revoked token: %d", code)
	}
	if _, err := (tt.Dialer{}).TryWS(context.Background(), p.WS("/api/ws?access_token="+tok)); err == nil {
		t.Fatal("a new WebSocket with the revoked token was accepted")
	}
	check(t, b, 5)
}

// TestSenderOverwritten: mallory claims to be ann in the data on /chat, /stomp/chat and the
// native API; ann's /chat socket sees mallory every time.
func TestSenderOverwritten(t *testing.T) {
	p := authed(t)
	b := servertest.StartBystander(t, p, "news/sender", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	ann, mallory := mint(t, "ann", time.Hour), mint(t, "mallory", time.Hour)
	watch := tt.DialWS(t, p.WS("/chat?access_token="+ann))
	watch.Send(`{"type":"ENTER","sender":"ann","roomId":"8","message":""}`)
	watch.Until(`"ENTER"`, 5*time.Second)

	m := tt.DialWS(t, p.WS("/chat?access_token="+mallory))
	m.Send(`{"type":"ENTER","sender":"ann","roomId":"8","message":""}`)
	m.Send(`{"type":"CHAT","sender":"ann","roomId":"8","message":"via /chat"}`)
	got := []string{watch.Until("via /chat", 5*time.Second)}
	st := tt.DialWS(t, p.WS("/stomp/chat"), "v12.stomp")
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + mallory + "\n\n\x00")
	st.Until("CONNECTED", 5*time.Second)
	st.Send("SEND\ndestination:/pub/chat/message/8\ncontent-type:application/json\n\n{\"type\":\"TALK\",\"sender\":\"ann\",\"message\":\"via stomp\"}\x00")
	got = append(got, watch.Until("via stomp", 5*time.Second))
	if code, body := call(t, p, "POST", "/api/publish/chat/8?type=TALK", mallory, `{"sender":"ann","message":"via native"}`); code != 200 {
		t.Fatalf("native publish: %d %s", code, body)
	}
	got = append(got, watch.Until("via native", 5*time.Second))
	for _, msg := range got {
		var d struct{ Sender string }
		_ = json.Unmarshal([]byte(msg), &d)
		if d.Sender != "mallory" {
			t.Errorf("arrived as %s", msg)
		}
	}
	check(t, b, 5)
}

// TestOwnerSurvivesFloodAndCrash: ann owns a room; mallory floods it with ENTER/LEAVE until
// ann's ENTER is long out of history; the server is killed with SIGKILL and restarted; ann
// still owns the room and mallory cannot take it.
func TestOwnerSurvivesFloodAndCrash(t *testing.T) {
	p := authed(t, "--durable-history", "50", "--msg-rate", "-1")
	b := servertest.StartBystander(t, p, "news/flood", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	ann, mallory := mint(t, "ann", time.Hour), mint(t, "mallory", time.Hour)
	if code, body := call(t, p, "POST", "/api/publish/chat/annroom?type=ENTER", ann, `{}`); code != 200 {
		t.Fatalf("ann ENTER: %d %s", code, body)
	}
	call(t, p, "POST", "/api/publish/chat/annroom?type=LEAVE", ann, `{}`)
	m := tt.DialWS(t, p.WS("/api/ws?access_token="+mallory))
	m.Until(`"connected"`, 5*time.Second)
	const pairs = 150 // 300 publications: six times the history kept
	for i := range pairs {
		m.Send(fmt.Sprintf(`{"op":"publish","topic":"chat/annroom","type":"ENTER","data":{},"id":%d}`, 2*i))
		m.Send(fmt.Sprintf(`{"op":"publish","topic":"chat/annroom","type":"LEAVE","data":{},"id":%d}`, 2*i+1))
	}
	m.Until(fmt.Sprintf(`"id":%d`, 2*pairs-1), 30*time.Second)
	var h struct {
		Publications []struct{ Sender string }
	}
	_, body := call(t, p, "GET", "/api/topics/chat/annroom/history?since=0&limit=1000", ann, "")
	_ = json.Unmarshal([]byte(body), &h)
	for _, pub := range h.Publications {
		if pub.Sender == "ann" {
			t.Fatal("ann's ENTER is still in history: the flood was too small to test anything")
		}
	}
	check(t, b, 5)

	p.Restart(true) // SIGKILL
	b2 := servertest.StartBystander(t, p, "news/flood2", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	code, body := call(t, p, "GET", "/api/chat/annroom/members", ann, "")
	var ri struct{ Owner string }
	_ = json.Unmarshal([]byte(body), &ri)
	if code != 200 || ri.Owner != "ann" {
		t.Fatalf("after the flood and SIGKILL: %d %s", code, body)
	}
	if code, _ := call(t, p, "POST", "/api/chat/annroom/owner", mallory, `{"owner":"mallory"}`); code != http.StatusForbidden {
		t.Fatalf("mallory takes the room: %d", code)
	}
	if code, _ := call(t, p, "POST", "/api/chat/nobodyroom/owner", mallory, `{"owner":"mallory"}`); code != http.StatusNotFound {
		t.Fatalf("mallory claims a room nobody entered: %d", code)
	}
	if code, body := call(t, p, "POST", "/api/chat/annroom/owner", ann, `{"owner":"ann"}`); code != 200 {
		t.Fatalf("ann acts as owner: %d %s", code, body)
	}
	check(t, b2, 5)
}

// TestNonMemberHistoryRefused: a members-only room's history, member list and live messages
// are refused to a user who is not a member; members read them.
func TestNonMemberHistoryRefused(t *testing.T) {
	p := authed(t, "--private-rooms", "chat/private/")
	b := servertest.StartBystander(t, p, "news/members", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	// ann owns chat/private/ops on her backend's word: only the backend creates such a room.
	ann, eve := mintGrants(t, "ann", time.Hour, map[string]any{"own": []string{"chat/private/ops"}}), mint(t, "eve", time.Hour)
	for _, room := range []string{"team", "private/ops"} {
		call(t, p, "POST", "/api/publish/chat/"+room+"?type=ENTER", ann, `{}`)
		call(t, p, "POST", "/api/publish/chat/"+room+"?type=TALK", ann, `{"message":"for members"}`)
	}
	if code, body := call(t, p, "POST", "/api/chat/team/private", ann, `{"private":true}`); code != 200 {
		t.Fatalf("make private: %d %s", code, body)
	}
	for _, room := range []string{"team", "private/ops"} {
		for _, path := range []string{"/api/topics/chat/" + room + "/history?since=0", "/api/poll/chat/" + room + "?since=0", "/api/chat/" + room + "/members"} {
			code, body := call(t, p, "GET", path, eve, "")
			if code != http.StatusForbidden || strings.Contains(body, "for members") {
				t.Errorf("eve GET %s: %d %s", path, code, body)
			}
			if code, _ := call(t, p, "GET", path, ann, ""); code != 200 {
				t.Errorf("ann GET %s: %d", path, code)
			}
		}
		w := tt.DialWS(t, p.WS("/api/ws?access_token="+eve))
		w.Until(`"connected"`, 5*time.Second)
		w.Send(`{"op":"subscribe","topic":"chat/` + room + `","since":0}`)
		if got := w.Until(`"op":"`, 5*time.Second); !strings.Contains(got, `"forbidden"`) {
			t.Errorf("eve subscribes to chat/%s: %s", room, got)
		}
	}
	if !bytes.Contains([]byte(p.Output()), []byte("tokens required")) {
		t.Errorf("start line does not say tokens are required:\n%s", p.Output())
	}
	check(t, b, 5)
}
