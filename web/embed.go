// Package web is the browser page `rtlab serve` shows at /: a live map and a chat over any of
// the five transports, and /lab, the list of bench results. Everything is embedded (no CDN,
// no build step), so the page works offline. Its live traffic goes through rtlab.js, the client
// library of clients/js, served at /rtlab.js.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"

	rtlabjs "github.com/rtlab/rtlab/clients/js"
)

//go:embed index.html lab.html static
var files embed.FS

// pageCSP keeps the page to its own origin: scripts, styles and connections ('self' covers
// same-origin ws: and wss: too), no inline script.
const pageCSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Handler serves the page and its assets: GET / (index.html), GET /static/... (js, css,
// vendored libs), GET /lab (the bench results found under resultsDir: each subfolder with a
// results.json or report.html, newest first) and GET /lab/{run}/report.html (that run's
// report; results.json too). A run is one directory name directly under resultsDir; anything
// else, such as a path that climbs out of it, is a 404. An empty resultsDir lists nothing.
//
// It also serves GET /rtlab.js, the client library (clients/js), which the page imports.
//
// Register it for GET /{$}, GET /static/, GET /rtlab.js, GET /lab and GET /lab/.
func Handler(resultsDir string) http.Handler {
	mux := http.NewServeMux()
	a := newAssets()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, "index.html") })
	mux.HandleFunc("GET /static/{file...}", func(w http.ResponseWriter, r *http.Request) {
		a.serve(w, r, "static/"+r.PathValue("file"))
	})
	lib := sha256.Sum256(rtlabjs.Source)
	libTag := base64.RawURLEncoding.EncodeToString(lib[:12])
	mux.HandleFunc("GET /rtlab.js", func(w http.ResponseWriter, r *http.Request) {
		// Minified, and compressed as the client accepts (brotli, gzip); one ETag per
		// encoding, since the bytes differ.
		min := rtlabjs.Minified()
		body, enc := min.Min, ""
		switch accept := r.Header.Get("Accept-Encoding"); {
		case acceptsEncoding(accept, "br"):
			body, enc = min.Brotli, "br"
		case acceptsEncoding(accept, "gzip"):
			body, enc = min.Gzip, "gzip"
		}
		tag := `"` + libTag + "-" + enc + `"`
		h := w.Header()
		h.Set("ETag", tag)
		h.Set("Vary", "Accept-Encoding")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Type", "text/javascript; charset=utf-8")
		h.Set("Access-Control-Allow-Origin", "*") // a library: pages of any origin may import it
		if enc != "" {
			h.Set("Content-Encoding", enc)
		}
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	l := &lab{dir: resultsDir}
	mux.HandleFunc("GET /lab", l.serveList)
	mux.HandleFunc("GET /lab/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/lab", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /lab/{run}/{file}", l.serveFile)
	return mux
}

// assets serves the embedded files with strong ETags (embed.FS has no modification times), so
// browsers revalidate cheaply instead of caching a stale page after an upgrade.
type assets struct {
	etags map[string]string // by path in files; immutable
}

func newAssets() *assets {
	a := &assets{etags: make(map[string]string)}
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a.etags[p] = `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return a
}

func (a *assets) serve(w http.ResponseWriter, r *http.Request, name string) {
	name = path.Clean(name)
	etag, ok := a.etags[name]
	if !ok || name == "lab.html" || strings.HasSuffix(name, ".map") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if name == "index.html" {
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("Referrer-Policy", "no-referrer")
	}
	http.ServeFileFS(w, r, files, name)
}

// acceptsEncoding reports whether an Accept-Encoding header takes enc (and not with q=0).
func acceptsEncoding(header, enc string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), enc) {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
