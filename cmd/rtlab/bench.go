package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/k6export"
	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/report"
	"github.com/rtlab/rtlab/internal/results"
)

// benchUsage is the help text before the flags; %[1]s is --long-wait's default, %[2]s and %[3]s
// the location and chat scenarios' --interval.
const benchUsage = `usage: rtlab bench [flags]

Runs the load lab: for every transport and user level it starts a fresh rtlab server (or uses
--target), ramps virtual users through the stages, writes results.json and report.html into
--out, and prints a summary. Each user behaves as a browser client would: shortpoll polls every
--interval (poll-1s every second), longpoll loops on wait=%[1]s, sse keeps one stream, ws and stomp
one socket. Polling and SSE users publish over a shared pool of --publish-conns keep-alive
connections: one socket per user, since 10,000 users with two each would not fit a 20,000
open-file limit. See docs/bench.md for what is measured and how.

Scenarios:
  location  every user shares its position with its group every --interval (%[2]s)
  chat      login, connect, subscribe to the room, ENTER, --talks TALKs one per --interval (%[3]s),
            LEAVE, disconnect, and again; --hold keeps one session TALKing until ramp-down
  notify    a TALK alarms the room's owner (NOTIFY on notify/{owner}); measures TALK → owner;
            all = poll-1s, poll-5s, longpoll, sse, ws, stomp
Spawned servers run in open dev mode (tokens identify users, none are required) unless
--auth-secret is given.

Ctrl-C stops the run cleanly: what was measured is written (marked stopped) and the server is
stopped.

Exit status: 0 done; 1 the run failed or was interrupted; 2 bad input or a failed --profile
pre-flight (nothing is written);
99 a --threshold was crossed (the results are written).

flags:
`

// exitThresholds is the exit status of a run that crossed a --threshold, k6's, so that a CI
// tells a crossed threshold from a run that failed.
const exitThresholds = 99

// runBench is `rtlab bench`: it returns 0 on success, 1 when the run failed or was interrupted,
// 2 on bad input (nothing is written then), 99 when a --threshold was crossed.
func runBench(args []string, stdout, stderr io.Writer) int {
	f := benchFlagSet()
	fs := f.fs
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	bad := func(err error) int {
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		return 2
	}
	if len(fs.positional) > 0 {
		return bad(fmt.Errorf("unexpected argument %q; all settings are flags (rtlab bench -h)", fs.positional[0]))
	}
	o, err := f.options(args, stderr)
	if err != nil {
		return bad(err)
	}
	if err := o.Validate(); err != nil {
		return bad(err)
	}
	switch {
	case *f.prepare:
		return prepareServers(o, stdout, stderr)
	case *f.exportK6 != "":
		return exportScripts(*f.exportK6, o, stdout, stderr)
	}
	return runBenchInto(o, *f.out, *f.csv, stdout, stderr)
}

// benchFlags are the flags of `rtlab bench`.
type benchFlags struct {
	fs         *flags
	transport  *string
	users      *string
	stages     *string
	scenario   *string
	groupSize  *int
	groups     *int
	interval   *time.Duration
	grace      *time.Duration
	roomSize   *int
	talks      *int
	hold       *bool
	authSecret *string
	longWait   *time.Duration
	target     *string
	seed       *int64
	out        *string
	serverArgs *string
	broker     *string
	rounds     *int
	nodes      *int
	pubConns   *int
	servers    *string
	targetKind *string
	target2    targetFlags
	stompPub   *string
	stompSub   *string
	stompLogin *string
	profile    *string
	cfBin      *string
	cfKey      *string
	springJar  *string
	peerCache  *string
	prepare    *bool
	thresholds *string
	faults     *string
	exportK6   *string
	csv        *bool
}

