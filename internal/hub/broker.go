package hub

import (
	"context"
	"encoding/json"
	"time"
)

// Broker moves publications between nodes and keeps each topic's history. The hub consumes it;
// implementations live in internal/broker/*.
//
// Ordering contract: for one topic, offsets are assigned by the broker, increase by exactly one
// per publication within an epoch, and Handler.HandlePublication is called for that topic
// sequentially in offset order (never concurrently for the same topic). Calls for different
// topics may run concurrently.
type Broker interface {
	// Run starts delivering publications of subscribed topics to h until ctx ends or Close.
	// It returns once the broker is usable.
	Run(ctx context.Context, h Handler) error

	// Publish appends a publication to the topic's history and delivers it to every node
	// subscribed to the topic, atomically with respect to other publishes on that topic.
	// It returns the stored publication (with offset, epoch and time set), or for a retry of
	// req.Key the original (Duplicate set). An error wrapping ErrNotReady means nothing was
	// published; one wrapping ErrOutcomeUnknown, that it may have been.
	Publish(ctx context.Context, req PublishRequest) (*Publication, error)

	// Subscribe makes this node receive the topic's publications. When it returns, every
	// publication that a later History call does not show will be delivered.
	Subscribe(ctx context.Context, topic string) error
	// Unsubscribe stops delivery of topic to this node.
	Unsubscribe(ctx context.Context, topic string) error

	// History returns retained publications with offset > since (at most limit; limit <= 0 means
	// all retained) in offset order, and the topic's current position. since may be
	// math.MaxUint64 ("only the position"), so implementations must not compute since+1
	// unguarded. The hub calls History from inside HandlePublication when it sees a gap in
	// offsets (rare: lost deliveries), so History must not wait on the delivery goroutine. If the topic's epoch is
	// not the caller's, or since is older than the oldest retained offset, the publications that
	// are retained are still returned; the hub decides what the client is told.
	History(ctx context.Context, topic string, since uint64, limit int) (HistoryResult, error)

	// Ready reports whether the broker can currently publish and deliver.
	Ready() bool

	// Close releases the broker's resources.
	Close() error
}

// Handler receives publications from a Broker.
type Handler interface {
	// HandlePublication is called per topic sequentially in offset order. It must not block.
	HandlePublication(p *Publication)
	// HandleResubscribed is called after the broker recovered from an outage, so the hub can
	// fetch from history anything that was published while deliveries were interrupted.
	HandleResubscribed()
}

// PublishRequest is what a client asks to publish.
type PublishRequest struct {
	Topic  string
	Data   json.RawMessage
	Sender string
	Type   string
	// Time is the publish time; the broker sets it when zero.
	Time time.Time
	// Key is the idempotency key (CheckKey): a retry with the same key and sender on the same
	// topic, within the topic's history window, is answered with the original publication
	// (Publication.Duplicate) and not published again. Empty: no de-duplication, no cost.
	Key string
}

// HistoryResult is an answer from Broker.History.
type HistoryResult struct {
	Publications []*Publication
	// Top is the topic's latest position (Offset 0 when nothing was published in this epoch).
	Top Position
	// Oldest is the smallest offset still retained; 0 when history is empty.
	Oldest uint64
}

// HistoryPolicy says how much history a topic keeps.
type HistoryPolicy struct {
	Size int           // publications kept; zero means DefaultHistorySize
	TTL  time.Duration // how long each is kept; zero means DefaultHistoryTTL, negative forever
}

// The history a zero HistoryPolicy means.
const (
	DefaultHistorySize = 100
	DefaultHistoryTTL  = 10 * time.Minute
)

// Resolved is p with its zero fields set to their defaults, in one place for every broker.
func (p HistoryPolicy) Resolved() HistoryPolicy {
	if p.Size <= 0 {
		p.Size = DefaultHistorySize
	}
	if p.TTL == 0 {
		p.TTL = DefaultHistoryTTL
	}
	return p
}

// Unavailable is the error a broker returns while it cannot serve (its server is unreachable,
// or it is catching up): an *UnavailableError.
func Unavailable(broker string, cause error) error {
	return &UnavailableError{Broker: broker, Cause: cause}
}

// UnavailableError wraps ErrNotReady, so clients get 503 "unavailable", and the cause, for
// errors.Is and logs. Its text names only the broker, since the cause may carry addresses.
type UnavailableError struct {
	Broker string
	Cause  error
}

func (e *UnavailableError) Error() string   { return e.Broker + " broker unavailable" }
func (e *UnavailableError) Unwrap() []error { return []error{ErrNotReady, e.Cause} }
