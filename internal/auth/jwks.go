package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// JWKS limits.
const (
	// MaxJWKSBytes bounds a JWKS document.
	MaxJWKSBytes = 1 << 20
	// MaxJWKSKeys bounds the keys kept from one document; the rest are ignored.
	MaxJWKSKeys = 100
)

// JWKSConfig configures a JWKS.
type JWKSConfig struct {
	// URL serves the key set (RFC 7517 JSON: {"keys": [...]}).
	URL string
	// MinRefresh is the shortest time between two fetches: a token with an unknown kid makes
	// a fetch at most this often, so junk tokens cannot make the server hammer the URL.
	// Zero means 30 s.
	MinRefresh time.Duration
	// MaxAge is how long a fetched set is used before it is fetched again (when a token is
	// verified). Zero means 1 h.
	MaxAge time.Duration
	// Client fetches; nil means a client with a 5 s timeout.
	Client *http.Client
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// JWKS is a cached key set. It is safe for concurrent use.
type JWKS struct {
	cfg JWKSConfig

	fetchMu sync.Mutex // one fetch at a time; taken before mu
	mu      sync.RWMutex
	keys    map[string][]jwt.VerificationKey // by kid ("" for keys without one); guarded by mu
	all     []jwt.VerificationKey            // guarded by mu
	fetched time.Time                        // last successful fetch; guarded by mu
	tried   time.Time                        // last attempt; guarded by mu
}

// NewJWKS fetches the key set once, so a wrong URL fails at start.
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = 30 * time.Second
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Hour
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	j := &JWKS{cfg: cfg}
	if err := j.fetch(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// fetch downloads and parses the key set, replacing the cached one on success.
func (j *JWKS) fetch(ctx context.Context) error {
	now := j.cfg.Now()
	j.mu.Lock()
	j.tried = now
	j.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("auth: jwks %s: %w", j.cfg.URL, err)
	}
	res, err := j.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("auth: jwks: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("auth: jwks %s: %s", j.cfg.URL, res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("auth: jwks %s: %w", j.cfg.URL, err)
	}
	if len(body) > MaxJWKSBytes {
		return fmt.Errorf("auth: jwks %s: over %d bytes", j.cfg.URL, MaxJWKSBytes)
	}
	keys, all, err := parseJWKS(body)
	if err != nil {
		return fmt.Errorf("auth: jwks %s: %w", j.cfg.URL, err)
	}
	j.mu.Lock()
	j.keys, j.all, j.fetched = keys, all, now
	j.mu.Unlock()
	return nil
}

// parseJWKS keeps the set's RSA and ECDSA public keys meant for signatures. A key that does
// not parse (another kty, a bad curve point) is skipped rather than failing the whole set.
func parseJWKS(body []byte) (map[string][]jwt.VerificationKey, []jwt.VerificationKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	keys := make(map[string][]jwt.VerificationKey)
	var all []jwt.VerificationKey
	for _, raw := range doc.Keys {
		if len(all) == MaxJWKSKeys {
			break
		}
		var k jose.JSONWebKey
		if k.UnmarshalJSON(raw) != nil || !k.Valid() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		pub := k.Public()
		switch pub.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey:
		default:
			continue
		}
		keys[k.KeyID] = append(keys[k.KeyID], pub.Key)
		all = append(all, pub.Key)
	}
	if len(all) == 0 {
		return nil, nil, errors.New("no usable RSA or ECDSA signing key")
	}
	return keys, all, nil
}

// Keys returns the keys to check a token with kid against. An unknown kid, or a set older
// than MaxAge, fetches the set again, at most once per MinRefresh; a failed fetch keeps the
// old set. A token without kid is checked against every key.
func (j *JWKS) Keys(kid, alg string) (jwt.VerificationKeySet, error) {
	if ks, ok := j.lookup(kid); ok {
		return ks, nil
	}
	j.fetchMu.Lock()
	if ks, ok := j.lookup(kid); ok { // another caller fetched meanwhile
		j.fetchMu.Unlock()
		return ks, nil
	}
	j.mu.RLock()
	due := j.cfg.Now().Sub(j.tried) >= j.cfg.MinRefresh
	j.mu.RUnlock()
	var ferr error
	if due {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ferr = j.fetch(ctx)
		cancel()
	}
	j.fetchMu.Unlock()
	j.mu.RLock()
	defer j.mu.RUnlock()
	ks := j.keys[kid]
	if kid == "" {
		ks = j.all
	}
	if len(ks) == 0 {
		if ferr != nil {
			return jwt.VerificationKeySet{}, fmt.Errorf("%w: kid %q (%s): %v", ErrNoKey, kid, alg, ferr)
		}
		return jwt.VerificationKeySet{}, fmt.Errorf("%w: kid %q (%s) is not in the JWKS", ErrNoKey, kid, alg)
	}
	return jwt.VerificationKeySet{Keys: ks}, nil // stale but usable
}

// lookup answers from the cache when it is fresh and knows kid.
func (j *JWKS) lookup(kid string) (jwt.VerificationKeySet, bool) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.cfg.Now().Sub(j.fetched) >= j.cfg.MaxAge {
		return jwt.VerificationKeySet{}, false
	}
	ks := j.keys[kid]
	if kid == "" {
		ks = j.all
	}
	return jwt.VerificationKeySet{Keys: ks}, len(ks) > 0
}
