// Package rtlabjs holds rtlab.js, the JavaScript client library, so that the server can serve
// it at /rtlab.js. The package's own files (package.json, rtlab.d.ts, README.md, tests) live
// beside it for npm and node.
package rtlabjs

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/tdewolff/minify/v2"
	"github.com/tdewolff/minify/v2/js"
)

// Source is rtlab.js, an ES module.
//
//go:embed rtlab.js
var Source []byte

// Served is rtlab.js as the server sends it: minified, and compressed both ways.
type Served struct {
	Min, Gzip, Brotli []byte
}

var (
	servedOnce sync.Once
	served     Served
)

// Minified returns rtlab.js minified, gzipped and brotli-compressed, made once. Should the
// minifier fail, the source is served as it is.
func Minified() Served {
	servedOnce.Do(func() {
		m := minify.New()
		m.AddFunc("text/javascript", js.Minify)
		min, err := m.Bytes("text/javascript", Source)
		if err != nil || len(min) == 0 {
			min = Source
		}
		var gz, br bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		_, _ = zw.Write(min)
		_ = zw.Close()
		bw := brotli.NewWriterLevel(&br, brotli.BestCompression)
		_, _ = bw.Write(min)
		_ = bw.Close()
		served = Served{Min: min, Gzip: gz.Bytes(), Brotli: br.Bytes()}
	})
	return served
}
