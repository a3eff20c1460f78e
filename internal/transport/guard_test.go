package transport

import (
	"fmt"
	"testing"
	"time"
)

// TestOriginsAllowed: a browser's own host, listed origins and subdomain patterns are let
// through, localhost only in open dev mode; anything else, "null" included, is not.
func TestOriginsAllowed(t *testing.T) {
	o := Origins{Allowed: []string{"https://app.example", "https://*.partner.example"}}
	dev := Origins{Localhost: true}
	for _, tc := range []struct {
		o      Origins
		origin string
		want   bool
	}{
		{o, "https://rt.example", true}, // the request's own host
		{o, "http://rt.example", true},
		{o, "https://app.example", true},
		{o, "HTTPS://APP.EXAMPLE", true},
		{o, "https://eu.partner.example", true},
		{o, "https://partner.example", false},
		{o, "http://eu.partner.example", false}, // the pattern names its scheme
		{o, "https://app.example.evil.example", false},
		{o, "https://evil.example", false},
		{o, "null", false},
		{o, "file://", false},
		{o, "http://localhost:3000", false},
		{dev, "http://localhost:3000", true},
		{dev, "http://127.0.0.1:8080", true},
		{dev, "http://[::1]:8080", true},
		{dev, "http://localhost.evil.example", false},
		{Origins{Allowed: []string{"*"}}, "https://anything.example", true},
	} {
		if got := tc.o.allowed(tc.origin, "rt.example"); got != tc.want {
			t.Errorf("%+v allowed(%q) = %v, want %v", tc.o, tc.origin, got, tc.want)
		}
	}
}

// TestKeyedLimiter: each key has its own bucket; a refusal says when to retry; buckets that
// have refilled are forgotten, so the map holds only recently active keys.
func TestKeyedLimiter(t *testing.T) {
	k := newKeyedLimiter(10, 20)
	now := time.Unix(1000, 0)
	for i := 0; i < 20; i++ {
		if ok, _ := k.allow("a", now); !ok {
			t.Fatalf("publish %d of the burst refused", i)
		}
	}
	ok, wait := k.allow("a", now)
	if ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("over the burst: ok %v, retry after %v; want refused, about 100 ms", ok, wait)
	}
	if ok, _ := k.allow("b", now); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	if ok, _ := k.allow("a", now.Add(150*time.Millisecond)); !ok {
		t.Fatal("a token refilled after 150 ms was refused")
	}
	for i := 0; i < 1000; i++ {
		k.allow(fmt.Sprint("k", i), now)
	}
	k.allow("late", now.Add(time.Minute)) // the sweep runs: every other bucket has refilled
	if n := k.size(); n != 1 {
		t.Fatalf("%d buckets kept after every other key went quiet, want 1", n)
	}
	if ok, _ := newKeyedLimiter(-1, 10).allow("x", now); !ok {
		t.Fatal("an unlimited rate refused")
	}
}
