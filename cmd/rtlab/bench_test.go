package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/results"
)

// TestBenchBadInput checks that bad input is one line naming the flag, the value and what is
// expected, exit status 2, and nothing left in --out.
func TestBenchBadInput(t *testing.T) {
	// A port nothing listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	metrics := strings.Join(bench.ThresholdMetrics(), ", ")
	// An https:// target whose certificate this machine does not trust.
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	untrusted.StartTLS()
	defer untrusted.Close()

	tests := []struct {
		args []string
		want string // the line after "rtlab bench: "; a trailing * matches any rest
	}{
		{[]string{"--transport", "ws,pigeon"}, `--transport: unknown transport "pigeon"; want a comma list of shortpoll, longpoll, sse, ws, stomp, stomp-tcp, sockjs, poll-<interval> (like poll-1s), or all`},
		{[]string{"--stages", "20s:300,30s"}, `--stages: stage 2 "30s": want duration:target like 30s:PEAK`},
		{[]string{"--stages", "abc:10"}, `--stages: stage 1 "abc:10": duration "abc" is not a positive Go duration like 20s`},
		{[]string{"--users", "1000,lots"}, `--users: "lots" is not a number; want peak user counts like 1000,5000,10000`},
		{[]string{"--scenario", "gossip"}, `--scenario: unknown scenario "gossip"; want location, chat, notify`},
		{[]string{"--scenario", "notify", "--room-size", "1"}, `--room-size: 1: a notify room needs its owner and at least one member; want 2 or more`},
		{[]string{"--hold"}, `--hold: applies to the chat scenario (location users always hold their connection)`},
		{[]string{"--target", dead}, `--target: ` + dead + ` does not answer GET /readyz with 200 (*`},
		{[]string{"--target", untrusted.URL}, `--target: ` + untrusted.URL + `: its TLS certificate was not accepted (*`},
		{[]string{"--target", "ftp://x"}, `--target: "ftp://x": want a base URL like http://127.0.0.1:8080 or https://host`},
		{[]string{"--ca-file", file}, `--ca-file/--insecure/--target-pid/--target-metrics: apply to a --target only (the bench samples the servers it starts)`},
		{[]string{"--target", dead, "--insecure"}, `--ca-file/--insecure: apply to an https:// or wss:// --target`},
		{[]string{"--target", "https://127.0.0.1:1", "--ca-file", file}, `--ca-file: ` + file + ` holds no PEM certificate`},
		{[]string{"--target", dead, "--target-pid", "0"}, `--target-pid: "0": want a comma list of process ids like 1234,5678`},
		{[]string{"--target", dead, "--target-pid", "999999999"}, `--target-pid: process 999999999: *`},
		{[]string{"--target", dead, "--target-metrics", "metrics"}, `--target-metrics: "metrics": want a Prometheus endpoint's URL like http://127.0.0.1:8080/actuator/prometheus`},
		{[]string{"--nodes", "2"}, `--nodes: 2 needs a shared broker: give --broker redis://…, nats://… or amqp://… (memory is per process)`},
		{[]string{"--broker", "memory,memory"}, `--broker: "memory" twice in "memory,memory": *`},
		{[]string{"--broker", "memory,"}, `--broker: "memory,": want a comma list of distinct brokers: memory, redis://…, nats://…, amqp://…, or redis, nats, amqp (the lab starts one)`},
		{[]string{"--fault", "10s:explode"}, `--fault: "10s:explode": unknown fault "explode"; want a comma list of AT:FAULT*`},
		{[]string{"--fault", "soon:kill-node=1"}, `--fault: "soon:kill-node=1": AT "soon" is not a duration like 30s; *`},
		{[]string{"--fault", "10s:partition-node=1"}, `--fault: "10s:partition-node=1": partition-node wants one duration after its argument; *`},
		{[]string{"--fault", "20s:kill-node=1,10s:kill-node=1"}, `--fault: "10s:kill-node=1" comes before the fault listed ahead of it; list faults in time order`},
		{[]string{"--fault", "10s:kill-node=2"}, `--fault: kill-node=2: --nodes is 1 (nodes count from 1)`},
		{[]string{"--fault", "10s:restart-broker"}, `--fault: restart-broker needs a shared broker; --broker memory is in the server`},
		{[]string{"--fault", "10s:restart-broker", "--broker", "redis://127.0.0.1:1/0"}, `--fault: restart-broker needs a broker the lab starts: --broker redis, nats, amqp (not redis://127.0.0.1:1/0)`},
		{[]string{"--fault", "10m:kill-node=1"}, `--fault: kill-node at 10m0s: the stages end at 1m0s`},
		{[]string{"--target", dead, "--fault", "10s:kill-node=1"}, `--fault: given with --target: faults are injected into the servers and brokers the lab starts`},
		{[]string{"--broker", "nats://127.0.0.1:1,nats://127.0.0.1:2"}, `--broker: "nats" twice in *`},
		{[]string{"--broker", "nats://127.0.0.1:1#a,nats://127.0.0.1:2#a"}, `--broker: *`},
		{[]string{"--broker", "nats://127.0.0.1:1#Bad Label"}, `--broker: *`},
		{[]string{"--broker", "nats://127.0.0.1:1#memory"}, `--broker: *`},
		{[]string{"--broker", "memory#mine,nats://127.0.0.1:1"}, `--broker: *`},
		{[]string{"--broker", "nats://127.0.0.1:1#"}, `--broker: *`},
		{[]string{"--rounds", "21"}, `--rounds "21": want a whole number from 1 to 20`},
		{[]string{"--rounds", "-1"}, `--rounds "-1": want a whole number from 1 to 20`},
		{[]string{"--nodes", "0"}, `--nodes "0": want a whole number from 1 to 16`},
		{[]string{"--group-size", "-3"}, `--group-size "-3": want a whole number, at least 1`},
		{[]string{"--publish-conns", "x"}, `--publish-conns "x": want a whole number from 1 to 1024`},
		{[]string{"--interval", "5x"}, `--interval "5x": want a duration such as 500ms, 30s, 10m or 1h, not negative (0: the default)`},
		{[]string{"--interval", "1ms"}, `--interval: 1ms: want a duration between 10ms and 10m`},
		{[]string{"--grace=-1s"}, `--grace "-1s": want a duration such as 500ms, 30s, 10m or 1h, not negative (0: the default)`},
		{[]string{"--csv=maybe"}, `--csv "maybe": want true or false`},
		{[]string{"--no-such-flag"}, `unknown flag --no-such-flag (rtlab bench -h lists the flags)`},
		{[]string{"--stages"}, `--stages needs a value (rtlab bench -h says what it takes)`},
		{[]string{"stray"}, `unexpected argument "stray"; all settings are flags (rtlab bench -h)`},
		{[]string{"--threshold", "p99<soon"}, `--threshold: "p99<soon": "soon" is not a duration like 250ms or 1.5s (delivery latency)`},
		{[]string{"--threshold", "p98<1ms"}, `--threshold: "p98<1ms": unknown metric "p98"; want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics},
		{[]string{"--threshold", "ratio>=2"}, `--threshold: "ratio>=2": "2" is not a ratio from 0 to 1 (0.999) or a percentage (99.9%) (delivery ratio)`},
		{[]string{"--target", dead, "--broker", "memory,redis://127.0.0.1:1/0"}, `--broker: given with --target: the bench starts no server`},
	}
	for _, tt := range tests {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench", "--out", out}, tt.args...), &stdout, &stderr)
		msg := stderr.String()
		want := "rtlab bench: " + tt.want + "\n"
		ok := msg == want
		if prefix, wild := strings.CutSuffix(tt.want, "*"); wild {
			ok = strings.HasPrefix(msg, "rtlab bench: "+prefix) && strings.Count(msg, "\n") == 1 && strings.HasSuffix(msg, "\n")
		}
		if code != 2 || !ok {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, msg, want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: --out was left behind", tt.args)
		}
	}

	// An --out this user cannot make or write in: said before anything runs.
	for _, tt := range []struct{ out, want string }{
		{filepath.Join(file, "x"), fmt.Sprintf(`--out %q: mkdir %s: not a directory; want a directory this user can write`, filepath.Join(file, "x"), file)},
		{file, fmt.Sprintf(`--out %q: it exists and is not a directory; want a directory`, file)},
		{"/proc/rtlab-out", `--out "/proc/rtlab-out": mkdir /proc/rtlab-out: no such file or directory; want a directory this user can write`},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"bench", "--out", tt.out, "--transport", "ws", "--stages", "1s:PEAK"}, &stdout, &stderr)
		if want := "rtlab bench: " + tt.want + "\n"; code != 2 || stderr.String() != want {
			t.Errorf("--out %s: exit %d, stderr %q; want exit 2 and %q", tt.out, code, stderr.String(), want)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bench", "-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-transport", "-users", "-stages", "-scenario", "-group-size", "-groups", "-interval",
		"-target", "-seed", "-out", "-server-args", "-broker", "-nodes", "-rounds", "-room-size", "-talks", "-hold", "-auth-secret",
		"-threshold", "-csv", "-fault"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("help does not document %s", f)
		}
	}
	if strings.Contains(stdout.String(), "panic") {
		t.Errorf("help prints a panic:\n%s", stdout.String())
	}
}

func TestRedactSecret(t *testing.T) {
	got := strings.Join(redactSecret([]string{"--scenario", "chat", "--auth-secret", "s3cret", "-auth-secret=x", "--users", "10"}), " ")
	if want := "--scenario chat --auth-secret REDACTED -auth-secret=REDACTED --users 10"; got != want {
		t.Errorf("redactSecret = %q, want %q", got, want)
	}
	got = strings.Join(redactSecret([]string{"--broker", "memory,redis://:pw@127.0.0.1:6379/0,amqp://guest:guest@h:5672/#rmq,nats://h:4222",
		"--broker=amqp://u:p%40ss@h/", "--nodes", "2"}), " ")
	if want := "--broker memory,redis://:xxxxx@127.0.0.1:6379/0,amqp://guest:xxxxx@h:5672/#rmq,nats://h:4222 --broker=amqp://u:xxxxx@h/ --nodes 2"; got != want {
		t.Errorf("redactSecret = %q, want %q", got, want)
	}
}

// TestServeHidesBrokerPassword checks that a refused --broker is named without its password.
func TestServeHidesBrokerPassword(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--addr", "127.0.0.1:0", "--broker", "kafka://user:s3cret@127.0.0.1:1/"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "kafka://user:xxxxx@127.0.0.1:1/") || strings.Contains(stderr.String()+stdout.String(), "s3cret") {
		t.Errorf("exit %d, stderr %q: want a refusal naming the URL without its password", code, stderr.String())
	}
}

// TestBenchThresholdExit runs the lab for real, a few seconds at 20 users, and checks that
// --threshold sets the exit status (0 when every run passed, 99 when one crossed), that the
// summary and results.json mark each check, and that --csv writes the per-second series.
func TestBenchThresholdExit(t *testing.T) {
	for _, tt := range []struct {
		threshold string
		code      int
		summary   []string
	}{
		{"p99<1h,ratio>=0.5,failed==0", 0, []string{"  pass\n", "\nthresholds (p99<1h,ratio>=0.5,failed==0): every run passed\n"}},
		{"p99<1h,p50<1us", exitThresholds, []string{"CROSSED 1!", "  ! WebSocket crossed p50<1us (", "\nthresholds (p99<1h,p50<1us): crossed in 1 check\n"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		// A process of its own: the servers the bench starts are this test binary as rtlab.
		cmd := rtlabCmd(t, "bench", "--transport", "ws", "--users", "20", "--stages", "1s:PEAK,6s:PEAK,1s:0",
			"--out", out, "--threshold", tt.threshold, "--csv")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code {
			t.Errorf("--threshold %s: exit %d, want %d\nstdout:\n%s\nstderr (end):\n%s", tt.threshold, code, tt.code, stdout.String(), lastLines(stderr.String(), 5))
		}
		for _, want := range tt.summary {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("--threshold %s: summary lacks %q:\n%s", tt.threshold, want, stdout.String())
			}
		}
		if tt.code == exitThresholds && !strings.HasSuffix(stderr.String(), "rtlab bench: thresholds crossed in 1 check(s) (--threshold p99<1h,p50<1us); exit status 99\n") {
			t.Errorf("stderr ends %q", lastLines(stderr.String(), 1))
		}
		b, err := os.ReadFile(filepath.Join(out, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res results.Results
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		if res.Config.Thresholds != tt.threshold || len(res.Runs) != 1 || len(res.Runs[0].Thresholds) != strings.Count(tt.threshold, ",")+1 {
			t.Errorf("results.json: thresholds %q, runs %d, checks %+v", res.Config.Thresholds, len(res.Runs), res.Runs)
		}
		rows, err := os.ReadFile(filepath.Join(out, "series.csv"))
		if err != nil {
			t.Fatalf("--csv: %v", err)
		}
		if lines := strings.Split(strings.TrimSpace(string(rows)), "\n"); len(lines) != 1+len(res.Runs[0].Series.Users) || !strings.HasPrefix(lines[1], "ws,,,0,20,0,") {
			t.Errorf("series.csv: %d lines for %d seconds, first row %q", len(lines), len(res.Runs[0].Series.Users), lines[1])
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestBenchFlagDefaults checks that rtlab bench's flags left out give the run a zero Options
// gives, scenario by scenario: the flags show bench.Defaults, and Validate fills the same.
func TestBenchFlagDefaults(t *testing.T) {
	for _, scn := range bench.Scenarios() {
		f := benchFlagSet()
		args := []string{"--scenario", scn}
		if code, ok := f.fs.parse(args, io.Discard, io.Discard); !ok {
			t.Fatalf("%s: parse exit %d", scn, code)
		}
		got, err := f.options(args, nil)
		if err != nil {
			t.Fatalf("%s: %v", scn, err)
		}
		want := &bench.Options{Scenario: scn}
		for _, o := range []*bench.Options{got, want} {
			if err := o.Validate(); err != nil {
				t.Fatalf("%s: %v", scn, err)
			}
			// A zero Seed is seed 0, not --seed's default; the rest records the command.
			o.Seed, o.Args, o.Version = 0, nil, ""
		}
		g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
		for i := range g.NumField() {
			// Printed, so that an empty list equals none; the unexported fields follow from these.
			if name := g.Type().Field(i).Name; g.Type().Field(i).IsExported() && fmt.Sprint(g.Field(i)) != fmt.Sprint(w.Field(i)) {
				t.Errorf("%s: the flags left out give %s %v; a zero %s means %v", scn, name, g.Field(i), name, w.Field(i))
			}
		}
	}
	if d := bench.Defaults(bench.ScenarioChat); d.Interval == bench.Defaults(bench.ScenarioLocation).Interval {
		t.Errorf("chat's and location's --interval are both %s: -h and docs/bench.md say they differ", d.Interval)
	}
}
