package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// buildRTLab builds the rtlab binary into a temporary directory, or returns $RTLAB_BIN when
// set (a binary built beforehand, e.g. with -race or by CI).
func buildRTLab(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("RTLAB_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "rtlab")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rtlab/rtlab/cmd/rtlab").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/rtlab: %v\n%s", err, out)
	}
	return bin
}

// TestBenchAgainstRealServer runs a short bench on all five transports against the real
// server and checks that results.json is consistent: with no fault every expected delivery
// arrives, latencies are measured, and every series has one point per second.
// executeJSON runs a bench and returns its results as read back from JSON: what the report
// reads is the JSON, so the figures are checked after the round trip.
func executeJSON(ctx context.Context, t *testing.T, o *Options) results.Results {
	t.Helper()
	res, err := Execute(ctx, o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got results.Results
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestBenchAgainstRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs for about 30 s")
	}
	bin := buildRTLab(t)
	var status bytes.Buffer
	o := &Options{
		Users:        []int{50},
		Stages:       "2s:PEAK,2s:PEAK,1s:0",
		Interval:     500 * time.Millisecond,
		Seed:         7,
		ServerBinary: bin,
		Status:       &status,
		Transports:   append(Transports(), TransportSTOMPTCP, TransportSockJS),
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Probe(ctx, o); err != nil {
		t.Fatal(err)
	}
	got := executeJSON(ctx, t, o)
	if got.Stopped || len(got.Warnings) > 0 || len(got.Runs) != len(o.Transports) {
		t.Fatalf("stopped %v, warnings %v, %d runs", got.Stopped, got.Warnings, len(got.Runs))
	}
	for _, r := range got.Runs {
		t.Run(r.Transport, func(t *testing.T) {
			d := r.Delivery
			if d.Expected == 0 || d.Ratio != 1 || d.Received != d.Expected || d.Duplicates != 0 || d.OutOfOrder != 0 || d.Gaps != 0 {
				t.Errorf("delivery %+v; want every expected message once", d)
			}
			// Users, connections and reconnects are separate counts.
			if c := r.Connections; c.Users != int64(r.Peak) || c.Opened != c.Users+c.Reconnects {
				t.Errorf("connections %+v; want %d users, opened = users + reconnects", c, r.Peak)
			}
			if d.Latency.Count == 0 || d.Latency.P50 <= 0 || d.Latency.Max < d.Latency.P99 {
				t.Errorf("delivery latency %+v", d.Latency)
			}
			if c := r.Connections; c.Opened != 50 || c.Failed != 0 || c.Dropped != 0 || c.Connect.Count != 50 {
				t.Errorf("connections %+v", c)
			}
			if p := r.Publish; p.Sent == 0 || p.Failed != 0 || p.Latency.P50 <= 0 {
				t.Errorf("publish %+v", p)
			}
			if time.Duration(r.Duration) != 5*time.Second {
				t.Errorf("duration %s, want 5s", time.Duration(r.Duration))
			}
			s := r.Series
			for name, n := range seriesPoints(s) {
				if n != 5 {
					t.Errorf("series %s has %d points, want 5", name, n)
				}
			}
			var sent, received int64
			for i := range s.Sent {
				sent += s.Sent[i]
				received += s.Received[i]
			}
			// Latency covers exactly the receipts the ratio counts plus those of publications it
			// leaves out (Unconfirmed); the series count every first receipt.
			if d.Latency.Count != d.Received+d.Unconfirmed {
				t.Errorf("latency over %d deliveries; received %d + unconfirmed %d", d.Latency.Count, d.Received, d.Unconfirmed)
			}
			if sent != r.Publish.Sent || received != d.Latency.Count+d.OutsideWindow {
				t.Errorf("series sums: sent %d received %d; totals %d and %d + %d outside the window", sent, received, r.Publish.Sent, d.Latency.Count, d.OutsideWindow)
			}
			if !r.Server.Available || r.Server.RSSMaxBytes == 0 || r.Server.GoroutinesMax == 0 || r.Generator.RSSMaxBytes == 0 {
				t.Errorf("usage: server %+v generator %+v", r.Server, r.Generator)
			}
		})
	}
	if !strings.Contains(status.String(), "stage 2/3") {
		t.Errorf("no progress lines: %q", status.String())
	}
}

// TestBenchInterrupted cancels a run midway, as Ctrl-C does: what was measured comes back
// marked stopped, series cover the seconds that ran, and the ratio leaves out the last
// grace period instead of counting it as lost.
func TestBenchInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server")
	}
	bin := buildRTLab(t)
	o := &Options{
		Users: []int{40}, Transports: []string{"ws", "sse"}, Stages: "2s:PEAK,10s:PEAK,1s:0",
		Interval: 300 * time.Millisecond, ServerBinary: bin,
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	time.AfterFunc(4500*time.Millisecond+time.Second, interrupt) // ~1 s to start the server
	res, err := Execute(runCtx, o, "")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || len(res.Runs) != 1 {
		t.Fatalf("stopped %v, %d runs; want the first run only, stopped", res.Stopped, len(res.Runs))
	}
	r := res.Runs[0]
	d := time.Duration(r.Duration)
	if !r.Stopped || d < 3*time.Second || d > 6*time.Second {
		t.Errorf("run stopped %v after %s", r.Stopped, d)
	}
	if n := len(r.Series.Users); n != int(math.Ceil(d.Seconds())) || len(r.Series.GeneratorRSS) != n {
		t.Errorf("%d points for %s", n, d)
	}
	if r.Delivery.Expected == 0 || r.Delivery.Ratio != 1 {
		t.Errorf("delivery %+v", r.Delivery)
	}
}

