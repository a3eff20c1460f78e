package transport

import (
	"fmt"
	"net/http"
	"time"
)

// readLimits are the rates of HTTP reads (short and long polls, history pages, presence,
// member lists): a user's take --read-rate-per-user; an address's (the only one of anonymous
// requests) take --read-rate-per-ip, an address standing for many clients (a NAT, or a load
// test's host).
type readLimits struct {
	user, addr *keyedLimiter
}

func newReadLimits(l Limits) readLimits {
	return readLimits{user: readLimiter(l.ReadRatePerUser), addr: readLimiter(l.ReadRatePerIP)}
}

// readLimiter is a keyed limiter of rate reads per second, burst twice that (at least 10);
// -1 is unlimited.
func readLimiter(rate float64) *keyedLimiter {
	if rate <= 0 {
		return newKeyedLimiter(-1, 0)
	}
	return newKeyedLimiter(rate, max(2*int(rate), 10))
}

// allowRead takes a token for one HTTP read by user (empty when anonymous) from r's address.
// A refused read is answered once it could be retried (Tarpit), so a flood of reads slows to
// one per connection per wait.
func (s *Server) allowRead(r *http.Request, user string) error {
	now := time.Now()
	addr := addrKey(s.clientIP(r))
	var err error
	if ok, wait := s.reads.addr.allow(addr, now); !ok {
		err = &retryError{fmt.Errorf("%w: at most %g reads (polls, history, presence) per second from address %s (--read-rate-per-ip)", ErrRateLimited, s.reads.addr.rate, addr), wait}
	} else if user == "" {
		return nil
	} else if ok, wait := s.reads.user.allow(user, now); !ok {
		err = &retryError{fmt.Errorf("%w: at most %g reads (polls, history, presence) per second for user %s (--read-rate-per-user)", ErrRateLimited, s.lim.ReadRatePerUser, user), wait}
	}
	if err != nil {
		Tarpit(r, err)
	}
	return err
}

// AllowRead is allowRead for the application's reads (member lists, location groups,
// notifications).
func (s *Server) AllowRead(r *http.Request, user string) error { return s.allowRead(r, user) }
