package app

import (
	"net/http/httptest"
	"testing"
)

// TestRequestRoute: a poll with a non-zero wait counts as a long poll, whatever the order of
// its query parameters, reading the query as URL.Query does.
func TestRequestRoute(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"since=3&wait=25s", "longpoll"},
		{"wait=10s", "longpoll"},
		{"since=3&epoch=e&limit=100", "shortpoll"},
		{"wait=0s&since=1", "shortpoll"},
		{"nowait=25s", "shortpoll"},
		{"", "shortpoll"},
		{"w%61it=%32%35s", "longpoll"},   // escaped, as URL.Query reads it
		{"wait=0%73", "shortpoll"},       // 0s
		{"wait=%zz&wait=5s", "longpoll"}, // a pair that does not unescape is skipped
	} {
		r := httptest.NewRequest("GET", "/api/poll/t/a?"+tc.query, nil)
		r.Pattern = "GET /api/poll/{topic...}"
		if got := requestRoute(r); got != tc.want {
			t.Errorf("?%s: route %q, want %q", tc.query, got, tc.want)
		}
	}
}
