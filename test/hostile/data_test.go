package hostile

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// mintGrants mints a token for user with the rtlab claim's grants.
func mintGrants(t testing.TB, user string, ttl time.Duration, grants map[string]any) string {
	t.Helper()
	now := time.Now()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": user, "iat": now.Unix(), "exp": now.Add(ttl).Unix(), "jti": fmt.Sprintf("%s-%d", user, now.UnixNano()),
		"rtlab": grants,
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const apiKey = "hostile-backend-key"

// TestMembersOnlyRoomNotSquatted: eve's first ENTER into a --private-rooms room, or a room the
// backend names in rtlab.rooms, is refused: she cannot become the owner of a room the backend
// will hand out. The backend creates them: a token naming ann owner (rtlab.own), or the server API.
func TestMembersOnlyRoomNotSquatted(t *testing.T) {
	p := authed(t, "--private-rooms", "chat/private/", "--api-key", apiKey)
	b := servertest.StartBystander(t, p, "news/squat", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	eve := mint(t, "eve", time.Hour)
	eveNamed := mintGrants(t, "eve", time.Hour, map[string]any{"rooms": []string{"chat/team-42"}})
	for _, c := range []struct{ room, tok string }{{"private/ops", eve}, {"team-42", eveNamed}} {
		code, body := call(t, p, "POST", "/api/publish/chat/"+c.room+"?type=ENTER", c.tok, `{}`)
		if _, reason := refusal(t, []byte(body)); code != http.StatusForbidden || !strings.Contains(reason, "does not exist yet") {
			t.Fatalf("eve's first ENTER into chat/%s: %d %s", c.room, code, body)
		}
	}
	ann := mintGrants(t, "ann", time.Hour, map[string]any{"own": []string{"chat/private/ops"}})
	if code, body := call(t, p, "POST", "/api/publish/chat/private/ops?type=ENTER", ann, `{}`); code != 200 {
		t.Fatalf("ann, owner by her token, enters: %d %s", code, body)
	}
	hc := tt.Dialer{Header: http.Header{"Authorization": {"apikey " + apiKey}}}
	if code, body := hc.Call(t, "POST", p.URL()+"/api/server/rooms", `{"room":"team-42","owner":"bob","invited":["carol"]}`); code != 200 || !strings.Contains(string(body), `"owner":"bob"`) {
		t.Fatalf("server API creates chat/team-42: %d %s", code, body)
	}
	for _, room := range []string{"private/ops", "team-42"} {
		if code, _ := call(t, p, "GET", "/api/topics/chat/"+room+"/history?since=0", eve, ""); code != http.StatusForbidden {
			t.Errorf("eve reads chat/%s: %d", room, code)
		}
	}
	// Named in rtlab.rooms, eve is admitted to the room the backend created.
	if code, body := call(t, p, "POST", "/api/publish/chat/team-42?type=ENTER", eveNamed, `{}`); code != 200 {
		t.Fatalf("eve, named by the backend, enters the backend's room: %d %s", code, body)
	}
	check(t, b, 5)
}

// TestNarrowedRefreshEndsSubscriptions: a refresh whose token's rtlab.subscribe no longer names
// a topic ends that subscription (WebSocket: an error naming the topic; STOMP: a MESSAGE with
// unsubscribed:forbidden), and nothing published there afterwards reaches the client.
func TestNarrowedRefreshEndsSubscriptions(t *testing.T) {
	p := authed(t)
	b := servertest.StartBystander(t, p, "news/refresh", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	wide := mintGrants(t, "ann", time.Hour, map[string]any{"subscribe": []string{"news/*"}})
	narrow := mintGrants(t, "ann", time.Hour, map[string]any{"subscribe": []string{"news/kept"}})
	w := tt.DialWS(t, p.WS("/api/ws?access_token="+wide))
	w.Until(`"connected"`, 5*time.Second)
	for _, topic := range []string{"news/kept", "news/secret"} {
		w.Send(`{"op":"subscribe","topic":"` + topic + `"}`)
		w.Until(`"subscribed"`, 5*time.Second)
	}
	st := tt.DialWS(t, p.WS("/api/stomp"), "v12.stomp")
	st.Send("CONNECT\naccept-version:1.2\npasscode:" + wide + "\n\n\x00")
	st.Until("CONNECTED", 5*time.Second)
	st.Send("SUBSCRIBE\nid:s1\ndestination:/topic/news/secret\nreceipt:r1\n\n\x00")
	st.Until("RECEIPT", 5*time.Second)

	w.Send(`{"op":"refresh","token":"` + narrow + `"}`)
	if got := w.Until(`"op":"error"`, 5*time.Second); !strings.Contains(got, `"forbidden"`) || !strings.Contains(got, `"topic":"news/secret"`) {
		t.Fatalf("WebSocket told %s", got)
	}
	w.Until(`"refreshed"`, 5*time.Second)
	st.Send("SEND\ndestination:/rtlab/refresh\npasscode:" + narrow + "\nreceipt:r2\n\n\x00")
	if got := st.Until("unsubscribed:", 5*time.Second); !strings.Contains(got, "unsubscribed:forbidden") || !strings.Contains(got, "subscription:s1") {
		t.Fatalf("STOMP told %q", got)
	}
	st.Until("RECEIPT", 5*time.Second)
	call(t, p, "POST", "/api/publish/news/secret", mint(t, "bob", time.Hour), `{"after":"refresh"}`)
	call(t, p, "POST", "/api/publish/news/kept", mint(t, "bob", time.Hour), `{"kept":1}`)
	if got := w.Until(`"message"`, 5*time.Second); strings.Contains(got, "after") {
		t.Fatalf("WebSocket received %s after its subscription ended", got)
	}
	if msg, err := st.Next(500 * time.Millisecond); err == nil && strings.Contains(string(msg), "after") {
		t.Fatalf("STOMP received %q after its subscription ended", msg)
	}
	check(t, b, 5)
}

// TestLongPollEndsWithItsToken: a long poll waiting when its token expires, or is logged out,
// answers 401 then, instead of waiting on and answering later publications.
func TestLongPollEndsWithItsToken(t *testing.T) {
	p := authed(t)
	b := servertest.StartBystander(t, p, "news/lp", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	short := mint(t, "ann", 2*time.Second)
	revoked := mint(t, "bob", time.Hour)
	type answer struct {
		code int
		took time.Duration
	}
	poll := func(tok string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			start := time.Now()
			code, _ := (tt.Dialer{}).Bearer(tok).Call(t, "GET", p.URL()+"/api/poll/news/lp-quiet?wait=25s", "")
			ch <- answer{code, time.Since(start)}
		}()
		return ch
	}
	expiring, loggedOut := poll(short), poll(revoked)
	time.Sleep(300 * time.Millisecond) // both waiting
	if code, body := call(t, p, "POST", "/api/logout", revoked, ""); code != 200 {
		t.Fatalf("logout: %d %s", code, body)
	}
	for name, ch := range map[string]<-chan answer{"logged out": loggedOut, "expired": expiring} {
		select {
		case a := <-ch:
			if a.code != http.StatusUnauthorized || a.took > 10*time.Second {
				t.Errorf("%s token's long poll: %d after %v", name, a.code, a.took)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s token's long poll still waiting", name)
		}
	}
	check(t, b, 5)
}

// TestTextRefusedNotMangled: invalid UTF-8 in a binary WebSocket frame's fields and in the
// server API's, and control characters in type or sender, are refused (never stored as U+FFFD
// or NUL); JSON data with raw line breaks reaches an SSE client as one data: line.
func TestTextRefusedNotMangled(t *testing.T) {
	p := authed(t, "--api-key", apiKey)
	b := servertest.StartBystander(t, p, "news/text", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	tok := mint(t, "ann", time.Hour)
	w := tt.DialWS(t, p.WS("/api/ws?access_token="+tok))
	w.Until(`"connected"`, 5*time.Second)
	w.SendBinary([]byte("{\"op\":\"publish\",\"topic\":\"news/text-bad\",\"type\":\"T\xff\",\"data\":{},\"id\":1}"))
	if got := w.Until(`"id":1`, 5*time.Second); !strings.Contains(got, `"bad_request"`) {
		t.Fatalf("binary frame with invalid UTF-8: %s", got)
	}
	w.Send(`{"op":"publish","topic":"news/text-bad","type":"T\u0000","data":{},"id":2}`)
	if got := w.Until(`"id":2`, 5*time.Second); !strings.Contains(got, `"bad_request"`) {
		t.Fatalf("NUL in type: %s", got)
	}
	hc := tt.Dialer{Header: http.Header{"Authorization": {"apikey " + apiKey}}}
	for _, body := range []string{
		"{\"topic\":\"news/text-bad\",\"data\":{},\"sender\":\"ev\xffe\"}",
		`{"topic":"news/text-bad","data":{},"sender":"eve\u0000"}`,
		`{"topic":"news/text-bad","data":{},"type":"A\nB"}`,
	} {
		if code, ans := hc.Call(t, "POST", p.URL()+"/api/server/publish", body); code != http.StatusBadRequest {
			t.Errorf("server API %q: %d %s", body, code, ans)
		}
	}
	if code, body := call(t, p, "GET", "/api/topics/news/text-bad/history?since=0", tok, ""); code != 200 || strings.Contains(body, `"publications":[{`) {
		t.Fatalf("something was stored: %d %s", code, body)
	}

	req, _ := http.NewRequest("GET", p.URL()+"/api/sse?topic=news/text-lines&access_token="+tok, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("SSE: %v %v", res, err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	if code, body := call(t, p, "POST", "/api/publish/news/text-lines", tok, "{\n\"a\": 1,\r\n\"b\": [2,\n3]\n}"); code != 200 {
		t.Fatalf("publish with line breaks: %d %s", code, body)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: {") {
			if !strings.Contains(line, `"data":{"a":1,"b":[2,3]}}`) {
				t.Fatalf("SSE data line %q", line)
			}
			break
		}
	}
	check(t, b, 5)
}

// TestRemovedMemberHearsNoPresence: bob, removed from a members-only room he watches the
// presence of, hears nothing of who comes in after: the next presence event closes his
// connection (forbidden) instead of reaching him.
func TestRemovedMemberHearsNoPresence(t *testing.T) {
	p := authed(t, "--api-key", apiKey)
	b := servertest.StartBystander(t, p, "news/presence", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	hc := tt.Dialer{Header: http.Header{"Authorization": {"apikey " + apiKey}}}
	if code, body := hc.Call(t, "POST", p.URL()+"/api/server/rooms", `{"room":"board","owner":"ann","invited":["bob","carol"]}`); code != 200 {
		t.Fatalf("server API creates chat/board: %d %s", code, body)
	}
	ann := mint(t, "ann", time.Hour)
	bob := tt.DialWS(t, p.WS("/api/ws?access_token="+mint(t, "bob", time.Hour)))
	bob.Until(`"connected"`, 5*time.Second)
	bob.Send(`{"op":"subscribe","topic":"chat/board","presence":true}`)
	bob.Until(`"op":"presence"`, 5*time.Second)
	if code, body := call(t, p, "DELETE", "/api/chat/board/members/bob", ann, ""); code != 200 {
		t.Fatalf("ann removes bob: %d %s", code, body)
	}
	bob.Until(`"REMOVE"`, 5*time.Second) // he hears that he was removed
	carol := tt.DialWS(t, p.WS("/api/ws?access_token="+mint(t, "carol", time.Hour)))
	carol.Until(`"connected"`, 5*time.Second)
	carol.Send(`{"op":"subscribe","topic":"chat/board"}`)
	carol.Until(`"subscribed"`, 5*time.Second)
	said := expectClose(t, bob, 4003)
	if strings.Contains(said, `"carol"`) || !strings.Contains(said, `"forbidden"`) {
		t.Fatalf("removed bob was told %q", said)
	}
	check(t, b, 5)
}

// TestArchiveNotPoisoned: with --archive on PostgreSQL, a publication with a NUL in its type or
// sender (on a durable topic, in open dev mode and through the server API) once stopped the
// archive for good: the writer retried the batch forever. Such names are now refused at the
// door (400), the store sets aside any row it refuses (internal/archive's TestPoisonRowSetAside),
// and everyone else's messages are archived.
func TestArchiveNotPoisoned(t *testing.T) {
	pg := brokertest.StartPostgres(t)
	p := servertest.Start(t, bin, "--archive", pg.URL, "--durable", "chat/,log/", "--api-key", apiKey)
	b := servertest.StartBystander(t, p, "news/archive", "", 20*time.Millisecond)
	hc := tt.Dialer{Header: http.Header{"Authorization": {"apikey " + apiKey}}}
	if code, body := hc.Call(t, "POST", p.URL()+"/api/server/publish", `{"topic":"log/x","data":{},"sender":"eve\u0000"}`); code != http.StatusBadRequest {
		t.Fatalf("server API, NUL in sender: %d %s", code, body)
	}
	if code, body := call(t, p, "POST", "/api/publish/log/x?type=A%00B", "", `{}`); code != http.StatusBadRequest {
		t.Fatalf("NUL in type: %d %s", code, body)
	}
	for i := range 10 {
		if code, body := call(t, p, "POST", "/api/publish/log/x", "", fmt.Sprintf(`{"n":%d}`, i)); code != 200 {
			t.Fatalf("publish %d: %d %s", i, code, body)
		}
	}
	db, err := pgx.Connect(context.Background(), pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	eventually.True(t, 10*time.Second, "10 publications archived", func() bool {
		var n int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM rtlab_archive WHERE topic = 'log/x'`).Scan(&n)
		return err == nil && n == 10
	})
	check(t, b, 5)
}
