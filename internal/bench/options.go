// Package bench is rtlab's load lab: it starts (or targets) an rtlab server, drives virtual
// users over real sockets on each transport exactly as browser clients would, measures what
// users feel (delivery latency and ratio, failed connections) and what it costs (CPU, memory
// per connection), and returns Results for the report package.
//
// It imports none of the server's packages: everything goes over the wire contract in
// docs/protocol.md.
package bench

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/target"
	"github.com/rtlab/rtlab/internal/transports"
)

// Transports returns the transports the bench drives, in the order "all" runs them for the
// location and chat scenarios.
func Transports() []string { return transports.Sessions() }

// TransportSTOMPTCP is STOMP over plain TCP, rtlab's --stomp-addr: the STOMP sessions of the
// "stomp" transport without WebSocket framing. Asked for by name; "all" leaves it out.
const TransportSTOMPTCP = "stomp-tcp" // transports.STOMPTCP as the lab writes it (transports.LabName)

// TransportSockJS is STOMP over SockJS's xhr-streaming, as sockjs-client falls back to when a
// proxy refuses WebSocket: the server's frames on a streaming POST, the client's in one POST
// each. Asked for by name; "all" leaves it out.
const TransportSockJS = transports.SockJS

// namedOnly are the transports run only when named: they need the listeners the lab gives the
// servers it starts.
var namedOnly = []string{TransportSTOMPTCP, TransportSockJS}

// NotifyTransports returns what "all" runs for the notify scenario: short polling at a 1 s and
// a 5 s interval, then the other transports.
func NotifyTransports() []string {
	return []string{"poll-1s", "poll-5s", "longpoll", "sse", "ws", "stomp"}
}

