package appproxy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestConfigRefused: a prefix that is not its own, a route outside the prefix or mixing a
// prefix with one destination, and a backend that is not an http URL are refused, naming the
// flag.
func TestConfigRefused(t *testing.T) {
	for name, cfg := range map[string]Config{
		"prefix under /topic/": {Prefix: "/topic/app"},
		"prefix not a path":    {Prefix: "app"},
		"route outside":        {Routes: []string{"/other/x=/topic/y"}},
		"route to a queue":     {Routes: []string{"/app/x=/queue/y"}},
		"prefix to one":        {Routes: []string{"/app/rooms/=/topic/room"}},
		"backend not http":     {URL: "ftp://backend"},
	} {
		if _, err := New(cfg, nil, nil, prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), "--app-") {
			t.Errorf("%s: %v, want a refusal naming the flag", name, err)
		}
	}
}

// TestRoutesRebroadcast: without a backend a SEND follows its route (a prefix keeps the
// rest), a SUBSCRIBE under the prefix is nobody's, and the forms say so.
func TestRoutesRebroadcast(t *testing.T) {
	d, err := New(Config{Routes: []string{"/app/chat.send=/topic/public", "/app/rooms/=/topic/rooms/"}}, nil, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for dest, want := range map[string]string{"/app/chat.send": "public", "/app/rooms/a/b": "rooms/a/b"} {
		if r, ok := d.Dest(dest, true); !ok || r.Topic != want {
			t.Errorf("SEND %s: %q %v, want %q", dest, r.Topic, ok, want)
		}
	}
	if _, ok := d.Dest("/app/other", true); ok {
		t.Error("SEND to an unrouted destination was routed")
	}
	if _, ok := d.Dest("/app/chat.send", false); ok {
		t.Error("SUBSCRIBE without a backend was routed")
	}
	if d.Form(true) != "/app/... (the application's), " || d.Form(false) != "" {
		t.Errorf("forms %q %q", d.Form(true), d.Form(false))
	}
}
