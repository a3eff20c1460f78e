package app

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rtlab/rtlab/internal/transports"
)

// requestRoute is the route label of an answered request, once the mux has matched it: the
// kind of the data routes, whichever API they come by (publish, shortpoll, longpoll, multipoll, history,
// presence), else the matched path pattern (/api/login, /cur/{group}), and "other" for what
// matched no route, so that the label's values stay few whatever clients ask for.
func requestRoute(r *http.Request) string {
	switch r.Pattern {
	case "POST /api/publish/{topic...}", "POST /location/long/{group}/notify", "POST /location/sse/share":
		return "publish"
	case "GET /api/poll/{topic...}":
		if w := queryValue(r.URL.RawQuery, "wait"); w != "" && strings.Trim(w, "0s.") != "" {
			return transports.LongPoll
		}
		return transports.ShortPoll
	case "GET /location/long/{group}":
		return transports.LongPoll
	case "POST /api/poll":
		return "multipoll" // short or long, the body says: many topics in one request
	case "GET /api/topics/{rest...}":
		switch rest := r.PathValue("rest"); {
		case strings.HasSuffix(rest, "/presence"):
			return "presence"
		case strings.HasSuffix(rest, "/history"):
			return "history"
		}
		return "other"
	case "", "/":
		return "other"
	}
	if _, path, ok := strings.Cut(r.Pattern, " "); ok {
		return path
	}
	return r.Pattern
}

// queryValue is the value of key in query as URL.Query().Get reads it (pairs that do not
// unescape are skipped), without building the map: this runs for every poll, whose handler
// parses the query again anyway.
func queryValue(query, key string) string {
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		k, v, _ := strings.Cut(kv, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || k != key {
			continue
		}
		if v, err = url.QueryUnescape(v); err == nil {
			return v
		}
	}
	return ""
}
