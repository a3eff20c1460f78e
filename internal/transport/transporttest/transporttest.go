// Package transporttest is how tests talk to rtlab over its transports: one resuming client per
// transport (short poll, long poll, SSE, WebSocket, STOMP) behind one small interface (Client),
// the protocol-level connections they are built on (WSConn, STOMPConn, SSEStream) for tests of
// the wire itself, Run to run a test body on every transport, and Server, a transport server on
// the in-memory broker to run them against. The transports' own tests, the application's, the
// multi-node and the hostile tests all use these clients.
package transporttest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/rtlab/rtlab/internal/transports"
)

// Kind names a transport.
type Kind string

// The transports with a client of their own (STOMP's other carriers are STOMP's).
const (
	ShortPoll Kind = transports.ShortPoll
	LongPoll  Kind = transports.LongPoll
	SSE       Kind = transports.SSE
	WS        Kind = transports.WS
	STOMP     Kind = transports.STOMP
)

// Kinds lists every transport that carries its own sessions (transports.Sessions), in the
// order Run runs them; New has a client for each.
var Kinds = kindsOf(transports.Sessions())

func kindsOf(names []string) []Kind {
	kinds := make([]Kind, len(names))
	for i, n := range names {
		kinds[i] = Kind(n)
	}
	return kinds
}

// Streaming lists the transports that hold a connection open.
var Streaming = []Kind{SSE, WS, STOMP}

// Streams reports whether k holds a connection open (SSE, WebSocket, STOMP).
func (k Kind) Streams() bool { return slices.Contains(Streaming, k) }

// Run runs f as a subtest for each of kinds, all of them when none is given, in the manner of
// net/http's tests over HTTP/1 and HTTP/2: one test body, every transport.
func Run(t *testing.T, f func(t *testing.T, k Kind), kinds ...Kind) {
	t.Helper()
	if len(kinds) == 0 {
		kinds = Kinds
	}
	for _, k := range kinds {
		t.Run(string(k), func(t *testing.T) { f(t, k) })
	}
}

// Position is where a publication stands in its topic.
type Position struct {
	Offset uint64 `json:"offset"`
	Epoch  string `json:"epoch"`
}

func (p Position) String() string { return fmt.Sprintf("%d:%s", p.Offset, p.Epoch) }

// Publication is a publication as every transport carries it (the JSON object of SSE data,
// poll answers and WebSocket messages; a STOMP MESSAGE's headers and body).
type Publication struct {
	Topic  string          `json:"topic"`
	Offset uint64          `json:"offset"`
	Epoch  string          `json:"epoch"`
	Time   string          `json:"time"`
	Sender string          `json:"sender"`
	Type   string          `json:"type"`
	Data   json.RawMessage `json:"data"`
}

// Pos is the publication's position.
func (p Publication) Pos() Position { return Position{p.Offset, p.Epoch} }

// Msg is any message of the WebSocket JSON protocol from the server.
type Msg struct {
	Op string `json:"op"`
	Publication
	Recovered *bool           `json:"recovered"`
	Reason    string          `json:"reason"`
	Code      string          `json:"code"`
	ID        json.RawMessage `json:"id"`
	Reconnect bool            `json:"reconnect"`
}

// PollAnswer is the answer of a short or long poll and of a history read.
type PollAnswer struct {
	Topic        string        `json:"topic"`
	Epoch        string        `json:"epoch"`
	Offset       uint64        `json:"offset"`
	Recovered    bool          `json:"recovered"`
	Reason       string        `json:"reason"`
	Publications []Publication `json:"publications"`
}

// Refusal is the server's refusal of a publish or a subscription, as each transport says it:
// an HTTP error answer, a WebSocket error message, a STOMP ERROR frame.
type Refusal struct {
	Status int    // HTTP status; zero on WebSocket and STOMP
	Code   string // the error code (bad_topic, too_large...); a STOMP ERROR names it in Reason
	Reason string
}

func (r *Refusal) Error() string {
	if r.Status != 0 {
		return fmt.Sprintf("refused (%d %s): %s", r.Status, r.Code, r.Reason)
	}
	return fmt.Sprintf("refused (%s): %s", r.Code, r.Reason)
}
