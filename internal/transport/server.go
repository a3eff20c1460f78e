// Package transport serves the hub over five transports: short and long polling, Server-Sent
// Events, a WebSocket JSON protocol and STOMP 1.2 over WebSocket. An application adds dialects
// of its own through small hooks: raw WebSockets (RawSocket), data-only streams and polls, and
// STOMP destinations besides /topic/ (STOMPDests). Each connection has one reader goroutine and
// a writer (see writer.go).
package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/metrics"
)

// Limits bound what one client may do and hold. Zero values mean the defaults given.
type Limits struct {
	MaxFrame     int           // bytes of one client frame or request body; zero means 64 KiB
	QueueBytes   int           // bytes queued per connection before it is cut off; zero means 1 MiB
	WriteTimeout time.Duration // one socket write; zero means 10 s
	MaxSubs      int           // subscriptions per connection; zero means 128
	MsgRate      float64       // publishes per second per connection; zero means 100, -1 unlimited
	MsgBurst     int           // publish burst; zero means 2×MsgRate (at least 10)
	// UserMsgRate bounds publishes per second of one user across all its WebSocket and STOMP
	// connections (of one address when anonymous), burst twice that: one tenant cannot multiply
	// MsgRate by its connection count. Zero means 2×MsgRate (unlimited when MsgRate is), -1
	// unlimited.
	UserMsgRate float64
	// OpRate paces every message a WebSocket or STOMP client sends (publishes, subscribes,
	// pings, history reads, refreshes): over it the connection is not read until a token is
	// back, so a flood slows its sender only. Zero means 200, -1 unlimited.
	OpRate         float64
	OpBurst        int           // zero means 2×OpRate (at least 10)
	PingInterval   time.Duration // WebSocket ping when idle; zero means 25 s
	SSEHeartbeat   time.Duration // SSE comment when idle; zero means 10 s
	StompHeartbeat time.Duration // STOMP heart-beat offered both ways; zero means 10 s
	LongPollMax    time.Duration // longest long-poll wait; zero means 60 s
	SSEMaxAge      time.Duration // life of an /api/sse stream; zero (the default) never ends

	StompTxFrames     int           // SEND frames held by one STOMP transaction; zero means 100
	StompTxBytes      int           // body bytes held by one STOMP transaction; zero means 1 MiB
	StompTxMax        int           // open transactions per STOMP session; zero means 16
	UnackedMsgs       int           // unacknowledged messages per STOMP subscription; zero means 1000
	UnackedBytes      int           // their data bytes; zero means 4 MiB
	FirstFrameTimeout time.Duration // STOMP: upgrade to the CONNECT frame; zero means 10 s
	BodyTimeout       time.Duration // reading one request body; zero means 10 s
	HTTPPubRate       float64       // HTTP publishes per second per user (address when anonymous); zero means 100, -1 unlimited
	HTTPPubBurst      int           // HTTP publish burst; zero means 2×HTTPPubRate (at least 10)
	MaxConns          int           // streaming connections in all; zero means 10,000, -1 unlimited
	MaxConnsPerIP     int           // connections per client address (an IPv6 /64); zero means 2,000, -1 unlimited
	ReadRatePerIP     float64       // HTTP reads per second per client address (burst twice that); zero means 2,000, -1 unlimited
	ReadRatePerUser   float64       // HTTP reads per second per authenticated user (burst twice that); zero means 200, -1 unlimited
	MaxConnsPerUser   int           // streaming connections per user; zero means 500, -1 unlimited
	// HTTPIdleTimeout closes a keep-alive HTTP connection idle this long; zero means 30 s.
	HTTPIdleTimeout time.Duration
	// LoginRate and LoginBurst bound password checks (POST /api/login with --login-users) per
	// client address and per user name; zero means 2/s, burst 10; -1 unlimited.
	LoginRate  float64
	LoginBurst int
	// SockJSInput bounds a SockJS session's input not yet read by its STOMP session, and one
	// xhr_send body; zero means 256 KiB, and it is at least 2×MaxFrame.
	SockJSInput int
	// SockJSMissRate bounds requests per second per client address for SockJS sessions that
	// do not exist or are not the client's (burst twice that, at least 10); zero means 10, -1
	// unlimited.
	SockJSMissRate float64
	// PollAnswerBytes bounds one POST /api/poll answer's publications; zero means 1 MiB.
	PollAnswerBytes int
}

