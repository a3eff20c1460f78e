package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

var testSecret = []byte("0123456789abcdef-test-secret")

// clock is an injectable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

// keys are one RSA and one ECDSA key pair, made once per test binary.
var keys = sync.OnceValue(func() struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
} {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return struct {
		rsa *rsa.PrivateKey
		ec  *ecdsa.PrivateKey
	}{r, e}
})

// mint signs claims with method and key; extra claims are merged in.
func mint(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func std(c *clock, user string, ttl time.Duration) jwt.MapClaims {
	return jwt.MapClaims{"sub": user, "iat": c.Now().Unix(), "exp": c.Now().Add(ttl).Unix()}
}

func newVerifier(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestNewValidatesConfig(t *testing.T) {
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"nothing", Config{}, false},
		{"short secret", Config{Secret: []byte("fifteen-bytes!!")}, false},
		{"16 bytes", Config{Secret: []byte("sixteen-bytes!!!")}, true},
		{"rsa 1024", Config{PublicKeys: []crypto.PublicKey{&small.PublicKey}}, false},
		{"p224", Config{PublicKeys: []crypto.PublicKey{&p224.PublicKey}}, false},
		{"rsa and ec", Config{PublicKeys: []crypto.PublicKey{&keys().rsa.PublicKey, &keys().ec.PublicKey}}, true},
		{"a private key", Config{PublicKeys: []crypto.PublicKey{keys().rsa}}, false},
	} {
		if _, err := New(tc.cfg); (err == nil) != tc.ok {
			t.Errorf("%s: New error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestVerifyAlgorithms(t *testing.T) {
	c := newClock()
	k := keys()
	v := newVerifier(t, Config{Secret: testSecret, PublicKeys: []crypto.PublicKey{&k.rsa.PublicKey, &k.ec.PublicKey}, Now: c.Now})
	for _, tc := range []struct {
		method jwt.SigningMethod
		key    any
	}{
		{jwt.SigningMethodHS256, testSecret}, {jwt.SigningMethodHS384, testSecret}, {jwt.SigningMethodHS512, testSecret},
		{jwt.SigningMethodRS256, k.rsa}, {jwt.SigningMethodRS512, k.rsa}, {jwt.SigningMethodES256, k.ec},
	} {
		tok := mint(t, tc.method, tc.key, std(c, "ann", time.Hour), "")
		got, err := v.Verify(tok)
		if err != nil {
			t.Errorf("%s: %v", tc.method.Alg(), err)
			continue
		}
		if got.User != "ann" || !got.Expires.Equal(c.Now().Add(time.Hour)) || !got.IssuedAt.Equal(c.Now()) {
			t.Errorf("%s: claims %+v", tc.method.Alg(), got)
		}
		if !strings.HasPrefix(got.ID, "sha256:") {
			t.Errorf("%s: id %q: a token without jti is named by its digest", tc.method.Alg(), got.ID)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	c := newClock()
	k := keys()
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	v := newVerifier(t, Config{Secret: testSecret, PublicKeys: []crypto.PublicKey{&k.ec.PublicKey}, Issuer: "https://app.example", Audience: "rtlab", Now: c.Now})
	good := func() jwt.MapClaims {
		m := std(c, "ann", time.Hour)
		m["iss"], m["aud"] = "https://app.example", []string{"rtlab", "other"}
		return m
	}
	with := func(f func(jwt.MapClaims)) jwt.MapClaims { m := good(); f(m); return m }
	pemKey, _ := x509.MarshalPKIXPublicKey(&k.ec.PublicKey)
	for _, tc := range []struct {
		name string
		tok  string
		want error
	}{
		{"good", mint(t, jwt.SigningMethodHS256, testSecret, good(), ""), nil},
		{"no exp", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { delete(m, "exp") }), ""), ErrBadClaims},
		{"expired", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["exp"] = c.Now().Unix() - 1 }), ""), ErrExpired},
		{"nbf ahead", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["nbf"] = c.Now().Unix() + 60 }), ""), ErrNotYetValid},
		{"iat ahead", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["iat"] = c.Now().Unix() + 60 }), ""), ErrNotYetValid},
		{"no sub", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { delete(m, "sub") }), ""), ErrBadClaims},
		{"bad sub", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["sub"] = "a/b" }), ""), ErrBadClaims},
		{"other issuer", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["iss"] = "evil" }), ""), ErrBadClaims},
		{"other audience", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["aud"] = "web" }), ""), ErrBadClaims},
		{"bad rtlab claim", mint(t, jwt.SigningMethodHS256, testSecret, with(func(m jwt.MapClaims) { m["rtlab"] = map[string]any{"subscribe": []string{"a b"}} }), ""), ErrBadClaims},
		{"other secret", mint(t, jwt.SigningMethodHS256, []byte("another-secret-of-enough-bytes"), good(), ""), ErrBadSignature},
		{"other ec key", mint(t, jwt.SigningMethodES256, other, good(), ""), ErrBadSignature},
		// Key confusion: the public key's bytes as an HMAC secret must not verify.
		{"public key as hmac secret", mint(t, jwt.SigningMethodHS256, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pemKey}), good(), ""), ErrBadSignature},
		{"none", mint(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good(), ""), ErrBadSignature},
		{"garbage", "not.a.token", ErrMalformed},
		{"empty", "", ErrMalformed},
		{"huge", strings.Repeat("a", MaxToken+1), ErrMalformed},
	} {
		_, err := v.Verify(tc.tok)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestLeeway(t *testing.T) {
	c := newClock()
	v := newVerifier(t, Config{Secret: testSecret, Leeway: 5 * time.Second, Now: c.Now})
	tok := mint(t, jwt.SigningMethodHS256, testSecret, std(c, "ann", time.Second), "")
	c.Add(3 * time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("within leeway: %v", err)
	}
	c.Add(5 * time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("past leeway: %v", err)
	}
}

func TestGrants(t *testing.T) {
	c := newClock()
	v := newVerifier(t, Config{Secret: testSecret, Now: c.Now})
	m := std(c, "ann", time.Hour)
	m["jti"] = "t-1"
	m["rtlab"] = map[string]any{"subscribe": []string{"chat/team-42", "location/*", "news/**"}, "publish": []string{"chat/team-42"}, "rooms": []string{"chat/team-42"}}
	got, err := v.Verify(mint(t, jwt.SigningMethodHS256, testSecret, m, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "t-1" {
		t.Errorf("id %q, want the jti", got.ID)
	}
	g := got.Grants
	for topic, want := range map[string]bool{"chat/team-42": true, "chat/team-43": false, "location/7": true, "location/7/x": false, "news/a/b": true, "news": false} {
		if g.MayRead(topic) != want {
			t.Errorf("MayRead(%s) = %v", topic, !want)
		}
	}
	if !g.MayPublish("chat/team-42") || g.MayPublish("location/7") || !g.InRoom("chat/team-42") || g.InRoom("chat/lobby") {
		t.Errorf("grants %+v", g)
	}
	var none Grants
	if !none.MayRead("x") || !none.MayPublish("x") || none.InRoom("chat/x") {
		t.Error("absent lists must restrict nothing and admit to no room")
	}
}

func TestPatterns(t *testing.T) {
	for p, ok := range map[string]bool{"a/b": true, "a/*": true, "a/**": true, "**": true, "a**": false, "a/**/b": false, "a/*/**": false, "": false, "a b": false} {
		if (ValidPattern(p) == nil) != ok {
			t.Errorf("ValidPattern(%q) = %v", p, ValidPattern(p))
		}
	}
}

func TestRevocations(t *testing.T) {
	c := newClock()
	r := NewRevocations(2, c.Now)
	v := newVerifier(t, Config{Secret: testSecret, Revocations: r, Now: c.Now})
	s, err := NewSigner(testSecret, time.Hour, "", c.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok, cl, _ := s.Issue("ann")
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(cl.ID, cl.Expires); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked token: %v", err)
	}
	_ = r.Add("b", c.Now().Add(2*time.Hour))
	if err := r.Add("c", c.Now().Add(time.Hour)); !errors.Is(err, ErrTooManyRevocations) {
		t.Fatalf("third revocation in a set of two: %v", err)
	}
	c.Add(time.Hour) // ann's token expired: its entry goes
	if err := r.Add("c", c.Now().Add(time.Hour)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if r.Len() != 2 {
		t.Fatalf("%d entries, want 2", r.Len())
	}
}

func TestLoadPublicKeys(t *testing.T) {
	dir := t.TempDir()
	der, _ := x509.MarshalPKIXPublicKey(&keys().ec.PublicKey)
	b := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&keys().rsa.PublicKey)})...)
	path := filepath.Join(dir, "keys.pem")
	_ = os.WriteFile(path, b, 0o600)
	ks, err := LoadPublicKeys(path)
	if err != nil || len(ks) != 2 {
		t.Fatalf("LoadPublicKeys: %d keys, %v", len(ks), err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})
	_ = os.WriteFile(path, priv, 0o600)
	if _, err := LoadPublicKeys(path); err == nil || !strings.Contains(err.Error(), "never a private key") {
		t.Fatalf("a private key file: %v", err)
	}
}