// TestBenchChatAndNotify runs short chat and notify scenarios against the real server, the two
// side by side to keep the test short: with no fault every expected TALK reaches every room
// member (chat) and every expected NOTIFY its room's owner (notify), on every transport.
func TestBenchChatAndNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs for about 30 s")
	}
	bin := buildRTLab(t)
	tests := []struct {
		name string
		o    Options
	}{
		// Sessions of 9 TALKs at 300 ms with a pause of one interval: each user goes through
		// login … LEAVE about three times in the 9 s hold, so session churn is covered. The grace
		// is a delivery's allowance (a 300 ms short poll on a machine that may be loaded many
		// times over) and leaves each session a window of about 0.7 s.
		{"chat", Options{Scenario: ScenarioChat, Users: []int{50}, RoomSize: 10, Talks: 9,
			Stages: "1s:PEAK,9s:PEAK,1s:0", Interval: 300 * time.Millisecond, Grace: 2 * time.Second}},
		// (go test runs two of these at a time on two cores: the short one goes second.)
		{"chat-hold", Options{Scenario: ScenarioChat, Users: []int{50}, RoomSize: 25, Hold: true,
			Transports: []string{"ws"}, Stages: "1s:PEAK,3s:PEAK,1s:0", Interval: 400 * time.Millisecond}},
		// poll-1s stands for the interval polls (poll-5s is the same client at another
		// interval, and would need a grace over 5 s); the grace covers one 1 s poll.
		{"notify", Options{Scenario: ScenarioNotify, Users: []int{50}, RoomSize: 10,
			Transports: []string{"poll-1s", "longpoll", "sse", "ws", "stomp"},
			Stages:     "1s:PEAK,3s:PEAK,1s:0", Interval: 300 * time.Millisecond, Grace: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := tt.o
			o.Seed, o.ServerBinary = 3, bin
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			got := executeJSON(ctx, t, &o)
			if got.Stopped || len(got.Warnings) > 0 || len(got.Runs) != len(o.Transports) {
				t.Fatalf("stopped %v, warnings %v, %d runs", got.Stopped, got.Warnings, len(got.Runs))
			}
			if c := got.Config; c.Scenario != o.Scenario || c.RoomSize != o.RoomSize || c.Auth != "open" || c.Hold != o.Hold {
				t.Errorf("config %+v", c)
			}
			secs := int(math.Ceil(o.stageSpecs[0].Duration.Seconds() + o.stageSpecs[1].Duration.Seconds() + o.stageSpecs[2].Duration.Seconds()))
			for _, r := range got.Runs {
				t.Run(r.Transport, func(t *testing.T) {
					d := r.Delivery
					if d.Expected == 0 || d.Ratio != 1 || d.Received != d.Expected || d.Duplicates != 0 || d.OutOfOrder != 0 || d.Gaps != 0 {
						t.Errorf("delivery %+v; want every expected message once", d)
					}
					if d.Latency.Count == 0 || d.Latency.P50 <= 0 || d.Latency.Max < d.Latency.P99 || d.Other == 0 {
						t.Errorf("delivery latency %+v, other %d", d.Latency, d.Other)
					}
					if r.Rooms != (50+o.RoomSize-1)/o.RoomSize {
						t.Errorf("%d rooms", r.Rooms)
					}
					c := r.Connections
					if c.Opened < 50 || c.Failed != 0 || c.Dropped != 0 || len(c.Errors) != 0 {
						t.Errorf("connections %+v", c)
					}
					l := r.Login
					// One login per session; a session the stages end before it connects has no
					// connection attempt.
					if l == nil || l.Tried < c.Tried || l.Tried > c.Tried+50 || l.Failed != 0 || l.Latency.Count != l.Tried || l.Latency.P50 <= 0 {
						t.Errorf("login %+v; want one per session (%d connection attempts)", l, c.Tried)
					}
					// Churn is covered when users come back; how many make it to a third session
					// depends on the machine's speed, so the count asks for half of them.
					if o.Scenario == ScenarioChat && !o.Hold && c.Tried < 50+50/2 {
						t.Errorf("%d sessions; want users to come back", c.Tried)
					}
					if p := r.Publish; p.Sent == 0 || p.Failed != 0 || p.Latency.P50 <= 0 {
						t.Errorf("publish %+v", p)
					}
					s := r.Series
					points := seriesPoints(s)
					points["logins"] = len(s.Logins)
					for name, n := range points {
						if n != secs {
							t.Errorf("series %s has %d points, want %d", name, n, secs)
						}
					}
					var sent, received, logins int64
					for i := range s.Sent {
						sent += s.Sent[i]
						received += s.Received[i]
						logins += s.Logins[i]
					}
					if d.Latency.Count != d.Received+d.Unconfirmed {
						t.Errorf("latency over %d deliveries; received %d + unconfirmed %d", d.Latency.Count, d.Received, d.Unconfirmed)
					}
					if sent != r.Publish.Sent || received != d.Latency.Count+d.OutsideWindow || logins != l.Tried {
						t.Errorf("series sums: sent %d received %d logins %d; totals %d (+ %d outside the window), %d and %d", sent, received, logins, r.Publish.Sent, d.Latency.Count, d.OutsideWindow, l.Tried)
					}
				})
			}
		})
	}
}

// seriesPoints is the number of points of every per-second series a run always records.
func seriesPoints(s results.Series) map[string]int {
	return map[string]int{
		"users": len(s.Users), "sent": len(s.Sent), "received": len(s.Received), "errors": len(s.Errors),
		"latencyP50": len(s.LatencyP50), "latencyP99": len(s.LatencyP99), "bytesIn": len(s.BytesIn),
		"httpRequests": len(s.Requests), "serverCpu": len(s.ServerCPU), "serverRss": len(s.ServerRSS),
		"serverGoroutines": len(s.ServerGorout), "generatorCpu": len(s.GeneratorCPU), "generatorRss": len(s.GeneratorRSS),
		"machineSteal": len(s.MachineSteal),
	}
}
