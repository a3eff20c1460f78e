// Package metrics holds the server's Prometheus collectors. They are created per server (no
// global registry), so tests can run several servers in one process.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Transport names used as label values.
const (
	ShortPoll = "shortpoll"
	LongPoll  = "longpoll"
	SSE       = "sse"
	WS        = "ws"
	STOMP     = "stomp"
)

// Metrics are the transport-level collectors.
type Metrics struct {
	Connections    *prometheus.GaugeVec   // open connections by transport
	Accepted       *prometheus.CounterVec // connections accepted by transport
	Disconnects    *prometheus.CounterVec // by transport and reason
	QueueOverflows *prometheus.CounterVec // slow consumers cut off, by transport
	Sent           *prometheus.CounterVec // messages written to clients, by transport
	Requests       *prometheus.CounterVec // HTTP requests by route kind and status class
	Refused        *prometheus.CounterVec // refused operations by reason (bad input, forbidden...)
	DeliveryLag    prometheus.Histogram   // publish time → written to the socket
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
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
			Name: "rtlab_http_requests_total", Help: "HTTP requests by route kind and status code class.",
		}, []string{"route", "code"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_refused_total", Help: "Refused client operations by reason.",
		}, []string{"reason"}),
		DeliveryLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rtlab_delivery_lag_seconds",
			Help:    "Publish time to socket write, sampled once per write batch.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	reg.MustRegister(m.Connections, m.Accepted, m.Disconnects, m.QueueOverflows, m.Sent,
		m.Requests, m.Refused, m.DeliveryLag)
	for _, t := range []string{ShortPoll, LongPoll, SSE, WS, STOMP} {
		m.Connections.WithLabelValues(t)
		m.QueueOverflows.WithLabelValues(t)
	}
	return m
}
