package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
)

// sockjs is a SockJS client speaking the protocol by hand over xhr-polling, from a loopback
// address of its own, with optional request headers (Authorization, Origin).
type sockjs struct {
	hc   *http.Client
	base string // the endpoint, like http://host:port/ws
	hdr  http.Header
}

func newSockJS(p *servertest.Proc, from string, hdr http.Header) sockjs {
	return sockjs{hc: httpFrom(from), base: p.URL() + "/ws", hdr: hdr}
}

// do sends a request for session sid's transport and returns the status, headers and body.
func (c sockjs) do(t testing.TB, method, sid, transport, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("%s/000/%s/%s", c.base, sid, transport), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, transport, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// send posts STOMP frames to the session with xhr_send and returns the status and body.
func (c sockjs) send(t testing.TB, sid string, frames ...string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(frames)
	code, _, body := c.do(t, http.MethodPost, sid, "xhr_send", string(b))
	return code, body
}

// poll makes one xhr-polling request and returns its STOMP frames; the open frame gives none.
func (c sockjs) poll(t testing.TB, sid string) []string {
	t.Helper()
	code, _, body := c.do(t, http.MethodPost, sid, "xhr", "")
	body = strings.TrimSuffix(body, "\n")
	switch {
	case code != http.StatusOK:
		t.Fatalf("poll of %s: %d %s", sid, code, body)
	case body == "o" || body == "h":
		return nil
	case !strings.HasPrefix(body, "a["):
		t.Fatalf("poll of %s: %q", sid, firstLine(body, 1))
	}
	return stompFrames(body)
}

// stompFrames are the STOMP frames of an 'a' frame (a message may carry several).
func stompFrames(body string) []string {
	var msgs []string
	if !strings.HasPrefix(body, "a[") || json.Unmarshal([]byte(strings.TrimSpace(body[1:])), &msgs) != nil {
		return nil
	}
	var frames []string
	for _, m := range msgs {
		for _, f := range strings.Split(m, "\x00") {
			if f = strings.TrimLeft(f, "\r\n"); f != "" {
				frames = append(frames, f)
			}
		}
	}
	return frames
}

// head sends a request for session sid's transport and returns the status and the answer up
// to its open frame (a streaming answer goes on; what follows depends on time).
func (c sockjs) head(t testing.TB, method, sid, transport, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("%s/000/%s/%s", c.base, sid, transport), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, transport, err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(io.LimitReader(res.Body, 64<<10))
	var got strings.Builder
	for {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if err != nil || strings.TrimSpace(strings.TrimPrefix(line, "data: ")) == "o" {
			return res.StatusCode, got.String()
		}
	}
}

// until polls until a frame contains want and returns every frame up to it.
func (c sockjs) until(t testing.TB, sid, want string) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, f := range c.poll(t, sid) {
			got = append(got, f)
			if strings.Contains(f, want) {
				return got
			}
		}
	}
	t.Fatalf("no frame with %q in %d frames", want, len(got))
	return nil
}

// open starts session sid and CONNECTs its STOMP session with token (none when empty).
func (c sockjs) open(t testing.TB, sid, token string) {
	t.Helper()
	if f := c.poll(t, sid); f != nil {
		t.Fatalf("open %s: %q", sid, f)
	}
	connect := "CONNECT\naccept-version:1.2\nheart-beat:0,0\n"
	if token != "" {
		connect += "passcode:" + token + "\n"
	}
	if code, body := c.send(t, sid, connect+"\n\x00"); code != http.StatusNoContent {
		t.Fatalf("CONNECT: %d %s", code, body)
	}
	c.until(t, sid, "CONNECTED\n")
}

