package transport

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/transports"
)

// retryError is a refusal the client may retry later: HTTP answers carry Retry-After.
type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// retryAfter is the Retry-After value of err in whole seconds (at least 1), or "" when err is
// not a retryError.
func retryAfter(err error) string {
	var re *retryError
	if !errors.As(err, &re) {
		return ""
	}
	return strconv.Itoa(max(1, int(math.Ceil(re.after.Seconds()))))
}

// addrKey is what limits per client address key on: the address, or for IPv6 its /64 (one
// subscriber's network, in which it may pick any address).
func addrKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is6() || a.Is4In6() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// admit counts a new streaming connection from r, of user (empty when anonymous), against
// MaxConns, MaxConnsPerIP (the address's /64 for IPv6) and MaxConnsPerUser. The returned
// release must be called once the connection has ended (or was never opened).
func (s *Server) admit(r *http.Request, user string) (release func(), err error) {
	return s.admitAddr(addrKey(s.clientIP(r)), user)
}

// admitAddr is admit for a connection from ip, an address already keyed by addrKey; empty for
// a trusted proxy's connection (STOMP over TCP), which the per-address cap does not hold.
func (s *Server) admitAddr(ip, user string) (release func(), err error) {
	s.mu.Lock()
	switch {
	case s.lim.MaxConns >= 0 && s.admitted >= s.lim.MaxConns:
		s.mu.Unlock()
		return nil, &retryError{fmt.Errorf("%w: %d connections open, at most %d (--max-conns)", ErrServerFull, s.lim.MaxConns, s.lim.MaxConns), 5 * time.Second}
	case ip != "" && s.lim.MaxConnsPerIP >= 0 && s.perIP[ip] >= s.lim.MaxConnsPerIP:
		s.mu.Unlock()
		return nil, &retryError{fmt.Errorf("%w: %d connections from %s, at most %d per address (--max-conns-per-ip)", ErrTooManyConns, s.perIP[ip], ip, s.lim.MaxConnsPerIP), 5 * time.Second}
	case user != "" && s.lim.MaxConnsPerUser >= 0 && s.perUser[user] >= s.lim.MaxConnsPerUser:
		s.mu.Unlock()
		return nil, &retryError{fmt.Errorf("%w: %d connections of user %s, at most %d per user (--max-conns-per-user)", ErrTooManyConns, s.perUser[user], user, s.lim.MaxConnsPerUser), 5 * time.Second}
	}
	s.admitted++
	if ip != "" {
		s.perIP[ip]++
	}
	if user != "" {
		s.perUser[user]++
	}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.admitted--
			if s.perIP[ip]--; ip == "" || s.perIP[ip] <= 0 {
				delete(s.perIP, ip) // the map holds only addresses with open connections
			}
			if user != "" {
				if s.perUser[user]--; s.perUser[user] <= 0 {
					delete(s.perUser, user)
				}
			}
			s.mu.Unlock()
		})
	}, nil
}

// admitUser counts a connection admitted anonymously that has since named its user (STOMP
// CONNECT with a passcode) against MaxConnsPerUser.
func (s *Server) admitUser(user string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lim.MaxConnsPerUser >= 0 && s.perUser[user] >= s.lim.MaxConnsPerUser {
		return nil, &retryError{fmt.Errorf("%w: %d connections of user %s, at most %d per user (--max-conns-per-user)", ErrTooManyConns, s.perUser[user], user, s.lim.MaxConnsPerUser), 5 * time.Second}
	}
	s.perUser[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.perUser[user]--; s.perUser[user] <= 0 {
				delete(s.perUser, user)
			}
			s.mu.Unlock()
		})
	}, nil
}

// admitLongPoll admits a waiting long poll like a streaming connection (it holds a
// subscription as long as one) and counts it in the long-poll gauge.
func (s *Server) admitLongPoll(r *http.Request, user string) (func(), error) {
	admitted, err := s.admit(r, user)
	if err != nil {
		return nil, err
	}
	g := s.m.Connections.WithLabelValues(transports.LongPoll)
	g.Inc()
	return func() { g.Dec(); admitted() }, nil
}