// pollEvery returns the polling interval of a short-polling transport: "shortpoll" polls every
// interval, "poll-<duration>" (poll-1s, poll-500ms) at its own. ok is false for the others.
func pollEvery(t string, interval time.Duration) (d time.Duration, ok bool) {
	if t == "shortpoll" {
		return interval, true
	}
	s, found := strings.CutPrefix(t, "poll-")
	if !found {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 10*time.Millisecond || d > 10*time.Minute {
		return 0, false
	}
	return d, true
}

// Options configure a bench run. cmd/rtlab fills them from flags. A field marked "zero:
// Defaults" takes its value in Defaults(Scenario) when zero; Validate fills those, checks every
// option once and names the offending flag.
type Options struct {
	Scenario   string        // zero: Defaults
	Transports []string      // zero: Defaults, all the scenario runs (Transports(), NotifyTransports() for notify)
	Users      []int         // peak users, one run per value; zero: Defaults
	Stages     string        // zero: Defaults
	GroupSize  int           // users per location group; zero: Defaults (ignored when Groups is set)
	Groups     int           // fixed number of location groups; zero means peak/GroupSize
	Interval   time.Duration // publish and short-poll interval; zero: Defaults (the scenario's)
	Grace      time.Duration // delivery grace (see docs/bench.md); zero means the longest of Interval and the poll intervals, plus 1 s
	RoomSize   int           // chat and notify: users per room; zero: Defaults (the scenario's)
	Talks      int           // chat: TALKs per session; zero: Defaults
	Hold       bool          // chat: keep the connection and TALK until the stages remove the user; always set for notify
	AuthSecret string        // --auth-secret of spawned servers; empty runs them in open dev mode
	LongWait   time.Duration // long-poll wait; zero: Defaults
	Target     string        // base URL of a running server; empty starts one per run cell
	Seed       int64         // seeds phases and positions; zero is a seed too (Defaults holds --seed's)
	ServerArgs []string      // extra flags for spawned servers
	Brokers    []string      // --broker of spawned servers, the matrix once each; zero: Defaults
	Nodes      int           // spawned servers per cell; zero: Defaults (memory always runs one)
	Rounds     int           // --rounds: passes over the whole matrix, one after the other; zero: Defaults
	PubConns   int           // shared keep-alive connections for HTTP publishing; zero: Defaults

	// Servers are the servers to measure, one after the other in every cell (--server); zero:
	// Defaults. See ServerKinds.
	Servers []string
	// TargetKind says what --target is (--target-kind): rtlab, centrifugo or stomp; zero:
	// Defaults.
	TargetKind string
	// StompPub and StompSub are the SEND and SUBSCRIBE destinations of a STOMP target, with
	// {group} for the group number; zero: the other one, and both zero: Defaults' StompPub.
	StompPub, StompSub string
	// StompLogin is the "login:passcode" a STOMP target's CONNECT carries; zero sends none.
	StompLogin string
	// CAFile is a PEM file of the CAs an https:// or wss:// target's certificate is checked
	// against (--ca-file); zero means the system's. Insecure (--insecure) skips the check.
	CAFile   string
	Insecure bool
	// TargetPIDs are local processes sampled as the target's cost (--target-pid), each with its
	// children, as a spawned server is.
	TargetPIDs []string
	// TargetMetrics is a Prometheus endpoint read each second for the target's cost
	// (--target-metrics); zero means the target's /metrics when it is rtlab or Centrifugo.
	TargetMetrics string
	// Profile is --profile: a target profile file (or builtin:NAME) that describes --target's
	// own routes and messages; zero measures the target as --target-kind says.
	Profile string
	// CentrifugoBin is the centrifugo executable; zero looks in PATH, then in PeerCache.
	CentrifugoBin string
	// CentrifugoAPIKey is the HTTP API key of a Centrifugo target (its SSE users publish through
	// the server API); spawned Centrifugo servers get a key of the lab's.
	CentrifugoAPIKey string
	// SpringJar is the Spring peer's jar; zero builds tools/peers/spring-stomp into PeerCache
	// once (mvn package) and uses that.
	SpringJar string
	// PeerCache is where built peers are kept; zero: Defaults (in the working directory).
	PeerCache string

	// Thresholds is --threshold: a comma list of pass/fail criteria checked on every run
	// (ParseThresholds); zero checks none.
	Thresholds string
	// Faults is --fault: a schedule of faults injected into every run (ParseFaults); zero
	// injects none.
	Faults string

	// ServerBinary is the rtlab executable to spawn; zero means os.Executable().
	ServerBinary string
	// Args is the command line, recorded in the results.
	Args []string
	// Version is the rtlab version, recorded in the results.
	Version string
	// Status receives one progress line per second; nil discards them.
	Status io.Writer

	scn         scenarioValue // the scenario Scenario names
	stageSpecs  []StageSpec
	thresholds  []Threshold
	faults      []FaultSpec
	usersSet    bool        // Users was given explicitly
	targetHost  string      // --target's host:port
	targetPath  string      // a STOMP target's endpoint path
	targetQuery string      // --target's query string, added to the users' requests
	tlsConf     *tls.Config // an https:// or wss:// target's; nil for plain TCP
	cfSecret    []byte      // Centrifugo: the HMAC key of connection tokens (--auth-secret, or the lab's own)
	cfKey       string      // Centrifugo: the HTTP API key
	cfHeaders   string      // Centrifugo: the header lines of an API publish, built once
	// serversUp, when set, is told the servers of each cell once they are ready (tests that
	// inject faults into them).
	serversUp func(transport string, servers []*peers.Server)
	profile   *target.Profile // what Profile names
}

// Defaults returns the options of a run of scenario with each default filled: what a zero
// field marked "zero: Defaults" means. It is the one place a bench default is stated: rtlab
// bench's flags show these and Validate fills them. Defaults that depend on the scenario come
// from its defaults method; an unknown scenario gets location's.
func Defaults(scenario string) Options {
	scn, ok := scenarioNamed(scenario)
	if !ok {
		scenario, scn = ScenarioLocation, locationScenario{}
	}
	d := Options{
		Scenario: scenario, Users: []int{1000}, Stages: DefaultStages, GroupSize: 10, Talks: 10,
		LongWait: 25 * time.Second, Seed: 1, Brokers: []string{"memory"}, Nodes: 1, Rounds: 1, PubConns: 64,
		Servers: []string{results.KindRTLab}, TargetKind: results.KindRTLab,
		StompPub: "/topic/location/{group}", PeerCache: ".cache",
	}
	scn.defaults(&d)
	return d
}

// fillDefaults gives the zero fields that mean a default their value in d, but for those that
// depend on other flags (TargetKind and Servers with --target, the STOMP destinations), which
// their checks fill.
func (o *Options) fillDefaults(d *Options) {
	o.usersSet = len(o.Users) > 0
	if !o.usersSet {
		o.Users = d.Users
	}
	if len(o.Brokers) == 0 {
		o.Brokers = d.Brokers
	}
	orDefault(&o.Stages, d.Stages)
	orDefault(&o.GroupSize, d.GroupSize)
	orDefault(&o.Talks, d.Talks)
	orDefault(&o.LongWait, d.LongWait)
	orDefault(&o.Nodes, d.Nodes)
	orDefault(&o.Rounds, d.Rounds)
	orDefault(&o.PubConns, d.PubConns)
	orDefault(&o.PeerCache, d.PeerCache)
}

// orDefault sets *v to d when it is zero.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// UsageError is bad input: a flag and what was expected. cmd/rtlab prints it and exits 2.
type UsageError struct {
	Flag string // e.g. "--stages"
	Msg  string
}

func (e *UsageError) Error() string { return e.Flag + ": " + e.Msg }

func usageErr(flag, format string, args ...any) error {
	return &UsageError{Flag: flag, Msg: fmt.Sprintf(format, args...)}
}

// Validate fills defaults and checks every option, returning a *UsageError for the first bad
// one. It touches nothing outside the process except reading the open-file limit.
func (o *Options) Validate() error {
	for _, check := range []func() error{
		o.checkProfile, o.checkScenario, o.checkTransports, o.checkLoad, o.checkGroups, o.checkTiming,
		o.checkBrokers, o.checkWhere, o.checkFaults, o.checkCentrifugo, o.checkFileLimit,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkScenario finds the scenario and fills its defaults.
func (o *Options) checkScenario() error {
	if o.Scenario == "" {
		o.Scenario = ScenarioLocation
	}
	scn, ok := scenarioNamed(o.Scenario)
	if !ok {
		return usageErr("--scenario", "unknown scenario %q; want %s", o.Scenario, strings.Join(Scenarios(), ", "))
	}
	o.scn = scn
	scn.defaults(o)
	d := Defaults(o.Scenario)
	o.fillDefaults(&d)
	return nil
}

// checkTransports checks --transport.
func (o *Options) checkTransports() error {
	seen := map[string]bool{}
	for _, t := range o.Transports {
		sio := t == target.SocketIOName && o.profile != nil // a transport of other servers only
		if _, poll := pollEvery(t, time.Second); !poll && !sio && !slices.Contains(Transports(), t) && !slices.Contains(namedOnly, t) {
			return usageErr("--transport", "unknown transport %q; want a comma list of %s, %s, poll-<interval> (like poll-1s), or all", t, strings.Join(Transports(), ", "), strings.Join(namedOnly, ", "))
		}
		if slices.Contains(namedOnly, t) && o.Target != "" && o.profile == nil {
			return usageErr("--transport", "%s runs against the servers the lab starts (their --stomp-addr and --sockjs-path), not a --target", t)
		}
		if seen[t] {
			return usageErr("--transport", "%q given twice", t)
		}
		seen[t] = true
	}
	return nil
}

// checkLoad checks --users, --stages and --threshold.
func (o *Options) checkLoad() error {
	for _, u := range o.Users {
		if u < 1 {
			return usageErr("--users", "%d: want positive user counts like 1000,5000,10000", u)
		}
	}
	specs, err := ParseStages(o.Stages)
	if err != nil {
		return usageErr("--stages", "%v", err)
	}
	if !HasPeak(specs) && o.usersSet {
		return usageErr("--stages", "%q has no PEAK stage, so --users would have no effect; use PEAK as a target", o.Stages)
	}
	o.stageSpecs = specs
	if o.thresholds, err = ParseThresholds(o.Thresholds); err != nil {
		return usageErr("--threshold", "%v", err)
	}
	return nil
}

// checkGroups checks --interval. The ranges of whole numbers (--group-size, --groups,
// --room-size, --talks, --rounds, --nodes, --publish-conns) are checked once, by rtlab bench's
// flag table; zero here means the default.
func (o *Options) checkGroups() error {
	if o.Interval < 10*time.Millisecond || o.Interval > 10*time.Minute {
		return usageErr("--interval", "%s: want a duration between 10ms and 10m", o.Interval)
	}
	return nil
}

// checkTiming fills the grace period and checks the chat settings and the scenario's flags.
func (o *Options) checkTiming() error {
	if o.Grace == 0 {
		// The longest a healthy delivery can take on the slowest transport of the run: a short
		// poll waits up to its polling interval.
		longest := o.Interval
		for _, t := range o.Transports {
			if d, ok := pollEvery(t, o.Interval); ok {
				longest = max(longest, d)
			}
			if o.profile != nil && o.profile.Transports[t] != nil {
				longest = max(longest, o.profile.Transports[t].Interval)
			}
		}
		o.Grace = longest + time.Second
	}
	if o.Grace < 0 {
		return usageErr("--grace", "%s: want a positive duration", o.Grace)
	}
	return o.scn.check(o)
}

// checkBrokers checks --broker.
func (o *Options) checkBrokers() error {
	names := map[string]bool{}
	for _, b := range o.Brokers {
		if b == "" {
			return usageErr("--broker", "%q: want a comma list of distinct brokers: memory, redis://…, nats://…, amqp://…, or redis, nats, amqp (the lab starts one)", strings.Join(o.Brokers, ","))
		}
		if err := checkBrokerLabel(b); err != nil {
			return err
		}
		name := BrokerName(b)
		if names[name] {
			return usageErr("--broker", "%q twice in %q: to compare two servers of one kind, label each with a URL fragment, e.g. nats://127.0.0.1:4222#nats-a,nats://127.0.0.1:4223#nats-b", name, strings.Join(o.Brokers, ","))
		}
		names[name] = true
	}
	return nil
}

// checkWhere checks what the run measures: a --target, or the servers it starts.
func (o *Options) checkWhere() error {
	shared := slices.ContainsFunc(o.Brokers, func(b string) bool { return brokerURL(b) != "memory" })
	if o.Target != "" {
		if err := o.checkTarget(); err != nil {
			return err
		}
		if o.Nodes > 1 {
			return usageErr("--nodes", "%d with --target: the bench only spreads users over servers it starts", o.Nodes)
		}
		if len(o.Brokers) > 1 || shared {
			return usageErr("--broker", "given with --target: the bench starts no server")
		}
		if len(o.ServerArgs) > 0 {
			return usageErr("--server-args", "given with --target: the bench starts no server")
		}
		if o.AuthSecret != "" && o.TargetKind != results.KindCentrifugo {
			return usageErr("--auth-secret", "given with --target: the bench starts no server (tokens from the target's /api/login work either way)")
		}
		if len(o.Servers) > 0 && !slices.Equal(o.Servers, []string{results.KindRTLab}) {
			return usageErr("--server", "given with --target: the bench starts no server; say what the target is with --target-kind")
		}
		o.Servers = []string{o.TargetKind}
	} else {
		if o.TargetKind != "" {
			return usageErr("--target-kind", "given without --target")
		}
		if o.StompPub != "" || o.StompSub != "" || o.StompLogin != "" {
			return usageErr("--stomp-pub/--stomp-sub/--stomp-login", "apply to a STOMP --target only (the bench knows its own servers' destinations)")
		}
		if o.CAFile != "" || o.Insecure || len(o.TargetPIDs) > 0 || o.TargetMetrics != "" {
			return usageErr("--ca-file/--insecure/--target-pid/--target-metrics", "apply to a --target only (the bench samples the servers it starts)")
		}
		if err := o.checkServers(); err != nil {
			return err
		}
		if o.Nodes > 1 && !shared {
			return usageErr("--nodes", "%d needs a shared broker: give --broker redis://…, nats://… or amqp://… (memory is per process)", o.Nodes)
		}
	}
	return nil
}

// checkCentrifugo sets up the keys of Centrifugo servers, and refuses their flags without one.
func (o *Options) checkCentrifugo() error {
	if slices.Contains(o.Servers, results.KindCentrifugo) {
		// Spawned Centrifugo servers run in insecure client mode without --auth-secret, but SSE
		// users still need tokens naming their channel; the lab signs them with a key of its own.
		o.cfSecret = []byte(o.AuthSecret)
		if len(o.cfSecret) == 0 && o.Target == "" {
			o.cfSecret = []byte(randomKey())
		}
		o.cfKey = o.CentrifugoAPIKey
		if o.cfKey == "" && o.Target == "" {
			o.cfKey = randomKey()
		}
		o.cfHeaders = "X-API-Key: " + o.cfKey + "\r\nContent-Type: application/json\r\n"
	} else if o.CentrifugoAPIKey != "" || o.CentrifugoBin != "" {
		return usageErr("--centrifugo-bin/--centrifugo-api-key", "apply when centrifugo is in --server (or --target-kind)")
	}
	return nil
}

// checkFileLimit refuses a run that cannot fit in the open-file limit: every user holds one
// socket in the generator (and in the server), two on Socket.IO long-polling (a GET and a
// POST); publishing goes through the shared pool.
func (o *Options) checkFileLimit() error {
	per := uint64(1)
	if p := o.profile; p != nil && p.SocketIO != nil && p.SocketIO.Transport != target.SIOWebSocket && slices.Contains(o.Transports, target.SocketIOName) {
		per = 2
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		for _, u := range o.Users {
			most := u
			for _, s := range o.stageSpecs {
				most = max(most, s.Target)
			}
			need := uint64(most)*per + uint64(o.PubConns) + 64
			if need > lim.Max {
				return usageErr("--users", "%d users need about %d sockets in one process; the open-file limit is %d", most, need, lim.Max)
			}
		}
	}
	return nil
}

// randomKey returns a fresh secret for a server the bench starts.
func randomKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkTarget validates --target and --target-kind. An rtlab or Centrifugo target is a base
// URL (http://host:port); a STOMP target names its WebSocket endpoint (ws://host:port/path).
func (o *Options) checkTarget() error {
	orDefault(&o.TargetKind, Defaults(o.Scenario).TargetKind)
	if !slices.Contains(TargetKinds(), o.TargetKind) {
		return usageErr("--target-kind", "unknown kind %q; want %s", o.TargetKind, strings.Join(TargetKinds(), ", "))
	}
	u, err := url.Parse(o.Target)
	switch {
	case o.TargetKind == results.KindSTOMP:
		if err != nil || !slices.Contains([]string{"ws", "wss", "http", "https"}, u.Scheme) || u.Host == "" || u.Path == "" || u.Path == "/" {
			return usageErr("--target", "%q: want the STOMP endpoint's URL, like ws://127.0.0.1:15674/ws", o.Target)
		}
		o.targetPath = u.Path
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/"):
		return usageErr("--target", "%q: want a base URL like http://127.0.0.1:8080 or https://host", o.Target)
	}
	if err := o.targetTLS(u); err != nil {
		return err
	}
	if err := o.checkTargetCost(); err != nil {
		return err
	}
	o.targetQuery = u.RawQuery
	if o.TargetKind != results.KindRTLab && o.scn.rtlabOnly() {
		return usageErr("--target-kind", "%s runs the location scenario only: chat and notify follow rtlab's own chat rules", o.TargetKind)
	}
	o.Target = u.Scheme + "://" + u.Host + o.targetPath
	o.targetHost = u.Host
	if u.Port() == "" { // users dial host:port
		port := "80"
		if o.tlsConf != nil {
			port = "443"
		}
		o.targetHost = net.JoinHostPort(u.Hostname(), port)
	}
	if o.TargetKind != results.KindSTOMP && (o.StompPub != "" || o.StompSub != "" || o.StompLogin != "") {
		return usageErr("--stomp-pub/--stomp-sub/--stomp-login", "apply to --target-kind stomp")
	}
	for _, d := range []struct{ flag, v string }{{"--stomp-pub", o.StompPub}, {"--stomp-sub", o.StompSub}} {
		if d.v != "" && (!strings.HasPrefix(d.v, "/") || strings.ContainsAny(d.v, "\n\r\x00:")) {
			return usageErr(d.flag, "%q: want a destination like /topic/location.{group} ({group} is the group number)", d.v)
		}
	}
	if o.StompLogin != "" && !strings.Contains(o.StompLogin, ":") {
		return usageErr("--stomp-login", "want login:passcode")
	}
	return nil
}

// groupsFor returns the number of location groups, or chat rooms, for a run with peak users.
func (o *Options) groupsFor(peak int) int { return o.scn.groups(o, peak) }

// authMode is Config.Auth: how the servers authenticate.
func (o *Options) authMode() string {
	switch {
	case o.Target != "":
		return "target"
	case o.AuthSecret != "":
		return "secret"
	}
	return "open"
}

// statusW returns where progress lines go.
func (o *Options) statusW() io.Writer {
	if o.Status == nil {
		return io.Discard
	}
	return o.Status
}

// nodesFor is how many servers a cell on broker starts: memory is per process, so one.
func (o *Options) nodesFor(broker string) int {
	if brokerURL(broker) == "memory" {
		return 1
	}
	return o.Nodes
}

// newRun is the Run of one cell in round (1-based). Runs name their server when the results
// hold another than rtlab, their broker only when the matrix runs on several, and their round
// only when there are several, so that a report keys them apart ("ws~centrifugo@redis#2"); a
// single run of rtlab on one broker stays keyed by its transport. A server that is its own
// broker (RabbitMQ, Spring) names none.
func (o *Options) newRun(kind, broker, transport string, peak, round int) *results.Run {
	run := &results.Run{Transport: transport, Peak: peak, ServerKind: o.kindOf(kind)}
	if len(o.Brokers) > 1 && !ownBroker(kind) {
		run.Broker, run.Nodes = BrokerName(broker), o.nodesFor(broker)
	}
	if o.Rounds > 1 {
		run.Round = round
	}
	return run
}

// BrokerName is how results name a broker: its label (the --broker entry's URL fragment, as
// in nats://127.0.0.1:4223#nats-new), else its URL's scheme ("redis", "nats", "amqp"), or
// "memory". It never carries addresses or credentials.
func BrokerName(broker string) string {
	broker, label, ok := strings.Cut(broker, "#")
	if ok {
		return label
	}
	if scheme, _, ok := strings.Cut(broker, "://"); ok {
		return scheme
	}
	return broker
}

// RedactBrokers returns a --broker list with every password replaced by "xxxxx"
// (amqp://guest:xxxxx@host/), for what the bench records: results.json and report.html are
// made to be shared. An entry that does not parse as a URL is kept; no server took it.
func RedactBrokers(list string) string {
	entries := strings.Split(list, ",")
	for i, e := range entries {
		if u, err := url.Parse(strings.TrimSpace(e)); err == nil && u.User != nil {
			entries[i] = u.Redacted()
		}
	}
	return strings.Join(entries, ",")
}

// brokerURL is what a spawned server's --broker gets: the entry without its label.
func brokerURL(broker string) string {
	u, _, _ := strings.Cut(broker, "#")
	return u
}

// checkBrokerLabel refuses a label that could not name a run: results key runs as
// transport@label, and the report and verdict treat "memory" as the baseline.
func checkBrokerLabel(broker string) error {
	u, label, ok := strings.Cut(broker, "#")
	if !ok {
		return nil
	}
	valid := label != "" && len(label) <= 32 && label != "memory" && u != "memory"
	for _, c := range label {
		valid = valid && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}
	if !valid {
		return usageErr("--broker", "%q: a label (after #) is 1–32 of a-z, 0-9, '-', '_', '.', not \"memory\", and only on a shared broker's URL", broker)
	}
	return nil
}
