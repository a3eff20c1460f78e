package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

func TestParseStages(t *testing.T) {
	tests := []struct {
		in   string
		want []StageSpec
		err  string // substring of the error; empty for success
	}{
		{in: DefaultStages, want: []StageSpec{{20 * time.Second, 300, false}, {30 * time.Second, 0, true}, {10 * time.Second, 0, false}}},
		{in: " 1m:10 , 500ms:peak ", want: []StageSpec{{time.Minute, 10, false}, {500 * time.Millisecond, 0, true}}},
		{in: "5s:0", want: []StageSpec{{5 * time.Second, 0, false}}},
		{in: "", err: "empty"},
		{in: "20s", err: "want duration:target"},
		{in: "20:300", err: "not a positive Go duration"},
		{in: "0s:300", err: "not a positive Go duration"},
		{in: "-1s:300", err: "not a positive Go duration"},
		{in: "20s:-3", err: "not PEAK or a non-negative integer"},
		{in: "20s:lots", err: "not PEAK or a non-negative integer"},
		{in: "20s:300,", err: "stage 2"},
		{in: "20s:300,,10s:0", err: "stage 2"},
	}
	for _, tt := range tests {
		got, err := ParseStages(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseStages(%q) error = %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseStages(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseStages(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// activeAt counts users the plan has active at t.
func activeAt(p *Plan, t time.Duration) int {
	n := 0
	for _, ivs := range p.Activity {
		for _, iv := range ivs {
			if iv.Start <= t && t < iv.Stop {
				n++
			}
		}
	}
	return n
}

func TestPlanFollowsRamp(t *testing.T) {
	specs, err := ParseStages("10s:100,20s:PEAK,10s:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlan(Resolve(specs, 300))
	if p.Peak != 300 || p.Total != 40*time.Second || p.PeakEnd != 30*time.Second {
		t.Fatalf("peak %d total %s peakEnd %s", p.Peak, p.Total, p.PeakEnd)
	}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{0, 0}, {5 * time.Second, 50}, {10 * time.Second, 100}, {20 * time.Second, 200},
		{30*time.Second - 1, 299}, {30 * time.Second, 300}, {35 * time.Second, 150}, {40 * time.Second, 0},
	} {
		if got := activeAt(p, tc.at); got != tc.want {
			t.Errorf("active at %s = %d, want %d (target %.1f)", tc.at, got, tc.want, p.Target(tc.at))
		}
	}
	// Last in, first out: the highest-numbered users leave first.
	var stops []int
	for _, e := range p.Events {
		if !e.Start {
			stops = append(stops, e.User)
		}
	}
	if len(stops) != 300 || stops[0] != 299 || stops[299] != 0 {
		t.Errorf("stops %d, first %d, last %d; want 300 from 299 down to 0", len(stops), stops[0], stops[len(stops)-1])
	}
	if got := p.StageAt(15 * time.Second); got != 2 {
		t.Errorf("StageAt(15s) = %d, want 2", got)
	}
}

func TestPlanRestartsUsers(t *testing.T) {
	p := NewPlan([]Stage{{time.Second, 2}, {time.Second, 0}, {time.Second, 2}})
	// User 0 comes back in the last stage and leaves at the end; user 1 would come back at the
	// very end of the run, for no time, so it does not.
	want := [][]Interval{
		{{time.Second / 2, 2 * time.Second}, {2*time.Second + time.Second/2, 3 * time.Second}},
		{{time.Second, time.Second + time.Second/2}},
	}
	if !reflect.DeepEqual(p.Activity, want) {
		t.Errorf("activity %v, want %v", p.Activity, want)
	}
	starts, stops := 0, 0
	for _, e := range p.Events {
		if e.Start {
			starts++
		} else {
			stops++
		}
	}
	if starts != 3 || stops != 3 {
		t.Errorf("%d starts and %d stops, want 3 and 3: %v", starts, stops, p.Events)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	tests := []struct {
		o    Options
		flag string
	}{
		{Options{Transports: []string{"carrier-pigeon"}}, "--transport"},
		{Options{Stages: "20s"}, "--stages"},
		{Options{Users: []int{10}, Stages: "5s:10"}, "--stages"},
		{Options{Users: []int{0}}, "--users"},
		{Options{Scenario: "gossip"}, "--scenario"},
		{Options{Scenario: "notify", RoomSize: 1}, "--room-size"},
		{Options{Scenario: "chat", Talks: -1}, "--talks"},
		{Options{Scenario: "chat", Talks: 1}, "--talks"}, // 1 × 5 s ≤ 6 s of grace
		{Options{Hold: true}, "--hold"},
		{Options{Transports: []string{"poll-fast"}}, "--transport"},
		{Options{Target: "http://127.0.0.1:1", AuthSecret: "s"}, "--auth-secret"},
		{Options{Interval: time.Microsecond}, "--interval"},
		{Options{Target: "localhost:8080"}, "--target"},
		{Options{Nodes: 3}, "--nodes"},
		{Options{Servers: []string{"nginx"}}, "--server"},
		{Options{Servers: []string{"rtlab", "rtlab"}}, "--server"},
		{Options{Servers: []string{"centrifugo"}, Scenario: "chat"}, "--server"},
		{Options{Servers: []string{"spring"}, Transports: []string{"ws", "sse"}}, "--transport"},
		{Options{Target: "http://127.0.0.1:1", Servers: []string{"centrifugo"}}, "--server"},
		{Options{Target: "http://127.0.0.1:1", TargetKind: "mqtt"}, "--target-kind"},
		{Options{Target: "http://127.0.0.1:1", TargetKind: "stomp"}, "--target"}, // a STOMP target names its endpoint
		{Options{Target: "ws://127.0.0.1:1/ws", TargetKind: "stomp", StompPub: "topic"}, "--stomp-pub"},
		{Options{Target: "ws://127.0.0.1:1/ws", TargetKind: "stomp", StompLogin: "guest"}, "--stomp-login"},
		{Options{Target: "http://127.0.0.1:1", TargetKind: "centrifugo", Scenario: "notify"}, "--target-kind"},
		{Options{TargetKind: "centrifugo"}, "--target-kind"},
		{Options{StompSub: "/topic/x"}, "--stomp-pub/--stomp-sub/--stomp-login"},
		{Options{CentrifugoAPIKey: "k"}, "--centrifugo-bin/--centrifugo-api-key"},
		{Options{Servers: []string{"centrifugo"}, Brokers: []string{"nats://127.0.0.1:4222"}}, "--broker"},
	}
	for _, tt := range tests {
		err := tt.o.Validate()
		ue, ok := err.(*UsageError)
		if !ok || ue.Flag != tt.flag {
			t.Errorf("Validate(%+v) = %v, want a usage error for %s", tt.o, err, tt.flag)
		}
	}
	var o Options
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if len(o.Transports) != 5 || o.Users[0] != 1000 || o.Interval != 3*time.Second || o.Grace != 4*time.Second {
		t.Errorf("defaults not filled: %+v", o)
	}
	chat := Options{Scenario: "chat"}
	if err := chat.Validate(); err != nil {
		t.Fatalf("chat defaults: %v", err)
	}
	if len(chat.Transports) != 5 || chat.Interval != 5*time.Second || chat.Grace != 6*time.Second || chat.RoomSize != 50 || chat.Talks != 10 || chat.Hold {
		t.Errorf("chat defaults not filled: %+v", chat)
	}
	// notify: poll-1s and poll-5s; the grace covers the 5 s poll.
	notify := Options{Scenario: "notify", Interval: 2 * time.Second}
	if err := notify.Validate(); err != nil {
		t.Fatalf("notify defaults: %v", err)
	}
	if !reflect.DeepEqual(notify.Transports, NotifyTransports()) || notify.Grace != 6*time.Second || notify.RoomSize != 10 || !notify.Hold {
		t.Errorf("notify defaults not filled: %+v", notify)
	}
}

func TestPollEvery(t *testing.T) {
	for in, want := range map[string]time.Duration{"shortpoll": 3 * time.Second, "poll-1s": time.Second, "poll-500ms": 500 * time.Millisecond, "poll-0s": 0, "poll-x": 0, "longpoll": 0, "ws": 0} {
		got, ok := pollEvery(in, 3*time.Second)
		if got != want || ok != (want != 0) {
			t.Errorf("pollEvery(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
}

// TestServerMatrix checks which cells each server runs and how its runs are named.
func TestServerMatrix(t *testing.T) {
	o := Options{Servers: []string{"rtlab", "centrifugo", "rabbitmq", "spring"}, Brokers: []string{"memory", "redis://127.0.0.1:6379/0", "nats://127.0.0.1:4222"}, Nodes: 2, Rounds: 2}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for bi, b := range o.Brokers {
		for _, tr := range []string{"shortpoll", "ws", "sse", "stomp"} {
			for _, k := range o.Servers {
				if _, skip := o.skip(k, b, bi, tr); !skip {
					ran = append(ran, o.newRun(k, b, tr, 100, 2).Key())
				}
			}
		}
	}
	want := "shortpoll~rtlab@memory#2 ws~rtlab@memory#2 ws~centrifugo@memory#2 sse~rtlab@memory#2 sse~centrifugo@memory#2 " +
		"stomp~rtlab@memory#2 stomp~rabbitmq#2 stomp~spring#2 " +
		"shortpoll~rtlab@redis#2 ws~rtlab@redis#2 ws~centrifugo@redis#2 sse~rtlab@redis#2 sse~centrifugo@redis#2 stomp~rtlab@redis#2 " +
		"shortpoll~rtlab@nats#2 ws~rtlab@nats#2 sse~rtlab@nats#2 stomp~rtlab@nats#2"
	if got := strings.Join(ran, " "); got != want {
		t.Errorf("cells\n%s\nwant\n%s", got, want)
	}
	// rtlab alone keeps its old keys.
	solo := Options{}
	if err := solo.Validate(); err != nil {
		t.Fatal(err)
	}
	if k := solo.newRun(results.KindRTLab, "memory", "ws", 100, 1).Key(); k != "ws" {
		t.Errorf("rtlab alone: key %q, want ws", k)
	}
}

// TestWorkloadMatchesCell checks that the workload handed to an exported k6 script has the
// groups and publish phases the bench's own users get.
func TestWorkloadMatchesCell(t *testing.T) {
	c := testCellEvery(t, 40, 4, 3*time.Second)
	w := c.opts.WorkloadFor(40)
	if w.Groups != c.groups || w.Peak != 40 || len(w.Phases) != len(c.vus) {
		t.Fatalf("workload groups %d peak %d phases %d; cell %d groups, %d users", w.Groups, w.Peak, len(w.Phases), c.groups, len(c.vus))
	}
	for i, v := range c.vus {
		if w.Phases[i] != v.phase {
			t.Fatalf("user %d: phase %s, the cell's %s", i, w.Phases[i], v.phase)
		}
	}
}
