package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/shrink"
)

// Source is the broker's window, which a sweep catches up from.
type Source interface {
	History(ctx context.Context, topic string, since uint64, limit int) (hub.HistoryResult, error)
}

// TopicLister is implemented by brokers that can name the topics published to since a time (a
// superset is fine), so a sweep need not know every topic beforehand. Without it a node sweeps
// only the topics it archived itself.
type TopicLister interface {
	TopicsSince(ctx context.Context, since time.Time) ([]string, error)
}

// Config configures an Archiver. Zero values mean the defaults given.
type Config struct {
	Store  Store  // required
	Source Source // the broker; required for catch-up
	// Durable selects the topics archived. Nil means none.
	Durable func(topic string) bool
	// Queue bounds the publications waiting to be written; when it is full, new ones are left
	// to the sweep. Zero means 100,000.
	Queue int
	// Batch is the most publications written at once. Zero means 1,000.
	Batch int
	// Sweep is how often the broker's window is checked for publications nobody archived.
	// Zero means 30 s.
	Sweep time.Duration
	// Grace is how old a publication must be before a sweep writes it: younger ones may still
	// be in the queue of the node that acknowledged them. Zero means 10 s.
	Grace time.Duration
	// Retention is what the store keeps; pruned every PruneEvery (zero: 10 minutes).
	Retention  Retention
	PruneEvery time.Duration
	Logger     *slog.Logger
	// Registerer receives the rtlab_archive_* metrics. Nil: not registered.
	Registerer prometheus.Registerer
	// Now returns the time. Nil means time.Now.
	Now func() time.Time
}

// Archiver writes durable topics' publications to a Store and sweeps the broker's window for
// what is missing. It also answers the hub's pages (hub.Archive). Safe for concurrent use.
type Archiver struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu      sync.Mutex
	queue   []*hub.Publication           // waiting to be written; guarded by mu
	seen    shrink.Map[string, struct{}] // topics added since the last sweep; guarded by mu
	written shrink.Map[string, struct{}] // topics written since the last prune; guarded by mu
	closed  bool                         // guarded by mu
	wake    chan struct{}                // cap 1: the writer has something to do
	kick    chan time.Time               // cap 1: sweep now, from this time on
	flushed chan struct{}                // closed when the writer has exited

	// Owned by the sweeper goroutine.
	verified shrink.Map[string, hub.Position] // per topic: archived up to here, as checked by a sweep

	cancel context.CancelFunc
	done   sync.WaitGroup
}

var _ hub.Archive = (*Archiver)(nil)

// The defaults of Config's Queue, Sweep and Grace (--archive-queue, --archive-sweep, --archive-grace).
const (
	DefaultQueue = 100_000
	DefaultSweep = 30 * time.Second
	DefaultGrace = 10 * time.Second
)

// New returns an Archiver; Run starts it.
func New(cfg Config) *Archiver {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Sweep <= 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = 10 * time.Minute
	}
	if cfg.Durable == nil {
		cfg.Durable = func(string) bool { return false }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Archiver{
		cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer),
		seen: shrink.NewMap[string, struct{}](shrink.Floor), written: shrink.NewMap[string, struct{}](shrink.Floor),
		wake: make(chan struct{}, 1), kick: make(chan time.Time, 1), flushed: make(chan struct{}),
		verified: shrink.NewMap[string, hub.Position](shrink.Floor),
	}
	a.m.ready.Set(1)
	return a
}

// Run starts the writer, and the sweeper with a first sweep of every topic the broker knows
// (what a node that stopped, or died, left unarchived). It returns at once.
func (a *Archiver) Run(ctx context.Context) {
	ctx, a.cancel = context.WithCancel(ctx)
	a.done.Add(2)
	go func() { defer a.done.Done(); defer close(a.flushed); a.writeLoop(ctx) }()
	go func() { defer a.done.Done(); a.sweepLoop(ctx) }()
}

