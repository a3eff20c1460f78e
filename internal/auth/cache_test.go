package auth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestCachedTokensAreStillChecked: a token remembered after it verified is refused once it
// expires or is revoked, a token differing from it in one byte of its signature is checked on
// its own, and one verified by a key that is gone is refused at most CacheTTL later.
func TestCachedTokensAreStillChecked(t *testing.T) {
	c := newClock()
	rev := NewRevocations(10, c.Now)
	v := newVerifier(t, Config{Secret: testSecret, Revocations: rev, Now: c.Now, Cache: 100})

	short := mint(t, jwt.SigningMethodHS256, testSecret, std(c, "ann", 30*time.Second), "")
	for range 3 {
		if got, err := v.Verify(short); err != nil || got.User != "ann" {
			t.Fatalf("verify: %v, %v", got, err)
		}
	}
	forged := short[:len(short)-2] + map[bool]string{true: "AA", false: "BB"}[strings.HasSuffix(short, "BB")]
	if _, err := v.Verify(forged); !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformed) {
		t.Fatalf("a token with another signature: %v, want it refused", err)
	}
	c.Add(31 * time.Second)
	if _, err := v.Verify(short); !errors.Is(err, ErrExpired) {
		t.Fatalf("a remembered token past its exp: %v, want ErrExpired", err)
	}

	m := std(c, "bob", time.Hour)
	m["jti"] = "bob-1"
	long := mint(t, jwt.SigningMethodHS256, testSecret, m, "")
	if _, err := v.Verify(long); err != nil {
		t.Fatal(err)
	}
	if err := rev.Add("bob-1", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(long); !errors.Is(err, ErrRevoked) {
		t.Fatalf("a remembered token revoked: %v, want ErrRevoked", err)
	}

	// A verifier whose secret changed stands for a key removed from a JWKS: what it remembers
	// expires after CacheTTL.
	m = std(c, "cy", time.Hour)
	tok := mint(t, jwt.SigningMethodHS256, testSecret, m, "")
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	v.secret = []byte(strings.Repeat("k", MinSecret))
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("within CacheTTL: %v, want the remembered answer", err)
	}
	c.Add(CacheTTL)
	if _, err := v.Verify(tok); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("CacheTTL after the check, with the key gone: %v, want ErrBadSignature", err)
	}
}

// TestCacheIsBounded: however many tokens verify, at most Config.Cache are remembered.
func TestCacheIsBounded(t *testing.T) {
	c := newClock()
	v := newVerifier(t, Config{Secret: testSecret, Now: c.Now, Cache: 5})
	for i := range 50 {
		tok := mint(t, jwt.SigningMethodHS256, testSecret, std(c, fmt.Sprintf("u%d", i), time.Hour), "")
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cache.len(); n != 5 {
		t.Fatalf("%d tokens remembered, want 5 (Config.Cache)", n)
	}
}
