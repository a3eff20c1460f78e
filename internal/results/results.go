// Package results is the schema of results.json, what `rtlab bench` writes and `rtlab report`
// and the lab page read: the types, the schema version, and Load, which refuses a version it
// does not know. It imports nothing of rtlab, so every reader shares these types.
package results

import (
	"fmt"
	"strconv"
	"time"
)

// SchemaVersion is written into every results file so readers can refuse files they do not
// understand. Version 2 added connections.users and .reconnects, delivery.unconfirmed and
// .outsideWindow, and recorded delivery latency only for receipts inside the receiver's window
// (docs/results.md, docs/results.schema.json); version 1 files still load.
const SchemaVersion = 2

// Results is the content of results.json: one run of `rtlab bench`, possibly a matrix of
// transports × user levels. It is the only thing the report package reads.
type Results struct {
	Schema   int       `json:"schema"`
	Version  string    `json:"version"` // rtlab version that produced it
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Stopped  bool      `json:"stopped"` // true when interrupted (Ctrl-C); figures cover what ran
	Config   Config    `json:"config"`
	Machine  Machine   `json:"machine"`
	Runs     []Run     `json:"runs"`
	// Skipped lists the cells of the matrix a server could not run (a transport or broker it
	// does not offer), with the reason, so the report can say why a row is missing.
	Skipped   []Skip   `json:"skipped,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	Generator string   `json:"generator"` // e.g. "rtlab bench (Go, one process)"
}

// Config records the flags a run used, so a results file can be reproduced.
type Config struct {
	Scenario   string   `json:"scenario"`
	Transports []string `json:"transports"`
	Users      []int    `json:"users"`
	Stages     string   `json:"stages"`    // as given, e.g. "20s:300,30s:PEAK,10s:0"
	GroupSize  int      `json:"groupSize"` // users per group
	Groups     int      `json:"groups"`    // when fixed by --groups, else 0
	Interval   Duration `json:"interval"`  // publish (and short-poll) interval
	Target     string   `json:"target"`    // empty when the bench started its own server
	Broker     string   `json:"broker"`
	Nodes      int      `json:"nodes"`
	Rounds     int      `json:"rounds,omitempty"` // --rounds when more than 1
	// Servers is --server when it names other servers than rtlab (comma list: rtlab,
	// centrifugo, rabbitmq, spring); TargetKind is --target-kind with --target.
	Servers    string `json:"servers,omitempty"`
	TargetKind string `json:"targetKind,omitempty"`
	// ServerVersions names what each server was: "rtlab dev", "Centrifugo 6.9.1",
	// "RabbitMQ 3.10.8 (rabbitmq_web_stomp)", "Spring Boot 3.5.7 (simple broker)".
	ServerVersions map[string]string `json:"serverVersions,omitempty"`
	Seed           int64             `json:"seed"`
	Args           []string          `json:"args"` // command line
	// Thresholds is --threshold as given: every run is checked against each (Run.Thresholds).
	Thresholds string `json:"thresholds,omitempty"`
	// Faults is --fault as given: the schedule of faults injected into every run (Run.Faults).
	Faults string `json:"faults,omitempty"`

	// Added by the bench: settings that change the figures.
	Grace        Duration `json:"grace"`        // see docs/results.md, "Delivery ratio"
	LongPollWait Duration `json:"longPollWait"` // wait= of long polls
	PublishConns int      `json:"publishConns"` // shared HTTP publish pool, per node (upper bound)
	ServerArgs   []string `json:"serverArgs,omitempty"`

	// Chat and notify scenarios (zero for location).
	RoomSize int  `json:"roomSize,omitempty"` // users per room
	Talks    int  `json:"talks,omitempty"`    // chat: TALKs per session (ignored with Hold)
	Hold     bool `json:"hold,omitempty"`     // users keep one session until the stages remove them (always in notify)
	// Auth is how the spawned servers authenticate: "open" (open dev mode: tokens identify
	// users but are not required) or "secret" (--auth-secret; the secret is not recorded);
	// "target" with --target, whose setting the bench cannot see.
	Auth string `json:"auth,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	Hostname string `json:"hostname"`
	CPUs     int    `json:"cpus"`
	GoOS     string `json:"goos"`
	GoArch   string `json:"goarch"`
	MemTotal uint64 `json:"memTotalBytes"`
	// GoMaxProcs is the generator's GOMAXPROCS: its CPU budget for the saturation rule.
	GoMaxProcs int `json:"goMaxProcs,omitempty"`
	// Affinity lists the CPUs the bench and the servers it spawned were pinned to (taskset),
	// when fewer than CPUs: a broker on the other CPUs then did not compete with them.
	Affinity string `json:"cpuAffinity,omitempty"`
}