// DefaultLimits are the limits' defaults, stated once: the serve flags show them and fill
// takes a zero limit from them.
func DefaultLimits() Limits {
	return Limits{
		MaxFrame: 64 << 10, QueueBytes: 1 << 20, WriteTimeout: 10 * time.Second, MaxSubs: 128,
		MsgRate: 100, PingInterval: 25 * time.Second, SSEHeartbeat: 10 * time.Second,
		StompHeartbeat: 10 * time.Second, LongPollMax: 60 * time.Second,
		StompTxFrames: 100, StompTxBytes: 1 << 20, StompTxMax: 16, UnackedMsgs: 1000, UnackedBytes: 4 << 20,
		FirstFrameTimeout: 10 * time.Second, BodyTimeout: 10 * time.Second,
		HTTPPubRate: 100, MaxConns: 10_000, MaxConnsPerIP: 2000, ReadRatePerIP: 2000, ReadRatePerUser: 200, MaxConnsPerUser: 500,
		OpRate: 200, HTTPIdleTimeout: 30 * time.Second, LoginRate: 2, LoginBurst: 10,
		SockJSInput: 256 << 10, SockJSMissRate: 10, PollAnswerBytes: 1 << 20,
	}
}

func (l *Limits) fill() {
	d := DefaultLimits()
	zero := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	zeroDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	zero(&l.MaxFrame, d.MaxFrame)
	zero(&l.QueueBytes, d.QueueBytes)
	zero(&l.MaxSubs, d.MaxSubs)
	if l.MsgRate == 0 {
		l.MsgRate = d.MsgRate
	}
	if l.MsgBurst <= 0 {
		l.MsgBurst = max(10, int(2*l.MsgRate))
	}
	if l.UserMsgRate == 0 {
		l.UserMsgRate = max(-1, 2*l.MsgRate)
	}
	if l.OpRate == 0 {
		l.OpRate = d.OpRate
	}
	if l.OpBurst <= 0 {
		l.OpBurst = max(10, int(2*l.OpRate))
	}
	if l.HTTPPubRate == 0 {
		l.HTTPPubRate = d.HTTPPubRate
	}
	if l.ReadRatePerIP == 0 {
		l.ReadRatePerIP = d.ReadRatePerIP
	}
	if l.ReadRatePerUser == 0 {
		l.ReadRatePerUser = d.ReadRatePerUser
	}
	if l.HTTPPubBurst <= 0 {
		l.HTTPPubBurst = max(10, int(2*l.HTTPPubRate))
	}
	// -1 (unlimited) is kept for the connection caps.
	for _, f := range []struct {
		v *int
		d int
	}{
		{&l.StompTxFrames, d.StompTxFrames}, {&l.StompTxBytes, d.StompTxBytes}, {&l.StompTxMax, d.StompTxMax},
		{&l.UnackedMsgs, d.UnackedMsgs}, {&l.UnackedBytes, d.UnackedBytes},
		{&l.MaxConns, d.MaxConns}, {&l.MaxConnsPerIP, d.MaxConnsPerIP}, {&l.MaxConnsPerUser, d.MaxConnsPerUser},
	} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	zeroDur(&l.FirstFrameTimeout, d.FirstFrameTimeout)
	zeroDur(&l.BodyTimeout, d.BodyTimeout)
	zeroDur(&l.WriteTimeout, d.WriteTimeout)
	zeroDur(&l.PingInterval, d.PingInterval)
	zeroDur(&l.SSEHeartbeat, d.SSEHeartbeat)
	zeroDur(&l.StompHeartbeat, d.StompHeartbeat)
	zeroDur(&l.LongPollMax, d.LongPollMax)
	zeroDur(&l.HTTPIdleTimeout, d.HTTPIdleTimeout)
	if l.LoginRate == 0 {
		l.LoginRate = d.LoginRate
	}
	if l.LoginBurst <= 0 {
		l.LoginBurst = d.LoginBurst
	}
	zero(&l.SockJSInput, d.SockJSInput)
	l.SockJSInput = max(l.SockJSInput, 2*l.MaxFrame)
	if l.SockJSMissRate == 0 {
		l.SockJSMissRate = d.SockJSMissRate
	}
	zero(&l.PollAnswerBytes, d.PollAnswerBytes)
}

