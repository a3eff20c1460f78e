// Package metrics holds the server's Prometheus collectors. They are created per server (no
// global registry), so tests can run several servers in one process.
package metrics

import (
	"bufio"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/transports"
)

// Metrics are the transport-level collectors.
type Metrics struct {
	Connections    *prometheus.GaugeVec     // open connections by transport
	Accepted       *prometheus.CounterVec   // connections accepted by transport
	Disconnects    *prometheus.CounterVec   // by transport and reason
	QueueOverflows *prometheus.CounterVec   // slow consumers cut off, by transport
	Sent           *prometheus.CounterVec   // messages written to clients, by transport
	Requests       *prometheus.CounterVec   // HTTP answers by route and status code (Instrument)
	Refused        *prometheus.CounterVec   // refused operations by reason (bad input, forbidden...)
	DeliveryLag    *prometheus.HistogramVec // publish time → written to the socket, by transport
}

// New creates the collectors, and rtlab_build_info for version, and registers them on reg.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		Connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rtlab_connections", Help: "Open client connections by transport.",
		}, []string{"transport"}),
		Accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_connections_accepted_total", Help: "Client connections accepted by transport.",
		}, []string{"transport"}),
		Disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_disconnects_total", Help: "Closed client connections by transport and reason.",
		}, []string{"transport", "reason"}),
		QueueOverflows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_queue_overflows_total", Help: "Connections cut off because their send queue overflowed.",
		}, []string{"transport"}),
		Sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_messages_sent_total", Help: "Messages written to clients by transport.",
		}, []string{"transport"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_http_requests_total", Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_refused_total", Help: "Refused client operations by transport (http for any answer to a plain HTTP request, refused upgrades included) and reason.",
		}, []string{"transport", "reason"}),
		DeliveryLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rtlab_delivery_lag_seconds",
			Help:    "Publish time to socket write by transport, sampled once per write batch.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"transport"}),
	}
	reg.MustRegister(m.Connections, m.Accepted, m.Disconnects, m.QueueOverflows, m.Sent,
		m.Requests, m.Refused, m.DeliveryLag, buildInfo(version))
	// Every transport's series exist from the start, so dashboards and alerts see zeros
	// instead of nothing.
	for _, t := range transports.Names() {
		m.Connections.WithLabelValues(t)
		m.Accepted.WithLabelValues(t)
		m.QueueOverflows.WithLabelValues(t)
		m.Sent.WithLabelValues(t)
		m.DeliveryLag.WithLabelValues(t)
	}
	return m
}

// buildInfo is rtlab_build_info{version,revision,goversion} 1, the conventional way to put a
// version beside the figures (group_left joins, "which version ran then").
func buildInfo(version string) prometheus.Collector {
	if version == "" {
		version = "dev"
	}
	bi, _ := debug.ReadBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rtlab_build_info", Help: "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision(version, bi), "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// describedCommit is the commit in a version's build metadata: 0.9.0+12-g6e1cc73 (make build,
// git describe) or 0.9.0+g6e1cc73 (go build).
var describedCommit = regexp.MustCompile(`\+(?:\d+-)?g([0-9a-f]{7,40})(?:-dirty)?$`)

// revision is the commit Go recorded, else the one in version (a build where Go records none,
// such as one from a git worktree, has it stamped there), else "unknown".
func revision(version string, bi *debug.BuildInfo) string {
	if bi != nil {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	if m := describedCommit.FindStringSubmatch(version); m != nil {
		return m[1]
	}
	return "unknown"
}

// Instrument counts every answer of next in rtlab_http_requests_total by route(r) and the
// status code sent. next must be a ServeMux (or set r.Pattern itself): route runs after next,
// when r.Pattern says which route matched. Connections a handler takes over (WebSocket, STOMP
// and SSE streams) are not requests answered; they count in rtlab_connections_accepted_total.
// A request whose client left before any answer counts as 499, as in nginx's logs.
func (m *Metrics) Instrument(next http.Handler, route func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.hijacked {
			return
		}
		code := sw.code
		if code == 0 {
			code = http.StatusOK
			if r.Context().Err() != nil {
				code = 499
			}
		}
		m.Requests.WithLabelValues(route(r), strconv.Itoa(code)).Inc()
	})
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code     int
	hijacked bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx are interim answers
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush and Hijack pass through: SSE flushes, WebSocket upgrades hijack, and both assert
// these interfaces on the writer they are given.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	c, rw, err := h.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