// benchFlagSet defines the flags of `rtlab bench`.
func benchFlagSet() *benchFlags {
	d := bench.Defaults(bench.ScenarioLocation) // every default, stated once
	fs := newFlags("rtlab bench", func(w io.Writer) {
		fmt.Fprintf(w, benchUsage, d.LongWait, d.Interval, bench.Defaults(bench.ScenarioChat).Interval)
	})
	fs.env = "RTLAB_"
	f := &benchFlags{fs: fs}
	f.transport = fs.String("transport", "all", "transports to run: a comma list of shortpoll, longpoll, sse, ws, stomp, stomp-tcp (STOMP over TCP; not in all), sockjs (STOMP over SockJS xhr-streaming; not in all), poll-<interval> (short polling at its own interval, like poll-1s), or all")
	f.users = fs.String("users", joinInts(d.Users), "peak users, a comma list runs a matrix: 1000,5000,10000")
	f.stages = fs.String("stages", d.Stages, "k6-style stages duration:target; each ramps linearly from the previous target; PEAK is the --users value")
	f.scenario = fs.String("scenario", d.Scenario, "scenario: location, chat or notify")
	f.groupSize = fs.Int("group-size", d.GroupSize, "users per location group (groups = peak / group-size)")
	f.groups = fs.Int("groups", 0, "fixed number of groups instead of --group-size (the seed layout is 10)")
	f.interval = fs.Duration("interval", d.Interval, "publish interval of every user, and short-poll interval")
	fs.defText["interval"] = perScenario(func(o bench.Options) any { return o.Interval })
	f.grace = fs.Duration("grace", 0, "a publication is expected only at receivers that stay this long after it; 0 means the longest of interval and the poll-<interval>s, plus 1s")
	f.roomSize = fs.Int("room-size", 0, "chat and notify: users per room")
	fs.defText["room-size"] = perScenario(func(o bench.Options) any { return o.RoomSize })
	f.talks = fs.Int("talks", d.Talks, "chat: TALKs per session, one every --interval, before LEAVE")
	f.hold = fs.Bool("hold", false, "chat: keep the session open after its TALKs, TALKing every --interval until the stages remove the user")
	f.authSecret = fs.String("auth-secret", "", "--auth-secret of the spawned servers (passed in their environment; not recorded); empty runs them in open dev mode")
	f.longWait = fs.Duration("long-wait", d.LongWait, "wait= of long polls")
	f.target = fs.String("target", "", "base URL of a running server (http://host:port, https://host); its query string goes on every request of the users; then only client-side figures and the target's cost (--target-pid, --target-metrics)")
	f.seed = fs.Int64("seed", d.Seed, "seed of publish phases and positions")
	f.out = fs.String("out", "", "output directory")
	fs.defText["out"] = "./bench-results/<timestamp>"
	f.serverArgs = fs.String("server-args", "", "extra flags for the spawned servers, space separated (no quoting)")
	f.broker = fs.String("broker", strings.Join(d.Brokers, ","), "--broker of the spawned servers; a comma list runs the matrix once per broker and compares them in one report: memory,redis://127.0.0.1:6379/0,redis+cluster://host:port?addr=host:port,nats://…,amqp://…; a #label names a URL's rows (nats://…:4223#nats-new), so two servers of one kind can be compared")
	f.rounds = fs.Int("rounds", d.Rounds, "passes over the whole matrix, one after the other (1..20); the verdict then gives each broker's p99 against memory's as the median over rounds")
	f.nodes = fs.Int("nodes", d.Nodes, "spawned servers per run; users are spread round-robin (needs a shared --broker; memory always runs one)")
	f.pubConns = fs.Int("publish-conns", d.PubConns, "keep-alive connections shared by all users for HTTP publishing (shortpoll, longpoll, sse)")
	f.servers = fs.String("server", strings.Join(d.Servers, ","), "servers to measure side by side, a comma list of rtlab, centrifugo, rabbitmq, spring; each is started fresh per run, and transports a server does not offer are skipped")
	f.targetKind = fs.String("target-kind", d.TargetKind, "what --target is: rtlab, centrifugo (base URL) or stomp (the endpoint's URL, ws://host:port/path)")
	f.target2.define(fs)
	f.stompPub = fs.String("stomp-pub", "", "STOMP target: SEND destination, {group} is the group number")
	f.stompSub = fs.String("stomp-sub", "", "STOMP target: SUBSCRIBE destination")
	fs.defText["stomp-pub"] = d.StompPub
	fs.defText["stomp-sub"] = "the --stomp-pub one"
	f.stompLogin = fs.String("stomp-login", "", "STOMP target: login:passcode its CONNECT carries")
	f.profile = fs.String("profile", "", "a target profile (YAML, docs/targets.md) describing --target's own routes and messages, or builtin:"+strings.Join(bench.BuiltinProfiles(), ", builtin:")+"; its transports run unless --transport names some, after a pre-flight publish → receive")
	f.cfBin = fs.String("centrifugo-bin", "", "the centrifugo executable; by default centrifugo in PATH, else <peer-cache>/centrifugo-"+peers.CentrifugoVersion+"/centrifugo")
	f.cfKey = fs.String("centrifugo-api-key", "", "HTTP API key of a Centrifugo --target (its SSE users publish through the API); spawned Centrifugo servers get one of the bench's")
	f.springJar = fs.String("spring-jar", "", "a built jar of the Spring peer; by default built from its sources into --peer-cache once")
	f.peerCache = fs.String("peer-cache", d.PeerCache, "where the bench keeps built peers (the Spring jar) and looks for an installed centrifugo")
	f.prepare = fs.Bool("prepare", false, "only get the --server list ready (build the Spring peer, check Centrifugo and RabbitMQ's Web-STOMP), print what each is, and exit")
	f.faults = fs.String("fault", "", "faults injected into every run, a comma list of AT:FAULT like '30s:kill-node=1,45s:restart-broker,60s:partition-node=1:15s,80s:delay-broker=200ms:20s' (kill-node=N[:DOWN] restarts it after DOWN, restart-broker[:DOWN]; nodes from 1); on servers the lab starts, restart-broker on a broker it starts (--broker redis, nats or amqp)")
	f.thresholds = fs.String("threshold", "", "pass/fail criteria checked on every run (each transport at each user level), a comma list like 'p99<250ms,ratio>=0.999,failed==0'; metrics: "+strings.Join(bench.ThresholdMetrics(), ", ")+"; a crossed one makes the exit status 99")
	f.exportK6 = fs.String("export-k6", "", "write the location workload (--users, --stages, --groups/--group-size, --interval, --seed) as k6 scripts into this directory, one per transport k6 can speak (ws, stomp, longpoll, shortpoll; with --profile, the profile's routes and messages), with a README on running them with k6 run, on several hosts and with k6-operator; runs nothing")
	f.csv = fs.Bool("csv", false, "also write the per-second series of every run to series.csv in --out")
	fs.rule(atLeast(1), "group-size", "talks")
	fs.rule(atLeast(0), "groups", "room-size")
	fs.rule(between(1, 20), "rounds")
	fs.rule(between(1, 16), "nodes")
	fs.rule(between(1, 1024), "publish-conns")
	fs.rule(rule{func(any) bool { return true }, "a whole number"}, "seed")
	return f
}