// Identity is who a client is, as the Policy established it from its credentials.
type Identity struct {
	User string // empty when anonymous
	// Expires is when the credentials end: a streaming connection is closed then, unless the
	// client refreshed them. Zero means never.
	Expires time.Time
	// Session names the credentials for revocation (a token id); empty when anonymous.
	Session string
	// Grants is the Policy's own view of the credentials, handed back to it with the Client.
	Grants any
}

// Client identifies who is acting: a connection (ID is empty for plain HTTP requests) and its
// identity (User empty when anonymous).
type Client struct {
	ID string
	Identity
}

// Guard is checked before each delivery of a subscription. An error (wrapping ErrForbidden)
// means the client may no longer receive the topic: the publication is not delivered and the
// connection is closed with the error as its reason. It runs on the hub's delivery path, so it
// must be quick and must not block.
type Guard func(p *hub.Publication) error

// Policy decides who a client is and what it may do. internal/app implements it; transports
// call it for every connection, subscription, read and publish.
type Policy interface {
	// Authenticate returns the identity of a request (token from the Authorization header or
	// the access_token query parameter). No credentials give an anonymous identity and no
	// error; bad ones give an error wrapping ErrUnauthorized.
	Authenticate(r *http.Request) (Identity, error)
	// AuthenticateToken checks a token given inside a protocol (STOMP CONNECT, a refresh).
	AuthenticateToken(token string) (Identity, error)
	// AuthRequired reports whether anonymous clients are refused.
	AuthRequired() bool
	// CanSubscribe refuses a live subscription with an error wrapping ErrForbidden. A non-nil
	// Guard is checked before every delivery of the subscription.
	CanSubscribe(c Client, topic string) (Guard, error)
	// CanRead refuses a read of topic's history (polls, history) with an error wrapping
	// ErrForbidden. Whatever may not be subscribed may not be read.
	CanRead(c Client, topic string) error
	// Publish publishes on behalf of c, applying the application's rules.
	Publish(ctx context.Context, c Client, req hub.PublishRequest) (*hub.Publication, error)
	// Disconnected is called once when a streaming connection has closed.
	Disconnected(c Client)
}

// PublishChecker is implemented by a Policy that can tell, without publishing, whether
// publishes would be refused: a STOMP COMMIT checks all of its SENDs first, so that it
// publishes all or none. reqs are in order; one may depend on an earlier one (a chat ENTER
// before a TALK).
type PublishChecker interface {
	CheckPublish(ctx context.Context, c Client, reqs []hub.PublishRequest) error
}

// authenticate resolves a request's identity and refuses anonymous ones when auth is required.
func (s *Server) authenticate(r *http.Request) (Identity, error) {
	id, err := s.policy.Authenticate(r)
	if err != nil {
		return Identity{}, err
	}
	if id.User == "" && s.policy.AuthRequired() {
		return Identity{}, fmt.Errorf("%w: send a token as Authorization: Bearer or access_token", ErrUnauthorized)
	}
	return id, nil
}

// Config configures a Server.
type Config struct {
	Hub     *hub.Hub
	Policy  Policy
	Limits  Limits
	Origins Origins
	// STOMPDests serves STOMP destinations besides /topic/{topic}; nil serves /topic/ alone.
	STOMPDests STOMPDests
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
	// Proxies are the reverse proxies whose X-Forwarded-For gives the client's address for the
	// per-address limits (clientaddr.go).
	Proxies Proxies
}

