package app

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/appproxy"
	"github.com/rtlab/rtlab/internal/stomp"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// springBackend answers as a Spring app's @MessageMapping handlers would: /app/chat.send is
// broadcast on public (the @SendTo) and acknowledged to the sender's own queue (the
// convertAndSendToUser); /app/forbidden is refused.
func springBackend(t *testing.T, seen chan<- appproxy.Request) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req appproxy.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seen <- req
		switch req.Destination {
		case "/app/chat.send":
			var in struct{ Text string }
			_ = json.Unmarshal(req.Data, &in)
			out, _ := json.Marshal(map[string]string{"from": req.User, "text": in.Text})
			json.NewEncoder(w).Encode(map[string]any{"publish": []map[string]any{
				{"topic": "public", "data": json.RawMessage(out), "type": "CHAT"},
				{"topic": "user/" + req.User + "/queue/acks", "data": map[string]string{"ack": req.RequestID}},
			}})
		default:
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"reason": "no handler for " + req.Destination}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSpringDestinations: a SEND to /app/... goes to the backend with the verified user and
// the frame's headers (never the token), the backend's answer is published on /topic/public
// and the sender's /user/queue/acks; another user's queue gets nothing, until the server API
// publishes to it; the backend's refusal is told the sender on /user/queue/errors and its
// receipt, and its session goes on.
func TestSpringDestinations(t *testing.T) {
	seen := make(chan appproxy.Request, 8)
	backend := springBackend(t, seen)
	s := startServer(t, func(c *Config) { c.Auth.Secret = testSecret; c.AppProxy = backend.URL; c.APIKey = "k" })

	dial := func(user string) *tt.STOMPConn {
		c := tt.DialSTOMP(t, s.ws("/api/stomp"))
		if f := c.Connect("passcode:" + tokenFor(t, user, time.Hour) + "\n"); tt.Header(f, "user-name") != user {
			t.Fatalf("CONNECTED %+v", f.Headers)
		}
		return c
	}
	ann, bob := dial("ann"), dial("bob")
	ann.Send("SUBSCRIBE\nid:p\ndestination:/topic/public\n\n\x00")
	ann.Send("SUBSCRIBE\nid:q\ndestination:/user/queue/acks\nreceipt:a\n\n\x00")
	ann.Expect("RECEIPT")
	bob.Send("SUBSCRIBE\nid:q\ndestination:/user/queue/acks\nreceipt:b\n\n\x00")
	bob.Expect("RECEIPT")

	ann.Send("SEND\ndestination:/app/chat.send\ncontent-type:application/json\nx-room:lobby\nreceipt:s\n\n{\"text\":\"hi\"}\x00")
	req := <-seen
	if req.User != "ann" || req.Headers["x-room"] != "lobby" || req.RequestID == "" || string(req.Data) != `{"text":"hi"}` {
		t.Fatalf("the backend got %+v", req)
	}
	got := map[string]stomp.Frame{}
	for len(got) < 3 {
		f := ann.Frame(5 * time.Second)
		if f.Command == "MESSAGE" {
			got[tt.Header(f, "destination")] = f
		} else {
			got[f.Command] = f
		}
	}
	if m := got["/topic/public"]; !strings.Contains(string(m.Body), `"from":"ann"`) || tt.Header(m, "type") != "CHAT" {
		t.Fatalf("public %+v %s", m.Headers, m.Body)
	}
	if m := got["/user/queue/acks"]; !strings.Contains(string(m.Body), req.RequestID) {
		t.Fatalf("ann's queue %s", m.Body)
	}
	// The server API reaches bob's queue, the convertAndSendToUser of a backend.
	r, _ := http.NewRequest("POST", s.URL+"/api/server/publish", strings.NewReader(`{"topic":"user/bob/queue/acks","data":{"for":"bob"}}`))
	r.Header.Set("Authorization", "apikey k")
	if res, err := http.DefaultClient.Do(r); err != nil || res.StatusCode != 200 {
		t.Fatalf("server API publish: %v %v", res, err)
	}
	if m := bob.Expect("MESSAGE"); string(m.Body) != `{"for":"bob"}` || tt.Header(m, "destination") != "/user/queue/acks" {
		t.Fatalf("bob got %+v %s (and never ann's ack)", m.Headers, m.Body)
	}

	// Refused by the backend: told on ann's /user/queue/errors and in the receipt; the
	// session goes on.
	ann.Send("SUBSCRIBE\nid:e\ndestination:/user/queue/errors\nreceipt:e\n\n\x00")
	ann.Expect("RECEIPT")
	ann.Send("SEND\ndestination:/app/forbidden\nreceipt:f\n\n{}\x00")
	<-seen
	if m := ann.Expect("MESSAGE"); tt.Header(m, "destination") != "/user/queue/errors" || !strings.Contains(string(m.Body), "no handler for /app/forbidden") {
		t.Fatalf("ann's errors %+v %s", m.Headers, m.Body)
	}
	if f := ann.Expect("RECEIPT"); tt.Header(f, "refused") != "forbidden" || !strings.Contains(tt.Header(f, "message"), "no handler for /app/forbidden") {
		t.Fatalf("refusal %+v", f.Headers)
	}
	ann.Send("SEND\ndestination:/app/chat.send\nreceipt:again\n\n{\"text\":\"still here\"}\x00")
	<-seen
	if f := ann.Expect("RECEIPT"); tt.Header(f, "refused") != "" {
		t.Fatalf("after a refusal %+v", f.Headers)
	}
	// Clients neither send to user queues nor subscribe to another's topic.
	bob.Send("SEND\ndestination:/user/queue/acks\n\n{}\x00")
	bob.Expect("ERROR")
	eve := dial("eve")
	eve.Send("SUBSCRIBE\nid:x\ndestination:/topic/user/bob/queue/acks\n\n\x00")
	// A refused subscription is told on its own (a MESSAGE with refused), the session goes on.
	if f := eve.Expect("MESSAGE"); tt.Header(f, "refused") != "forbidden" || !strings.Contains(tt.Header(f, "message"), "only bob") {
		t.Fatalf("eve %+v", f.Headers)
	}
	anon := tt.DialSTOMP(t, s.ws("/api/stomp"))
	anon.Send("SUBSCRIBE\nid:x\ndestination:/user/queue/acks\n\n\x00")
	anon.Expect("ERROR") // no CONNECT with a token: the session itself is refused
}

