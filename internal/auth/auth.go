// Package auth checks the identity tokens every transport accepts: standard JWTs (RFC 7519)
// that an application's backend mints with any JWT library, verified with golang-jwt. HS256,
// HS384 and HS512 take a shared secret; RS256/384/512 and ES256/384 take public keys, from PEM
// files or from a JWKS URL (fetched, cached, refetched for an unknown kid at a bounded rate).
//
// A token's `sub` is the user and `exp` is required; `nbf` and `iat` are honoured, `iss` and
// `aud` checked when configured. An optional claim, `rtlab`, narrows what the user may do (see
// Grants). The package also signs the tokens of open dev mode and of configured logins
// (Signer), checks configured passwords (Users) and remembers revoked tokens (Revocations).
package auth

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// Errors of Verify; test with errors.Is. Transports map all of them to "unauthorized" and send
// the wrapped text as the reason: it names what was wrong, never a key.
var (
	// ErrMalformed: the string is not a JWT (three base64url parts of JSON), or is too long.
	ErrMalformed = errors.New("auth: malformed token")
	// ErrBadSignature: the signature does not verify with any configured key, or the
	// algorithm is not one the configured keys allow.
	ErrBadSignature = errors.New("auth: bad token signature")
	// ErrExpired: the token's exp has passed.
	ErrExpired = errors.New("auth: token expired")
	// ErrNotYetValid: the token's nbf (or iat) lies in the future.
	ErrNotYetValid = errors.New("auth: token not valid yet")
	// ErrBadClaims: a required claim is missing or wrong: no exp, no or a bad sub, another
	// issuer or audience than configured, a malformed rtlab claim.
	ErrBadClaims = errors.New("auth: bad token claims")
	// ErrRevoked: the token was genuine but its owner logged out.
	ErrRevoked = errors.New("auth: token revoked")
	// ErrBadUser: a user name is empty, too long or has a character outside [A-Za-z0-9_.:@-].
	ErrBadUser = errors.New("auth: bad user name")
	// ErrNoKey: no key could be found for the token (unknown kid, JWKS unreachable).
	ErrNoKey = errors.New("auth: no key for token")
)

// Limits.
const (
	// MaxUser is the longest user name (sub), in bytes.
	MaxUser = 64
	// MaxToken is the longest token accepted, in bytes; longer strings are refused unparsed.
	MaxToken = 8 << 10
	// MinSecret is the shortest HMAC secret accepted. Shorter secrets can be brute-forced
	// offline from a single token.
	MinSecret = 16
	// MaxPatterns bounds each list of the rtlab claim.
	MaxPatterns = 64
)

// Claims is what a verified token says.
type Claims struct {
	User     string
	ID       string    // what revocation names: the jti, or a digest of the token when it has none
	IssuedAt time.Time // zero when the token has no iat
	Expires  time.Time // the token is refused from this instant on
	Grants   Grants
}

// Grants is the optional `rtlab` claim: what the backend allows this user beyond (or instead
// of) the server's defaults. Each entry is a topic pattern (see Match).
//
//	"rtlab": {"subscribe": ["chat/team-42", "location/*"], "publish": ["chat/team-42"],
//	          "rooms": ["chat/team-42"]}
//
// Subscribe, when present, is the only topics the user may subscribe to and read (history,
// polls, member lists); the user's own notify/{sub} stays readable. Publish, when present, is
// the only topics the user may publish on. Rooms are members-only chat rooms the user belongs to
// on the backend's word: the room becomes members-only when such a user uses it, and the user
// is admitted without the owner's invitation. Own are members-only rooms the user owns on the
// backend's word: the only way besides the server API to create a members-only room (its first
// ENTER creates it), or to take over an open room of that name. Absent lists restrict nothing.
type Grants struct {
	Subscribe []string `json:"subscribe,omitempty"`
	Publish   []string `json:"publish,omitempty"`
	Rooms     []string `json:"rooms,omitempty"`
	Own       []string `json:"own,omitempty"`
}

// validate checks the lists' sizes and patterns.
func (g *Grants) validate() error {
	for name, list := range map[string][]string{"subscribe": g.Subscribe, "publish": g.Publish, "rooms": g.Rooms, "own": g.Own} {
		if len(list) > MaxPatterns {
			return fmt.Errorf("rtlab.%s has %d patterns, at most %d", name, len(list), MaxPatterns)
		}
		for _, p := range list {
			if err := ValidPattern(p); err != nil {
				return fmt.Errorf("rtlab.%s: %w", name, err)
			}
		}
	}
	return nil
}

// MayRead reports whether the grants let the user read topic (nil Subscribe: yes).
func (g *Grants) MayRead(topic string) bool {
	return g.Subscribe == nil || MatchAny(g.Subscribe, topic)
}

// MayPublish reports whether the grants let the user publish on topic (nil Publish: yes).
func (g *Grants) MayPublish(topic string) bool { return g.Publish == nil || MatchAny(g.Publish, topic) }

// InRoom reports whether the backend named topic as a members-only room of the user (owned or not).
func (g *Grants) InRoom(topic string) bool { return MatchAny(g.Rooms, topic) || g.Owns(topic) }

// Owns reports whether the backend named the user owner of the members-only room topic.
func (g *Grants) Owns(topic string) bool { return MatchAny(g.Own, topic) }

// ValidPattern checks a topic pattern: 1–200 characters of topic characters and '*', where
// '*' matches within one segment (as path.Match), and a pattern ending in "**" after a '/'
// (or alone) matches every topic starting with what comes before it.
func ValidPattern(p string) error {
	if p == "" || len(p) > 200 {
		return fmt.Errorf("pattern %q: length %d, want 1 to 200", p, len(p))
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case strings.IndexByte("_.:@/-*", c) >= 0:
		default:
			return fmt.Errorf("pattern %q: character %q is not allowed", p, c)
		}
	}
	if prefix, ok := strings.CutSuffix(p, "**"); ok {
		if strings.Contains(prefix, "*") || (prefix != "" && !strings.HasSuffix(prefix, "/")) {
			return fmt.Errorf("pattern %q: ** only ends a pattern, after a / and with no other *", p)
		}
	} else if strings.Contains(p, "**") {
		return fmt.Errorf("pattern %q: ** only ends a pattern", p)
	}
	return nil
}

// Match reports whether topic matches pattern (see ValidPattern). Invalid patterns match
// nothing.
func Match(pattern, topic string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "**"); ok {
		return !strings.Contains(prefix, "*") && strings.HasPrefix(topic, prefix) && len(topic) > len(prefix)
	}
	if !strings.Contains(pattern, "*") {
		return pattern == topic
	}
	ok, err := path.Match(pattern, topic)
	return ok && err == nil
}

// MatchAny reports whether topic matches one of patterns.
func MatchAny(patterns []string, topic string) bool {
	for _, p := range patterns {
		if Match(p, topic) {
			return true
		}
	}
	return false
}

// ValidUser reports whether name can be a user: 1–64 bytes of [A-Za-z0-9_.:@-]. The set is
// small on purpose: names appear in topics (notify/{user}), logs and headers without escaping.
func ValidUser(name string) error {
	if len(name) == 0 || len(name) > MaxUser {
		return fmt.Errorf("%w: length %d, want 1 to %d", ErrBadUser, len(name), MaxUser)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == '@', c == '-', c == ':':
		default:
			return fmt.Errorf("%w: character %d is not one of A-Z a-z 0-9 _ . : @ -", ErrBadUser, i)
		}
	}
	return nil
}
