package web_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	rtlabjs "github.com/rtlab/rtlab/clients/js"
	"github.com/rtlab/rtlab/web"
)

func get(t *testing.T, h http.Handler, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPageAndAssets(t *testing.T) {
	h := web.Handler("")
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html", `name="rtlab-page"`},
		{"/static/app.css", "text/css", ".card"},
		{"/static/js/main.js", "text/javascript", "startTransport"},
		{"/static/js/live.js", "text/javascript", "class Live"},
		{"/rtlab.js", "text/javascript", "Client"},
	} {
		res := get(t, h, tc.path)
		b := body(t, res)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(b, tc.contains) {
			t.Errorf("GET %s: %d %q, want 200 %s containing %q", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.ctype, tc.contains)
		}
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", tc.path)
			continue
		}
		if res := get(t, h, tc.path, "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %d, want 304", tc.path, res.StatusCode)
		}
	}
	if csp := get(t, h, "/").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("page CSP = %q", csp)
	}
	for _, p := range []string{"/static/", "/static/nope.js", "/static/js", "/static/../embed.go", "/static/%2e%2e/embed.go", "/index.html", "/static/../lab.html"} {
		if res := get(t, h, p); res.StatusCode == http.StatusOK {
			t.Errorf("GET %s: 200, want a refusal", p)
		}
	}
}

// writeRun makes a run folder with the given files.
func writeRun(t *testing.T, dir, name string, files map[string]string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(d, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func resultsJSON(started time.Time, transports string) string {
	return `{"schema":1,"version":"dev","started":"` + started.Format(time.RFC3339) + `","finished":"` +
		started.Add(90*time.Second).Format(time.RFC3339) + `","config":{"scenario":"location","transports":[` +
		transports + `],"users":[1000,5000],"broker":"memory"},"runs":[]}`
}

func TestLab(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC().Truncate(time.Second)
	writeRun(t, dir, "old-run", map[string]string{"results.json": resultsJSON(now.Add(-48*time.Hour), `"ws"`), "report.html": "<p>old report</p>"})
	writeRun(t, dir, "new-run", map[string]string{"results.json": resultsJSON(now.Add(-time.Hour), `"sse","stomp"`), "report.html": "<p>new report</p>"})
	writeRun(t, dir, "broken", map[string]string{"results.json": "{not json"})
	writeRun(t, dir, "report-only", map[string]string{"report.html": "<p>just a report</p>"})
	writeRun(t, dir, "empty", nil)
	writeRun(t, dir, ".hidden", map[string]string{"report.html": "secret"})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "report.html"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	h := web.Handler(dir)

	res := get(t, h, "/lab")
	page := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /lab: %d", res.StatusCode)
	}
	// Newest first: report-only (its folder's time is now), new-run, old-run, then broken.
	order := []string{`data-run="report-only"`, `data-run="new-run"`, `data-run="old-run"`}
	last := -1
	for _, s := range order {
		i := strings.Index(page, s)
		if i < 0 || i < last {
			t.Fatalf("GET /lab: %s missing or out of order:\n%s", s, page)
		}
		last = i
	}
	for _, s := range []string{"sse, stomp", "1000, 5000", `href="/lab/new-run/report.html"`, "unreadable"} {
		if !strings.Contains(page, s) {
			t.Errorf("GET /lab: no %q in\n%s", s, page)
		}
	}
	for _, s := range []string{`data-run="empty"`, `data-run=".hidden"`, `data-run="escape"`} {
		if strings.Contains(page, s) {
			t.Errorf("GET /lab lists %s", s)
		}
	}

	res = get(t, h, "/lab/new-run/report.html")
	if b := body(t, res); res.StatusCode != http.StatusOK || b != "<p>new report</p>" {
		t.Errorf("GET report: %d %q", res.StatusCode, b)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
		t.Errorf("report CSP = %q, want a sandbox", csp)
	}
	if res := get(t, h, "/lab/old-run/results.json"); res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("GET results.json: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, p := range []string{
		"/lab/escape/report.html", "/lab/.hidden/report.html", "/lab/..%2f..%2fetc/report.html",
		"/lab/%2e%2e/report.html", "/lab/new-run/other.txt", "/lab/missing/report.html",
		"/lab/broken/report.html", "/lab/new-run/../old-run/report.html",
	} {
		if res := get(t, h, p); res.StatusCode == http.StatusOK {
			t.Errorf("GET %s: 200, want a refusal", p)
		}
	}

	// No results folder (or none configured): an empty list, not an error.
	for _, d := range []string{"", filepath.Join(dir, "does-not-exist")} {
		res := get(t, web.Handler(d), "/lab")
		if b := body(t, res); res.StatusCode != http.StatusOK || !strings.Contains(b, "No bench results yet") {
			t.Errorf("GET /lab with results dir %q: %d\n%s", d, res.StatusCode, b)
		}
	}
}

// TestLibraryCompressed: /rtlab.js is minified, and sent brotli- or gzip-compressed to clients
// that take it, each with its own ETag.
func TestLibraryCompressed(t *testing.T) {
	h := web.Handler("")
	plain := get(t, h, "/rtlab.js")
	min := body(t, plain)
	if len(min) >= len(rtlabjs.Source)*3/4 {
		t.Errorf("minified: %d bytes of %d", len(min), len(rtlabjs.Source))
	}
	tags := map[string]bool{plain.Header.Get("ETag"): true}
	for _, enc := range []string{"gzip", "br"} {
		res := get(t, h, "/rtlab.js", "Accept-Encoding", enc)
		if res.Header.Get("Content-Encoding") != enc || res.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("%s: Content-Encoding %q, Vary %q", enc, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"))
		}
		var r io.Reader = res.Body
		if enc == "gzip" {
			zr, err := gzip.NewReader(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		} else {
			r = brotli.NewReader(res.Body)
		}
		b, err := io.ReadAll(r)
		if err != nil || string(b) != min {
			t.Fatalf("%s: %d bytes decoded (%v), want the %d minified", enc, len(b), err, len(min))
		}
		tags[res.Header.Get("ETag")] = true
		t.Logf("/rtlab.js: source %d B, minified %d B, %s %s B", len(rtlabjs.Source), len(min), enc, res.Header.Get("Content-Length"))
	}
	if len(tags) != 3 {
		t.Errorf("ETags %v, want one per encoding", tags)
	}
}