// TestSpringDestinationsWithoutBackend: --app-route rebroadcasts; a backend that is down refuses
// the SEND (never retried), counted as an error.
func TestSpringDestinationsWithoutBackend(t *testing.T) {
	s := startServer(t, func(c *Config) { c.AppRoutes = []string{"/app/chat.send=/topic/public", "/app/rooms/=/topic/rooms/"} })
	c := tt.DialSTOMP(t, s.ws("/api/stomp"))
	c.Connect("")
	c.Send("SUBSCRIBE\nid:p\ndestination:/topic/public\n\n\x00")
	c.Send("SUBSCRIBE\nid:r\ndestination:/topic/rooms/7\nreceipt:r\n\n\x00")
	c.Expect("RECEIPT")
	c.Send("SEND\ndestination:/app/chat.send\n\n{\"a\":1}\x00")
	if m := c.Expect("MESSAGE"); tt.Header(m, "destination") != "/topic/public" || string(m.Body) != `{"a":1}` {
		t.Fatalf("rebroadcast %+v %s", m.Headers, m.Body)
	}
	c.Send("SEND\ndestination:/app/rooms/7\n\n{\"b\":2}\x00")
	if m := c.Expect("MESSAGE"); tt.Header(m, "destination") != "/topic/rooms/7" {
		t.Fatalf("prefix rebroadcast %+v", m.Headers)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String()
	ln.Close()
	d := startServer(t, func(c *Config) { c.AppProxy = down; c.AppProxyTimeout = time.Second })
	k := tt.DialSTOMP(t, d.ws("/api/stomp"))
	k.Connect("")
	k.Send("SEND\ndestination:/app/chat.send\nreceipt:r\n\n{}\x00")
	if f := k.Expect("RECEIPT"); !strings.Contains(tt.Header(f, "message"), "did not answer") || strings.Contains(tt.Header(f, "message"), down) {
		t.Fatalf("backend down: %+v", f.Headers)
	}
	if n := metricValue(t, d, `rtlab_app_proxy_requests_total{outcome="error"}`); n != 1 {
		t.Fatalf("outcome error counted %v times", n)
	}
}