// joinInts is a comma list of ns, as --users takes it.
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// perScenario says a default that depends on the scenario, like "3s for location, 5s for chat
// and notify", from each scenario's bench.Defaults; of gives the setting, and a scenario whose
// value is zero (it does not use the setting) is left out.
func perScenario(of func(bench.Options) any) string {
	var vals []string
	names := map[string][]string{}
	for _, s := range bench.Scenarios() {
		v := of(bench.Defaults(s))
		if reflect.ValueOf(v).IsZero() {
			continue
		}
		text := fmt.Sprint(v)
		if names[text] == nil {
			vals = append(vals, text)
		}
		names[text] = append(names[text], s)
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		n := names[v]
		parts[i] = v + " for " + strings.Join(n[:len(n)-1], ", ")
		if len(n) > 1 {
			parts[i] += " and "
		}
		parts[i] += n[len(n)-1]
	}
	return strings.Join(parts, ", ")
}

// options are the bench's options as the flags give them (Options.Validate checks them).
func (f *benchFlags) options(args []string, status io.Writer) (*bench.Options, error) {
	fs := f.fs
	o := &bench.Options{
		Scenario: *f.scenario, Stages: *f.stages, GroupSize: *f.groupSize, Groups: *f.groups,
		Grace: *f.grace, LongWait: *f.longWait, Target: *f.target, Seed: *f.seed,
		ServerArgs: strings.Fields(*f.serverArgs), Nodes: *f.nodes, Rounds: *f.rounds, PubConns: *f.pubConns,
		RoomSize: *f.roomSize, Talks: *f.talks, Hold: *f.hold, AuthSecret: *f.authSecret,
		TargetKind: *f.targetKind, StompPub: *f.stompPub, StompSub: *f.stompSub, StompLogin: *f.stompLogin, Profile: *f.profile,
		CentrifugoBin: *f.cfBin, CentrifugoAPIKey: *f.cfKey, SpringJar: *f.springJar, PeerCache: *f.peerCache,
		Thresholds: *f.thresholds,
		Faults:     *f.faults,
		Args:       append([]string{"rtlab", "bench"}, redactSecret(args)...), Version: version, Status: status,
	}
	for _, b := range strings.Split(*f.broker, ",") {
		o.Brokers = append(o.Brokers, strings.TrimSpace(b))
	}
	if fs.isSet("server") || *f.target == "" {
		for _, s := range strings.Split(*f.servers, ",") {
			o.Servers = append(o.Servers, strings.TrimSpace(s))
		}
	}
	if !fs.isSet("target-kind") {
		o.TargetKind = ""
	}
	f.target2.fill(o)
	if fs.isSet("interval") { // else the scenario's default
		o.Interval = *f.interval
	}
	if *f.transport != "all" {
		for _, t := range strings.Split(*f.transport, ",") {
			o.Transports = append(o.Transports, strings.TrimSpace(t))
		}
	}
	if fs.isSet("users") {
		for _, s := range strings.Split(*f.users, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("--users: %q is not a number; want peak user counts like 1000,5000,10000", s)
			}
			o.Users = append(o.Users, n)
		}
	}
	return o, nil
}