// keyedLimiter is a token bucket per key (a user or an address), safe for concurrent use.
// Buckets that have refilled are forgotten, so the map holds only keys active within the last
// burst/rate seconds.
type keyedLimiter struct {
	rate, burst float64

	mu        sync.Mutex
	buckets   map[string]*rateLimiter // guarded by mu
	lastSweep time.Time               // guarded by mu
}

func newKeyedLimiter(rate float64, burst int) *keyedLimiter {
	return &keyedLimiter{rate: rate, burst: float64(burst), buckets: make(map[string]*rateLimiter)}
}

// allow takes a token from key's bucket; when there is none it says how long until one is.
func (k *keyedLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	return k.allowN(key, now, 1)
}

// allowN takes n tokens from key's bucket, or none when there are fewer; then it says how long
// until there are.
func (k *keyedLimiter) allowN(key string, now time.Time, n int) (bool, time.Duration) {
	if k.rate < 0 {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Sub(k.lastSweep) > 10*time.Second {
		k.lastSweep = now
		for key, b := range k.buckets {
			if b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst {
				delete(k.buckets, key)
			}
		}
	}
	b := k.buckets[key]
	if b == nil {
		b = &rateLimiter{rate: k.rate, burst: k.burst, tokens: k.burst}
		k.buckets[key] = b
	}
	if b.allowN(now, n) {
		return true, 0
	}
	return false, time.Duration((float64(n) - b.tokens) / b.rate * float64(time.Second))
}

// size is how many buckets are kept.
func (k *keyedLimiter) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// allowHTTPPublish applies the HTTP publish rate to the request's user, or to its address
// when anonymous.
func (s *Server) allowHTTPPublish(r *http.Request, user string) error {
	ip := addrKey(s.clientIP(r))
	key, who := "a:"+ip, "address "+ip
	if user != "" {
		key, who = "u:"+user, "user "+user
	}
	ok, wait := s.pubRate.allow(key, time.Now())
	if ok {
		return nil
	}
	return &retryError{fmt.Errorf("%w: at most %g publishes per second per %s over HTTP (--http-pub-rate)", ErrRateLimited, s.lim.HTTPPubRate, who), wait}
}

// AllowLoginFrom takes a token of the login rate of r's address (an IPv6 /64, --login-rate)
// before anything of the request is read: a flood of attempts is refused for the cost of its
// request line and headers. A refusal wraps ErrRateLimited and says when to retry.
func (s *Server) AllowLoginFrom(r *http.Request) error {
	addr := addrKey(s.clientIP(r))
	if ok, wait := s.loginRate.allow("a:"+addr, time.Now()); !ok {
		return &retryError{fmt.Errorf("%w: at most %g login attempts per second from address %s (--login-rate)", ErrRateLimited, s.lim.LoginRate, addr), wait}
	}
	return nil
}

// AllowLogin admits one password check of user, whose request r AllowLoginFrom admitted, and
// returns done, to be called with the check's outcome. Only failed checks take a token of the
// user name's login rate (--login-rate), and that rate refuses only addresses that failed for
// the name within loginFailMemory: a flood of wrong passwords for ann from some addresses
// cannot lock ann out from another, while the flood itself gets no more guesses than the rate.
// Then the check waits for a place among those running at once (half the CPUs), so that
// bcrypt cannot take every core. A refusal wraps ErrRateLimited and says when to retry.
func (s *Server) AllowLogin(r *http.Request, user string) (done func(ok bool), err error) {
	now := time.Now()
	pair := user + "\x00" + addrKey(s.clientIP(r))
	if s.loginFailed.failedWithin(pair, now) {
		if ok, wait := s.loginRate.peek("u:"+user, now); !ok {
			return nil, &retryError{fmt.Errorf("%w: at most %g failed login attempts per second for user %q (--login-rate)", ErrRateLimited, s.lim.LoginRate, user), wait}
		}
	}
	t := time.NewTimer(maxLoginWait)
	defer t.Stop()
	select {
	case s.checking <- struct{}{}:
	case <-t.C:
		return nil, &retryError{fmt.Errorf("%w: %d password checks running, try again", ErrRateLimited, cap(s.checking)), time.Second}
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return func(ok bool) {
		<-s.checking
		if !ok {
			now := time.Now()
			s.loginRate.allow("u:"+user, now)
			s.loginFailed.allow(pair, now)
		}
	}, nil
}

// maxLoginWait bounds how long a password check waits for a place among those running.
const maxLoginWait = 5 * time.Second

// loginFailMemory is how long an address that failed a login for a name is remembered as one.
const loginFailMemory = time.Minute

// failedWithin reports whether key's bucket (rate 1/loginFailMemory, burst 1) was taken from
// within the last loginFailMemory.
func (k *keyedLimiter) failedWithin(key string, now time.Time) bool {
	ok, _ := k.peek(key, now)
	return !ok
}

// peek reports whether key's bucket holds a token, without taking it, and if not how long
// until it does.
func (k *keyedLimiter) peek(key string, now time.Time) (bool, time.Duration) {
	if k.rate < 0 {
		return true, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		return true, 0
	}
	tokens := min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	if tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - tokens) / b.rate * float64(time.Second))
}

