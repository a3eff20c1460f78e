package bench

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHTTPConnKeepAlive(t *testing.T) {
	big := strings.Repeat("x", 3*pollBufSize)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small": // Content-Length, fits in the reader
			_, _ = w.Write([]byte(`{"ok":true}`))
		case "/chunked": // net/http chunks what it cannot size
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(big))
		case "/sized": // Content-Length, larger than the reader
			w.Header().Set("Content-Length", "12288")
			_, _ = w.Write([]byte(big))
		case "/missing":
			http.Error(w, `{"error":"not_found"}`, http.StatusNotFound)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("bye"))
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, own := range []bool{false, true} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		hc := newHTTPConn(conn, addr, own)
		get := func(path string) (int, string, error) {
			var status int
			var body string
			req := appendRequest(nil, "GET", addr, []byte(path), "", nil)
			err := hc.roundTrip(req, time.Now().Add(5*time.Second), func(s int, b []byte) error {
				status, body = s, string(b)
				return nil
			})
			return status, body, err
		}
		// Several requests on the same connection.
		for _, path := range []string{"/small", "/chunked", "/sized", "/missing", "/small"} {
			status, body, err := get(path)
			if err != nil {
				t.Fatalf("own=%v %s: %v", own, path, err)
			}
			want := map[string]string{"/small": `{"ok":true}`, "/chunked": big, "/sized": big, "/missing": "{\"error\":\"not_found\"}\n"}[path]
			if body != want || (path == "/missing") != (status == 404) {
				t.Errorf("own=%v %s: %d %.40q", own, path, status, body)
			}
		}
		if _, body, err := get("/close"); !errors.Is(err, errConnClose) || body != "bye" {
			t.Errorf("own=%v /close: %q %v, want the body and errConnClose", own, body, err)
		}
		hc.close()
	}
}
