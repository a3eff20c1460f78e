package bench

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/peers"
)

// Fault kinds (--fault).
const (
	FaultKillNode      = "kill-node"
	FaultRestartBroker = "restart-broker"
	FaultPartitionNode = "partition-node"
	FaultDelayBroker   = "delay-broker"
)

// FaultSpec is one fault of a --fault schedule.
type FaultSpec struct {
	At    time.Duration // since the run's start
	Kind  string
	Node  int           // kill-node, partition-node: 1-based
	For   time.Duration // partition, delay, a node's or broker's time down (0: a kill without restart; a broker back at once)
	Delay time.Duration // delay-broker
}

// faultUsage is the schedule's syntax, for errors.
const faultUsage = "want a comma list of AT:FAULT, FAULT one of kill-node=N[:DOWN], restart-broker[:DOWN], partition-node=N:FOR, delay-broker=DELAY:FOR (e.g. 30s:kill-node=1,45s:restart-broker,60s:partition-node=1:15s)"

// ParseFaults parses a --fault schedule: a comma list of AT:FAULT, in the order of AT. Nodes
// are numbered from 1.
func ParseFaults(s string) ([]FaultSpec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var fs []FaultSpec
	for _, item := range strings.Split(s, ",") {
		f, err := parseFault(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("%q: %w; %s", item, err, faultUsage)
		}
		if len(fs) > 0 && f.At < fs[len(fs)-1].At {
			return nil, fmt.Errorf("%q comes before the fault listed ahead of it; list faults in time order", item)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// parseFault parses one AT:FAULT.
func parseFault(item string) (FaultSpec, error) {
	var f FaultSpec
	at, rest, ok := strings.Cut(item, ":")
	if !ok {
		return f, fmt.Errorf("no AT: before the fault")
	}
	var err error
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return f, fmt.Errorf("AT %q is not a duration like 30s", at)
	}
	kind, arg, _ := strings.Cut(rest, "=")
	f.Kind = kind
	args := strings.Split(arg, ":")
	switch kind {
	case FaultKillNode, FaultPartitionNode:
		if f.Node, err = strconv.Atoi(args[0]); err != nil || f.Node < 1 {
			return f, fmt.Errorf("%s wants a node number from 1", kind)
		}
		return f, faultFor(&f, args[1:], kind == FaultPartitionNode)
	case FaultRestartBroker:
		if arg == "" {
			return f, nil
		}
		return f, faultFor(&f, args, false)
	case FaultDelayBroker:
		if f.Delay, err = time.ParseDuration(args[0]); err != nil || f.Delay <= 0 {
			return f, fmt.Errorf("delay-broker wants a positive delay like 200ms")
		}
		return f, faultFor(&f, args[1:], true)
	}
	return f, fmt.Errorf("unknown fault %q", kind)
}

// faultFor reads the fault's optional (or needed) duration.
func faultFor(f *FaultSpec, args []string, needed bool) error {
	if len(args) == 0 && !needed {
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("%s wants one duration after its argument", f.Kind)
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d <= 0 {
		return fmt.Errorf("%s: %q is not a positive duration", f.Kind, args[0])
	}
	f.For = d
	return nil
}

// checkFaults checks --fault against the run: faults need servers (and, for the broker's,
// a broker) that the lab starts, nodes that exist, and times inside the stages.
func (o *Options) checkFaults() error {
	fs, err := ParseFaults(o.Faults)
	if err != nil {
		return usageErr("--fault", "%v", err)
	}
	if len(fs) == 0 {
		return nil
	}
	if o.Target != "" {
		return usageErr("--fault", "given with --target: faults are injected into the servers and brokers the lab starts")
	}
	var total time.Duration
	for _, s := range o.stageSpecs {
		total += s.Duration
	}
	for _, f := range fs {
		if f.At >= total {
			return usageErr("--fault", "%s at %s: the stages end at %s", f.Kind, f.At, total)
		}
		if f.Node > o.Nodes {
			return usageErr("--fault", "%s=%d: --nodes is %d (nodes count from 1)", f.Kind, f.Node, o.Nodes)
		}
		if err := o.checkFaultBroker(f); err != nil {
			return err
		}
	}
	o.faults = fs
	return nil
}

// checkFaultBroker refuses a broker fault on a broker it cannot touch: restart-broker needs
// one the lab starts; partitions and delays a shared broker with one address to put the proxy
// before.
func (o *Options) checkFaultBroker(f FaultSpec) error {
	if f.Kind == FaultKillNode {
		return nil
	}
	for _, b := range o.Brokers {
		u := brokerURL(b)
		switch {
		case u == "memory":
			return usageErr("--fault", "%s needs a shared broker; --broker %s is in the server", f.Kind, b)
		case f.Kind == FaultRestartBroker && !spawned(b):
			return usageErr("--fault", "restart-broker needs a broker the lab starts: --broker %s (not %s)", strings.Join(peers.SpawnedBrokers, ", "), RedactBrokers(b))
		case !spawned(b) && !singleAddress(u):
			return usageErr("--fault", "%s needs --broker to name one server (the lab's proxy goes before it), not %s", f.Kind, RedactBrokers(b))
		}
	}
	return nil
}

// spawned reports whether a --broker entry asks the lab to start the broker (redis, nats,
// amqp without an address).
func spawned(broker string) bool { return slices.Contains(peers.SpawnedBrokers, brokerURL(broker)) }

// singleAddress reports whether a broker URL names one server by host:port.
func singleAddress(u string) bool {
	p, err := url.Parse(u)
	return err == nil && !strings.ContainsAny(u, " ") && p.Port() != "" && !strings.Contains(p.Scheme, "+") && p.Query().Get("addr") == ""
}