// Added queues a publication this node published (hub.Archive). It never blocks: when the
// queue is full the publication is left to the sweeps.
func (a *Archiver) Added(p *hub.Publication) {
	if !a.cfg.Durable(p.Topic) {
		return
	}
	a.mu.Lock()
	if a.closed || len(a.queue) >= a.cfg.Queue {
		a.seen.Set(p.Topic, struct{}{})
		a.mu.Unlock()
		a.m.dropped.Inc()
		return
	}
	a.queue = append(a.queue, p)
	a.seen.Set(p.Topic, struct{}{})
	n := len(a.queue)
	a.mu.Unlock()
	a.m.queued.Set(float64(n))
	if n == 1 || n == a.cfg.Batch {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// Close writes what is queued (for up to timeout), stops the sweeper and closes the store.
func (a *Archiver) Close(timeout time.Duration) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	if a.cancel != nil {
		select {
		case <-a.flushed:
		case <-time.After(timeout):
		}
		a.cancel()
		a.done.Wait()
	}
	a.mu.Lock()
	left := len(a.queue)
	a.mu.Unlock()
	var err error
	if left > 0 {
		err = fmt.Errorf("archive: %d publications not written at shutdown (a sweep catches them up)", left)
	}
	return errors.Join(err, a.cfg.Store.Close())
}

// ReleaseMapped takes the store's mapped file pages out of the process's resident memory when
// it has any (the embedded bbolt file; see boltmem).
func (a *Archiver) ReleaseMapped() error {
	if r, ok := a.cfg.Store.(interface{ ReleaseMapped() error }); ok {
		return r.ReleaseMapped()
	}
	return nil
}

// Page answers the hub from the store, for durable topics.
func (a *Archiver) Page(ctx context.Context, topic, epoch string, before uint64, limit int) ([]*hub.Publication, error) {
	if !a.cfg.Durable(topic) {
		return nil, nil
	}
	start := time.Now()
	pubs, err := a.cfg.Store.Page(ctx, topic, epoch, before, limit)
	if err != nil {
		return nil, hub.Unavailable("archive", err)
	}
	a.m.pageSeconds.Observe(time.Since(start).Seconds())
	return pubs, nil
}

// PrevEpoch answers the hub from the store, for durable topics.
func (a *Archiver) PrevEpoch(ctx context.Context, topic, epoch string) (hub.Position, bool, error) {
	if !a.cfg.Durable(topic) {
		return hub.Position{}, false, nil
	}
	pos, ok, err := a.cfg.Store.PrevEpoch(ctx, topic, epoch)
	if err != nil {
		return pos, ok, hub.Unavailable("archive", err)
	}
	return pos, ok, nil
}

// writeLoop writes the queue in batches until Close, retrying a failed batch with backoff.
// After a failure ends it asks for a sweep from when it began: publications dropped meanwhile,
// or acknowledged by nodes that died, are caught up.
func (a *Archiver) writeLoop(ctx context.Context) {
	backoff := time.Duration(0)
	var failedSince time.Time
	var batch []*hub.Publication
	for {
		a.mu.Lock()
		if len(batch) == 0 {
			n := min(len(a.queue), a.cfg.Batch)
			batch = append(batch[:0], a.queue[:n]...)
			rest := copy(a.queue, a.queue[n:])
			clear(a.queue[rest:])
			a.queue = a.queue[:rest]
			if rest == 0 {
				a.queue = shrink.Slice(a.queue) // a drained burst gives its array back
			}
		}
		closed, left := a.closed, len(a.queue)
		a.mu.Unlock()
		a.m.queued.Set(float64(left))
		if len(batch) == 0 {
			if closed {
				return
			}
			select {
			case <-a.wake:
			case <-ctx.Done():
				return
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := a.write(wctx, batch)
		cancel()
		if err != nil {
			a.m.errors.Inc()
			if failedSince.IsZero() {
				failedSince = a.cfg.Now()
				a.m.ready.Set(0)
				a.log.Warn("archive write failed; retrying", "err", err, "queued", left+len(batch))
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		now := a.cfg.Now()
		for _, p := range batch {
			a.m.lag.Observe(now.Sub(p.Time).Seconds())
		}
		a.m.written.WithLabelValues("live").Add(float64(n))
		a.mu.Lock()
		for _, p := range batch {
			a.wroteLocked(p.Topic)
		}
		a.mu.Unlock()
		clear(batch)
		batch = batch[:0]
		if !failedSince.IsZero() {
			a.log.Info("archive writes resumed", "down_for", now.Sub(failedSince).Round(time.Millisecond))
			a.m.ready.Set(1)
			select {
			case a.kick <- failedSince.Add(-a.cfg.Grace):
			default:
			}
			failedSince, backoff = time.Time{}, 0
		}
	}
}

// write writes batch. When the store refuses it, the publications are written one at a time
// and those it refuses are set aside (counted, logged), so one bad row never stops the archive:
// retrying it would fail forever and hold up everything queued after it.
func (a *Archiver) write(ctx context.Context, batch []*hub.Publication) (int, error) {
	n, err := a.cfg.Store.Write(ctx, batch)
	if !errors.Is(err, ErrRefused) {
		return n, err
	}
	n = 0
	for _, p := range batch {
		w, err := a.cfg.Store.Write(ctx, []*hub.Publication{p})
		switch {
		case errors.Is(err, ErrRefused):
			a.m.refused.Inc()
			a.log.Warn("archive: publication refused by the store, set aside", "topic", p.Topic,
				"epoch", p.Epoch, "offset", p.Offset, "err", err)
		case err != nil:
			return n, err // unavailable now: the batch is retried (what was written is kept once)
		default:
			n += w
		}
	}
	return n, nil
}

// sweepLoop sweeps at start, every Sweep, and when the writer recovers.
func (a *Archiver) sweepLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Sweep)
	defer t.Stop()
	prune := time.NewTicker(a.cfg.PruneEvery)
	defer prune.Stop()
	var since time.Time // zero: every topic the broker knows
	for {
		start := a.cfg.Now()
		if err := a.sweep(ctx, since); err != nil {
			a.log.Debug("archive sweep", "err", err)
		} else {
			// The next sweep looks at topics published to since this one's cutoff, with a sweep
			// interval of margin for clocks that differ between nodes.
			since = start.Add(-a.cfg.Grace - a.cfg.Sweep)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case from := <-a.kick:
			if from.Before(since) {
				since = from
			}
		case <-prune.C:
			a.prune(ctx)
			continue
		}
	}
}

// quietVerified bounds the verified positions held: a sweep forgets those of topics it did
// not look at while more than this many are held.
const quietVerified = 1024

// sweep catches up every durable topic published to since since.
func (a *Archiver) sweep(ctx context.Context, since time.Time) error {
	var topics []string
	if l, ok := a.cfg.Source.(TopicLister); ok {
		var err error
		if topics, err = l.TopicsSince(ctx, since); err != nil {
			return fmt.Errorf("archive: list topics: %w", err)
		}
	}
	a.mu.Lock()
	for t := range a.seen.M {
		topics = append(topics, t)
	}
	a.seen.Clear()
	a.mu.Unlock()
	cutoff := a.cfg.Now().Add(-a.cfg.Grace)
	a.mu.Lock()
	if len(a.queue) > 0 && a.queue[0].Time.Before(cutoff) {
		// This node's own backlog (an archive that was down) goes first, by its writer: a
		// sweep takes only what is older than anything still queued here.
		cutoff = a.queue[0].Time
	}
	a.mu.Unlock()
	var errs []error
	done := make(map[string]struct{}, len(topics))
	for _, t := range topics {
		if _, dup := done[t]; dup || !a.cfg.Durable(t) {
			continue
		}
		done[t] = struct{}{}
		if err := a.catchUp(ctx, t, cutoff); err != nil {
			errs = append(errs, err)
			a.mu.Lock()
			a.seen.Set(t, struct{}{}) // try it again next time, whatever since says
			a.mu.Unlock()
		}
	}
	// Forget quiet topics beyond a few: the map stays bounded by active topics, and gives its
	// memory back after a burst of them (forgetting costs a quiet topic's next sweep a read of
	// its whole window).
	for t := range a.verified.M {
		if _, ok := done[t]; !ok && len(a.verified.M) > quietVerified {
			a.verified.Delete(t)
		}
	}
	a.verified.Tidy()
	return errors.Join(errs...)
}

// catchUp writes topic's publications that are in the broker's window, older than cutoff, and
// not archived yet.
func (a *Archiver) catchUp(ctx context.Context, topic string, cutoff time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v := a.verified.M[topic]
	hr, err := a.cfg.Source.History(ctx, topic, v.Offset, 0)
	if err == nil && v.Offset > 0 && hr.Top.Epoch != v.Epoch {
		hr, err = a.cfg.Source.History(ctx, topic, 0, 0) // a new epoch: all of its window
	}
	if err != nil {
		return fmt.Errorf("archive: window of %s: %w", topic, err)
	}
	var due []*hub.Publication
	ageCut := time.Time{}
	if a.cfg.Retention.Age > 0 {
		ageCut = a.cfg.Now().Add(-a.cfg.Retention.Age)
	}
	for _, p := range hr.Publications {
		if p.Epoch != hr.Top.Epoch || !p.Time.Before(cutoff) {
			break
		}
		if p.Time.Before(ageCut) {
			continue // retention would delete it again
		}
		due = append(due, p)
	}
	if v.Epoch == hr.Top.Epoch && v.Offset > 0 && hr.Oldest > v.Offset+1 {
		// The window moved past what this node verified: what was in between is archived, or lost.
		if n, err := a.cfg.Store.Count(ctx, topic, v.Epoch, v.Offset+1, hr.Oldest-1); err == nil {
			if lost := int(hr.Oldest-1-v.Offset) - n; lost > 0 {
				a.m.missed.Add(float64(lost))
				a.log.Warn("archive: publications left the broker's window unarchived", "topic", topic,
					"epoch", v.Epoch, "from", v.Offset+1, "to", hr.Oldest-1, "missing", lost)
			}
		}
	}
	if len(due) == 0 {
		return nil
	}
	first, last := due[0].Offset, due[len(due)-1].Offset
	n, err := a.cfg.Store.Count(ctx, topic, hr.Top.Epoch, first, last)
	if err != nil {
		return fmt.Errorf("archive: count %s: %w", topic, err)
	}
	if n < len(due) {
		for i := 0; i < len(due); i += a.cfg.Batch {
			w, err := a.write(ctx, due[i:min(i+a.cfg.Batch, len(due))])
			if err != nil {
				a.m.errors.Inc()
				return fmt.Errorf("archive: catch up %s: %w", topic, err)
			}
			a.m.written.WithLabelValues("catchup").Add(float64(w))
			if w > 0 {
				a.log.Info("archive: caught up from the broker's window", "topic", topic, "written", w)
			}
		}
		a.mu.Lock()
		a.wroteLocked(topic)
		a.mu.Unlock()
	}
	setTopic(&a.verified, topic, hub.Position{Offset: last, Epoch: hr.Top.Epoch})
	return nil
}

// setTopic stores v under topic in m, a copy of topic when it is new there: a topic name may
// be cut from a request's memory, which a long-lived map would otherwise keep whole.
func setTopic[V any](m *shrink.Map[string, V], topic string, v V) {
	if _, ok := m.M[topic]; !ok {
		topic = strings.Clone(topic)
	}
	m.Set(topic, v)
}

// wroteLocked notes that topic was written, for the next prune; only when there is one to do.
func (a *Archiver) wroteLocked(topic string) {
	if a.cfg.Retention.IsZero() {
		return
	}
	setTopic(&a.written, topic, struct{}{})
}

// Sweep runs one sweep of every topic now, for tests and tools; it must not overlap Run's.
func (a *Archiver) Sweep(ctx context.Context) error { return a.sweep(ctx, time.Time{}) }

func (a *Archiver) prune(ctx context.Context) {
	a.mu.Lock()
	topics := make([]string, 0, len(a.written.M))
	for t := range a.written.M {
		topics = append(topics, t)
	}
	a.written.Clear()
	a.mu.Unlock()
	if a.cfg.Retention.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	n, err := a.cfg.Store.Prune(ctx, a.cfg.Retention, a.cfg.Now(), topics)
	if err != nil {
		a.log.Warn("archive prune failed", "err", err)
		return
	}
	a.m.pruned.Add(float64(n))
}

type metrics struct {
	lag         prometheus.Histogram
	pageSeconds prometheus.Histogram
	written     *prometheus.CounterVec
	errors      prometheus.Counter
	refused     prometheus.Counter
	dropped     prometheus.Counter
	missed      prometheus.Counter
	pruned      prometheus.Counter
	queued      prometheus.Gauge
	ready       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rtlab_archive_lag_seconds",
			Help:    "From a publication's time to its commit in the archive, for what this node acknowledged.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}),
		pageSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rtlab_archive_page_seconds",
			Help: "Time to read one page from the archive.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rtlab_archive_written_total",
			Help: "Publications stored in the archive by this node: live (acknowledged here) or catchup (found missing by a sweep)."}, []string{"path"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "rtlab_archive_write_errors_total",
			Help: "Archive writes that failed (retried)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "rtlab_archive_refused_total",
			Help: "Publications the archive's store refused (a NUL in text, say): set aside and logged, the rest goes on."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "rtlab_archive_dropped_total",
			Help: "Publications not queued because the queue was full; left to the sweeps."}),
		missed: prometheus.NewCounter(prometheus.CounterOpts{Name: "rtlab_archive_missed_total",
			Help: "Publications found gone from the broker's window before anyone archived them."}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{Name: "rtlab_archive_pruned_total",
			Help: "Publications deleted by --archive-retention."}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rtlab_archive_queue",
			Help: "Publications waiting to be written to the archive."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rtlab_archive_ready",
			Help: "1 while archive writes succeed."}),
	}
	if reg != nil {
		reg.MustRegister(m.lag, m.pageSeconds, m.written, m.errors, m.refused, m.dropped, m.missed, m.pruned, m.queued, m.ready)
	}
	return m
}