func randomSID() string { return fmt.Sprintf("s%016x", rand.Uint64()) }

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestSockJSSessionOwned: a victim's session, opened from one address with a token, cannot be
// read or written by anyone else: from another address without a token, with another user's
// token or an evil Origin, or from the victim's own address with another user's token. Each
// gets what it would get for an id nobody opened (same status, same body), so ids are no
// oracle. The victim's session goes on untouched, and a bystander is served.
func TestSockJSSessionOwned(t *testing.T) {
	p := authed(t, "--sockjs-path", "/ws", "--allowed-origins", "https://app.example.com")
	b := servertest.StartBystander(t, p, "news/sockjs-owned", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	victimToken := mint(t, "victim", time.Hour)
	victim := newSockJS(p, attacker2, bearer(victimToken))
	sid := randomSID()
	victim.open(t, sid, victimToken)
	frames := victim.keepPolling(t, sid)
	if code, body := victim.send(t, sid, "SUBSCRIBE\nid:1\ndestination:/topic/news/victim\nreceipt:sub\n\n\x00"); code != http.StatusNoContent {
		t.Fatalf("SUBSCRIBE: %d %s", code, body)
	}
	// Each attacker first meets the id with xhr_send, then with a receiving transport (which
	// for an unknown id opens a session of the attacker's own).
	mallory := bearer(mint(t, "mallory", time.Hour))
	attackers := []struct {
		name string
		c    sockjs
		trs  []string
	}{
		{"no token, other address", newSockJS(p, attacker, nil), []string{"xhr_send", "xhr"}},
		{"other user's token, other address", newSockJS(p, attacker, mallory), []string{"xhr_send", "xhr_streaming"}},
		{"other user's token, same address", newSockJS(p, attacker2, mallory), []string{"xhr_send", "eventsource"}},
		{"evil origin, other address", newSockJS(p, attacker, http.Header{"Origin": {"https://evil.example"}}), []string{"xhr_send", "xhr", "xhr_streaming", "eventsource"}},
	}
	hijack, _ := json.Marshal([]string{"SEND\ndestination:/topic/news/victim\ncontent-type:application/json\n\n{\"by\":\"attacker\"}\x00"})
	for _, a := range attackers {
		for _, tr := range a.trs {
			method, body := http.MethodPost, ""
			switch tr {
			case "xhr_send":
				body = string(hijack)
			case "eventsource":
				method = http.MethodGet
			}
			code, got := a.c.head(t, method, sid, tr, body)
			wantCode, want := a.c.head(t, method, randomSID(), tr, body)
			if code != wantCode || got != want {
				t.Errorf("%s, %s of the victim's session: %d %q; an unknown id: %d %q", a.name, tr, code, firstLine(got, 1)[:min(100, len(firstLine(got, 1)))], wantCode, firstLine(want, 1)[:min(100, len(firstLine(want, 1)))])
			}
			if strings.Contains(got, "RECEIPT") || strings.Contains(got, "MESSAGE") {
				t.Errorf("%s, %s: read the victim's frames", a.name, tr)
			}
		}
	}
	// The victim got its RECEIPT; its own SEND is the only MESSAGE it hears.
	if code, body := victim.send(t, sid, "SEND\ndestination:/topic/news/victim\ncontent-type:application/json\n\n{\"by\":\"victim\"}\x00"); code != http.StatusNoContent {
		t.Fatalf("victim SEND: %d %s", code, body)
	}
	got := frames.until(t, "MESSAGE\n")
	if !strings.Contains(strings.Join(got, ""), "receipt-id:sub") {
		t.Fatalf("the victim did not get its RECEIPT: %q", got)
	}
	for _, f := range got {
		if strings.Contains(f, "attacker") {
			t.Fatalf("the attacker's SEND went into the victim's session: %q", firstLine(f, 1))
		}
	}
	check(t, b, 20)
}

// sockjsFrames are the frames a session's receiving requests got, as they come.
type sockjsFrames chan string

// keepPolling polls session sid until the test ends, as a client does to keep its session, and
// hands over the frames.
func (c sockjs) keepPolling(t *testing.T, sid string) sockjsFrames {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(sockjsFrames, 1<<16)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/000/%s/xhr", c.base, sid), nil)
			for k, v := range c.hdr {
				req.Header[k] = v
			}
			res, err := c.hc.Do(req)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			for _, f := range stompFrames(string(body)) {
				out <- f
			}
		}
	}()
	return out
}

