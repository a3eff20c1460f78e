package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
)

// profileRun runs a short bench of transport with the profile against target and returns its
// one run.
func profileRun(t *testing.T, target, profile, transport string) results.Run {
	t.Helper()
	o := &Options{
		Target: target, Profile: profile, Transports: []string{transport},
		Users: []int{30}, Stages: "2s:PEAK,3s:PEAK,1s:0", Interval: 500 * time.Millisecond, Seed: 3,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Probe(ctx, o); err != nil {
		t.Fatal(err)
	}
	got := executeJSON(ctx, t, o)
	if got.Stopped || len(got.Warnings) > 0 || len(got.Runs) != 1 {
		t.Fatalf("stopped %v, warnings %v, %d runs", got.Stopped, got.Warnings, len(got.Runs))
	}
	return got.Runs[0]
}

// checkExact asserts an honest server's run: every connection and publication served, every
// expected delivery received once.
func checkExact(t *testing.T, r results.Run) {
	t.Helper()
	c, p, d := r.Connections, r.Publish, r.Delivery
	t.Logf("%s: conns %d/%d failed %d, pubs %d failed %d, expected %d received %d dup %d ooo %d, errors %v",
		r.Transport, c.Opened, c.Tried, c.Failed, p.Sent, p.Failed, d.Expected, d.Received, d.Duplicates, d.OutOfOrder, c.Errors)
	if c.Failed != 0 || c.Dropped != 0 || p.Failed != 0 || p.Sent == 0 {
		t.Errorf("connections %+v, publish sent %d failed %d", c, p.Sent, p.Failed)
	}
	if d.Expected == 0 || d.Received != d.Expected || d.Duplicates != 0 || d.OutOfOrder != 0 {
		t.Errorf("delivery: expected %d, received %d, duplicates %d, out of order %d", d.Expected, d.Received, d.Duplicates, d.OutOfOrder)
	}
}

func example(name string) string {
	return filepath.Join("..", "..", "examples", "targets", name+".yaml")
}

func TestProfileShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three short benches")
	}
	t.Run("ws-envelope", func(t *testing.T) {
		checkExact(t, profileRun(t, wsEnvelopeServer(t).URL, example("ws-envelope"), "ws"))
	})
	t.Run("sse-dto", func(t *testing.T) {
		checkExact(t, profileRun(t, sseDTOServer(t, 0).URL, example("sse-dto"), "sse"))
	})
	t.Run("stomp-no-receipts", func(t *testing.T) {
		checkExact(t, profileRun(t, stompNoReceiptServer(t).URL, example("stomp-no-receipts"), "stomp"))
	})
}

// TestProfileReadsDropRate: a server that drops one delivery in 20 reads as a ratio of 95 %,
// to within a point.
func TestProfileReadsDropRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short bench")
	}
	r := profileRun(t, sseDTOServer(t, 20).URL, example("sse-dto"), "sse")
	d := r.Delivery
	t.Logf("expected %d, received %d, ratio %.4f", d.Expected, d.Received, d.Ratio)
	if d.Expected < 500 || d.Ratio < 0.94 || d.Ratio > 0.96 || d.Duplicates != 0 {
		t.Errorf("expected %d, ratio %.4f, duplicates %d: want 0.95 ± 0.01", d.Expected, d.Ratio, d.Duplicates)
	}
}

