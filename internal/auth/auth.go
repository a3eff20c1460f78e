// Package auth issues and checks the signed login tokens every transport accepts.
//
// A token is two base64url (unpadded) parts joined by a dot: a small binary payload (version,
// issued-at, expiry, a random token id, the user name) and its HMAC-SHA256. Only the characters
// [A-Za-z0-9_-.] occur, so a token travels unescaped in a query string, a cookie, an
// Authorization header and a STOMP header. The server keeps no session state: any node with the
// same secret verifies any token. Logout is the exception: Revoke remembers a token's id in this
// process until the token would have expired anyway.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"
)

// Errors returned by Verify and Revoke; test with errors.Is. Transports map all of them to
// "unauthorized"; the distinction is for logs and metrics, so tell clients no more than that.
var (
	// ErrMalformed means the string is not a token this package could have written.
	ErrMalformed = errors.New("auth: malformed token")
	// ErrBadSignature means the token is well formed but was not signed with this secret:
	// forged, altered, or issued by a server with another secret.
	ErrBadSignature = errors.New("auth: bad token signature")
	// ErrExpired means the token was genuine but its lifetime is over; the client logs in again.
	ErrExpired = errors.New("auth: token expired")
	// ErrRevoked means the token was genuine but its owner logged out.
	ErrRevoked = errors.New("auth: token revoked")
	// ErrBadUser means a user name is empty, too long or has a character outside [A-Za-z0-9_.@-].
	ErrBadUser = errors.New("auth: bad user name")
)

// Limits of the token format.
const (
	// MaxUser is the longest user name, in bytes.
	MaxUser = 64
	// MinSecret is the shortest secret New accepts. Shorter secrets can be brute-forced offline
	// from a single token.
	MinSecret = 16
	// DefaultTTL is a token's lifetime when Config.TTL is zero.
	DefaultTTL = 24 * time.Hour

	version   = 1
	idLen     = 16                 // random token id, 128 bits: never repeats in practice
	fixedLen  = 1 + 8 + 8 + idLen  // version, issued-at ms, expires ms, id
	macLen    = sha256.Size        // full HMAC-SHA256; truncating saves 11 chars, not worth it
	maxPayRaw = fixedLen + MaxUser // longest decoded payload
	maxPayEnc = (maxPayRaw*8 + 5) / 6
	macEnc    = (macLen*8 + 5) / 6
	maxToken  = maxPayEnc + 1 + macEnc // longest token string
	keyLabel  = "rtlab/auth/token/v1"
)

var b64 = base64.RawURLEncoding.Strict()

// Claims is what a token says: who, since when, until when, and which token (for logout).
type Claims struct {
	User     string
	ID       string // random token id, base64url; unique per Issue
	IssuedAt time.Time
	Expires  time.Time // the token is refused from this instant on
}

// Config configures a Signer.
type Config struct {
	// Secret signs and verifies tokens. At least MinSecret bytes; every node of a cluster needs
	// the same one. Changing it logs everyone out.
	Secret []byte
	// TTL is how long an issued token is valid. Zero means 24h; otherwise at least 1s.
	TTL time.Duration
	// Now returns the current time. Nil means time.Now; tests set it.
	Now func() time.Time
}

// Signer issues and verifies tokens. It is safe for concurrent use.
type Signer struct {
	key []byte // derived from Config.Secret; immutable
	ttl time.Duration
	now func() time.Time
	// random fills token ids: crypto/rand.Read, or a deterministic source in fuzz tests, whose
	// worker processes must issue the same tokens as the coordinator.
	random func([]byte) (int, error)

	macs sync.Pool // of hash.Hash keyed with key; hmac.New allocates ~1 KB each call

	mu        sync.RWMutex
	revoked   map[[idLen]byte]int64 // token id → expiry (unix ms); guarded by mu
	nextPrune int64                 // unix ms when Revoke next drops expired entries; guarded by mu
}

