package auth

import (
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
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

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)} }

func newSigner(t testing.TB, c *clock, ttl time.Duration) *Signer {
	t.Helper()
	s, err := New(Config{Secret: testSecret, TTL: ttl, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"no secret", Config{}, false},
		{"short secret", Config{Secret: []byte("fifteen-bytes!!")}, false},
		{"16 bytes", Config{Secret: []byte("sixteen-bytes!!!")}, true},
		{"negative ttl", Config{Secret: testSecret, TTL: -time.Hour}, false},
		{"tiny ttl", Config{Secret: testSecret, TTL: time.Millisecond}, false},
		{"1s ttl", Config{Secret: testSecret, TTL: time.Second}, true},
	}
	for _, tt := range tests {
		s, err := New(tt.cfg)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err == nil && tt.cfg.TTL == 0 && s.TTL() != DefaultTTL {
			t.Errorf("%s: TTL %v, want default %v", tt.name, s.TTL(), DefaultTTL)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	c := newClock()
	s := newSigner(t, c, time.Hour)
	for _, user := range []string{"a", "alice", "bob.smith@example.com", "A_b-9", strings.Repeat("z", MaxUser)} {
		tok, issued, err := s.Issue(user)
		if err != nil {
			t.Fatalf("Issue(%q): %v", user, err)
		}
		if len(tok) > maxToken {
			t.Errorf("token is %d bytes, over maxToken %d", len(tok), maxToken)
		}
		if url.QueryEscape(tok) != tok {
			t.Errorf("token %q needs escaping in a query string", tok)
		}
		if strings.ContainsAny(tok, ":\r\n\\ ") {
			t.Errorf("token %q is unsafe in a STOMP header", tok)
		}
		got, err := s.Verify(tok)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if got.User != user || got.ID != issued.ID || !got.IssuedAt.Equal(issued.IssuedAt) || !got.Expires.Equal(issued.Expires) {
			t.Errorf("Verify = %+v, Issue said %+v", got, issued)
		}
		if !got.IssuedAt.Equal(c.Now().Truncate(time.Millisecond)) || !got.Expires.Equal(got.IssuedAt.Add(time.Hour)) {
			t.Errorf("times %v..%v, want now..now+1h", got.IssuedAt, got.Expires)
		}
	}
}

func TestIssueUniqueIDs(t *testing.T) {
	s := newSigner(t, newClock(), 0)
	seen := map[string]bool{}
	for range 1000 {
		tok, c, err := s.Issue("alice")
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.ID] || seen[tok] {
			t.Fatalf("repeated token id %s", c.ID)
		}
		seen[c.ID], seen[tok] = true, true
	}
}

func TestValidUser(t *testing.T) {
	good := []string{"a", "alice", "Bob_1", "x.y@z-w", strings.Repeat("a", 64)}
	bad := []string{"", strings.Repeat("a", 65), "al ice", "ali/ce", "ålice", "a:b", "a\x00", "a\n", "a+b", "a%20"}
	for _, u := range good {
		if err := ValidUser(u); err != nil {
			t.Errorf("ValidUser(%q) = %v", u, err)
		}
	}
	s := newSigner(t, newClock(), 0)
	for _, u := range bad {
		if err := ValidUser(u); !errors.Is(err, ErrBadUser) {
			t.Errorf("ValidUser(%q) = %v, want ErrBadUser", u, err)
		}
		if _, _, err := s.Issue(u); !errors.Is(err, ErrBadUser) {
			t.Errorf("Issue(%q) = %v, want ErrBadUser", u, err)
		}
	}
}

func TestExpired(t *testing.T) {
	c := newClock()
	s := newSigner(t, c, time.Minute)
	tok, _, err := s.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute - time.Millisecond)
	if _, err := s.Verify(tok); err != nil {
		t.Fatalf("1ms before expiry: %v", err)
	}
	c.Add(time.Millisecond)
	if _, err := s.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	c.Add(365 * 24 * time.Hour)
	if _, err := s.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("a year later: %v, want ErrExpired", err)
	}
}

// TestClockInjection checks that both Issue and Verify use Config.Now, not the wall clock.
func TestClockInjection(t *testing.T) {
	past := &clock{t: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newSigner(t, past, time.Hour)
	tok, c, err := s.Issue("alice")
	if err != nil {
		t.Fatal(err)
	}
	if c.IssuedAt.Year() != 2001 {
		t.Fatalf("IssuedAt %v ignores the injected clock", c.IssuedAt)
	}
	if _, err := s.Verify(tok); err != nil {
		t.Fatalf("Verify with injected clock: %v", err)
	}
	real := newSigner(t, &clock{t: time.Now()}, time.Hour)
	if _, err := real.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("a 2001 token verified today: %v", err)
	}
}