// TestProfileFailsLoudly: a route the server does not have stops the run before the ramp with
// an error naming the step; a bad profile is refused naming its line and field.
func TestProfileFailsLoudly(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(example("sse-dto"))
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(dir, "wrong.yaml")
	if err := os.WriteFile(wrong, []byte(strings.Replace(string(src), "/location/sse/connect", "/location/sse/nope", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := sseDTOServer(t, 0)
	o := &Options{Target: srv.URL, Profile: wrong, Users: []int{2}, Stages: "1s:PEAK"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = Probe(ctx, o)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "subscribe GET /location/sse/nope?group=0") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(src), "seq: $.lat", "seq: lat", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	o = &Options{Target: srv.URL, Profile: bad}
	err = o.Validate()
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "bad.yaml:13: transports.sse.read.seq: want a path like $.payload.seq") {
		t.Fatalf("got %v", err)
	}

	// A field the server does not send is named with what arrived.
	missing := filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(missing, []byte(strings.Replace(string(src), "seq: $.lat", "seq: $.payload.seq", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	o = &Options{Target: srv.URL, Profile: missing, Users: []int{2}, Stages: "1s:PEAK"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	err = Probe(ctx, o)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `receive: sse: field $.payload.seq missing in: {"lat":0,`) {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

// TestProfilesOnRealRTLab runs the built-in profile of the seed routes, and the generic drivers
// on rtlab's own API, against the real rtlab.
func TestProfilesOnRealRTLab(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	bin := buildRTLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := peers.StartRTLab(ctx, bin, "memory", nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, tr := range []string{"sse", "ws", "stomp"} {
		t.Run("seed-"+tr, func(t *testing.T) {
			checkExact(t, profileRun(t, "http://"+s.Addr, "builtin:seed", tr))
		})
	}
	t.Run("seed-text", func(t *testing.T) {
		checkExact(t, profileRun(t, "http://"+s.Addr, filepath.Join("testdata", "seed-text.yaml"), "ws"))
	})
	// Polling with a cursor, WebSocket frames answered by a reply, STOMP over TCP and SockJS.
	t.Setenv("RTLAB_TEST_STOMP_ADDR", s.STOMP)
	for _, tr := range []string{"shortpoll", "longpoll", "ws", TransportSTOMPTCP, TransportSockJS} {
		t.Run("api-"+tr, func(t *testing.T) {
			checkExact(t, profileRun(t, "http://"+s.Addr, filepath.Join("testdata", "rtlab-api.yaml"), tr))
		})
	}
}

// TestProfileOptions: --profile needs a --target, runs the profile's transports, and refuses
// one the profile lacks or the bench has no client for.
func TestProfileOptions(t *testing.T) {
	o := &Options{Profile: "builtin:seed"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "needs --target") {
		t.Fatalf("got %v", err)
	}
	o = &Options{Target: "http://127.0.0.1:1", Profile: "builtin:seed"}
	if err := o.Validate(); err != nil || strings.Join(o.Transports, ",") != "longpoll,sse,ws,stomp" {
		t.Fatalf("%v %v", err, o.Transports)
	}
	o = &Options{Target: "http://127.0.0.1:1", Profile: "builtin:seed", Transports: []string{"sockjs"}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "does not describe it") {
		t.Fatalf("got %v", err)
	}
	o = &Options{Target: "http://127.0.0.1:1", Profile: "builtin:socketio"}
	if err := o.Validate(); err != nil || strings.Join(o.Transports, ",") != "socketio" {
		t.Fatalf("%v %v", err, o.Transports)
	}
	o = &Options{Target: "http://127.0.0.1:1", Transports: []string{"socketio"}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `unknown transport "socketio"`) {
		t.Fatalf("got %v", err)
	}
	o = &Options{Target: "http://127.0.0.1:1", Profile: "builtin:nope"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "no built-in profile") {
		t.Fatalf("got %v", err)
	}
}

// TestProfileAuth: per-user tokens, cookies, query and subprotocols reach the server's
// handshake; a wrong secret is refused there, and the pre-flight names the refusal.
func TestProfileAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short bench")
	}
	srv := authedEnvelopeServer(t, "team-secret")
	t.Setenv("RTLAB_TEST_JWT", "team-secret")
	checkExact(t, profileRun(t, srv.URL, filepath.Join("testdata", "ws-auth.yaml"), "ws"))

	t.Setenv("RTLAB_TEST_JWT", "wrong")
	o := &Options{Target: srv.URL, Profile: filepath.Join("testdata", "ws-auth.yaml"), Users: []int{2}, Stages: "1s:PEAK"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Probe(ctx, o); err == nil || !strings.Contains(err.Error(), "subscribe GET /ws/location?group=0&client=bench") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("got %v", err)
	}
}

// TestProfileCountsRefusals: during a run, refused connections and publishes count as failed,
// so --threshold failed==0,pubfailed==0 catches them on any target.
func TestProfileCountsRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short bench")
	}
	srv := sseDTOServer(t, 0, refusing(7))
	o := &Options{
		Target: srv.URL, Profile: example("sse-dto"), Users: []int{30}, Stages: "2s:PEAK,3s:PEAK,1s:0",
		Interval: 500 * time.Millisecond, Thresholds: "failed==0,pubfailed==0",
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The pre-flight's requests may meet a refusal too; the run is what is checked here.
	got := executeJSON(ctx, t, o)
	r := got.Runs[0]
	t.Logf("connections %+v, publish failed %d of %d, thresholds %+v", r.Connections, r.Publish.Failed, r.Publish.Sent, r.Thresholds)
	if r.Connections.Failed == 0 || r.Publish.Failed == 0 {
		t.Errorf("refusals not counted: %d failed connections, %d failed publishes", r.Connections.Failed, r.Publish.Failed)
	}
	for _, th := range r.Thresholds {
		if th.Pass {
			t.Errorf("threshold %s passed with refusals", th.Expr)
		}
	}
}

// TestBuiltinRabbitMQProfile runs builtin:rabbitmq against a real RabbitMQ with Web-STOMP.
func TestBuiltinRabbitMQProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts RabbitMQ")
	}
	peerOrSkip(t, results.KindRabbitMQ)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := startRabbit(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	checkExact(t, profileRun(t, "http://"+s.Addr, "builtin:rabbitmq", "stomp"))
}

// TestBuiltinSpringProfile runs builtin:spring against the Spring peer, and a profile that asks
// for no RECEIPT against the peer as Spring ships it, without its RECEIPT interceptor.
func TestBuiltinSpringProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Spring peer")
	}
	peerOrSkip(t, results.KindSpring)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := peerOptions(t)
	s, err := o.startSpring(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkExact(t, profileRun(t, "http://"+s.Addr, "builtin:spring", "stomp"))
	s.Stop()
	plain, err := o.startSpring(ctx, nil, "--lab.receipts=false")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	checkExact(t, profileRun(t, "http://"+plain.Addr, filepath.Join("testdata", "spring-no-receipts.yaml"), "stomp"))
}
