package app

import (
	"net/http/httptest"
	"testing"
)

// TestRequestRoute: a poll with a non-zero wait counts as a long poll, whatever the order of
// its query parameters.
func TestRequestRoute(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"since=3&wait=25s", "longpoll"},
		{"wait=10s", "longpoll"},
		{"since=3&epoch=e&limit=100", "shortpoll"},
		{"wait=0s&since=1", "shortpoll"},
		{"nowait=25s", "shortpoll"},
		{"", "shortpoll"},
	} {
		r := httptest.NewRequest("GET", "/api/poll/t/a?"+tc.query, nil)
		r.Pattern = "GET /api/poll/{topic...}"
		if got := requestRoute(r); got != tc.want {
			t.Errorf("?%s: route %q, want %q", tc.query, got, tc.want)
		}
	}
}