// runBenchInto runs the bench with o into dir (a new timestamped one when empty) and prints
// the summary.
func runBenchInto(o *bench.Options, dir string, csv bool, stdout, stderr io.Writer) int {
	bad := func(err error) int {
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		return 2
	}
	if dir == "" {
		dir = filepath.Join("bench-results", time.Now().Format("20060102-150405"))
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return bad(fmt.Errorf("--out %q: it exists and is not a directory; want a directory", dir))
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err == nil {
		return bad(fmt.Errorf("--out %q: it already holds results.json; want a new directory", dir))
	}
	// The directory is made now, so that one this user cannot write is bad input, said before
	// the run; it is taken away again if the run does not start.
	made, err := makeDir(dir)
	if err != nil {
		return bad(fmt.Errorf("--out %q: %v; want a directory this user can write", dir, err))
	}
	started := false
	defer func() {
		if !started {
			removeMade(made)
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the bench at once (the servers die with it)
	}()
	if err := bench.Probe(ctx, o); err != nil {
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			return bad(err)
		}
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		return 1
	}
	started = true
	res, err := bench.Execute(ctx, o, dir)
	if res == nil {
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		return 1
	}
	if werr := writeResults(dir, res); werr != nil {
		fmt.Fprintf(stderr, "rtlab bench: %v\n", werr)
		return 1
	}
	if csv {
		if werr := writeCSV(filepath.Join(dir, "series.csv"), res); werr != nil {
			fmt.Fprintf(stderr, "rtlab bench: %v\n", werr)
			return 1
		}
	}
	report.Summary(stdout, res)
	fmt.Fprintf(stdout, "\nresults: %s\nreport:  %s\n", filepath.Join(dir, "results.json"), filepath.Join(dir, "report.html"))
	if csv {
		fmt.Fprintf(stdout, "series:  %s\n", filepath.Join(dir, "series.csv"))
	}
	switch n := res.ThresholdsCrossed(); {
	case err != nil:
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		return 1
	case res.Stopped:
		fmt.Fprintln(stderr, "rtlab bench: interrupted; the results cover what ran")
		return 1
	case n > 0:
		fmt.Fprintf(stderr, "rtlab bench: thresholds crossed in %d check(s) (--threshold %s); exit status %d\n", n, o.Thresholds, exitThresholds)
		return exitThresholds
	}
	return 0
}

// makeDir creates dir and its missing parents, and returns the topmost directory it created
// ("" when dir existed), for removeMade.
func makeDir(dir string) (string, error) {
	top := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s %s: %v", pe.Op, pe.Path, pe.Err)
		}
		return "", err
	}
	w, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		removeMade(top)
		return "", fmt.Errorf("cannot write in it (%v)", errors.Unwrap(err))
	}
	w.Close()
	os.Remove(w.Name())
	return top, nil
}

// removeMade removes the directories makeDir created, when they are still empty.
func removeMade(top string) {
	if top == "" {
		return
	}
	// Remove from the deepest up; os.Remove refuses a directory that is not empty.
	var dirs []string
	_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// writeCSV writes the per-second series of every run of res to path.
func writeCSV(path string, res *results.Results) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing series: %w", err)
	}
	if err := report.WriteCSV(f, res); err != nil {
		f.Close()
		return fmt.Errorf("writing series: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing series: %w", err)
	}
	return nil
}

