package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Config says which tokens a Verifier accepts. At least one of Secret, PublicKeys and JWKS.
type Config struct {
	// Secret verifies HS256, HS384 and HS512; at least MinSecret bytes. Every node needs the
	// same one.
	Secret []byte
	// PublicKeys verify RS256/384/512 (*rsa.PublicKey, at least 2048 bits) and ES256/ES384
	// (*ecdsa.PublicKey on P-256 or P-384). A token is checked against each key of its kind.
	PublicKeys []crypto.PublicKey
	// JWKS supplies public keys by kid.
	JWKS *JWKS
	// Issuer and Audience, when set, must match the token's iss and one of its aud.
	Issuer, Audience string
	// Leeway tolerates clock skew between the backend and this server on exp, nbf and iat.
	// Zero means none.
	Leeway time.Duration
	// Revocations, when set, refuses the tokens it holds with ErrRevoked.
	Revocations *Revocations
	// Cache is how many verified tokens are remembered (for CacheTTL at most, never past
	// their exp), so a token sent with every request is not checked every time. Zero: none.
	Cache int
	// Now returns the current time. Nil means time.Now; tests set it.
	Now func() time.Time
}

// Verifier checks tokens. It is safe for concurrent use.
type Verifier struct {
	secret  []byte
	rsaKeys []jwt.VerificationKey
	ecKeys  []jwt.VerificationKey
	jwks    *JWKS
	revoked *Revocations
	now     func() time.Time
	parser  *jwt.Parser
	cache   *verified // nil: none
}

// tokenClaims is the JSON of a token's claims as this package reads it.
type tokenClaims struct {
	jwt.RegisteredClaims
	Rtlab *Grants `json:"rtlab,omitempty"`
}

// New returns a Verifier for cfg, or an error naming what is wrong with it.
func New(cfg Config) (*Verifier, error) {
	v := &Verifier{jwks: cfg.JWKS, revoked: cfg.Revocations, now: cfg.Now, cache: newVerified(cfg.Cache)}
	if v.now == nil {
		v.now = time.Now
	}
	var methods []string
	if cfg.Secret != nil {
		if len(cfg.Secret) < MinSecret {
			return nil, fmt.Errorf("auth: secret is %d bytes, need at least %d", len(cfg.Secret), MinSecret)
		}
		v.secret = cfg.Secret
		methods = append(methods, "HS256", "HS384", "HS512")
	}
	for i, k := range cfg.PublicKeys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			if k.N.BitLen() < 2048 {
				return nil, fmt.Errorf("auth: public key %d: RSA key of %d bits, need at least 2048", i+1, k.N.BitLen())
			}
			v.rsaKeys = append(v.rsaKeys, k)
		case *ecdsa.PublicKey:
			if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
				return nil, fmt.Errorf("auth: public key %d: ECDSA key on %s, want P-256 or P-384", i+1, k.Curve.Params().Name)
			}
			v.ecKeys = append(v.ecKeys, k)
		default:
			return nil, fmt.Errorf("auth: public key %d: %T, want an RSA or ECDSA public key", i+1, k)
		}
	}
	if len(v.rsaKeys) > 0 || cfg.JWKS != nil {
		methods = append(methods, "RS256", "RS384", "RS512")
	}
	if len(v.ecKeys) > 0 || cfg.JWKS != nil {
		methods = append(methods, "ES256", "ES384")
	}
	if len(methods) == 0 {
		return nil, errors.New("auth: no secret, public key or JWKS to verify tokens with")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway), jwt.WithTimeFunc(func() time.Time { return v.now() }),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// keyFor is the parser's key function: the secret for HMAC, the configured keys of the
