package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultTTL is the lifetime of tokens a Signer issues when its TTL is zero.
const DefaultTTL = 24 * time.Hour

// Signer issues HS256 tokens: open dev mode's (with a per-installation key) and the logins of
// configured users (with the --auth-secret). Backends mint their own tokens; this is for the
// server's own POST /api/login. It is safe for concurrent use.
type Signer struct {
	secret []byte
	ttl    time.Duration
	issuer string
	now    func() time.Time
}

// NewSigner returns a Signer. ttl zero means DefaultTTL; otherwise at least a second. issuer,
// when set, is put in iss (so a Verifier configured with it accepts the tokens).
func NewSigner(secret []byte, ttl time.Duration, issuer string, now func() time.Time) (*Signer, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("auth: secret is %d bytes, need at least %d", len(secret), MinSecret)
	}
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < time.Second:
		return nil, fmt.Errorf("auth: token TTL %v is under 1s", ttl)
	}
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: secret, ttl: ttl, issuer: issuer, now: now}, nil
}

// Issue returns a token for user, valid from now for the Signer's TTL, with a random jti.
func (s *Signer) Issue(user string) (string, Claims, error) {
	if err := ValidUser(user); err != nil {
		return "", Claims{}, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Claims{}, fmt.Errorf("auth: token id: %w", err)
	}
	now := s.now().Truncate(time.Second)
	c := Claims{User: user, ID: base64.RawURLEncoding.EncodeToString(id[:]), IssuedAt: now, Expires: now.Add(s.ttl)}
	rc := jwt.RegisteredClaims{
		Subject: user, ID: c.ID, Issuer: s.issuer,
		IssuedAt: jwt.NewNumericDate(c.IssuedAt), ExpiresAt: jwt.NewNumericDate(c.Expires),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, rc).SignedString(s.secret)
	if err != nil {
		return "", Claims{}, fmt.Errorf("auth: sign: %w", err)
	}
	return tok, c, nil
}