// prepareServers is --prepare: it gets the servers ready as a run would (bench.Probe builds
// the Spring peer, starts a trial Centrifugo and rtlab, checks RabbitMQ's Web-STOMP) and says
// what each is. CI runs it so that the peers' tests find everything in place.
func prepareServers(o *bench.Options, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Probe(ctx, o); err != nil {
		fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
		var ue *bench.UsageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	for _, s := range o.Servers {
		fmt.Fprintf(stdout, "%s: ready (%s)\n", s, bench.ServerVersion(o, s))
	}
	return 0
}

// redactSecret returns args with the value of --auth-secret replaced, and the passwords in
// --broker URLs (the rest of the URLs kept), so the command line recorded in results.json does
// not carry them.
func redactSecret(args []string) []string {
	redact := map[string]func(string) string{
		"auth-secret":        func(string) string { return "REDACTED" },
		"centrifugo-api-key": func(string) string { return "REDACTED" },
		"stomp-login":        func(v string) string { l, _, _ := strings.Cut(v, ":"); return l + ":REDACTED" },
		"broker":             bench.RedactBrokers,
	}
	out := make([]string, len(args))
	copy(out, args)
	for i := 0; i < len(out); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		f := redact[name]
		if !strings.HasPrefix(out[i], "-") || f == nil {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.Index(out[i], "=")+1] + f(value)
		} else if i+1 < len(out) {
			out[i+1] = f(out[i+1])
			i++
		}
	}
	return out
}

// writeResults writes results.json and report.html into dir.
func writeResults(dir string, res *results.Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if err := report.WriteHTML(f, res); err != nil {
		f.Close()
		return fmt.Errorf("writing report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// exportScripts is --export-k6: the workload of each user level as k6 scripts in dir (in
// dir/<users>-users when there are several levels).
func exportScripts(dir string, o *bench.Options, stdout, stderr io.Writer) int {
	for _, peak := range o.Users {
		d := dir
		if len(o.Users) > 1 {
			d = filepath.Join(dir, strconv.Itoa(peak)+"-users")
		}
		written, skipped, err := exportLevel(d, o, peak)
		if err != nil {
			fmt.Fprintf(stderr, "rtlab bench: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "k6 scripts for %d users in %s: %s (k6 run -e BASE=http://host:port %s; see README.md)\n", peak, d, strings.Join(written, ", "), written[0])
		if len(skipped) > 0 {
			fmt.Fprintf(stdout, "  not written: %s (k6 has no client for them)\n", strings.Join(skipped, ", "))
		}
	}
	return 0
}

// exportLevel writes one user level's scripts: rtlab's routes, or the --profile's.
func exportLevel(dir string, o *bench.Options, peak int) (written, skipped []string, err error) {
	command := strings.Join(o.Args, " ")
	if o.Profile == "" {
		return k6export.Write(dir, o, peak, command)
	}
	p, err := bench.LoadProfile(o.Profile) // Validate read it already
	if err != nil {
		return nil, nil, fmt.Errorf("--profile: %w", err)
	}
	return k6export.WriteProfile(dir, o, p, peak, command)
}

// targetFlags are the flags of a --target's TLS and cost.
type targetFlags struct {
	caFile, pids, metrics *string
	insecure              *bool
}

func (t *targetFlags) define(fs *flags) {
	t.caFile = fs.String("ca-file", "", "PEM file of the CAs an https:// or wss:// --target's certificate is checked against; by default the system's")
	t.insecure = fs.Bool("insecure", false, "do not check an https:// or wss:// --target's certificate")
	t.pids = fs.String("target-pid", "", "local processes of the --target, a comma list of PIDs: their CPU, RSS and threads (children included) are its cost")
	t.metrics = fs.String("target-metrics", "", "Prometheus endpoint of the --target read every second for its cost: process_cpu_seconds_total and process_resident_memory_bytes, or Micrometer's process_cpu_usage and jvm_memory_used_bytes")
	fs.defText["target-metrics"] = "the /metrics of an rtlab or Centrifugo target"
}

func (t *targetFlags) fill(o *bench.Options) {
	o.CAFile, o.Insecure, o.TargetMetrics = *t.caFile, *t.insecure, *t.metrics
	for _, p := range strings.Split(*t.pids, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.TargetPIDs = append(o.TargetPIDs, p)
		}
	}
}
