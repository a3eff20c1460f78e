package hostile

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// The application backend cases: what a client can make rtlab do through --app-proxy, and what
// a backend's answer can make rtlab publish. The backend is a real HTTP server.

// appKey is the --app-proxy-secret of these servers and their backend.
const appKey = "hostile-app-proxy-key"

// appSign is "sha256=" and the hex HMAC-SHA256 of prefix + "." + body, as rtlab signs.
func appSign(prefix string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appKey))
	m.Write([]byte(prefix + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// appBackend is a team's backend behind --app-proxy. It refuses requests rtlab did not sign,
// and records what it was told and how many connections rtlab opened.
type appBackend struct {
	*httptest.Server
	t         *testing.T
	conns     atomic.Int64 // TCP connections accepted
	elsewhere atomic.Int64 // requests that reached the redirect's target
	mu        sync.Mutex
	headers   []map[string]string // the headers of each request, as forwarded
}

type appCall struct {
	RequestID   string            `json:"request_id"`
	Command     string            `json:"command"`
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers"`
	Data        json.RawMessage   `json:"data"`
	User        string            `json:"user"`
}

func startAppBackend(t *testing.T) *appBackend {
	b := &appBackend{t: t}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.elsewhere.Add(1)
		_, _ = io.WriteString(w, `{"publish":[{"topic":"tx/elsewhere","data":{"x":1}}]}`)
	}))
	t.Cleanup(other.Close)
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ts := r.Header.Get("X-Rtlab-Timestamp"); r.Header.Get("X-Rtlab-Signature") != appSign(ts, body) {
			t.Errorf("a request rtlab did not sign: %q %q", ts, r.Header.Get("X-Rtlab-Signature"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var c appCall
		if err := json.Unmarshal(body, &c); err != nil {
			t.Errorf("request %q: %v", body, err)
			return
		}
		b.mu.Lock()
		b.headers = append(b.headers, c.Headers)
		b.mu.Unlock()
		b.answer(w, r, c, other.URL)
	}))
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

