// Package target reads a target profile: a YAML file that describes a real-time server's own
// protocol per transport (how a user connects and subscribes, how it publishes, where the
// bench's sender, sequence number and send time are in what arrives), so that the load lab can
// measure any server with the same accounting as its own. Of rtlab it imports only the
// transport table.
package target

import (
	"regexp"
	"time"

	"github.com/rtlab/rtlab/internal/transports"
)

// SocketIOName is the profile section of a Socket.IO server: a transport the lab measures on
// other servers only, so it is not a row of rtlab's transport table.
const SocketIOName = "socketio"

// Transports returns the transports a profile may describe, in the order the bench runs them:
// rtlab's, as the lab names them, then Socket.IO.
func Transports() []string {
	var out []string
	for _, n := range transports.Names() {
		out = append(out, transports.LabName(n))
	}
	return append(out, SocketIOName)
}

// Profile is a validated target profile.
type Profile struct {
	File       string
	User       *Template // a user's name, {user}; u{vu} when not given
	Auth       *Auth
	Transports map[string]*Transport
	SocketIO   *SocketIO
}

// Names lists the transports the profile describes, in Transports() order.
func (p *Profile) Names() []string {
	var out []string
	for _, t := range Transports() {
		if _, ok := p.Transports[t]; ok || (t == SocketIOName && p.SocketIO != nil) {
			out = append(out, t)
		}
	}
	return out
}

// Transport is how a user of one transport connects, subscribes, publishes and reads.
type Transport struct {
	Name         string
	URL          *Template // path and query on the target (stomp-tcp: host:port, or empty for the target's)
	Headers      []Header  // on the handshake or request
	Cookies      []Header
	Query        []Header // appended to URL's query
	Subprotocols []string
	Lines        bool          // ws: each line of a message is a message (newline-delimited JSON)
	Ping, Pong   string        // ws: a message that is exactly Ping is answered with Pong
	Interval     time.Duration // shortpoll: between polls; zero means the run's --interval
	Connect      []Header      // STOMP: CONNECT's headers
	Subscribe    Subscribe
	Publish      Publish
	Read         Read
}

// Header is a name and a template for its value.
type Header struct {
	Name  string
	Value *Template
}

// Subscribe is what a user does once connected, and how it knows it is subscribed.
type Subscribe struct {
	URL         *Template   // polling: the first request, which reads the starting cursor
	Send        []*Template // ws: frames sent after open
	Destination *Template   // STOMP
	Headers     []Header    // STOMP: SUBSCRIBE's extra headers
	Ready       Ready
}

// Readiness kinds: how a subscription is known to be in place.
const (
	ReadyOpen    = "open"    // when the connection is open (the stream's head, the first poll)
	ReadyReceipt = "receipt" // STOMP: a RECEIPT for the SUBSCRIBE
	ReadyMessage = "message" // the first message that matches
	ReadyDelay   = "delay"   // a fixed time after open
)

// Ready says how a subscription is known to be in place.
type Ready struct {
	Kind   string
	Delay  time.Duration
	Status int     // the HTTP status of the stream or first poll; zero means 200
	Match  []Match // ReadyMessage: what the message must hold (none: any)
}

// Ack kinds: how a publication is known to be accepted.
const (
	AckStatus  = "status"  // an HTTP status
	AckReceipt = "receipt" // a STOMP RECEIPT
	AckReply   = "reply"   // a message that matches, with the publication's seq at a path
	AckEcho    = "echo"    // the publisher's own delivery
	AckNone    = "none"    // fire-and-forget: accepted when written
)

// Publish is how a user publishes: an HTTP request, a frame on its connection, or a STOMP
// SEND.
type Publish struct {
	Method      string    // HTTP
	URL         *Template // HTTP: path and query on the target
	Headers     []Header  // HTTP headers, or SEND's extra headers
	Body        *Template // HTTP body, the ws frame, or SEND's body
	Destination *Template // STOMP
	Ack         string
	Status      int     // AckStatus: the status wanted; zero means any 2xx
	ReplyMatch  []Match // AckReply
	ReplySeq    *Path   // AckReply
}

// HTTP reports whether publications are HTTP requests.
func (p *Publish) HTTP() bool { return p.URL != nil }

// Socket.IO transports: how a user's session runs.
const (
	SIOUpgrade   = "upgrade"   // long-polling upgraded to WebSocket, as the JS client does
	SIOPolling   = "polling"   // long-polling only
	SIOWebSocket = "websocket" // WebSocket from the start
)

// ReadyAck and AckSocketIO: the server's Socket.IO acknowledgement of the join or publish
// event.
const (
	ReadyAck    = "ack"
	AckSocketIO = "ack"
)

// SocketIO describes a Socket.IO v4 application (read here; its client lives elsewhere).
type SocketIO struct {
	Transport string // SIOUpgrade, SIOPolling or SIOWebSocket
	Path      string
	Namespace string
	Auth      *Template // CONNECT's auth payload, a JSON object; nil sends none
	JoinEvent string    // "": the query joins
	JoinData  *Template
	JoinReady Ready // ReadyAck (the default with a join event), ReadyOpen or ReadyDelay
	PubEvent  string
	PubData   *Template
	PubAck    string // AckSocketIO, AckEcho or AckNone (the default)
	RecvEvent string
	Read      Read
	Headers   []Header
	Query     []Header
}

// compiled regexps are checked for the named groups the bench reads.
func regexGroups(re *regexp.Regexp) (vu, seq bool) {
	for _, n := range re.SubexpNames() {
		vu = vu || n == "vu"
		seq = seq || n == "seq"
	}
	return vu, seq
}
