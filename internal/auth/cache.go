package auth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// CacheTTL is how long a verified token is remembered at most: the longest a token signed
// with a key since removed from a JWKS stays accepted.
const CacheTTL = time.Minute

// verified remembers the claims of tokens that verified, so a client that sends its token
// with every request (each poll, each HTTP publish) pays for the signature about once a
// minute rather than every time: at 10,000 long pollers that is 30,000 checks a second. A
// remembered token is still refused once it expires or is revoked. Keys are the tokens'
// SHA-256, so memory is bounded by max, whatever the tokens' length.
type verified struct {
	max int

	mu sync.Mutex
	m  map[[sha256.Size]byte]verifiedEntry // guarded by mu
}

type verifiedEntry struct {
	c     Claims
	until time.Time // remembered until then: CacheTTL after the check, never past exp
}

func newVerified(max int) *verified {
	if max <= 0 {
		return nil
	}
	return &verified{max: max, m: make(map[[sha256.Size]byte]verifiedEntry)}
}

// get returns the remembered claims of token, if it verified before and is not due again.
func (v *verified) get(key [sha256.Size]byte, now time.Time) (Claims, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[key]
	if !ok {
		return Claims{}, false
	}
	if !now.Before(e.until) {
		delete(v.m, key)
		return Claims{}, false
	}
	return e.c, true
}

// put remembers c for the token with digest key. When full it forgets one token at random
// (a map's iteration order), which costs the owner of that one a signature check.
func (v *verified) put(key [sha256.Size]byte, c Claims, now time.Time) {
	until := now.Add(CacheTTL)
	if !c.Expires.IsZero() && c.Expires.Before(until) {
		until = c.Expires
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[key]; !ok && len(v.m) >= v.max {
		for k := range v.m {
			delete(v.m, k)
			break
		}
	}
	v.m[key] = verifiedEntry{c: c, until: until}
}

// len is how many tokens are remembered.
func (v *verified) len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.m)
}
