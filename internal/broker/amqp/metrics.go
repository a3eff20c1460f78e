package amqp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// metrics are the broker's collectors, labelled broker="amqp": the common ones and the log's.
// They work unregistered when Config.Registerer is nil.
type metrics struct {
	*brokermetrics.Metrics
	checkpoints prometheus.Counter   // checkpoints this node appended
	resets      prometheus.Counter   // resets read: every topic started a new epoch
	malformed   prometheus.Counter   // log entries every node skips
	batch       prometheus.Histogram // publications per appended message
}

func newMetrics(reg prometheus.Registerer) *metrics {
	common := brokermetrics.New("amqp")
	m := &metrics{
		Metrics:     common,
		checkpoints: common.Counter("rtlab_broker_log_checkpoints_total", "Checkpoints of the log's counting state this node appended."),
		resets:      common.Counter("rtlab_broker_log_resets_total", "Resets read from the log: every topic started a new epoch."),
		malformed:   common.Counter("rtlab_broker_log_malformed_total", "Log entries skipped because they could not be parsed."),
	}
	m.batch = common.Histogram("rtlab_broker_log_batch_size", "Publications appended to the log in one message.",
		[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256})
	common.Register(reg, m.checkpoints, m.resets, m.malformed, m.batch)
	return m
}
