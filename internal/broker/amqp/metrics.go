package amqp

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/broker/brokermetrics"
)

// metrics are the broker's collectors, labelled broker="amqp": the common ones and the
// sequencer's. They work unregistered when Config.Registerer is nil.
type metrics struct {
	*brokermetrics.Metrics
	sequencer  prometheus.Gauge     // 1 while this node assigns offsets
	declined   prometheus.Counter   // times this node left the sequencer's role to another
	handedOver prometheus.Counter   // times this node handed an active sequencer's role over
	malformed  prometheus.Counter   // entries skipped
	batch      prometheus.Histogram // publications per message the sequencer sent
	requests   prometheus.Histogram // requests per message this node sent the sequencer
	direct     prometheus.Counter   // request messages sent straight to the sequencer's node
	retried    prometheus.Counter   // requests sent to the queue again after their link broke
	received   prometheus.Counter   // publications read from this node's live queue
	followed   prometheus.Gauge     // topics this node follows
}

func newMetrics(reg prometheus.Registerer) *metrics {
	common := brokermetrics.New("amqp")
	m := &metrics{
		Metrics:   common,
		sequencer: common.Gauge("rtlab_broker_sequencer", "1 while this node is the sequencer: it gives every publication its offset."),
		declined:  common.Counter("rtlab_broker_sequencer_declined_total", "Times this node, made the sequencer queue's active consumer, left the role to another node, holding its share of the shards' sequencers."),
		malformed: common.Counter("rtlab_broker_log_malformed_total", "Entries skipped because they could not be parsed."),
	}
	m.batch = common.Histogram("rtlab_broker_log_batch_size", "Publications of one topic the sequencer sent in one message (to the log and the nodes following the topic).",
		[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256})
	m.requests = common.Histogram("rtlab_broker_request_batch_size", "Requests this node sent the sequencer in one message.",
		[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256})
	m.direct = common.Counter("rtlab_broker_direct_requests_total", "Request messages this node sent straight to the sequencer's node instead of the sequencer queue.")
	m.retried = common.Counter("rtlab_broker_direct_retries_total", "Requests sent to the sequencer queue again because the link to the sequencer's node broke before their publication came back.")
	m.received = common.Counter("rtlab_broker_received_total", "Publications this node's queue received live: those of the topics it follows, every topic's while it is the sequencer.")
	m.handedOver = common.Counter("rtlab_broker_sequencer_handovers_total", "Times this node, the sequencer holding more than its share of the shards' sequencers, handed the role over to another node.")
	m.followed = common.Gauge("rtlab_broker_followed_topics", "Topics this node follows: its queue is bound to them.")
	common.Register(reg, m.sequencer, m.declined, m.handedOver, m.malformed, m.batch, m.requests, m.direct, m.retried, m.received, m.followed)
	return m
}
