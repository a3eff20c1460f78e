package transport_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

func sockjsServer(t *testing.T, lim transport.Limits) *tt.Server {
	return tt.NewServer(t, tt.ServerConfig{Limits: lim, Routes: func(mux *http.ServeMux, tr *transport.Server) {
		mux.Handle("/ws/", tr.HandleSockJS("/ws"))
	}})
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	res, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestSockJSProtocol: the SockJS frames by hand over xhr-polling: info, the open frame, a STOMP
// session through xhr_send, its frames in 'a' arrays; bad input to xhr_send is refused as
// sockjs-node refuses it; a session over the per-address cap is refused while the admitted one
// is still served.
func TestSockJSProtocol(t *testing.T) {
	s := sockjsServer(t, transport.Limits{MaxConnsPerIP: 1})
	base := s.URL + "/ws"
	res, err := http.Get(base + "/info")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(info), `"websocket":true`) {
		t.Fatalf("info: %d %s", res.StatusCode, info)
	}
	sess := base + "/000/abc"
	if code, body := post(t, sess+"/xhr", ""); code != 200 || body != "o\n" {
		t.Fatalf("open: %d %q", code, body)
	}
	send := func(frames ...string) {
		t.Helper()
		var b strings.Builder
		b.WriteString("[")
		for i, f := range frames {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + strings.NewReplacer("\n", `\n`, "\x00", `\u0000`).Replace(f) + `"`)
		}
		b.WriteString("]")
		if code, body := post(t, sess+"/xhr_send", b.String()); code != 204 {
			t.Fatalf("xhr_send: %d %q", code, body)
		}
	}
	send("CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\x00", "SUBSCRIBE\nid:1\ndestination:/topic/sj\nreceipt:r\n\n\x00")
	var got string
	for !strings.Contains(got, "RECEIPT") {
		code, body := post(t, sess+"/xhr", "")
		if code != 200 || !strings.HasPrefix(body, "a[") {
			t.Fatalf("poll: %d %q", code, body)
		}
		got += body
	}
	if !strings.Contains(got, `CONNECTED\nversion:1.2`) {
		t.Fatalf("frames %q", got)
	}
	for name, body := range map[string]string{"empty": "", "not JSON": "[\"x\"", "not strings": "[1,2]"} {
		if code, _ := post(t, sess+"/xhr_send", body); code != 500 {
			t.Errorf("xhr_send %s: %d, want 500", name, code)
		}
	}
	if code, _ := post(t, base+"/000/nosuch/xhr_send", `["x"]`); code != 404 {
		t.Errorf("xhr_send to no session: %d, want 404", code)
	}
	if code, body := post(t, base+"/000/second/xhr", ""); code != 503 && code != 429 {
		t.Errorf("a session over --max-conns-per-ip: %d %s", code, body)
	}
	s.Publish(t, "sj", `{"still":1}`)
	if code, body := post(t, sess+"/xhr", ""); code != 200 || !strings.Contains(body, `{\"still\":1}`) {
		t.Fatalf("the admitted session after the refusal: %d %q", code, body)
	}
}

// TestSockJSStreaming: xhr-streaming's prelude and frames, and one receiving request at a time.
func TestSockJSStreaming(t *testing.T) {
	s := sockjsServer(t, transport.Limits{})
	sess := s.URL + "/ws/1/st"
	res, err := http.Post(sess+"/xhr_streaming", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	line, _ := br.ReadString('\n')
	if line != strings.Repeat("h", 2048)+"\n" {
		t.Fatalf("prelude %q", line)
	}
	if line, _ = br.ReadString('\n'); line != "o\n" {
		t.Fatalf("open %q", line)
	}
	if code, body := post(t, sess+"/xhr", ""); code != 200 || body != "c[2010,\"Another connection still open\"]\n" {
		t.Fatalf("a second receiver: %d %q", code, body)
	}
	if code, _ := post(t, sess+"/xhr_send", `["CONNECT\naccept-version:1.2\n\n\u0000"]`); code != 204 {
		t.Fatalf("xhr_send %d", code)
	}
	done := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); done <- l }()
	select {
	case l := <-done:
		if !strings.HasPrefix(l, `a["CONNECTED\n`) {
			t.Fatalf("frame %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no CONNECTED on the stream")
	}
}

// TestSockJSClosedSessionKeepsLastFrames: a session that ends while no receiving request is
// attached (xhr-polling between two polls) keeps its last messages and the close frame for the
// next poll, as SockJS clients expect, instead of being forgotten at once.
func TestSockJSClosedSessionKeepsLastFrames(t *testing.T) {
	s := sockjsServer(t, transport.Limits{})
	sess := s.URL + "/ws/000/bye"
	if code, body := post(t, sess+"/xhr", ""); code != 200 || body != "o\n" {
		t.Fatalf("open: %d %q", code, body)
	}
	if code, _ := post(t, sess+"/xhr_send", `["CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\u0000"]`); code != 204 {
		t.Fatalf("xhr_send CONNECT: %d", code)
	}
	if code, body := post(t, sess+"/xhr", ""); code != 200 || !strings.Contains(body, `CONNECTED`) {
		t.Fatalf("poll: %d %q", code, body)
	}
	// DISCONNECT while nobody polls: the server answers RECEIPT and ends the session.
	if code, _ := post(t, sess+"/xhr_send", `["DISCONNECT\nreceipt:bye\n\n\u0000"]`); code != 204 {
		t.Fatalf("xhr_send DISCONNECT: %d", code)
	}
	var got string
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(got, `c[3000,`) && time.Now().Before(deadline) {
		code, body := post(t, sess+"/xhr", "")
		if code != 200 || body == "o\n" {
			t.Fatalf("poll after the session ended: %d %q (a new session instead of its last frames)", code, body)
		}
		got += body
	}
	if !strings.Contains(got, `receipt-id:bye`) || !strings.Contains(got, `c[3000,`) {
		t.Fatalf("after DISCONNECT the next polls got %q, want the RECEIPT, then the close frame", got)
	}
	// Asked again, the closed session answers the close frame, not a new session.
	if code, body := post(t, sess+"/xhr", ""); code != 200 || !strings.HasPrefix(body, `c[3000,`) {
		t.Fatalf("a poll of the closed session: %d %q", code, body)
	}
}
