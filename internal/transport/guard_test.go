package transport

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/metrics"
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

// newTestServer is a Server with limits lim and origins o, without a hub: enough for the
// checks made before a connection or publish reaches one.
func newTestServer(t *testing.T, lim Limits, o Origins) *Server {
	t.Helper()
	s := New(Config{Limits: lim, Origins: o, Metrics: metrics.New(prometheus.NewRegistry(), "test")})
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// TestHTTPPublishRateKeys: an authenticated user has one bucket wherever they publish from;
// anonymous clients have one per address.
func TestHTTPPublishRateKeys(t *testing.T) {
	s := newTestServer(t, Limits{HTTPPubRate: 1, HTTPPubBurst: 2}, Origins{})
	from := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/api/publish/x", nil)
		r.RemoteAddr = addr + ":5000"
		return r
	}
	ok := func(r *http.Request, user string) bool { return s.allowHTTPPublish(r, user) == nil }
	if !ok(from("10.0.0.1"), "ann") || !ok(from("10.0.0.2"), "ann") {
		t.Fatal("ann's burst refused")
	}
	err := s.allowHTTPPublish(from("10.0.0.3"), "ann")
	if code, status := errorCode(err); code != "rate_limited" || status != http.StatusTooManyRequests || retryAfter(err) == "" {
		t.Fatalf("ann over her rate from a third address: %v (%s %d, Retry-After %q)", err, code, status, retryAfter(err))
	}
	if !ok(from("10.0.0.1"), "bob") {
		t.Fatal("bob shares ann's bucket")
	}
	if !ok(from("10.0.0.1"), "") || !ok(from("10.0.0.1"), "") || ok(from("10.0.0.1"), "") {
		t.Fatal("anonymous clients of one address do not share a bucket of 2")
	}
	if !ok(from("10.0.0.9"), "") {
		t.Fatal("another address shares the first's bucket")
	}
}

// TestUserPublishRateKeys: a user's WebSocket and STOMP connections share one bucket of
// --user-msg-rate (burst twice that, at least 10) wherever they come from; anonymous ones share
// their address's; an anonymous one of no known address has none. Its default follows --msg-rate.
func TestUserPublishRateKeys(t *testing.T) {
	s := newTestServer(t, Limits{UserMsgRate: 1}, Origins{})
	c := func(user, addr string) *conn { return &conn{s: s, ident: Identity{User: user}, addr: addr} }
	if err := c("ann", "10.0.0.1").allowUserPublish(6); err != nil {
		t.Fatalf("6 of ann's burst of 10: %v", err)
	}
	if err := c("ann", "10.0.0.2").allowUserPublish(4); err != nil {
		t.Fatalf("the rest of ann's burst from another connection: %v", err)
	}
	err := c("ann", "10.0.0.3").allowUserPublish(1)
	if code, _ := errorCode(err); code != "rate_limited" || !strings.Contains(err.Error(), "--user-msg-rate") {
		t.Fatalf("ann over her rate on a third connection: %v", err)
	}
	if err := c("bob", "10.0.0.1").allowUserPublish(10); err != nil {
		t.Fatalf("bob shares ann's bucket: %v", err)
	}
	if c("", "10.0.0.1").allowUserPublish(10) != nil || c("", "10.0.0.1").allowUserPublish(1) == nil {
		t.Fatal("anonymous connections of one address do not share a bucket of 10")
	}
	if err := c("", "10.0.0.9").allowUserPublish(10); err != nil {
		t.Fatalf("another address shares the first's bucket: %v", err)
	}
	for range 20 {
		if err := c("", "").allowUserPublish(1); err != nil {
			t.Fatalf("an anonymous connection of no known address: %v", err)
		}
	}
	for _, tc := range []struct{ l, want Limits }{
		{Limits{}, Limits{UserMsgRate: 200}}, {Limits{MsgRate: 50}, Limits{UserMsgRate: 100}},
		{Limits{MsgRate: -1}, Limits{UserMsgRate: -1}}, {Limits{UserMsgRate: -1}, Limits{UserMsgRate: -1}},
	} {
		if tc.l.fill(); tc.l.UserMsgRate != tc.want.UserMsgRate {
			t.Errorf("--msg-rate %g: --user-msg-rate %g, want %g", tc.l.MsgRate, tc.l.UserMsgRate, tc.want.UserMsgRate)
		}
	}
}

// TestCORS: allowed origins get Access-Control-Allow-Origin (their own, never "*") and an
// answer to their preflight; other origins get no CORS headers at all.
func TestCORS(t *testing.T) {
	s := newTestServer(t, Limits{}, Origins{Allowed: []string{"https://app.example"}})
	h := s.CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	for _, tc := range []struct {
		method, origin string
		status         int
		acao           string
	}{
		{http.MethodOptions, "https://app.example", http.StatusNoContent, "https://app.example"},
		{http.MethodPost, "https://app.example", http.StatusOK, "https://app.example"},
		{http.MethodOptions, "https://evil.example", http.StatusOK, ""},
		{http.MethodPost, "https://evil.example", http.StatusOK, ""},
		{http.MethodPost, "", http.StatusOK, ""},
	} {
		r := httptest.NewRequest(tc.method, "http://rt.example/api/publish/x", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		r.Header.Set("Access-Control-Request-Method", "POST")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || w.Header().Get("Access-Control-Allow-Origin") != tc.acao {
			t.Errorf("%s from %q: %d, Access-Control-Allow-Origin %q; want %d, %q", tc.method, tc.origin, w.Code, w.Header().Get("Access-Control-Allow-Origin"), tc.status, tc.acao)
		}
	}
}

// Per-address limits key an IPv6 client on its /64, in which it may pick any address.
func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":               "192.0.2.7",
		"2001:db8:1:2:aaaa::1":    "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:1:2:3": "2001:db8:1:2::/64",
		"::ffff:192.0.2.7":        "::ffff:192.0.2.7",
		"not an address":          "not an address",
	} {
		if got := addrKey(in); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", in, got, want)
		}
	}
}