// jwksServer serves the set's public keys and counts fetches.
func jwksServer(t *testing.T, set *jose.JSONWebKeySet, fetches *atomic.Int64) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestJWKS(t *testing.T) {
	c := newClock()
	k := keys()
	set := &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &k.rsa.PublicKey, KeyID: "r1", Algorithm: "RS256", Use: "sig"},
		{Key: &k.ec.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"},
	}}
	var fetches atomic.Int64
	srv := jwksServer(t, set, &fetches)
	j, err := NewJWKS(context.Background(), JWKSConfig{URL: srv.URL, MinRefresh: time.Minute, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, Config{JWKS: j, Now: c.Now})
	for _, tc := range []struct {
		m   jwt.SigningMethod
		key any
		kid string
	}{{jwt.SigningMethodRS256, k.rsa, "r1"}, {jwt.SigningMethodES256, k.ec, "e1"}, {jwt.SigningMethodES256, k.ec, ""}} {
		if _, err := v.Verify(mint(t, tc.m, tc.key, std(c, "ann", time.Hour), tc.kid)); err != nil {
			t.Errorf("%s kid %q: %v", tc.m.Alg(), tc.kid, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for known kids, want 1", n)
	}
	// HMAC is not accepted when only a JWKS is configured.
	if _, err := v.Verify(mint(t, jwt.SigningMethodHS256, testSecret, std(c, "ann", time.Hour), "")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("HS256 with a JWKS only: %v", err)
	}
	// A new key: the unknown kid fetches once MinRefresh has passed, and not more often.
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tok := mint(t, jwt.SigningMethodES256, k2, std(c, "ann", time.Hour), "e2")
	for range 5 {
		if _, err := v.Verify(tok); !errors.Is(err, ErrNoKey) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches within MinRefresh, want 1", n)
	}
	set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k2.PublicKey, KeyID: "e2", Algorithm: "ES256", Use: "sig"})
	c.Add(time.Minute)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("rotated-in key after MinRefresh: %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
}

func TestJWKSRefusesJunk(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`))
	}))
	defer srv.Close()
	if _, err := NewJWKS(context.Background(), JWKSConfig{URL: srv.URL}); err == nil {
		t.Fatal("a set with no usable key was accepted")
	}
}

func TestUsers(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	u, err := ParseUsers([]byte("# ops\nann:" + string(h) + "\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !u.Check("ann", "s3cret") || u.Check("ann", "wrong") || u.Check("bob", "s3cret") {
		t.Fatal("Check answers wrong")
	}
	for _, bad := range []string{"", "ann", "ann:plain", "a b:" + string(h)} {
		if _, err := ParseUsers([]byte(bad)); err == nil {
			t.Errorf("ParseUsers(%q) accepted", bad)
		}
	}
}

func TestSignerTokensVerify(t *testing.T) {
	c := newClock()
	s, _ := NewSigner(testSecret, time.Minute, "rtlab-login", c.Now)
	v := newVerifier(t, Config{Secret: testSecret, Issuer: "rtlab-login", Now: c.Now})
	tok, cl, err := s.Issue("ann")
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(tok)
	if err != nil || got.User != "ann" || got.ID != cl.ID || !got.Expires.Equal(cl.Expires) {
		t.Fatalf("Verify: %+v %v, issued %+v", got, err, cl)
	}
	if _, _, err := s.Issue("a b"); !errors.Is(err, ErrBadUser) {
		t.Fatalf("Issue with a bad name: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	c := newClock()
	k := keys()
	v := newVerifier(f, Config{Secret: testSecret, PublicKeys: []crypto.PublicKey{&k.ec.PublicKey}, Now: c.Now})
	m := std(c, "ann", time.Hour)
	m["rtlab"] = map[string]any{"subscribe": []string{"chat/**"}}
	f.Add(mint(f, jwt.SigningMethodHS256, testSecret, m, ""))
	f.Add(mint(f, jwt.SigningMethodES256, k.ec, m, "kid"))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbm4ifQ.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, tok string) {
		got, err := v.Verify(tok)
		if err != nil {
			for _, known := range []error{ErrMalformed, ErrBadSignature, ErrExpired, ErrNotYetValid, ErrBadClaims, ErrNoKey} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("Verify(%q): unclassified error %v", tok, err)
		}
		if ValidUser(got.User) != nil || got.Expires.IsZero() || got.ID == "" {
			t.Fatalf("Verify(%q) accepted claims %+v", tok, got)
		}
	})
}

// BenchmarkVerify is the cost of checking one token per algorithm (BENCHMARKS.md).
func BenchmarkVerify(b *testing.B) {
	c := newClock()
	k := keys()
	v := newVerifier(b, Config{Secret: testSecret, PublicKeys: []crypto.PublicKey{&k.rsa.PublicKey, &k.ec.PublicKey}, Now: c.Now})
	cached := newVerifier(b, Config{Secret: testSecret, Now: c.Now, Cache: 10_000})
	for _, tc := range []struct {
		m   jwt.SigningMethod
		key any
	}{{jwt.SigningMethodHS256, testSecret}, {jwt.SigningMethodRS256, k.rsa}, {jwt.SigningMethodES256, k.ec}} {
		m := std(c, "ann", time.Hour)
		m["jti"] = "0123456789abcdef"
		tok := mint(b, tc.m, tc.key, m, "")
		b.Run(tc.m.Alg(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		if tc.m == jwt.SigningMethodHS256 {
			// The same token again, as a poller sends it: remembered (Config.Cache).
			b.Run("HS256-remembered", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cached.Verify(tok); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
