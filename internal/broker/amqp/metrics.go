package amqp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// metrics are the broker's collectors, labelled broker="amqp": the common ones and the
// sequencer's. They work unregistered when Config.Registerer is nil.
type metrics struct {
	*brokermetrics.Metrics
	sequencer prometheus.Gauge   // 1 while this node is the active sequencer
	rejected  prometheus.Counter // log entries every node ignores (a stale sequencer's)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	common := brokermetrics.New("amqp")
	m := &metrics{
		Metrics:   common,
		sequencer: common.Gauge("rtlab_broker_sequencer_active", "1 while this node assigns offsets for all nodes."),
		rejected:  common.Counter("rtlab_broker_log_rejected_total", "Log entries ignored because their offset was already taken."),
	}
	common.Register(reg, m.sequencer, m.rejected)
	return m
}