// answer is the backend's handlers, by destination.
func (b *appBackend) answer(w http.ResponseWriter, r *http.Request, c appCall, elsewhere string) {
	pub := func(topic string, data any) map[string]any {
		return map[string]any{"publish": []map[string]any{{"topic": topic, "data": data}}}
	}
	var ans any
	signed := false
	switch c.Destination {
	case "/app/ok":
		ans = pub("tx/app-ok", c.Data)
	case "/app/revoke":
		ans = pub("_rtlab/revocations", map[string]any{"user": "bob", "before": time.Now().Add(time.Hour).Unix()})
	case "/app/public":
		ans = pub("public", c.Data)
	case "/app/notify-bob":
		ans = pub("user/bob/queue/notify", map[string]string{"from": c.User})
	case "/app/notify-bob-signed":
		ans, signed = pub("user/bob/queue/notify", map[string]string{"from": c.User, "signed": "yes"}), true
	case "/app/redirect":
		http.Redirect(w, r, elsewhere, http.StatusTemporaryRedirect)
		return
	case "/app/slow":
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return
	case "/app/init":
		ans = map[string]any{"reply": map[string]string{"hello": c.User}}
	default:
		ans = map[string]any{"error": map[string]string{"reason": "no handler for " + c.Destination}}
	}
	body, _ := json.Marshal(ans)
	if signed {
		w.Header().Set("X-Rtlab-Signature", appSign(c.RequestID, body))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// startApp starts an authenticated server behind backend with a bystander.
func startApp(t *testing.T, b *appBackend, topic string, flags ...string) (*servertest.Proc, *servertest.Bystander) {
	t.Helper()
	p := authed(t, append([]string{"--app-proxy", b.URL, "--app-proxy-secret", appKey, "--app-proxy-timeout", "5s"}, flags...)...)
	return p, servertest.StartBystander(t, p, topic, mint(t, "bystander", time.Hour), 20*time.Millisecond)
}

// stompAs opens a STOMP session from the attacker's address, CONNECTed with token.
func stompAs(t *testing.T, p *servertest.Proc, token string) *tt.WSConn {
	t.Helper()
	c := dialWS(t, p.WS("/api/stomp"), attacker, nil)
	c.Send("CONNECT\naccept-version:1.2\nhost:rtlab\npasscode:" + token + "\n\n\x00")
	stompFrame(t, c, "CONNECTED")
	return c
}

// frameHeader is a header of a frame read as text, unescaped.
func frameHeader(frame, key string) string {
	head, _, _ := strings.Cut(frame, "\n\n")
	for _, line := range strings.Split(head, "\n")[1:] {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.NewReplacer(`\c`, ":", `\n`, "\n", `\r`, "\r", `\\`, `\`).Replace(v)
		}
	}
	return ""
}

// polled is what a topic holds, read over HTTP with token.
func polled(t *testing.T, p *servertest.Proc, token, topic string) string {
	t.Helper()
	code, body := call(t, p, "GET", "/api/poll/"+topic+"?since=0", token, "")
	if code != http.StatusOK {
		t.Fatalf("poll %s: %d %s", topic, code, body)
	}
	return body
}

// TestStompCommitChecksEverySend: a transaction of 3 good SENDs, 1 bad and 3 good published its
// first 3 when the bad one was a /topic/user/bob/ destination, a type with a control
// character, an /app SEND whose answer could not publish, or an ENTER into a members-only
// room nobody created. Every SEND is checked (the backend asked) before any is published now,
// and the ERROR names the bad one.
func TestStompCommitChecksEverySend(t *testing.T) {
	b := startAppBackend(t)
	p, by := startApp(t, b, "news/commit-all", "--private-rooms", "chat/private/")
	ann := mint(t, "ann", time.Hour)
	bad := map[string]string{
		"user":  "SEND\ndestination:/topic/user/bob/queue/x\ntransaction:t\n\n{\"n\":0}\x00",
		"type":  "SEND\ndestination:/topic/tx/typed\ntype:TA\aLK\ntransaction:t\n\n{\"n\":0}\x00",
		"app":   "SEND\ndestination:/app/revoke\ntransaction:t\n\n{\"n\":0}\x00",
		"enter": "SEND\ndestination:/topic/chat/private/nobody\ntype:ENTER\ntransaction:t\n\n{}\x00",
	}
	commit := func(topic, middle string) string {
		c := stompAs(t, p, ann)
		defer c.Close()
		c.Send("BEGIN\ntransaction:t\n\n\x00")
		send := func(n int) {
			c.Send(fmt.Sprintf("SEND\ndestination:/topic/%s\ntransaction:t\n\n{\"n\":%d}\x00", topic, n))
		}
		send(1)
		send(2)
		send(3)
		c.Send(middle)
		send(5)
		send(6)
		send(7)
		c.Send("COMMIT\ntransaction:t\nreceipt:done\n\n\x00")
		return stompFrame(t, c, "")
	}
	for name, middle := range bad {
		topic := "tx/" + name
		f := commit(topic, middle)
		if !strings.HasPrefix(f, "ERROR\n") || !strings.Contains(frameHeader(f, "message"), "SEND 4 of 7") {
			t.Errorf("%s: COMMIT answered %q, want an ERROR naming SEND 4 of 7", name, firstLine(f, 3))
		}
		if got := polled(t, p, ann, topic); strings.Contains(got, `"n"`) {
			t.Errorf("%s: published after a refused COMMIT: %s", name, got)
		}
	}
	// The same transaction with an /app SEND the backend answers is published whole.
	if f := commit("tx/good", "SEND\ndestination:/app/ok\ntransaction:t\n\n{\"n\":4}\x00"); !strings.HasPrefix(f, "RECEIPT\n") {
		t.Fatalf("a good COMMIT: %q", firstLine(f, 3))
	}
	if got := polled(t, p, ann, "tx/good"); strings.Count(got, `"n"`) != 6 || !strings.Contains(polled(t, p, ann, "tx/app-ok"), `"n":4`) {
		t.Fatalf("a good COMMIT published %s", got)
	}
	check(t, by, 10)
}

// TestAppProxyNotTrustedBothWays: rtlab's requests carried no signature, forwarded the client's
// user and token headers (the strip list was case-sensitive), and published whatever the
// backend answered: a publish on _rtlab/revocations revoked bob's tokens, and a token allowed
// to publish only nothing/here got its /app SENDs published on public. Requests are signed
// now (the backend checks each), headers pass an allow-list, and an unsigned answer publishes
// only what its sender may.
func TestAppProxyNotTrustedBothWays(t *testing.T) {
	b := startAppBackend(t)
	p, by := startApp(t, b, "news/app-trust")
	ann := mint(t, "ann", time.Hour)
	c := stompAs(t, p, ann)
	c.Send("SUBSCRIBE\nid:e\ndestination:/user/queue/errors\nreceipt:e\n\n\x00")
	stompFrame(t, c, "RECEIPT")
	c.Send("SEND\ndestination:/app/ok\nuser:bob\nUSER:bob\nAuthorization:Bearer " + ann + "\nAUTHORIZATION:x\nPasscode:x\nlogin:bob\ncookie:s=1\nX-Room:lobby\nreceipt:h\n\n{\"n\":1}\x00")
	if f := stompFrame(t, c, "RECEIPT"); frameHeader(f, "refused") != "" {
		t.Fatalf("/app/ok: %q", f)
	}
	b.mu.Lock()
	last := b.headers[len(b.headers)-1]
	b.mu.Unlock()
	for k := range last {
		switch strings.ToLower(k) {
		case "user", "authorization", "passcode", "login", "cookie":
			t.Fatalf("forwarded header %q: %v", k, last)
		}
	}
	if last["x-room"] != "lobby" {
		t.Fatalf("forwarded headers %v, want x-room", last)
	}

	refused := func(c *tt.WSConn, dest, want string) (messages []string) {
		t.Helper()
		c.Send("SEND\ndestination:" + dest + "\nreceipt:r\n\n{\"n\":2}\x00")
		for {
			f := stompFrame(t, c, "")
			if strings.HasPrefix(f, "MESSAGE\n") {
				messages = append(messages, f)
				continue
			}
			if !strings.HasPrefix(f, "RECEIPT\n") || frameHeader(f, "refused") == "" || !strings.Contains(frameHeader(f, "message"), want) {
				t.Fatalf("%s: %q, want a refusal naming %q", dest, f, want)
			}
			return messages
		}
	}
	// The refusal is told on the sender's /user/queue/errors too.
	if m := refused(c, "/app/revoke", "_rtlab/"); len(m) != 1 || frameHeader(m[0], "destination") != "/user/queue/errors" || frameHeader(m[0], "refused") != "forbidden" {
		t.Fatalf("ann's errors queue: %q", m)
	}
	refused(c, "/app/notify-bob", "user/ann/")
	narrow := stompAs(t, p, mintGrants(t, "nora", time.Hour, map[string]any{"publish": []string{"nothing/here"}}))
	refused(narrow, "/app/public", "does not grant publishing on public")
	if got := polled(t, p, ann, "public"); strings.Contains(got, `"n"`) {
		t.Fatalf("public after a refused answer: %s", got)
	}

	// bob's token still works, and a signed answer reaches his queue.
	bob := stompAs(t, p, mint(t, "bob", time.Hour))
	bob.Send("SUBSCRIBE\nid:n\ndestination:/user/queue/notify\nreceipt:n\n\n\x00")
	stompFrame(t, bob, "RECEIPT")
	c.Send("SEND\ndestination:/app/notify-bob-signed\nreceipt:s\n\n{}\x00")
	if f := stompFrame(t, c, "RECEIPT"); frameHeader(f, "refused") != "" {
		t.Fatalf("a signed answer: %q", f)
	}
	if m := stompFrame(t, bob, "MESSAGE"); !strings.Contains(m, `"signed":"yes"`) {
		t.Fatalf("bob's queue: %q", m)
	}
	check(t, by, 10)
}

// TestAppProxyConnectionsReused: 59,560 SENDs opened 15,194 connections to the backend. The
// connections are kept alive and bounded by --app-proxy-conns: 2,000 SENDs from 4 sessions
// open at most 4.
func TestAppProxyConnectionsReused(t *testing.T) {
	b := startAppBackend(t)
	p, by := startApp(t, b, "news/app-conns", "--app-proxy-conns", "4", "--msg-rate", "-1", "--op-rate", "-1")
	ann := mint(t, "ann", time.Hour)
	var wg sync.WaitGroup
	for range 4 {
		c := stompAs(t, p, ann)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for i := range 500 {
				c.Send(fmt.Sprintf("SEND\ndestination:/app/ok\nreceipt:r%d\n\n{\"i\":%d}\x00", i, i))
			}
			for range 500 {
				if f := stompFrame(t, c, "RECEIPT"); frameHeader(f, "refused") != "" {
					t.Errorf("a SEND refused: %q", f)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := b.conns.Load(); n > 4 {
		t.Fatalf("2,000 SENDs opened %d connections to the backend, --app-proxy-conns 4", n)
	}
	check(t, by, 10)
}

// TestAppProxyRedirectAndTimeout: a 307 from the backend was followed, re-POSTing the user
// elsewhere, and a backend timeout ended the whole STOMP session. A redirect is a refused SEND
// now, and a timeout fails that SEND alone: the session goes on.
func TestAppProxyRedirectAndTimeout(t *testing.T) {
	b := startAppBackend(t)
	p, by := startApp(t, b, "news/app-redirect")
	c := stompAs(t, p, mint(t, "ann", time.Hour))
	c.Send("SEND\ndestination:/app/redirect\nreceipt:r\n\n{}\x00")
	if f := stompFrame(t, c, "RECEIPT"); !strings.Contains(frameHeader(f, "message"), "redirect") {
		t.Fatalf("a redirect: %q", f)
	}
	if n := b.elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
	c.Send("SEND\ndestination:/app/slow\nreceipt:s\n\n{}\x00")
	if f := stompFrame(t, c, "RECEIPT"); frameHeader(f, "refused") != "unavailable" || !strings.Contains(frameHeader(f, "message"), "timeout") {
		t.Fatalf("a backend timeout: %q", f)
	}
	c.Send("SEND\ndestination:/app/ok\nreceipt:ok\n\n{}\x00")
	if f := stompFrame(t, c, "RECEIPT"); frameHeader(f, "refused") != "" {
		t.Fatalf("after a timeout: %q", f)
	}
	check(t, by, 10)
}