// Run is one transport at one user level (one cell of the matrix).
type Run struct {
	Transport string `json:"transport"` // shortpoll, longpoll, sse, ws, stomp
	Peak      int    `json:"peak"`      // peak users
	// Broker and Nodes are set when one run compared several brokers (--broker a,b): the
	// broker's name (memory, redis, nats, amqp, or its label) and how many servers shared it.
	Broker string `json:"broker,omitempty"`
	Nodes  int    `json:"nodes,omitempty"`
	// Round is which pass over the matrix this is (1, 2, …) when --rounds ran it more than once.
	Round int `json:"round,omitempty"`
	// ServerKind is the server the run measured when the results hold another than rtlab:
	// "rtlab", "centrifugo", "rabbitmq", "spring", or "stomp" (a --target of that kind).
	ServerKind string    `json:"serverKind,omitempty"`
	Started    time.Time `json:"started"`
	Duration   Duration  `json:"duration"`
	Stopped    bool      `json:"stopped,omitempty"`

	Connections Connections `json:"connections"`
	Publish     Publish     `json:"publish"`
	Delivery    Delivery    `json:"delivery"`
	Traffic     Traffic     `json:"traffic"`
	Server      Usage       `json:"server"`    // from /proc of the server process(es) and /metrics
	Generator   Usage       `json:"generator"` // the bench process itself
	// BrokerServer is the broker server's process (Redis, NATS, RabbitMQ) when it listens on a
	// loopback address of this machine and /proc shows which process it is; Available is false
	// otherwise (memory, a remote broker, --target).
	BrokerServer Usage `json:"brokerServer"`
	// Processes is the CPU of each node and of each broker server process over the run, when
	// there are several of either: the spawned nodes, and every server --broker names on a
	// loopback address of this machine (each of several space-separated URLs; a Redis Cluster
	// URL's node and its addr nodes).
	Processes []ProcessCPU `json:"processes,omitempty"`

	// Chat and notify scenarios. Transport may also be poll-<interval>: short polling at its own
	// interval (poll-1s, poll-5s in the notify scenario). Publish is about the TALKs. Delivery is
	// the TALKs at every room member (chat), or the NOTIFY publications at the room owners
	// (notify: the alarm latency, from the TALK's intended send time to the owner).
	Rooms int    `json:"rooms,omitempty"` // chat rooms; in notify also the owners, the users measured
	Login *Login `json:"login,omitempty"`

	// GeneratorSaturated is set when the generator's CPU was near its budget, so latency figures
	// may be the generator's, not the server's. The summary says so.
	GeneratorSaturated bool `json:"generatorSaturated"`
	// StealSeconds counts the seconds in which the hypervisor took 10 % of a core or more for
	// other machines (Series.MachineSteal); latency in them is partly the neighbours'.
	StealSeconds int `json:"stealSeconds,omitempty"`
	// Saturated is set when the whole machine's CPU was busy for saturationWindow seconds or
	// more, with whose CPU it was in those seconds.
	Saturated *Saturation `json:"machineSaturated,omitempty"`
	// PublishConns is the shared HTTP publish pool of this run, per node (0 when the users
	// publish on their own connections): one connection per 8 peak users, at most
	// Config.PublishConns.
	PublishConns int `json:"publishConns,omitempty"`
	// Thresholds are Config.Thresholds checked on this run.
	Thresholds []ThresholdResult `json:"thresholds,omitempty"`
	// Faults are the faults injected into the run (--fault), in order, each with what it cost.
	Faults []Fault  `json:"faults,omitempty"`
	Notes  []string `json:"notes,omitempty"`

	// Series holds one point per second of the run, index i covering [i s, i+1 s).
	Series Series `json:"series"`
}