// until reads frames until one contains want and returns every frame up to it.
func (p sockjsFrames) until(t testing.TB, want string) []string {
	t.Helper()
	var got []string
	timeout := time.After(30 * time.Second)
	for {
		select {
		case f := <-p:
			got = append(got, f)
			if strings.Contains(f, want) {
				return got
			}
		case <-timeout:
			t.Fatalf("no frame with %q in %d frames", want, len(got))
		}
	}
}

// TestSockJSGuessingThrottled: one address trying session ids at random is refused with 429 and
// a reason once over --sockjs-miss-rate, while another client's session is served.
func TestSockJSGuessingThrottled(t *testing.T) {
	p, b := startWithBystander(t, "news/sockjs-guess", "--sockjs-path", "/ws")
	victim := newSockJS(p, attacker2, nil)
	sid := randomSID()
	victim.open(t, sid, "")
	guesser := newSockJS(p, attacker, nil)
	refused := ""
	for i := 0; i < 500 && refused == ""; i++ {
		code, body := guesser.send(t, randomSID(), "SEND\ndestination:/topic/x\n\n\x00")
		switch code {
		case http.StatusNotFound:
		case http.StatusTooManyRequests:
			refused = body
		default:
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code, reason := refusal(t, []byte(refused)); code != "rate_limited" || !strings.Contains(reason, "--sockjs-miss-rate") {
		t.Fatalf("guessing was not throttled with a reason: %q", refused)
	}
	t.Logf("refused: %s", refused)
	if code, body := victim.send(t, sid, "SUBSCRIBE\nid:1\ndestination:/topic/news/v\nreceipt:r\n\n\x00"); code != http.StatusNoContent {
		t.Fatalf("the other client's session: %d %s", code, body)
	}
	victim.until(t, sid, "receipt-id:r")
	check(t, b, 20)
}

// TestSockJSCORS: SockJS answers CORS as every other route: an allowed origin gets its own
// origin back with credentials and a 10-minute preflight; any other origin gets no CORS
// headers (no reflected Origin, no year-long max-age) and 403 on the transports.
func TestSockJSCORS(t *testing.T) {
	p, b := startWithBystander(t, "news/sockjs-cors", "--sockjs-path", "/ws", "--allowed-origins", "https://app.example.com")
	for _, origin := range []string{"https://evil.example", "null"} {
		c := newSockJS(p, attacker, http.Header{"Origin": {origin}})
		code, h, _ := c.do(t, http.MethodOptions, randomSID(), "xhr", "")
		if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "" || h.Get("Access-Control-Allow-Credentials") != "" || h.Get("Access-Control-Max-Age") != "" || strings.Contains(h.Get("Cache-Control"), "31536000") {
			t.Errorf("OPTIONS from %s: %d %v", origin, code, h)
		}
		code, h, body := c.do(t, http.MethodPost, randomSID(), "xhr", "")
		if code != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("xhr from %s: %d %v %s", origin, code, h, body)
		}
		if ec, _ := refusal(t, []byte(body)); ec != "forbidden" {
			t.Errorf("xhr from %s: %s", origin, body)
		}
	}
	good := newSockJS(p, attacker, http.Header{"Origin": {"https://app.example.com"}})
	code, h, _ := good.do(t, http.MethodOptions, randomSID(), "xhr", "")
	if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" || h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("OPTIONS from the allowed origin: %d %v", code, h)
	}
	code, h, body := good.do(t, http.MethodPost, randomSID(), "xhr", "")
	if code != http.StatusOK || body != "o\n" || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("xhr from the allowed origin: %d %v %q", code, h, body)
	}
	check(t, b, 20)
}

