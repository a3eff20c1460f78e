// Package jmeter runs the JMeter plans of test/jmeter (WebSocket Samplers sending STOMP frames
// by hand, as Spring teams' load tests do) against a real server through Maven.
package jmeter

import (
	"context"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/servertest"
)

// TestJMeterPlans runs both plans at 200 threads and fails on any sampler error: one where
// each user connects, subscribes, joins, chats, reads each back and closes; one where the
// connection stays open and the user chats again after thinking longer than twice the
// server's heart-beat interval (the plan sends heart-beat:0,0 and never a heart-beat).
func TestJMeterPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("runs JMeter through Maven")
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		if os.Getenv("RTLAB_REQUIRE_PEERS") != "" {
			t.Fatal("mvn is not installed")
		}
		t.Skip("mvn is not installed")
	}
	bin, err := servertest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.StartWith(t, bin, servertest.Options{Memory: true, Args: []string{"--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--user-msg-rate", "-1"}})
	host, port, _ := net.SplitHostPort(srv.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "verify", "-Dhost="+host, "-Dport="+port, "-Dthreads=200")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("JMeter plans: %v\n%s\nserver:\n%s", err, out, srv.Output())
	}
	for _, plan := range []string{"stomp-close", "stomp-open"} {
		b, err := os.ReadFile("target/jmeter/results/" + plan + ".csv")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d samples, all passed", plan, countLines(b)-1)
	}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