// Saturation is whose CPU it was in the seconds the machine was saturated: averages over those
// seconds in percent of one core (100 = one core), out of Machine.CPUs × 100.
type Saturation struct {
	Seconds   int     `json:"seconds"`
	Machine   float64 `json:"machine"`   // every process, steal included
	Server    float64 `json:"server"`    // the servers the bench started (their process trees)
	Generator float64 `json:"generator"` // the bench itself
	Broker    float64 `json:"broker"`    // the broker server, when measured
	Steal     float64 `json:"steal"`     // the hypervisor's other machines
	Others    float64 `json:"others"`    // everything else on the machine
}

// Connections counts connection attempts. For polling transports a "connection" is a virtual
// user's keep-alive HTTP connection. Users, connections and reconnects are separate counts:
// Opened = Users' first connections + Reconnects + later sessions' connections (chat).
type Connections struct {
	Tried  int64 `json:"tried"`
	Opened int64 `json:"opened"`
	// Users counts the users that opened at least one connection in the run; Reconnects the
	// connections a user opened again within one stay (after a drop, or a close by the server).
	Users      int64 `json:"users"`
	Reconnects int64 `json:"reconnects"`
	Failed     int64 `json:"failed"`
	Dropped    int64 `json:"dropped"` // opened, then closed by the server or the network before the user left
	// Abandoned attempts were under way when the user left (stages ramping down): neither
	// opened nor failed. Tried = Opened + Failed + Abandoned.
	Abandoned int64     `json:"abandoned"`
	Connect   Latencies `json:"connectTime"`
	Errors    []Count   `json:"errors,omitempty"` // the most frequent error texts
}

// Publish describes the publishers' side.
type Publish struct {
	Sent     int64     `json:"sent"`
	Failed   int64     `json:"failed"`
	Latency  Latencies `json:"latency"` // send → ack / HTTP response
	Requests int64     `json:"httpRequests"`
}

// Delivery is what users feel: did every expected message arrive, in order, how fast.
type Delivery struct {
	Expected   int64   `json:"expected"` // receivers in the group at publish time, summed over publications
	Received   int64   `json:"received"` // first receipts of expected messages
	Duplicates int64   `json:"duplicates"`
	OutOfOrder int64   `json:"outOfOrder"`
	Gaps       int64   `json:"gaps"`  // server said history was gone
	Ratio      float64 `json:"ratio"` // Received / Expected (1 when Expected is 0)
	// Latency is publisher's send time → receiver over Received + Unconfirmed deliveries: first
	// receipts inside the receiver's window. Unconfirmed are those of publications the ratio
	// leaves out (the publisher saw the publish fail, or it fell in the grace period before an
	// interrupt). OutsideWindow counts first receipts of publications sent before the
	// receiver's window opened (while it subscribed) or after its cutoff (the grace before it
	// leaves): in neither the ratio nor Latency.
	Latency       Latencies `json:"latency"`
	Unconfirmed   int64     `json:"unconfirmed"`
	OutsideWindow int64     `json:"outsideWindow"`
	// Other counts messages received outside the measurement: chat ENTER and LEAVE, and in the
	// notify scenario the room traffic the members see. Not in Latency or MessagesPerSec.
	Other int64 `json:"other,omitempty"`
	// Histogram is the distribution of Latency: deliveries per latency bucket, ten buckets per
	// decade (bucket k ends at 10^(k/10) µs), empty buckets left out.
	Histogram []Bucket `json:"histogram,omitempty"`
	// Quiet is Latency without the seconds in which the hypervisor took CPU for other machines
	// (see Series.MachineSteal). Nil when no second was left out.
	Quiet *QuietLatency `json:"quiet,omitempty"`
}

// QuietLatency is delivery latency over the seconds of a run that the machine's neighbours left
// alone: deliveries received in a second with steal under 10 % of a core, after a second like
// it (a delivery held up by steal may arrive in the next second).
type QuietLatency struct {
	Seconds int       `json:"seconds"`        // seconds counted
	LeftOut int       `json:"secondsLeftOut"` // seconds with steal, and each second after one
	Latency Latencies `json:"latency"`
}