// maxTarpit bounds how long a refused attempt's answer is held (Tarpit).
const maxTarpit = time.Second

// Tarpit holds the answer to a request refused by a rate (err a retryError) until the client
// could retry, at most maxTarpit, or until it leaves. An HTTP/1.1 client sends nothing more on a
// connection waiting for an answer, so a flood of refused attempts slows to one per connection
// per wait, instead of costing the server a request handled at once; a waiting request holds
// a goroutine and a timer, and counts toward --max-conns-per-ip like any connection.
func Tarpit(r *http.Request, err error) {
	var re *retryError
	if !errors.As(err, &re) || !errors.Is(err, ErrRateLimited) {
		return
	}
	t := time.NewTimer(min(re.after, maxTarpit))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// Origins says which browser origins may open WebSocket, STOMP and SSE connections and get
// CORS headers. A request without an Origin header (a backend, k6, stomp.py) is not a
// browser's and is always let through.
type Origins struct {
	// Allowed lists origins (scheme://host[:port]); "*" allows any, and a host starting with
	// "*." any subdomain of the rest (https://*.example.com).
	Allowed []string
	// Localhost also allows http(s) origins on localhost, 127.0.0.1 and [::1]: open dev mode.
	Localhost bool
}

// allowed reports whether a browser on origin may talk to the server at host (the request's
// Host): its own host always may.
func (o Origins) allowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (sandboxed frames, file: pages) and anything unparsable
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	if o.Localhost {
		switch u.Hostname() {
		case "localhost", "127.0.0.1", "::1":
			return true
		}
	}
	for _, a := range o.Allowed {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
		scheme, pattern, ok := strings.Cut(a, "://*.")
		if ok && scheme == u.Scheme && strings.HasSuffix(strings.ToLower(u.Host), "."+strings.ToLower(pattern)) {
			return true
		}
	}
	return false
}

// checkOrigin refuses a browser request from an origin that is not allowed.
func (s *Server) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || s.origins.allowed(origin, r.Host) {
		return nil
	}
	return fmt.Errorf("%w: origin %q may not connect: the server allows its own host and --allowed-origins", ErrForbidden, origin)
}

// CORS adds CORS headers to answers for allowed cross-origin browsers, and answers their
// preflight requests. Other origins get no CORS headers, so browsers keep them out.
func (s *Server) CORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !s.origins.allowed(origin, r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// BodyDeadline bounds the time to read a request's body to BodyTimeout, so a client that
// trickles a body cannot hold a connection and its handler. It is a read deadline on the
// connection for that request only: net/http sets its own again for the next request, and
// requests without a body (SSE, WebSocket upgrades) are left alone, being long-lived.
func (s *Server) BodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.lim.BodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