func TestWrongSecret(t *testing.T) {
	c := newClock()
	a := newSigner(t, c, 0)
	b, err := New(Config{Secret: []byte("another-secret-of-enough-length"), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, _ := a.Issue("alice")
	if _, err := b.Verify(tok); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("other secret: %v, want ErrBadSignature", err)
	}
}

func TestMalformed(t *testing.T) {
	s := newSigner(t, newClock(), 0)
	tok, _, _ := s.Issue("alice")
	pay, sig, _ := strings.Cut(tok, ".")
	tests := []string{
		"",
		".",
		"abc",
		pay,
		pay + ".",
		"." + sig,
		pay + "." + sig + "." + sig,
		pay + "." + sig + "=",
		pay + "." + sig[:len(sig)-1],
		pay + "." + sig + "A",
		pay + "." + sig[:10] + "\n" + sig[10:],
		pay + "." + sig[:10] + "\r" + sig[10:],
		pay[:5] + "\n" + pay[5:] + "." + sig,
		pay + " ." + sig,
		pay + ".+" + sig[1:],
		pay + "./" + sig[1:],
		strings.Repeat("A", 10000) + "." + sig,
		"Bearer " + tok,
	}
	for _, bad := range tests {
		_, err := s.Verify(bad)
		if err == nil {
			t.Errorf("Verify(%q) accepted", bad)
			continue
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) {
			t.Errorf("Verify(%q) = %v, want ErrMalformed or ErrBadSignature", bad, err)
		}
	}
}

// TestBitFlips flips every bit of a genuine token, one at a time, and checks none verifies.
func TestBitFlips(t *testing.T) {
	s := newSigner(t, newClock(), 0)
	tok, _, _ := s.Issue("alice")
	for i := range len(tok) {
		for bit := range 8 {
			b := []byte(tok)
			b[i] ^= 1 << bit
			if _, err := s.Verify(string(b)); err == nil {
				t.Fatalf("flipping bit %d of byte %d still verifies: %q", bit, i, b)
			}
		}
	}
}

// TestForgedPayload re-encodes a changed payload (another user, later expiry) and keeps the
// genuine signature: the classic forgery.
func TestForgedPayload(t *testing.T) {
	s := newSigner(t, newClock(), 0)
	tok, _, _ := s.Issue("alice")
	pay, sig, _ := strings.Cut(tok, ".")
	raw, err := b64.DecodeString(pay)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			f := append([]byte(nil), raw...)
			f[i] ^= 1 << bit
			if _, err := s.Verify(b64.EncodeToString(f) + "." + sig); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("payload bit %d of byte %d: %v, want ErrBadSignature", bit, i, err)
			}
		}
	}
	f := append(raw[:fixedLen:fixedLen], "admin"...)
	if _, err := s.Verify(b64.EncodeToString(f) + "." + sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("renamed user: %v, want ErrBadSignature", err)
	}
}

func TestRevoke(t *testing.T) {
	c := newClock()
	s := newSigner(t, c, time.Hour)
	tok, _, _ := s.Issue("alice")
	other, _, _ := s.Issue("alice")
	if err := s.Revoke(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(tok); !errors.Is(err, ErrRevoked) {
		t.Fatalf("after logout: %v, want ErrRevoked", err)
	}
	if err := s.Revoke(tok); err != nil {
		t.Fatalf("second logout: %v", err)
	}
	if _, err := s.Verify(other); err != nil {
		t.Fatalf("the user's other token was logged out too: %v", err)
	}
	if err := s.Revoke("junk.junk"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Revoke(junk) = %v, want ErrMalformed", err)
	}
	// Replay after logout stays refused for the token's whole life, then it is plain expired.
	c.Add(59 * time.Minute)
	if _, err := s.Verify(tok); !errors.Is(err, ErrRevoked) {
		t.Fatalf("replay 59m after logout: %v, want ErrRevoked", err)
	}
	c.Add(time.Minute)
	if _, err := s.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("replay after expiry: %v, want ErrExpired", err)
	}
	if err := s.Revoke(tok); err != nil {
		t.Fatalf("logout with an expired token: %v", err)
	}
}

// TestRevokeBounded checks that revocations of expired tokens are dropped, so memory does not
// grow with every logout ever made.
func TestRevokeBounded(t *testing.T) {
	c := newClock()
	s := newSigner(t, c, time.Minute)
	for round := range 5 {
		for range 100 {
			tok, _, _ := s.Issue("alice")
			if err := s.Revoke(tok); err != nil {
				t.Fatal(err)
			}
		}
		if n := s.revokedLen(); n > 200 {
			t.Fatalf("round %d: %d revocations remembered, want at most 200", round, n)
		}
		c.Add(time.Minute)
	}
}

func TestConcurrent(t *testing.T) {
	s := newSigner(t, newClock(), time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				tok, _, err := s.Issue("alice")
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Verify(tok); err != nil {
					t.Error(err)
					return
				}
				if err := s.Revoke(tok); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Verify(tok); !errors.Is(err, ErrRevoked) {
					t.Errorf("got %v, want ErrRevoked", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzVerify checks that Verify never panics and never accepts a string that Issue did not
// return. Run it with: go test -fuzz FuzzVerify ./internal/auth
func FuzzVerify(f *testing.F) {
	c := newClock()
	s := newSigner(f, c, time.Hour)
	var n byte
	s.random = func(b []byte) (int, error) { // same tokens in every fuzz worker process
		for i := range b {
			n++
			b[i] = n
		}
		return len(b), nil
	}
	issued := map[string]bool{}
	for _, u := range []string{"alice", "b", strings.Repeat("x", MaxUser)} {
		tok, _, err := s.Issue(u)
		if err != nil {
			f.Fatal(err)
		}
		issued[tok] = true
		f.Add(tok)
		pay, sig, _ := strings.Cut(tok, ".")
		f.Add(pay + "." + sig[:len(sig)-1] + "B")
		f.Add(pay[1:] + "." + sig)
		f.Add(sig + "." + pay)
	}
	f.Add("")
	f.Add(".")
	f.Add("a.b")
	f.Add(strings.Repeat("A", 130) + "." + strings.Repeat("A", 43))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Verify(tok)
		if err == nil {
			if !issued[tok] {
				t.Fatalf("accepted a token that was never issued: %q (%+v)", tok, c)
			}
			return
		}
		for _, want := range []error{ErrMalformed, ErrBadSignature, ErrExpired, ErrRevoked} {
			if errors.Is(err, want) {
				return
			}
		}
		t.Fatalf("Verify(%q) = %v, not one of the sentinel errors", tok, err)
	})
}

func BenchmarkVerify(b *testing.B) {
	s := newSigner(b, &clock{t: time.Now()}, time.Hour)
	tok, _, _ := s.Issue("alice")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
