package transport

import (
	"net/http/httptest"
	"testing"
)

// TestClientAddr: X-Forwarded-For is believed only from trusted proxies, read from the right,
// skipping trusted hops; what the client itself put further left never counts.
func TestClientAddr(t *testing.T) {
	p, err := ParseProxies("10.0.0.0/8, 127.0.0.1, ::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"198.51.100.9:1", nil, "198.51.100.9"},
		{"198.51.100.9:1", []string{"203.0.113.1"}, "198.51.100.9"},         // untrusted peer: header ignored
		{"127.0.0.1:1", nil, "127.0.0.1"},                                   // a trusted peer forwarding nothing
		{"127.0.0.1:1", []string{"203.0.113.1"}, "203.0.113.1"},             // one proxy
		{"127.0.0.1:1", []string{"6.6.6.6, 203.0.113.1"}, "203.0.113.1"},    // a claimed entry further left
		{"127.0.0.1:1", []string{"203.0.113.1, 10.1.2.3"}, "203.0.113.1"},   // two proxies
		{"127.0.0.1:1", []string{"203.0.113.1", "10.1.2.3"}, "203.0.113.1"}, // two header lines
		{"127.0.0.1:1", []string{"junk, 10.1.2.3"}, "10.1.2.3"},             // malformed: stop at the last proxy
		{"[::1]:1", []string{"2001:db8::1"}, "2001:db8::1"},
		{"[::ffff:127.0.0.1]:1", []string{"203.0.113.1"}, "203.0.113.1"}, // v4-mapped peer
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := p.ClientAddr(r).String(); got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	if _, err := ParseProxies("10.0.0.0/33"); err == nil {
		t.Error("10.0.0.0/33 accepted")
	}
}

// TestLocalDirect: loopback without any forwarding header only.
func TestLocalDirect(t *testing.T) {
	for _, tc := range []struct {
		peer, header string
		want         bool
	}{
		{"127.0.0.1:1", "", true},
		{"[::1]:1", "", true},
		{"192.0.2.1:1", "", false},
		{"127.0.0.1:1", "X-Forwarded-For", false},
		{"127.0.0.1:1", "Forwarded", false},
		{"127.0.0.1:1", "X-Real-IP", false},
		{"127.0.0.1:1", "X-Client-IP", false},
		{"127.0.0.1:1", "True-Client-IP", false},
		{"127.0.0.1:1", "CF-Connecting-IP", false},
		{"127.0.0.1:1", "Via", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		if tc.header != "" {
			r.Header.Set(tc.header, "for=1.2.3.4")
		}
		if got := LocalDirect(r); got != tc.want {
			t.Errorf("peer %s header %q: %v, want %v", tc.peer, tc.header, got, tc.want)
		}
	}
}
