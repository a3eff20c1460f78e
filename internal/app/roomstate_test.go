package app

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/eventually"
)

// TestRoomStateOutlivesRedisRestart: a Redis without persistence restarts and comes back
// empty. The nodes that ran through write back what they know, so a members-only room keeps
// its owner and members, a node started after the restart refuses a token revoked before it,
// and members talk again.
func TestRoomStateOutlivesRedisRestart(t *testing.T) {
	srv := brokertest.StartRedis(t)
	node := func() *testServer {
		return startServer(t, func(c *Config) {
			c.Broker, c.Auth.Secret, c.Logger = srv.URL, testSecret, brokertest.Logger()
		})
	}
	n1, n2 := node(), node()
	alice, bob, mallory, carol := loginAs(t, n1, "alice"), loginAs(t, n1, "bob"), loginAs(t, n1, "mallory"), loginAs(t, n1, "carol")
	mustDo(t, n1, "POST", "/api/publish/chat/team?type=ENTER", alice, `{}`, 200)
	mustDo(t, n2, "POST", "/api/publish/chat/team?type=ENTER", bob, `{}`, 200)
	mustDo(t, n1, "POST", "/api/chat/team/private", alice, `{"private":true}`, 200)
	mustDo(t, n2, "POST", "/api/publish/chat/team?type=TALK", bob, `{"message":"before"}`, 200)
	mustDo(t, n1, "POST", "/api/logout", carol, "", 200)

	srv.Stop()
	srv.Start()
	for i, n := range []*testServer{n1, n2} {
		eventually.True(t, 30*time.Second, fmt.Sprintf("node %d ready again", i+1), func() bool { return readyz(n) == 200 })
	}
	for i, n := range []*testServer{n2, n1} {
		if code, body := do(t, n, "POST", "/api/publish/chat/team?type=ENTER", mallory, `{}`); code != 403 {
			t.Fatalf("mallory's ENTER into alice's members-only room after the restart, on node %d: %d %s", 2-i, code, body)
		}
	}
	var ri chat.RoomInfo
	_, body := do(t, n1, "GET", "/api/chat/team/members", alice, "")
	if err := json.Unmarshal([]byte(body), &ri); err != nil || ri.Owner != "alice" || !ri.Private || len(ri.Members) != 2 {
		t.Fatalf("members after the restart: %s", body)
	}
	eventually.Nil(t, 10*time.Second, func() error {
		if code, body := do(t, n2, "POST", "/api/publish/chat/team?type=TALK", bob, `{"message":"after"}`); code != 200 {
			return fmt.Errorf("bob's TALK after the restart: %d %s", code, body)
		}
		return nil
	})
	n3 := node()
	eventually.Nil(t, 10*time.Second, func() error {
		if code, body := do(t, n3, "GET", "/api/poll/a", carol, ""); code != 401 {
			return fmt.Errorf("a token revoked before the restart, on a node started after it: %d %s", code, body)
		}
		return nil
	})
	if code, body := do(t, n3, "POST", "/api/publish/chat/team?type=ENTER", mallory, `{}`); code != 403 {
		t.Fatalf("mallory's ENTER on a node started after the restart: %d %s", code, body)
	}

	// Again, with a node started at once, most likely before the others noticed: it reads the
	// revocations again when they write them back.
	srv.Stop()
	srv.Start()
	n4 := node()
	eventually.Nil(t, 10*time.Second, func() error {
		if code, body := do(t, n4, "GET", "/api/poll/a", carol, ""); code != 401 {
			return fmt.Errorf("a revoked token on a node started right after a second restart: %d %s", code, body)
		}
		return nil
	})
	_, body = do(t, n4, "GET", "/api/chat/team/members", alice, "")
	if err := json.Unmarshal([]byte(body), &ri); err != nil || ri.Owner != "alice" || !ri.Private {
		t.Fatalf("members after a second restart: %s", body)
	}
}

// mustDo sends a request and fails the test unless it is answered with want.
func mustDo(t *testing.T, s *testServer, method, path, token, body string, want int) {
	t.Helper()
	if code, b := do(t, s, method, path, token, body); code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
}
