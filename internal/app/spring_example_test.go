package app

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/eventually"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestSpringBackendExample builds examples/spring-backend with Maven and drives it end to end
// behind rtlab: the backend mints the clients' tokens; a client SENDs to /app/chat.send, which
// rtlab hands the backend; its answer reaches the subscribers of /topic/public and the
// sender's /user/queue/acks; the backend's server API call reaches another user's
// /user/queue/notify. It needs Java 17 and Maven (RTLAB_REQUIRE_PEERS makes their absence a
// failure, as for the Spring peer).
func TestSpringBackendExample(t *testing.T) {
	// jjwt refuses HMAC keys shorter than the hash: 32 bytes at least for HS256.
	const springSecret = "spring-backend-example-secret-0123456789"

	if testing.Short() {
		t.Skip("builds and starts a Spring Boot app")
	}
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("RTLAB_REQUIRE_PEERS") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, tool := range []string{"mvn", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("%s is not installed", tool)
		}
	}
	dir, _ := filepath.Abs("../../examples/spring-backend")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "mvn", "-q", "-B", "package", "-DskipTests")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("mvn package: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backendAddr := ln.Addr().String()
	ln.Close()
	s := startServer(t, func(c *Config) {
		c.Auth.Secret = springSecret
		c.APIKey = "example-key"
		c.AppProxy = "http://" + backendAddr + "/rtlab/app"
		c.AppProxySecret = "app-proxy-example-key"
	})
	_, port, _ := net.SplitHostPort(backendAddr)
	java := exec.CommandContext(ctx, "java", "-Xmx128m", "-jar", filepath.Join(dir, "target", "spring-backend.jar"),
		"--server.port="+port, "--server.address=127.0.0.1", "--rtlab.secret="+springSecret,
		"--rtlab.url="+s.URL, "--rtlab.api-key=example-key", "--rtlab.app-secret=app-proxy-example-key")
	logf, err := os.Create(filepath.Join(t.TempDir(), "backend.log"))
	if err != nil {
		t.Fatal(err)
	}
	java.Stdout, java.Stderr = logf, logf
	if err := java.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = java.Process.Kill(); _ = java.Wait() })
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("backend log:\n%s", b)
		}
	}()
	token := func(user string) string {
		var v struct{ Token string }
		eventually.True(t, 90*time.Second, "the backend mints a token", func() bool {
			res, err := http.Get("http://" + backendAddr + "/token/" + user)
			if err != nil {
				return false
			}
			defer res.Body.Close()
			return res.StatusCode == 200 && json.NewDecoder(res.Body).Decode(&v) == nil
		})
		return v.Token
	}
	dial := func(user string) *tt.STOMPConn {
		tok := token(user)
		c := tt.DialSTOMP(t, s.ws("/api/stomp"))
		if f := c.Connect("passcode:" + tok + "\n"); tt.Header(f, "user-name") != user {
			t.Fatalf("%s: CONNECTED %+v", user, f.Headers)
		}
		return c
	}
	ann, bob := dial("ann"), dial("bob")
	bob.Send("SUBSCRIBE\nid:p\ndestination:/topic/public\n\n\x00")
	bob.Send("SUBSCRIBE\nid:n\ndestination:/user/queue/notify\nreceipt:b\n\n\x00")
	bob.Expect("RECEIPT")
	ann.Send("SUBSCRIBE\nid:a\ndestination:/user/queue/acks\nreceipt:a\n\n\x00")
	ann.Expect("RECEIPT")

	ann.Send("SEND\ndestination:/app/chat.send\ncontent-type:application/json\nreceipt:s\n\n{\"text\":\"hello\"}\x00")
	if m := bob.Expect("MESSAGE"); tt.Header(m, "destination") != "/topic/public" || !strings.Contains(string(m.Body), `"text":"hello"`) || !strings.Contains(string(m.Body), `"from":"ann"`) {
		t.Fatalf("bob on /topic/public: %+v %s", m.Headers, m.Body)
	}
	if m := ann.Expect("MESSAGE"); tt.Header(m, "destination") != "/user/queue/acks" || !strings.Contains(string(m.Body), `"ack"`) {
		t.Fatalf("ann's acks: %+v %s", m.Headers, m.Body)
	}
	res, err := http.Post("http://"+backendAddr+"/notify/bob", "application/json", strings.NewReader(`{"note":"for bob"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("backend notify: %v %v", res, err)
	}
	res.Body.Close()
	if m := bob.Expect("MESSAGE"); tt.Header(m, "destination") != "/user/queue/notify" || string(m.Body) != `{"note":"for bob"}` {
		t.Fatalf("bob's queue: %+v %s", m.Headers, m.Body)
	}
	// A refusal is the sender's on its receipt; the session goes on.
	ann.Send("SEND\ndestination:/app/nothing\nreceipt:n\n\n{}\x00")
	f := ann.Expect("RECEIPT")
	for tt.Header(f, "receipt-id") != "n" { // the chat.send's receipt may come after its ack
		f = ann.Expect("RECEIPT")
	}
	if tt.Header(f, "refused") != "forbidden" || !strings.Contains(tt.Header(f, "message"), "no handler for /app/nothing") {
		t.Fatalf("refusal %+v", f.Headers)
	}
	// The backend refuses what rtlab did not sign.
	res, err = http.Post("http://"+backendAddr+"/rtlab/app", "application/json", strings.NewReader(`{"destination":"/app/chat.send","user":"bob","data":{"text":"x"}}`))
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned request to the backend: %v %v", res, err)
	}
	res.Body.Close()
}