// token's kind otherwise. The algorithm was already checked against the configured ones, and
// an HMAC method never gets a public key (nor the reverse), which rules out key confusion.
func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	switch t.Method.(type) {
	case *jwt.SigningMethodHMAC:
		if v.secret == nil {
			return nil, fmt.Errorf("%w: %s needs a secret", ErrNoKey, t.Method.Alg())
		}
		return v.secret, nil
	case *jwt.SigningMethodRSA, *jwt.SigningMethodECDSA:
		if v.jwks != nil {
			kid, _ := t.Header["kid"].(string)
			return v.jwks.Keys(kid, t.Method.Alg())
		}
		keys := v.ecKeys
		if _, ok := t.Method.(*jwt.SigningMethodRSA); ok {
			keys = v.rsaKeys
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("%w: no %s key configured", ErrNoKey, t.Method.Alg())
		}
		return jwt.VerificationKeySet{Keys: keys}, nil
	}
	return nil, fmt.Errorf("%w: algorithm %s", ErrNoKey, t.Method.Alg())
}

// Verify checks token and returns its claims, or an error wrapping one of the package's
// errors with a short reason.
func (v *Verifier) Verify(token string) (Claims, error) {
	if len(token) > MaxToken {
		return Claims{}, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(token), MaxToken)
	}
	if v.cache == nil {
		return v.verify(token)
	}
	key, now := sha256.Sum256([]byte(token)), v.now()
	if c, ok := v.cache.get(key, now); ok {
		if v.revoked != nil && v.revoked.Has(c.ID) {
			return Claims{}, ErrRevoked
		}
		return c, nil
	}
	c, err := v.verify(token)
	if err == nil {
		v.cache.put(key, c, now)
	}
	return c, err
}

// verify checks token's signature and claims.
func (v *Verifier) verify(token string) (Claims, error) {
	var tc tokenClaims
	_, err := v.parser.ParseWithClaims(token, &tc, v.keyFor)
	if err != nil {
		return Claims{}, classify(err)
	}
	if tc.Subject == "" {
		return Claims{}, fmt.Errorf("%w: no sub (the user)", ErrBadClaims)
	}
	if err := ValidUser(tc.Subject); err != nil {
		return Claims{}, fmt.Errorf("%w: sub: %v", ErrBadClaims, err)
	}
	c := Claims{User: tc.Subject, ID: tc.ID, Expires: tc.ExpiresAt.Time}
	if tc.IssuedAt != nil {
		c.IssuedAt = tc.IssuedAt.Time
	}
	if c.ID == "" || len(c.ID) > 128 {
		c.ID = tokenDigest(token)
	}
	if tc.Rtlab != nil {
		if err := tc.Rtlab.validate(); err != nil {
			return Claims{}, fmt.Errorf("%w: %v", ErrBadClaims, err)
		}
		c.Grants = *tc.Rtlab
	}
	if v.revoked != nil && v.revoked.Has(c.ID) {
		return Claims{}, ErrRevoked
	}
	return c, nil
}

// tokenDigest names a token without a jti: the first 128 bits of its SHA-256, base64url.
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// classify maps golang-jwt's errors onto the package's, keeping its text as the reason.
func classify(err error) error {
	var kind error
	switch {
	case errors.Is(err, ErrNoKey):
		return err
	case errors.Is(err, jwt.ErrTokenExpired):
		kind = ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		kind = ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		kind = ErrBadSignature
	case errors.Is(err, jwt.ErrTokenMalformed):
		kind = ErrMalformed
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidIssuer),
		errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenInvalidClaims):
		kind = ErrBadClaims
	default:
		kind = ErrMalformed
	}
	return fmt.Errorf("%w: %v", kind, err)
}

// LoadPublicKeys reads PEM public keys (PKIX "PUBLIC KEY", or "RSA PUBLIC KEY") from path;
// a file may hold several.
func LoadPublicKeys(path string) ([]crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: public key: %w", err)
	}
	keys, err := parsePEMKeys(b)
	if err != nil {
		return nil, fmt.Errorf("auth: public key %s: %w", path, err)
	}
	return keys, nil
}