// Server holds the transports' shared state: the connections it must close at shutdown.
type Server struct {
	hub     *hub.Hub
	policy  Policy
	lim     Limits
	origins Origins
	dests   STOMPDests // nil: /topic/ alone
	m       *metrics.Metrics
	log     *slog.Logger
	pubRate *keyedLimiter // HTTP publishes per user or address
	proxies Proxies
	// kaPeriod is how often the keepalive loop looks at idle connections: a connection that
	// must hear from the server within some interval is written to one period early.
	kaPeriod time.Duration
	// loginRate: password checks per address and failed ones per user name; loginFailed:
	// the (name, address) pairs that failed within loginFailMemory; checking: checks running.
	loginRate   *keyedLimiter
	loginFailed *keyedLimiter
	checking    chan struct{}
	reads       readLimits // HTTP reads per user and address (readrate.go)
	door        *door      // the admission every listener shares (listen.go)
	// userPubRate: WebSocket and STOMP publishes per user (address when anonymous), across
	// its connections (limit.go).
	userPubRate *keyedLimiter

	nextID  atomic.Uint64
	closing atomic.Bool
	mu      sync.Mutex
	conns   map[*conn]struct{} // streams and waiting long polls (CloseWhere); guarded by mu
	// kaParts are the streams' writers by keepalive part (keepalive.go); guarded by mu.
	kaParts  [kaSlots]map[*writer]struct{}
	admitted int            // streaming connections admitted; guarded by mu
	perIP    map[string]int // admitted connections per client address; guarded by mu
	perUser  map[string]int // admitted connections per user; guarded by mu
	draining chan struct{}  // closed at shutdown: long polls return at once
	wg       sync.WaitGroup // connection goroutines
	stop     chan struct{}
}

// New returns a Server. Call Close (or Shutdown) to stop its background work.
func New(cfg Config) *Server {
	cfg.Limits.fill()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		hub: cfg.Hub, policy: cfg.Policy, lim: cfg.Limits, origins: cfg.Origins, dests: cfg.STOMPDests, m: cfg.Metrics, log: cfg.Logger,
		proxies:     cfg.Proxies,
		pubRate:     newKeyedLimiter(cfg.Limits.HTTPPubRate, cfg.Limits.HTTPPubBurst),
		userPubRate: newKeyedLimiter(cfg.Limits.UserMsgRate, max(10, int(2*cfg.Limits.UserMsgRate))),
		loginRate:   newKeyedLimiter(cfg.Limits.LoginRate, cfg.Limits.LoginBurst),
		loginFailed: newKeyedLimiter(1/loginFailMemory.Seconds(), 1),
		checking:    make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		reads:       newReadLimits(cfg.Limits),
		door:        newDoor(cfg.Limits.MaxConnsPerIP),
		conns:       make(map[*conn]struct{}), perIP: make(map[string]int), perUser: make(map[string]int),
		draining: make(chan struct{}), stop: make(chan struct{}),
		// At least a millisecond: rtlab serve refuses shorter intervals; a library caller's tiny
		// one must not stop the ticker with a panic.
		kaPeriod: max(time.Millisecond, min(cfg.Limits.PingInterval, cfg.Limits.SSEHeartbeat, cfg.Limits.StompHeartbeat)/2),
	}
	for i := range s.kaParts {
		s.kaParts[i] = make(map[*writer]struct{})
	}
	go s.keepalive()
	return s
}

// Limits returns the limits in force (defaults filled in).
func (s *Server) Limits() Limits { return s.lim }

// Routes registers the transports' own routes on mux: publish, short and long poll, history
// and presence reads, SSE, the WebSocket protocol and STOMP, all under /api/.
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/publish/{topic...}", s.HandlePublish)
	mux.HandleFunc("GET /api/poll/{topic...}", s.HandlePoll)
	mux.HandleFunc("POST /api/poll", s.HandleMultiPoll)
	mux.HandleFunc("GET /api/topics/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		if topic, ok := strings.CutSuffix(r.PathValue("rest"), "/presence"); ok {
			s.HandlePresence(w, r, topic)
			return
		}
		topic, ok := strings.CutSuffix(r.PathValue("rest"), "/history")
		if !ok {
			s.WriteError(w, r, fmt.Errorf("%w: use /api/topics/{topic}/history or /presence", ErrNotFound))
			return
		}
		s.HandleHistory(w, r, topic)
	})
	mux.HandleFunc("GET /api/sse", s.HandleSSE)
	mux.HandleFunc("POST /api/sse", s.HandleSSEPost)
	mux.HandleFunc("GET /api/ws", s.HandleWS)
	mux.HandleFunc("GET /api/stomp", s.HandleSTOMP)
}

// track registers a connection so keepalive, shutdown and CloseWhere can reach it, and counts
// the reader its caller starts (s.wg): under the lock Shutdown takes before it waits, so that
// the wait never misses a reader, even one whose client has already seen the stream open.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.wg.Add(1)
	s.conns[c] = struct{}{}
	s.kaParts[c.kaSlot][c.w] = struct{}{}
	c.tracked = true
	s.m.Connections.WithLabelValues(c.w.stats.transport).Inc()
	s.m.Accepted.WithLabelValues(c.w.stats.transport).Inc()
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	delete(s.kaParts[c.kaSlot], c.w)
	s.mu.Unlock()
	r := c.w.closeReason()
	if r.Code == "" {
		r = ReasonClientClosed
	}
	s.m.Connections.WithLabelValues(c.w.stats.transport).Dec()
	s.m.Disconnects.WithLabelValues(c.w.stats.transport, r.Code).Inc()
}

