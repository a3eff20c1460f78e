package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestPresenceAndServerAPIMultiNode runs two nodes on Redis and on NATS: presence lists the
// clients of both nodes on both, with join and leave events across nodes; the server API's
// publish to notify/ann reaches ann's client on the other node; a disconnect of ann closes her
// connections on both nodes with the reason given, and bob, on both, stays.
func TestPresenceAndServerAPIMultiNode(t *testing.T) {
	for _, bk := range []struct {
		name  string
		start func(testing.TB) *brokertest.Server
	}{
		{"redis", brokertest.StartRedis},
		{"nats", brokertest.StartNATS},
	} {
		t.Run(bk.name, func(t *testing.T) {
			srv := bk.start(t)
			start := func() *testServer {
				return startServer(t, func(c *Config) {
					c.Broker = srv.URL
					c.Auth.Secret = "a shared secret of the test nodes"
					c.APIKey = "backend-key"
					c.PresenceRefresh = 200 * time.Millisecond
					c.Logger = brokertest.Logger()
				})
			}
			testPresenceServerAPI(t, start(), start())
		})
	}
}

func testPresenceServerAPI(t *testing.T, a, b *testServer) {
	const topic = "room/presence"
	token := func(s *testServer, user string) string { return loginAs(t, s, user) }
	join := func(s *testServer, user string, extra ...string) *tt.WSConn {
		t.Helper()
		c := tt.DialWS(t, s.ws("/api/ws?access_token="+token(s, user)))
		c.Op("connected")
		c.Send(fmt.Sprintf(`{"op":"subscribe","topic":%q,"presence":true}`, topic))
		c.Op("subscribed")
		c.Op("presence")
		for _, x := range extra {
			c.Send(fmt.Sprintf(`{"op":"subscribe","topic":%q}`, x))
			c.Op("subscribed")
		}
		return c
	}
	users := func(s *testServer) []string {
		var ans transport.PresenceAnswer
		if code := do2(t, s, "GET", "/api/topics/"+topic+"/presence", "Bearer "+token(s, "reader"), "", &ans); code != 200 {
			t.Fatalf("presence: %d", code)
		}
		slices.Sort(ans.Users)
		return ans.Users
	}
	serverAPI := func(s *testServer, path, body string) map[string]any {
		t.Helper()
		var v map[string]any
		if code := do2(t, s, "POST", "/api/server/"+path, "apikey backend-key", body, &v); code != 200 {
			t.Fatalf("server API %s: %d %v", path, code, v)
		}
		return v
	}

	annA := join(a, "ann", "notify/ann")
	bobB := join(b, "bob")
	for i, s := range []*testServer{a, b} {
		eventually.True(t, 10*time.Second, fmt.Sprintf("node %d to list ann and bob", i), func() bool {
			return slices.Equal(users(s), []string{"ann", "bob"})
		})
	}
	if m := expectPresence(t, annA, "join"); m.Info.User != "bob" {
		t.Fatalf("ann was told of %+v, want bob's join", m)
	}

	// A wrong key is refused; the right one publishes where no client may.
	var refused map[string]string
	if code := do2(t, b, "POST", "/api/server/publish", "apikey wrong", `{"topic":"notify/ann","data":{}}`, &refused); code != 401 {
		t.Fatalf("wrong API key: %d %v, want 401", code, refused)
	}
	ack := serverAPI(b, "publish", `{"topic":"notify/ann","data":{"hello":"ann"},"type":"NOTIFY"}`)
	m := annA.Op("message")
	if m.Topic != "notify/ann" || m.Offset != uint64(ack["offset"].(float64)) || !strings.Contains(string(m.Data), "hello") {
		t.Fatalf("ann got %+v, want the notification of %v", m, ack)
	}

	// ann on both nodes; one disconnect closes both, with the reason, and leaves bob alone.
	annB := join(b, "ann")
	eventually.True(t, 10*time.Second, "ann's second connection to show on node 0", func() bool {
		var ans transport.PresenceAnswer
		do2(t, a, "GET", "/api/topics/"+topic+"/presence", "Bearer "+token(a, "reader"), "", &ans)
		return len(ans.Clients) == 3
	})
	res := serverAPI(a, "disconnect", `{"user":"ann","reason":"account suspended"}`)
	if res["disconnected"].(float64) != 1 {
		t.Fatalf("disconnect answered %v, want 1 on the node asked", res)
	}
	for i, c := range []*tt.WSConn{annA, annB} {
		bye := c.Op("disconnect")
		if bye.Code != "disconnected" || bye.Reason != "account suspended" || bye.Reconnect {
			t.Fatalf("ann's connection %d: %+v, want disconnected: account suspended, no reconnect", i, bye)
		}
		if _, err := c.Next(5 * time.Second); err == nil {
			t.Fatalf("ann's connection %d still open after the disconnect", i)
		}
	}
	for i, s := range []*testServer{a, b} {
		eventually.True(t, 10*time.Second, fmt.Sprintf("node %d to list bob alone", i), func() bool {
			return slices.Equal(users(s), []string{"bob"})
		})
	}
	if m := expectPresence(t, bobB, "leave"); m.Info.User != "ann" {
		t.Fatalf("bob was told of %+v, want ann's leave", m)
	}
}

type presenceMsg struct {
	Op   string `json:"op"`
	Info struct {
		Client, Node, User string
	} `json:"info"`
}

// expectPresence reads until a presence event op (join, leave) arrives.
func expectPresence(t *testing.T, c *tt.WSConn, op string) presenceMsg {
	t.Helper()
	for {
		b, err := c.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v", op, err)
		}
		var m presenceMsg
		if json.Unmarshal(b, &m) == nil && m.Op == op {
			return m
		}
	}
}

// do2 makes a request with the Authorization header auth and decodes the JSON answer into v.
func do2(t *testing.T, s *testServer, method, path, auth, body string, v any) int {
	t.Helper()
	return tt.Dialer{Header: http.Header{"Authorization": {auth}}}.JSON(t, method, s.URL+path, body, v)
}
