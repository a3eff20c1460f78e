// Package rtlabjs holds rtlab.js, the JavaScript client library, so that the server can serve
// it at /rtlab.js. The package's own files (package.json, rtlab.d.ts, README.md, tests) live
// beside it for npm and node.
package rtlabjs

import _ "embed"

// Source is rtlab.js, an ES module.
//
//go:embed rtlab.js
var Source []byte