// TestSockJSInputBounded: an authenticated user posting 1 MiB xhr_send bodies in a loop is
// refused with 413 (--sockjs-input-bytes), and one posting bodies within it faster than its
// session reads them (--op-rate) is refused with 429 once the session holds that much unread;
// RSS stays bounded and a bystander is served.
func TestSockJSInputBounded(t *testing.T) {
	p := authed(t, "--sockjs-path", "/ws", "--sockjs-input-bytes", "131072", "--body-timeout", "1s")
	b := servertest.StartBystander(t, p, "news/sockjs-input", mint(t, "bystander", time.Hour), 20*time.Millisecond)
	base := p.RSS()
	token := mint(t, "flooder", time.Hour)
	c := newSockJS(p, attacker, bearer(token))
	sid := randomSID()
	c.open(t, sid, token)
	stop := make(chan struct{})
	var polling sync.WaitGroup
	polling.Add(1)
	go func() { // keeps the session alive, as a client's receiving request does
		defer polling.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _, _ = c.do(t, http.MethodPost, sid, "xhr", "")
		}
	}()
	defer func() { close(stop); polling.Wait() }()

	huge := `["` + strings.Repeat("x", 1<<20) + `"]`
	for i := range 40 {
		code, _, body := c.do(t, http.MethodPost, sid, "xhr_send", huge)
		if ec, reason := refusal(t, []byte(body)); code != http.StatusRequestEntityTooLarge || ec != "too_large" || !strings.Contains(reason, "--sockjs-input-bytes") {
			t.Fatalf("1 MiB body %d: %d %s", i, code, body)
		}
	}
	// Bodies within the bound, of frames that are read one per --op-rate token.
	var frames []string
	for i := 0; len(frames)*40 < 60<<10; i++ {
		frames = append(frames, fmt.Sprintf("SUBSCRIBE\nid:%d\ndestination:/topic/news/f\n\n\x00", i%2), fmt.Sprintf("UNSUBSCRIBE\nid:%d\n\n\x00", i%2))
	}
	refused := ""
	for i := 0; i < 50 && refused == ""; i++ {
		switch code, body := c.send(t, sid, frames...); code {
		case http.StatusNoContent:
		case http.StatusTooManyRequests:
			refused = body
		default:
			t.Fatalf("body %d within the bound: %d %s", i, code, body)
		}
	}
	if ec, reason := refusal(t, []byte(refused)); ec != "rate_limited" || !strings.Contains(reason, "--sockjs-input-bytes") {
		t.Fatalf("unread input was not bounded: %q", refused)
	}
	t.Logf("refused: %s", refused)
	growth(t, p, base, 64*mib, "1 MiB xhr_send bodies and unread input")
	check(t, b, 20)
}

// TestSockJSResumesBigBacklog: a SockJS session over xhr-polling resumes a 1.8 MB backlog
// (30 publications of 60 KB, more than --queue-bytes) whole and in order, over several polls,
// where it used to be closed with c[3000,"Go away!"].
func TestSockJSResumesBigBacklog(t *testing.T) {
	p, b := startWithBystander(t, "news/sockjs-resume", "--sockjs-path", "/ws", "--http-pub-rate", "-1")
	bl := fillBig(t, p, "news/sockjs-big", 30, 60<<10)
	c := newSockJS(p, attacker2, nil)
	sid := randomSID()
	c.open(t, sid, "")
	if code, body := c.send(t, sid, "SUBSCRIBE\nid:1\ndestination:/topic/"+bl.topic+"\nsince:0\n\n\x00"); code != http.StatusNoContent {
		t.Fatalf("SUBSCRIBE: %d %s", code, body)
	}
	next, polls := 0, 0
	eventually.True(t, 60*time.Second, "the whole backlog", func() bool {
		polls++
		for _, f := range c.poll(t, sid) {
			if strings.HasPrefix(f, "ERROR") || strings.HasPrefix(f, "c[") {
				t.Fatalf("after %d of %d: %q", next, bl.n, firstLine(f, 2))
			}
			if !strings.HasPrefix(f, "MESSAGE\n") {
				continue
			}
			if !strings.Contains(f, fmt.Sprintf(`"n":%d,`, next)) {
				t.Fatalf("message %d out of order: %q", next, firstLine(f, 4)[:min(200, len(firstLine(f, 4)))])
			}
			next++
		}
		return next == bl.n
	})
	t.Logf("%s resumed over SockJS xhr-polling in %d polls", bl.name, polls)
	check(t, b, 20)
}
