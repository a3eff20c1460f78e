package transport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// An application's own dialect over the transports' hooks: here a small one, as the seed
// routes in internal/app are a larger one.

// echoSocket follows one topic; a frame that is not a protocol op is published to it.
type echoSocket struct {
	policy transport.Policy
	topic  string
}

func (e *echoSocket) Open(ctx context.Context, c *transport.RawConn) {
	if err := c.Subscribe(ctx, e.topic); err != nil {
		c.Error(err, e.topic)
	}
}

func (e *echoSocket) Frame(ctx context.Context, c *transport.RawConn, msg []byte) {
	if c.Op(ctx, msg) {
		return
	}
	err := c.Allow()
	if err == nil {
		_, err = e.policy.Publish(ctx, c.Client(), hub.PublishRequest{Topic: e.topic, Data: transport.AsJSON(msg)})
	}
	if err != nil {
		c.Error(err, e.topic)
	}
}

// queueDests serves SUBSCRIBE to /queue/{name} and SEND to /queue/{name}, where an empty SEND
// publishes {"empty":true}.
type queueDests struct{ policy transport.Policy }

func (q queueDests) Dest(dest string, send bool) (transport.STOMPRoute, bool) {
	name, ok := strings.CutPrefix(dest, "/queue/")
	if !ok {
		return transport.STOMPRoute{}, false
	}
	r := transport.STOMPRoute{Topic: "queue/" + name}
	if send {
		r.Publish = func(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
			if req.Data == nil {
				req.Data = json.RawMessage(`{"empty":true}`)
			}
			return q.policy.Publish(ctx, c, req)
		}
	}
	return r, true
}

func (queueDests) Forms(bool) string { return "/queue/{name}" }

func dialectServer(t *testing.T) *tt.Server {
	var s *tt.Server
	s = tt.NewServer(t, tt.ServerConfig{Routes: func(mux *http.ServeMux, tr *transport.Server) {
		mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) {
			// s is set by the time a request comes
			tr.HandleRawWS(w, r, &echoSocket{policy: tt.Open{Hub: s.Hub}, topic: "echo/" + r.URL.Query().Get("room")})
		})
		mux.HandleFunc("GET /data/poll/{name}", func(w http.ResponseWriter, r *http.Request) {
			tr.HandleDataLongPoll(w, r, "echo/"+r.PathValue("name"), 300*time.Millisecond)
		})
		mux.HandleFunc("POST /data/publish/{name}", func(w http.ResponseWriter, r *http.Request) {
			tr.HandlePublishTo(w, r, "echo/"+r.PathValue("name"), func() json.RawMessage { return json.RawMessage(`{"empty":true}`) })
		})
	}})
	return s
}

// TestRawSocket: a raw socket gets the data alone and no answers but errors; its protocol ops
// are still served.
func TestRawSocket(t *testing.T) {
	s := dialectServer(t)
	base := s.Subscriptions()
	a := tt.DialWS(t, s.WS("/echo?room=1"))
	b := tt.DialWS(t, s.WS("/echo?room=1"))
	s.AwaitSubscriptions(t, base+2) // both opened, nothing said
	a.Send(`{"x":1}`)
	a.Send(`not json`)
	for _, c := range []*tt.WSConn{a, b} {
		if m1, m2 := c.Read(), c.Read(); string(m1) != `{"x":1}` || string(m2) != `"not json"` {
			t.Fatalf("got %q and %q, want the data alone", m1, m2)
		}
	}
	a.Send(`{"op":"ping","id":1}`)
	if m := a.Msg(); m.Op != "pong" {
		t.Fatalf("ping on a raw socket: %+v", m)
	}
	a.Send(`{"op":"publish","topic":"echo/2","data":{"y":2},"id":2}`) // quietly: no ack
	a.Send(`{"op":"subscribe","topic":"bad topic"}`)
	if m := a.Msg(); m.Op != "error" || m.Code != "bad_topic" {
		t.Fatalf("a refused op: %+v", m)
	}
	var ans tt.PollAnswer
	tt.Get(t, s.URL+"/api/poll/echo/2?since=0", &ans)
	if len(ans.Publications) != 1 || string(ans.Publications[0].Data) != `{"y":2}` {
		t.Fatalf("the publish op: %+v", ans)
	}
}

// TestDataLongPollAndPublishTo: a data long poll answers the data of what comes as a list (an
// empty one after its wait); an empty publish is given the route's data.
func TestDataLongPollAndPublishTo(t *testing.T) {
	s := dialectServer(t)
	base := s.Subscriptions()
	got := make(chan []json.RawMessage, 1)
	go func() {
		var list []json.RawMessage
		tt.Dialer{}.JSON(t, "GET", s.URL+"/data/poll/3", "", &list)
		got <- list
	}()
	s.AwaitSubscriptions(t, base+1) // waiting
	if code := tt.Post(t, s.URL+"/data/publish/3", "", nil); code != 200 {
		t.Fatalf("empty publish: %d", code)
	}
	if list := <-got; len(list) != 1 || string(list[0]) != `{"empty":true}` {
		t.Fatalf("long poll list: %s", list)
	}
	var list []json.RawMessage
	if code := tt.Get(t, s.URL+"/data/poll/3", &list); code != 200 || len(list) != 0 {
		t.Fatalf("after its wait: %d %s", code, list)
	}
}

// TestSTOMPDests: an application's destinations are served beside /topic/, and named when a
// client uses an unknown one.
func TestSTOMPDests(t *testing.T) {
	s := tt.NewServer(t, tt.ServerConfig{STOMPDests: func(p transport.Policy) transport.STOMPDests { return queueDests{p} }})
	c := tt.DialSTOMP(t, s.WS("/api/stomp"))
	c.Connect("")
	c.Send("SUBSCRIBE\nid:1\ndestination:/queue/q1\nreceipt:r\n\n\x00")
	c.Expect("RECEIPT")
	c.Send("SEND\ndestination:/queue/q1\n\n\x00")
	if m := c.Expect("MESSAGE"); string(m.Body) != `{"empty":true}` || tt.Header(m, "destination") != "/queue/q1" {
		t.Fatalf("MESSAGE %+v %q", m.Headers, m.Body)
	}
	c.Send("SUBSCRIBE\nid:2\ndestination:/nowhere\n\n\x00")
	if f := c.Frame(5 * time.Second); f.Command != "ERROR" || !strings.Contains(tt.Header(f, "message"), "/topic/{topic}, /queue/{name}") {
		t.Fatalf("unknown destination: %s %+v", f.Command, f.Headers)
	}
}
