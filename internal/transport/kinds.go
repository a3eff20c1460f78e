package transport

import "github.com/rtlab/rtlab/internal/metrics"

// Kinds are the transports the server serves, by the names metrics label them with. Each has
// a route here (Server.Routes; STOMP over TCP a listener, ServeSTOMP; SockJS the application's
// route, HandleSockJS), a metric label (internal/metrics), a driver in the load lab
// (internal/bench: the same name, '-' for '_') and a client in transporttest, or for a kind
// that only carries another's sessions (Carries) that kind's client; a test of transporttest
// checks all three.
var Kinds = []string{metrics.ShortPoll, metrics.LongPoll, metrics.SSE, metrics.WS, metrics.STOMP, metrics.STOMPTCP, metrics.SockJS}

// Carries names, for the kinds that carry another kind's sessions over another wire, the kind
// carried: STOMP over TCP and over SockJS are STOMP sessions (stomp.go) whatever carries them.
var Carries = map[string]string{metrics.STOMPTCP: metrics.STOMP, metrics.SockJS: metrics.STOMP}