// New returns a Signer for cfg. It fails if the secret is shorter than MinSecret bytes or the
// TTL is negative or under a second, so a misconfigured server refuses to start.
func New(cfg Config) (*Signer, error) {
	if len(cfg.Secret) < MinSecret {
		return nil, fmt.Errorf("auth: secret is %d bytes, need at least %d", len(cfg.Secret), MinSecret)
	}
	switch {
	case cfg.TTL == 0:
		cfg.TTL = DefaultTTL
	case cfg.TTL < time.Second:
		return nil, fmt.Errorf("auth: token TTL %v is under 1s", cfg.TTL)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Derive the signing key so the configured secret, which operators may reuse elsewhere,
	// never signs anything directly.
	m := hmac.New(sha256.New, cfg.Secret)
	m.Write([]byte(keyLabel))
	s := &Signer{
		key:     m.Sum(nil),
		ttl:     cfg.TTL,
		now:     cfg.Now,
		random:  rand.Read,
		revoked: make(map[[idLen]byte]int64),
	}
	s.macs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s, nil
}

// TTL returns how long issued tokens are valid, e.g. for a cookie's Max-Age.
func (s *Signer) TTL() time.Duration { return s.ttl }

// Issue returns a new token for user and the claims it carries. Times have millisecond
// precision, the same as Verify returns. It fails only for an invalid user name.
func (s *Signer) Issue(user string) (string, Claims, error) {
	if err := ValidUser(user); err != nil {
		return "", Claims{}, err
	}
	now := s.now().UnixMilli()
	exp := now + s.ttl.Milliseconds()

	var payload [maxPayRaw]byte
	p := payload[:fixedLen+len(user)]
	p[0] = version
	binary.BigEndian.PutUint64(p[1:9], uint64(now))
	binary.BigEndian.PutUint64(p[9:17], uint64(exp))
	id := p[17:fixedLen]
	if _, err := s.random(id); err != nil {
		return "", Claims{}, fmt.Errorf("auth: token id: %w", err)
	}
	copy(p[fixedLen:], user)

	tok := make([]byte, 0, maxToken)
	tok = b64.AppendEncode(tok, p)
	signed := len(tok)
	tok = append(tok, '.')
	tok = b64.AppendEncode(tok, s.mac(tok[:signed]))

	return string(tok), Claims{
		User:     user,
		ID:       b64.EncodeToString(id),
		IssuedAt: time.UnixMilli(now),
		Expires:  time.UnixMilli(exp),
	}, nil
}

// Verify checks token and returns its claims. It fails with ErrMalformed, ErrBadSignature,
// ErrExpired or ErrRevoked (possibly wrapped). The signature is checked in constant time before
// anything in the payload is trusted.
func (s *Signer) Verify(token string) (Claims, error) {
	c, id, err := s.verify(token)
	if err != nil {
		return Claims{}, err
	}
	s.mu.RLock()
	_, revoked := s.revoked[id]
	s.mu.RUnlock()
	if revoked {
		return Claims{}, ErrRevoked
	}
	return c, nil
}

// Revoke refuses token from now on, until it expires (logout). Revoking an expired or already
// revoked token does nothing and succeeds, so logout is idempotent; a token that does not verify
// is an error, so nobody can fill the revocation list with junk. Revocations live in this
// process only: another node, or this one after a restart, still accepts the token until it
// expires.
func (s *Signer) Revoke(token string) error {
	c, id, err := s.verify(token)
	if errors.Is(err, ErrExpired) {
		return nil
	}
	if err != nil {
		return err
	}
	now := s.now().UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	// Drop entries whose tokens have expired, at most once a minute (amortized O(1) per
	// Revoke), so memory is bounded by logouts within one TTL.
	if now >= s.nextPrune {
		for k, exp := range s.revoked {
			if exp <= now {
				delete(s.revoked, k)
			}
		}
		s.nextPrune = now + time.Minute.Milliseconds()
	}
	s.revoked[id] = c.Expires.UnixMilli()
	return nil
}

// revokedLen reports how many revocations are remembered; for tests.
func (s *Signer) revokedLen() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.revoked)
}

// verify checks everything but revocation.
func (s *Signer) verify(token string) (Claims, [idLen]byte, error) {
	var id [idLen]byte
	if len(token) > maxToken {
		return Claims{}, id, fmt.Errorf("%w: %d bytes", ErrMalformed, len(token))
	}
	dot := -1
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c == '.':
			if dot >= 0 {
				return Claims{}, id, fmt.Errorf("%w: more than one dot", ErrMalformed)
			}
			dot = i
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			// Checked here because the base64 decoder skips CR and LF, which would let two
			// different strings verify as one token.
			return Claims{}, id, fmt.Errorf("%w: bad character at %d", ErrMalformed, i)
		}
	}
	if dot < 0 {
		return Claims{}, id, fmt.Errorf("%w: no dot", ErrMalformed)
	}
	if len(token)-dot-1 != macEnc || dot > maxPayEnc {
		return Claims{}, id, fmt.Errorf("%w: bad part lengths", ErrMalformed)
	}
	var sig [macLen]byte
	n, err := b64.Decode(sig[:], []byte(token[dot+1:]))
	if err != nil || n != macLen {
		return Claims{}, id, fmt.Errorf("%w: bad signature encoding", ErrMalformed)
	}
	if !hmac.Equal(s.mac([]byte(token[:dot])), sig[:]) {
		return Claims{}, id, ErrBadSignature
	}

	// The payload is ours from here on; the checks below catch only our own bugs or a key
	// shared with a server that writes another format.
	var buf [maxPayRaw]byte // enough: dot <= maxPayEnc
	n, err = b64.Decode(buf[:], []byte(token[:dot]))
	if err != nil || n < fixedLen+1 || buf[0] != version {
		return Claims{}, id, fmt.Errorf("%w: bad payload", ErrMalformed)
	}
	p := buf[:n]
	user := string(p[fixedLen:])
	if ValidUser(user) != nil {
		return Claims{}, id, fmt.Errorf("%w: bad user in payload", ErrMalformed)
	}
	iat := int64(binary.BigEndian.Uint64(p[1:9]))
	exp := int64(binary.BigEndian.Uint64(p[9:17]))
	copy(id[:], p[17:fixedLen])
	c := Claims{
		User:     user,
		ID:       b64.EncodeToString(id[:]),
		IssuedAt: time.UnixMilli(iat),
		Expires:  time.UnixMilli(exp),
	}
	if s.now().UnixMilli() >= exp {
		return Claims{}, id, fmt.Errorf("%w at %s", ErrExpired, c.Expires.UTC().Format(time.RFC3339))
	}
	return c, id, nil
}

// mac returns HMAC-SHA256(key, msg).
func (s *Signer) mac(msg []byte) []byte {
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(msg)
	sum := m.Sum(make([]byte, 0, macLen))
	s.macs.Put(m)
	return sum
}

// ValidUser reports whether name can be a user: 1–64 bytes of [A-Za-z0-9_.@-]. The set is
// small on purpose: names appear in topics (notify/{user}), logs and headers without escaping.
func ValidUser(name string) error {
	if len(name) == 0 || len(name) > MaxUser {
		return fmt.Errorf("%w: length %d, want 1 to %d", ErrBadUser, len(name), MaxUser)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == '@', c == '-':
		default:
			return fmt.Errorf("%w: character %d is not one of A-Z a-z 0-9 _ . @ -", ErrBadUser, i)
		}
	}
	return nil
}
