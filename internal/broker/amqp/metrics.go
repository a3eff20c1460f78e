package amqp

import "github.com/prometheus/client_golang/prometheus"

// metrics are the broker's collectors, labelled broker="amqp". They work unregistered when
// Config.Registerer is nil.
type metrics struct {
	publish     prometheus.Histogram // publish until acknowledged
	publishErrs prometheus.Counter
	sequencer   prometheus.Gauge     // 1 while this node is the active sequencer
	rejected    prometheus.Counter   // log entries every node ignores (a stale sequencer's)
	reconnects  prometheus.Counter   // connections re-established after a loss
	outage      prometheus.Histogram // from losing the connection to caught up again
	ready       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := prometheus.Labels{"broker": "amqp"}
	m := &metrics{
		publish: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rtlab_broker_publish_seconds", Help: "Time to publish to the broker (offset assigned, stored, sent).",
			ConstLabels: labels, Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		publishErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtlab_broker_publish_errors_total", Help: "Publishes the broker refused or could not complete.", ConstLabels: labels,
		}),
		sequencer: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtlab_broker_sequencer_active", Help: "1 while this node assigns offsets for all nodes.", ConstLabels: labels,
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtlab_broker_log_rejected_total", Help: "Log entries ignored because their offset was already taken.", ConstLabels: labels,
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rtlab_broker_reconnects_total", Help: "Times the broker connection was re-established after a loss.", ConstLabels: labels,
		}),
		outage: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rtlab_broker_resubscribe_seconds", Help: "Time from losing the broker connection to deliveries resumed.",
			ConstLabels: labels, Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rtlab_broker_ready", Help: "1 when the broker can publish and deliver.", ConstLabels: labels,
		}),
	}
	if reg != nil {
		reg.MustRegister(m.publish, m.publishErrs, m.sequencer, m.rejected, m.reconnects, m.outage, m.ready)
	}
	return m
}
