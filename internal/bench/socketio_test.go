package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/socketio/socketiotest"
)

// socketIOProfile writes examples/targets/socketio.yaml with each old string replaced by its
// new one, and returns its path.
func socketIOProfile(t *testing.T, oldNew ...string) string {
	t.Helper()
	src, err := os.ReadFile(example("socketio"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for i := 0; i+1 < len(oldNew); i += 2 {
		if !strings.Contains(s, oldNew[i]) {
			t.Fatalf("%q not in the example", oldNew[i])
		}
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	p := filepath.Join(t.TempDir(), "socketio.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// secure is the namespace of server.js that refuses a CONNECT whose auth.token is not "good".
const secure = `namespace: /secure
    auth: '{"token":"${RTLAB_TEST_SIO_TOKEN}"}'
    `

// TestProfileSocketIO runs the Socket.IO profile against a real socket.io 4 server: over
// WebSocket from the start, joining by the acknowledged event and publishing with acks; over
// long-polling upgraded to WebSocket (the built-in profile); and over long-polling only,
// joining by the query and publishing fire-and-forget. Every delivery is counted exactly.
func TestProfileSocketIO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs short benches")
	}
	srv := socketiotest.Start(t)
	t.Setenv("RTLAB_TEST_SIO_TOKEN", "good")
	t.Run("websocket", func(t *testing.T) {
		p := socketIOProfile(t, "transport: upgrade", secure+"transport: websocket")
		checkExact(t, profileRun(t, srv, p, "socketio"))
	})
	t.Run("upgrade", func(t *testing.T) {
		checkExact(t, profileRun(t, srv, "builtin:socketio", "socketio"))
	})
	t.Run("polling-query", func(t *testing.T) {
		p := socketIOProfile(t,
			"transport: upgrade", "transport: polling\n    query: {group: '{group}'}",
			"    join: {event: join, data: '{group}', ready: ack}\n", "",
			"ack: ack}", "ack: none}")
		checkExact(t, profileRun(t, srv, p, "socketio"))
	})
}

// TestProfileSocketIOPreflight: an event name the server does not have, or a refused CONNECT,
// stops the run before the ramp, naming the step.
func TestProfileSocketIOPreflight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pre-flight")
	}
	srv := socketiotest.Start(t)
	t.Setenv("RTLAB_TEST_SIO_TOKEN", "bad")
	for _, tc := range []struct{ old, new, want string }{
		{"event: location, data", "event: locaton, data", "publish emit locaton: no answer in 10s"},
		{"transport: upgrade", secure + "transport: upgrade", "subscribe socketio " + srv + "/secure over upgrade, emit join: connect: socketio: namespace /secure refused the connection: not authorized"},
		{"receive: {event: location}", "receive: {event: position}", `messages arrived that receive.event "position" or read.match left out)`},
	} {
		o := &Options{Target: srv, Profile: socketIOProfile(t, tc.old, tc.new), Users: []int{2}, Stages: "1s:PEAK"}
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := Probe(ctx, o)
		cancel()
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "socketio pre-flight: ") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("got %v, want %q", err, tc.want)
		}
		t.Log(err)
	}
}