func (s *Server) connStats(transport string) *connStats {
	sent := s.m.Sent.WithLabelValues(transport)
	over := s.m.QueueOverflows.WithLabelValues(transport)
	lag := s.m.DeliveryLag.WithLabelValues(transport)
	return &connStats{
		transport: transport,
		sent:      func(n int) { sent.Add(float64(n)) },
		lag:       func(d time.Duration) { lag.Observe(d.Seconds()) },
		overflow:  over.Inc,
	}
}

// Shutdown tells every client to reconnect, flushes what is queued and waits for connections
// to close, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing.Swap(true) {
		close(s.draining)
		close(s.stop)
	}
	ws := make([]*writer, 0, len(s.conns))
	for c := range s.conns {
		if c.w != nil { // a waiting long poll returns at once (draining)
			ws = append(ws, c.w)
		}
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.close(ReasonShutdown, true)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, w := range ws {
			w.shut()
		}
		return ctx.Err()
	}
}

// ConnCount returns the number of open streaming connections.
func (s *Server) ConnCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		if c.w != nil {
			n++
		}
	}
	return n
}

// guardRefuses applies a subscription's guard to p: when it refuses, the connection is closed
// with its reason and p is not delivered.
func guardRefuses(g Guard, w *writer, p *hub.Publication) bool {
	if g == nil {
		return false
	}
	if err := g(p); err != nil {
		w.close(ForbiddenReason(err), false)
		return true
	}
	return false
}

// rateLimiter is a token bucket, used by one reader goroutine only.
type rateLimiter struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	slowed bool // pace has shrunk the connection's receive buffer (limit.go)
}

func newRateLimiter(l Limits) rateLimiter {
	return rateLimiter{rate: l.MsgRate, burst: float64(l.MsgBurst), tokens: float64(l.MsgBurst)}
}

func newOpLimiter(l Limits) rateLimiter {
	return rateLimiter{rate: l.OpRate, burst: float64(l.OpBurst), tokens: float64(l.OpBurst)}
}

// wait takes a token, waiting for one when there is none; false when ctx ended first.
func (r *rateLimiter) wait(ctx context.Context) bool {
	for !r.allow(time.Now()) {
		t := time.NewTimer(r.refill()) // limit.go
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return true
}

// errRateLimited is the refusal of a publish over the connection's rate.
func (s *Server) errRateLimited() error {
	return fmt.Errorf("%w: at most %g messages per second", ErrRateLimited, s.lim.MsgRate)
}

func (r *rateLimiter) allow(now time.Time) bool { return r.allowN(now, 1) }

// allowN takes n tokens, or none when there are fewer.
func (r *rateLimiter) allowN(now time.Time, n int) bool {
	if r.rate < 0 {
		return true
	}
	if !r.last.IsZero() {
		r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	}
	r.last = now
	if r.tokens < float64(n) {
		return false
	}
	r.tokens -= float64(n)
	return true
}

// AuthenticateRequest resolves a request's user, refusing anonymous ones when auth is required.
func (s *Server) AuthenticateRequest(r *http.Request) (Identity, error) { return s.authenticate(r) }

// refreshIdentity checks a refreshed token for the connection: it must verify and name the
// same user. On success the connection's identity and expiry timer are replaced.
func (c *conn) refreshIdentity(token string) (Identity, error) {
	s, cur := c.s, c.ident
	if token == "" {
		return cur, fmt.Errorf("%w: refresh needs a token", ErrUnauthorized)
	}
	id, err := s.policy.AuthenticateToken(token)
	if err != nil {
		return cur, err
	}
	if id.User != cur.User {
		who := cur.User
		if who == "" {
			who = "an anonymous connection"
		}
		return cur, fmt.Errorf("%w: the refreshed token names %s, the connection is %s's", ErrUnauthorized, id.User, who)
	}
	c.bindIdentity(id)
	return id, nil
}
