package amqp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// metrics are the broker's collectors, labelled broker="amqp": the common ones and the log's.
// They work unregistered when Config.Registerer is nil.
type metrics struct {
	*brokermetrics.Metrics
	checkpoints prometheus.Counter // checkpoints this node appended
	resets      prometheus.Counter // resets read: every topic started a new epoch
	malformed   prometheus.Counter // log entries every node skips
}

func newMetrics(reg prometheus.Registerer) *metrics {
	common := brokermetrics.New("amqp")
	m := &metrics{
		Metrics:     common,
		checkpoints: common.Counter("rtlab_broker_log_checkpoints_total", "Checkpoints of the log's counting state this node appended."),
		resets:      common.Counter("rtlab_broker_log_resets_total", "Resets read from the log: every topic started a new epoch."),
		malformed:   common.Counter("rtlab_broker_log_malformed_total", "Log entries skipped because they could not be parsed."),
	}
	common.Register(reg, m.checkpoints, m.resets, m.malformed)
	return m
}
