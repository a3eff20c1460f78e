package nats

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// metrics are the broker's collectors, labelled broker="nats": the common ones and the offset
// conflicts. They work unregistered when Config.Registerer is nil.
type metrics struct {
	*brokermetrics.Metrics
	conflicts prometheus.Counter // offset compare-and-set conflicts (another node published first)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	common := brokermetrics.New("nats")
	m := &metrics{
		Metrics:   common,
		conflicts: common.Counter("rtlab_broker_publish_conflicts_total", "Publishes retried because another node took the offset first."),
	}
	common.Register(reg, m.conflicts)
	return m
}
