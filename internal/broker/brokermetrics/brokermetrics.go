// Package brokermetrics holds the Prometheus collectors that every external broker (Redis, NATS,
// RabbitMQ) exports under the same names, told apart by the label broker="<name>".
package brokermetrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are one broker's common collectors. They work unregistered, so a broker updates them
// whether or not it has a Registerer. The fields are set by New and never nil.
type Metrics struct {
	Publish       prometheus.Histogram // rtlab_broker_publish_seconds: publish until acknowledged
	PublishErrors prometheus.Counter   // rtlab_broker_publish_errors_total
	Reconnects    prometheus.Counter   // rtlab_broker_reconnects_total: connections re-established after a loss
	Outage        prometheus.Histogram // rtlab_broker_resubscribe_seconds: from losing the connection to caught up again
	Ready         prometheus.Gauge     // rtlab_broker_ready: 1 when the broker can publish and deliver

	labels prometheus.Labels
}

// New returns the common collectors labelled broker=name, not yet registered.
func New(name string) *Metrics {
	labels := prometheus.Labels{"broker": name}
	return &Metrics{
		labels: labels,
		Publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rtlab_broker_publish_seconds", Help: "Time to publish to the broker (offset assigned, stored, sent).",
			ConstLabels: labels, Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtlab_broker_publish_errors_total", Help: "Publishes the broker refused or could not complete.", ConstLabels: labels,
		}),
		Reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtlab_broker_reconnects_total", Help: "Times the broker connection was re-established after a loss.", ConstLabels: labels,
		}),
		Outage: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rtlab_broker_resubscribe_seconds", Help: "Time from losing the broker connection to deliveries resumed.",
			ConstLabels: labels, Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		Ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtlab_broker_ready", Help: "1 when the broker can publish and deliver.", ConstLabels: labels,
		}),
	}
}

// Counter returns a broker-specific counter with the same broker label, for Register to take
// along.
func (m *Metrics) Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: m.labels})
}

// Gauge returns a broker-specific gauge with the same broker label, for Register to take along.
func (m *Metrics) Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: m.labels})
}

// Histogram returns a broker-specific histogram with the same broker label, for Register to
// take along.
func (m *Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: m.labels})
}

// Register registers the common collectors and extra with reg. A nil reg registers nothing.
// It panics, as prometheus.Registerer.MustRegister does, when a name is taken.
func (m *Metrics) Register(reg prometheus.Registerer, extra ...prometheus.Collector) {
	if reg == nil {
		return
	}
	reg.MustRegister(append([]prometheus.Collector{m.Publish, m.PublishErrors, m.Reconnects, m.Outage, m.Ready}, extra...)...)
}
