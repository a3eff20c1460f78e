// Package bench is rtlab's load lab: it starts (or targets) an rtlab server, drives virtual
// users over real sockets on each transport exactly as browser clients would, measures what
// users feel (delivery latency and ratio, failed connections) and what it costs (CPU, memory
// per connection), and returns Results for the report package.
//
// It imports none of the server's packages: everything goes over the wire contract in
// docs/protocol.md.
package bench

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Transports returns the transports the bench drives, in the order "all" runs them.
func Transports() []string { return []string{"shortpoll", "longpoll", "sse", "ws", "stomp"} }

// Scenarios. Only location is implemented; chat and notify are accepted names that are refused
// with a clear message until they exist.
const (
	ScenarioLocation = "location"
)

// Options configure a bench run. cmd/rtlab fills them from flags; the zero value of each field
// means the default stated beside it. Validate checks them once and names the offending flag.
type Options struct {
	Scenario   string        // zero means "location"
	Transports []string      // zero means all of Transports
	Users      []int         // peak users, one run per value; zero means {1000}
	Stages     string        // zero means DefaultStages
	GroupSize  int           // users per group; zero means 10 (ignored when Groups is set)
	Groups     int           // fixed number of groups; zero means peak/GroupSize
	Interval   time.Duration // publish and short-poll interval; zero means 3 s
	Grace      time.Duration // delivery grace (see docs/bench.md); zero means Interval + 1 s
	LongWait   time.Duration // long-poll wait; zero means 25 s
	Target     string        // base URL of a running server; empty starts one per run cell
	Seed       int64         // seeds phases and positions
	ServerArgs []string      // extra flags for spawned servers
	Broker     string        // --broker of spawned servers; zero means "memory"
	Nodes      int           // spawned servers; zero means 1
	PubConns   int           // shared keep-alive connections for HTTP publishing; zero means 64

	// ServerBinary is the rtlab executable to spawn; zero means os.Executable().
	ServerBinary string
	// Args is the command line, recorded in the results.
	Args []string
	// Version is the rtlab version, recorded in the results.
	Version string
	// Status receives one progress line per second; nil discards them.
	Status io.Writer

	stageSpecs []StageSpec
	usersSet   bool // Users was given explicitly
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
	if o.Scenario == "" {
		o.Scenario = ScenarioLocation
	}
	switch o.Scenario {
	case ScenarioLocation:
	case "chat", "notify":
		return usageErr("--scenario", "%q is not implemented yet; want location", o.Scenario)
	default:
		return usageErr("--scenario", "unknown scenario %q; want location", o.Scenario)
	}
	if len(o.Transports) == 0 {
		o.Transports = Transports()
	}
	seen := map[string]bool{}
	for _, t := range o.Transports {
		if !slices.Contains(Transports(), t) {
			return usageErr("--transport", "unknown transport %q; want a comma list of %s, or all", t, strings.Join(Transports(), ", "))
		}
		if seen[t] {
			return usageErr("--transport", "%q given twice", t)
		}
		seen[t] = true
	}
	o.usersSet = len(o.Users) > 0
	if !o.usersSet {
		o.Users = []int{1000}
	}
	for _, u := range o.Users {
		if u < 1 {
			return usageErr("--users", "%d: want positive user counts like 1000,5000,10000", u)
		}
	}
	if o.Stages == "" {
		o.Stages = DefaultStages
	}
	specs, err := ParseStages(o.Stages)
	if err != nil {
		return usageErr("--stages", "%v", err)
	}
	if !HasPeak(specs) && o.usersSet {
		return usageErr("--stages", "%q has no PEAK stage, so --users would have no effect; use PEAK as a target", o.Stages)
	}
	o.stageSpecs = specs
	if o.GroupSize == 0 {
		o.GroupSize = 10
	}
	if o.GroupSize < 1 {
		return usageErr("--group-size", "%d: want a positive number of users per group", o.GroupSize)
	}
	if o.Groups < 0 {
		return usageErr("--groups", "%d: want a positive number of groups (or 0 to derive from --group-size)", o.Groups)
	}
	if o.Interval == 0 {
		o.Interval = 3 * time.Second
	}
	if o.Interval < 10*time.Millisecond || o.Interval > 10*time.Minute {
		return usageErr("--interval", "%s: want a duration between 10ms and 10m", o.Interval)
	}
	if o.Grace == 0 {
		o.Grace = o.Interval + time.Second
	}
	if o.Grace < 0 {
		return usageErr("--grace", "%s: want a positive duration", o.Grace)
	}
	if o.LongWait == 0 {
		o.LongWait = 25 * time.Second
	}
	if o.Broker == "" {
		o.Broker = "memory"
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > 16 {
		return usageErr("--nodes", "%d: want 1..16", o.Nodes)
	}
	if o.PubConns == 0 {
		o.PubConns = 64
	}
	if o.PubConns < 1 || o.PubConns > 1024 {
		return usageErr("--publish-conns", "%d: want 1..1024", o.PubConns)
	}
	if o.Target != "" {
		u, err := url.Parse(o.Target)
		if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return usageErr("--target", "%q: want a base URL like http://127.0.0.1:8080", o.Target)
		}
		o.Target = "http://" + u.Host
		if o.Nodes > 1 {
			return usageErr("--nodes", "%d with --target: the bench only spreads users over servers it starts", o.Nodes)
		}
		if len(o.ServerArgs) > 0 {
			return usageErr("--server-args", "given with --target: the bench starts no server")
		}
	} else if o.Nodes > 1 && o.Broker == "memory" {
		return usageErr("--nodes", "%d needs a shared broker: give --broker redis://…, nats://… or amqp://… (memory is per process)", o.Nodes)
	}
	// Every user holds one socket in the generator (and in the server); publishing goes
	// through the shared pool. Refuse what cannot fit in the open-file limit.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		for _, u := range o.Users {
			most := u
			for _, s := range specs {
				most = max(most, s.Target)
			}
			need := uint64(most) + uint64(o.PubConns) + 64
			if need > lim.Max {
				return usageErr("--users", "%d users need about %d sockets in one process; the open-file limit is %d", most, need, lim.Max)
			}
		}
	}
	return nil
}

// groupsFor returns the number of groups for a run with peak users.
func (o *Options) groupsFor(peak int) int {
	if o.Groups > 0 {
		return o.Groups
	}
	return max(1, (peak+o.GroupSize-1)/o.GroupSize)
}

// statusW returns where progress lines go.
func (o *Options) statusW() io.Writer {
	if o.Status == nil {
		return io.Discard
	}
	return o.Status
}
