// Package transports is the one table of rtlab's transports: each one's name (the metric label,
// the test clients' kind, and with '-' for '_' the load lab's --transport value), the session it
// carries, and how reports show it. Adding a transport is its handler in internal/transport, its
// driver in internal/bench, and one row here; TestEveryKindEverywhere (transporttest) fails
// while a row has no driver or client.
package transports

import "strings"

// The transports' names.
const (
	ShortPoll = "shortpoll"
	LongPoll  = "longpoll"
	SSE       = "sse"
	WS        = "ws"
	STOMP     = "stomp"
	STOMPTCP  = "stomp_tcp" // STOMP over plain TCP or TLS (--stomp-addr)
	SockJS    = "sockjs"    // STOMP over SockJS's xhr-streaming (--sockjs-path)
)

// Transport is one row of the table.
type Transport struct {
	Name   string
	Wire   string // the session it carries: its own name, or STOMP for STOMP's other carriers
	Label  string // as a reader says it, in reports
	Colour string // its line in every chart of every report, so a reader learns it once
	K6     bool   // k6 speaks it (internal/k6export); k6 has no streaming HTTP client, so no SSE
}

// All returns the table in rank order: from the oldest technique to the newest, as the seed
// project compares them, which is the order of dashboards, reports and the lab's "all".
func All() []Transport {
	return []Transport{
		{Name: ShortPoll, Wire: ShortPoll, Label: "short polling", Colour: "#d95f02", K6: true},
		{Name: LongPoll, Wire: LongPoll, Label: "long polling", Colour: "#7570b3", K6: true},
		{Name: SSE, Wire: SSE, Label: "SSE", Colour: "#1b9e77"},
		{Name: WS, Wire: WS, Label: "WebSocket", Colour: "#1f78b4", K6: true},
		{Name: STOMP, Wire: STOMP, Label: "STOMP", Colour: "#e7298a", K6: true},
		{Name: STOMPTCP, Wire: STOMP, Label: "STOMP over TCP", Colour: "#e78ac3"},
		{Name: SockJS, Wire: STOMP, Label: "SockJS", Colour: "#b15928"},
	}
}

// Names returns every transport's name, in rank order.
func Names() []string { return namesWhere(func(Transport) bool { return true }) }

// Sessions returns the transports that carry their own sessions, in rank order: the test
// clients' kinds and the lab's "all" (a carrier of another's sessions is named on its own).
func Sessions() []string { return namesWhere(func(t Transport) bool { return t.Wire == t.Name }) }

// K6 returns the transports k6 speaks, in rank order.
func K6() []string { return namesWhere(func(t Transport) bool { return t.K6 }) }

func namesWhere(keep func(Transport) bool) []string {
	var names []string
	for _, t := range All() {
		if keep(t) {
			names = append(names, t.Name)
		}
	}
	return names
}

// Lookup returns the row of name and its rank; ok is false for a name not in the table.
func Lookup(name string) (t Transport, rank int, ok bool) {
	for i, t := range All() {
		if t.Name == name {
			return t, i, true
		}
	}
	return Transport{}, 0, false
}

// Rank orders transports as All does; names not in the table sort after them.
func Rank(name string) int {
	if _, rank, ok := Lookup(name); ok {
		return rank
	}
	return len(All())
}

// LabName is name as the load lab's --transport writes it: '-' for '_' (stomp-tcp).
func LabName(name string) string { return strings.ReplaceAll(name, "_", "-") }

// FromLab is the name of the transport the lab calls lab (stomp-tcp is stomp_tcp).
func FromLab(lab string) string { return strings.ReplaceAll(lab, "-", "_") }
