package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/transports"
)

// ServerKinds returns what --server accepts, in the order the lab runs them.
func ServerKinds() []string {
	return []string{results.KindRTLab, results.KindCentrifugo, results.KindRabbitMQ, results.KindSpring}
}

// TargetKinds returns what --target-kind accepts.
func TargetKinds() []string {
	return []string{results.KindRTLab, results.KindCentrifugo, results.KindSTOMP}
}

// serves reports whether a server of kind offers transport, and why not when it does not.
func serves(kind, transport string) (ok bool, why string) {
	switch kind {
	case results.KindRTLab:
		return true, ""
	case results.KindCentrifugo:
		if transport == transports.WS || transport == transports.SSE {
			return true, ""
		}
		return false, "Centrifugo offers its WebSocket protocol and SSE here, no polling and no STOMP"
	case results.KindRabbitMQ:
		if transport == transports.STOMP {
			return true, ""
		}
		return false, "RabbitMQ is measured through Web-STOMP, STOMP over WebSocket only"
	case results.KindSpring:
		if transport == transports.STOMP {
			return true, ""
		}
		return false, "the Spring peer is a STOMP endpoint (/location) only"
	case results.KindSTOMP:
		if transport == transports.STOMP {
			return true, ""
		}
		return false, "a STOMP target speaks STOMP only"
	}
	return false, "unknown server"
}

// ownBroker reports whether a server kind is its own broker (RabbitMQ, Spring's simple broker):
// it runs once per round, on one node, whatever --broker says.
func ownBroker(kind string) bool { return kind == results.KindRabbitMQ || kind == results.KindSpring }

// runsOn reports whether a server of kind runs in the broker column broker (the i-th of the
// --broker list), and why not when it does not.
func runsOn(kind, broker string, i int) (ok bool, why string) {
	switch {
	case kind == results.KindRTLab:
		return true, ""
	case ownBroker(kind):
		if i == 0 {
			return true, ""
		}
		return false, results.KindLabel(kind) + " is its own broker: it runs once per round, in the first --broker column"
	case kind == results.KindCentrifugo:
		switch strings.SplitN(brokerURL(broker), "://", 2)[0] {
		case "memory", "redis", "rediss":
			return true, ""
		}
		return false, "Centrifugo's engines here are memory and Redis"
	}
	return false, "unknown server"
}

// checkServers validates --server and its combination with the scenario.
func (o *Options) checkServers() error {
	if len(o.Servers) == 0 {
		o.Servers = Defaults(o.Scenario).Servers
	}
	seen := map[string]bool{}
	for _, s := range o.Servers {
		if !slices.Contains(ServerKinds(), s) {
			return usageErr("--server", "unknown server %q; want a comma list of %s", s, strings.Join(ServerKinds(), ", "))
		}
		if seen[s] {
			return usageErr("--server", "%q given twice", s)
		}
		seen[s] = true
		if s != results.KindRTLab && o.scn.rtlabOnly() {
			return usageErr("--server", "%s runs the location scenario only: chat and notify follow rtlab's own chat rules (ENTER, TALK, owners' notifications)", s)
		}
	}
	// Each server must have something to run.
	for _, s := range o.Servers {
		any := false
		for _, t := range o.Transports {
			if ok, _ := serves(s, t); ok {
				any = true
			}
		}
		if !any {
			_, why := serves(s, o.Transports[0])
			return usageErr("--transport", "%s with --server %s: nothing to run (%s)", strings.Join(o.Transports, ","), s, why)
		}
		any = false
		for i, b := range o.Brokers {
			if ok, _ := runsOn(s, b, i); ok {
				any = true
			}
		}
		if !any {
			_, why := runsOn(s, o.Brokers[0], 0)
			return usageErr("--broker", "%s with --server %s: nothing to run (%s)", RedactBrokers(strings.Join(o.Brokers, ",")), s, why)
		}
	}
	return nil
}

// peers reports whether the run involves another server than rtlab.
func (o *Options) peers() bool {
	return slices.ContainsFunc(o.Servers, func(s string) bool { return s != results.KindRTLab })
}

// kindOf is the server kind a run names: set when the results hold another server than rtlab,
// so rows read "WebSocket · Centrifugo" beside "WebSocket · rtlab".
func (o *Options) kindOf(kind string) string {
	if len(o.Servers) > 1 || kind != results.KindRTLab {
		return kind
	}
	return ""
}

// skipText is a skipped cell in one line, for status output and warnings.
func skipText(s results.Skip) string {
	what := results.KindLabel(s.ServerKind)
	if s.Transport != "" {
		what = s.Transport + " on " + what
	}
	if s.Broker != "" {
		what += " (--broker " + s.Broker + ")"
	}
	return fmt.Sprintf("%s: not run: %s", what, s.Reason)
}