// Login describes POST /api/login, once per chat session.
type Login struct {
	Tried   int64     `json:"tried"`
	Failed  int64     `json:"failed"`
	Latency Latencies `json:"latency"` // asked → token (includes waiting for a pool connection)
}

// Traffic is throughput over the whole run.
type Traffic struct {
	MessagesPerSec float64 `json:"messagesPerSec"` // deliveries received per second
	BytesPerSec    float64 `json:"bytesPerSec"`    // bytes received by clients per second
	RequestsPerSec float64 `json:"httpRequestsPerSec"`
}

// Usage is resource use of a process (or the sum over server nodes).
type Usage struct {
	CPUPercentAvg float64 `json:"cpuPercentAvg"` // 100 = one core
	CPUPercentMax float64 `json:"cpuPercentMax"`
	RSSMaxBytes   uint64  `json:"rssMaxBytes"`
	RSSAtPeak     uint64  `json:"rssAtPeakBytes"` // RSS at the end of the peak stage
	BytesPerUser  float64 `json:"bytesPerUser"`   // (RSS at peak − RSS before users) ÷ peak users
	GoroutinesMax int64   `json:"goroutinesMax,omitempty"`
	ThreadsMax    int64   `json:"threadsMax,omitempty"` // OS threads, from /proc (summed over the process tree)
	// CPUSeconds is the CPU time the process used over the run (user + system, summed over its
	// process tree and the nodes): what CPU per delivered message divides.
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`
	Available  bool    `json:"available"` // false with --target (no /proc access)
}

// Latencies summarises an HDR histogram. Values are milliseconds.
type Latencies struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Bucket is one bar of a latency histogram: the deliveries that took more than the previous
// bucket's UpToMs and at most this one's.
type Bucket struct {
	UpToMs float64 `json:"upToMs"`
	Count  int64   `json:"count"`
}

// Count is a label with how often it occurred.
type Count struct {
	Label string `json:"label"`
	N     int64  `json:"n"`
}

// Series are per-second samples; every slice has one entry per second of the run.
type Series struct {
	Users    []int   `json:"users"`    // connected virtual users
	Sent     []int64 `json:"sent"`     // publications sent that second
	Received []int64 `json:"received"` // deliveries received that second
	Errors   []int64 `json:"errors"`   // failures of any kind that second
	// PublishFailed counts the publishes refused or failed that second (also in Errors).
	PublishFailed []int64   `json:"publishFailed,omitempty"`
	LatencyP50    []float64 `json:"latencyP50"`   // ms, deliveries received that second
	LatencyP99    []float64 `json:"latencyP99"`   // ms
	BytesIn       []int64   `json:"bytesIn"`      // bytes received by clients
	Requests      []int64   `json:"httpRequests"` // HTTP requests completed
	ServerCPU     []float64 `json:"serverCpu"`    // percent, 100 = one core
	ServerRSS     []uint64  `json:"serverRss"`    // bytes
	ServerGorout  []int64   `json:"serverGoroutines"`
	// ServerThreads counts OS threads of the servers' process trees (0 with --target).
	ServerThreads []int64   `json:"serverThreads,omitempty"`
	GeneratorCPU  []float64 `json:"generatorCpu"`        // percent
	GeneratorRSS  []uint64  `json:"generatorRss"`        // bytes
	BrokerCPU     []float64 `json:"brokerCpu,omitempty"` // percent, when BrokerServer is measured
	// MachineSteal is CPU time the hypervisor gave other machines while this one had work, in
	// percent of one core (0 on bare metal).
	MachineSteal []float64 `json:"machineSteal,omitempty"`

	Logins []int64 `json:"logins,omitempty"` // chat, notify: logins answered that second
}

// ProcessCPU is one process's CPU over a run.
type ProcessCPU struct {
	Name          string  `json:"name"` // "node 1", "broker 127.0.0.1:6379"
	CPUSeconds    float64 `json:"cpuSeconds"`
	CPUPercentAvg float64 `json:"cpuPercentAvg"` // 100 = one core
}

// Duration marshals as a Go duration string ("30s") so results files stay readable.
type Duration time.Duration

// String returns the duration in Go syntax ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a Go duration string ("30s") so results files stay readable.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// UnmarshalJSON reads a Go duration string ("30s"), or a number of nanoseconds as written by
// tools that do not know the string form.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		s, err := strconv.Unquote(string(b))
		if err != nil {
			return fmt.Errorf("results: duration %s: %w", b, err)
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("results: duration %s: %w", b, err)
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("results: duration %s: want a string like \"30s\" or nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}

// Skip is a cell of the matrix that was not run: the server does not offer the transport, or
// cannot run on the broker.
type Skip struct {
	ServerKind string `json:"serverKind"`
	Transport  string `json:"transport,omitempty"` // empty when the whole server was skipped on Broker
	Broker     string `json:"broker,omitempty"`
	Reason     string `json:"reason"`
}

// Key identifies a run's cell within one user level: its transport, with "~server" when the
// results hold another server than rtlab, "@broker" when they compare brokers and "#round"
// when the matrix ran several rounds.
func (r *Run) Key() string {
	k := r.Transport
	if r.ServerKind != "" {
		k += "~" + r.ServerKind
	}
	if r.Broker != "" {
		k += "@" + r.Broker
	}
	if r.Round > 0 {
		k += "#" + strconv.Itoa(r.Round)
	}
	return k
}

// ThresholdResult is a threshold checked on one run.
type ThresholdResult struct {
	Expr     string  `json:"expr"`
	Value    float64 `json:"value"`    // the run's figure, in the threshold's unit
	Pass     bool    `json:"pass"`     // false also when the figure was not measured
	Measured bool    `json:"measured"` // false when the run has no such figure (no deliveries)
}

// FailedShare is the share of the publishes sent that were refused or failed, 0..1.
func (p Publish) FailedShare() float64 {
	if p.Sent == 0 {
		return 0
	}
	return float64(p.Failed) / float64(p.Sent)
}

// ThresholdsCrossed counts the threshold checks that failed over every run of r.
func (r *Results) ThresholdsCrossed() int {
	n := 0
	for i := range r.Runs {
		for _, t := range r.Runs[i].Thresholds {
			if !t.Pass {
				n++
			}
		}
	}
	return n
}

// Fault is one fault injected into a run and its accounting over its window: from the fault
// to the next one (or the end of the run). Deliveries count by the publication's send time,
// notices and refusals by when they happened.
type Fault struct {
	Kind string   `json:"kind"`           // kill-node, restart-broker, partition-node, delay-broker
	Node int      `json:"node,omitempty"` // kill-node, partition-node: the node (1-based)
	At   Duration `json:"at"`             // since the run's start
	// For is how long it lasted (a partition, a delay, a node's time down before its restart);
	// zero for a kill without restart and a broker restart (as long as the broker took).
	For   Duration `json:"for,omitempty"`
	Delay Duration `json:"delay,omitempty"` // delay-broker: the delay added each way
	// Late is how long after At the fault was injected, when the one before outlasted the gap.
	Late Duration `json:"late,omitempty"`
	// Error says why the fault could not be injected (a node that did not restart).
	Error string `json:"error,omitempty"`

	Expected  int64 `json:"expected"`  // deliveries due in the window
	Delivered int64 `json:"delivered"` // of those, received
	// Told are the missing deliveries of receivers that got a gap notice in the window or the
	// next (a notice tells of what went before it); SilentlyLost those of receivers that got
	// none: a broken promise.
	Told         int64 `json:"told"`
	SilentlyLost int64 `json:"silentlyLost"`
	Gaps         int64 `json:"gaps"` // gap notices received
	Duplicates   int64 `json:"duplicates"`
	Reordered    int64 `json:"reordered"`
	// PublishFailed counts publishes refused or failed in the window.
	PublishFailed int64 `json:"publishFailed"`
	// Recovery is the time from the fault's end to the first second whose deliveries reach 90 %
	// of the median second before the first fault; nil when none in the window did.
	Recovery *Duration `json:"recovery,omitempty"`
}
