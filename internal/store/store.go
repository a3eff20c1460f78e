// Package store keeps topic history durable in a bbolt file, so a restarted node continues each
// persisted topic's offsets in the same epoch instead of telling every client its history is gone.
//
// Writes are group-committed: Append only queues, and one committer goroutine writes everything
// queued in a single bbolt transaction (one fsync pair per batch, not per publication). That is
// what makes persistence cheap enough for the publish path: a bbolt transaction per publication
// managed 600–2,900 publications/s on the dev VM's disk, batches several hundred thousand.
//
// Layout (all integers big-endian, so byte order is numeric order):
//
//	bucket "meta":  topic                           → version(1) top(8) epoch
//	bucket "pubs":  topic 0x00 offset(8)            → encoded publication (see codec.go)
//	bucket "store": "format"                        → format version
//
// A topic's records and its meta row change in the same transaction, so after a crash the file
// holds, for every topic, a prefix of the appended publications and a top that matches it.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	bolt "go.etcd.io/bbolt"
)

// Errors of this package; test with errors.Is.
var (
	// ErrClosed is passed to done by Append, and returned by Flush, after Close.
	ErrClosed = errors.New("store: closed")
	// ErrOutOfOrder means a publication's offset is not above its topic's stored top in the same
	// epoch. Only that publication is refused; the rest of its batch is committed.
	ErrOutOfOrder = errors.New("store: offset not after the topic's top")
	// ErrBadTopic means a topic name is empty or holds a NUL byte, which the key layout reserves.
	ErrBadTopic = errors.New("store: bad topic name")
)

// Defaults for Config's zero values.
const (
	DefaultMaxBatch = 1024
	DefaultMaxDelay = 2 * time.Millisecond
	DefaultKeep     = 1000
)

// formatVersion is written to new files and checked on open, so a future layout change fails
// loudly instead of misreading old data.
const formatVersion = 1

var (
	bucketMeta  = []byte("meta")
	bucketPubs  = []byte("pubs")
	bucketStore = []byte("store")
	keyFormat   = []byte("format")
)

// Config configures a Store. Zero values are usable except Path.
type Config struct {
	// Path is the bbolt file, e.g. ./data/rtlab.db. Its directory is created. Only one process
	// may open it; Open waits up to 1s for the lock and then fails.
	Path string
	// MaxBatch is the most publications committed in one transaction. Zero means 1024.
	MaxBatch int
	// MaxDelay is the longest a queued publication waits for more to join its batch before the
	// committer starts the transaction (time spent waiting for an earlier commit is not added to
	// it). Zero means 2ms; negative means no wait: commit as soon as the committer is free, which
	// costs more transactions at moderate load in exchange for the lowest latency.
	MaxDelay time.Duration
	// Keep returns how many publications to retain per topic; older ones are deleted in the
	// same transaction that appends. A result <= 0 means 1000. Nil means 1000 for every topic.
	// It is called from the committer goroutine and from Load, so it must be cheap and safe for
	// concurrent use.
	Keep func(topic string) int
	// MaxQueue is how many publications may wait for the committer before Append blocks, which
	// is the backpressure when the disk cannot keep up. Zero means 64 × MaxBatch.
	MaxQueue int
	// NoSync skips the fsyncs of each commit. A process crash still loses nothing committed, but
	// a power loss or kernel crash may lose recent batches or corrupt the file. For tests and
	// benchmarks; false in production.
	NoSync bool
}

// Stats are cumulative counters of a Store, for metrics.
type Stats struct {
	Batches      uint64        // committed or failed transactions
	Publications uint64        // publications committed
	Failed       uint64        // publications whose done got an error (excluding ErrClosed)
	CommitTime   time.Duration // total time spent in transactions, fsync included
	Queued       int           // publications waiting for the committer right now
}

// TopicState is a persisted topic as Load reads it.
type TopicState struct {
	Epoch string
	// Top is the topic's latest offset in Epoch. Publications up to Top were appended (though
	// older ones may have been dropped by retention); the next publication gets Top+1.
	Top uint64
	// Publications are the retained publications (at most Keep) in offset order, with Topic,
	// Offset and Epoch set and Time in UTC.
	Publications []*hub.Publication
}

// item is one queued Append, or a Flush barrier when p is nil.
type item struct {
	p    *hub.Publication
	done func(error)
	err  error // per-publication refusal found during the commit; nil if none
}

// batch is what the committer hands the notifier: items in Append order and the commit result.
type batch struct {
	items []item
	err   error
}

// result is what the i-th item's done is told: the commit's error, else the item's own.
func (b *batch) result(i int) error {
	if b.err != nil {
		return b.err
	}
	return b.items[i].err
}

// Store is a durable per-topic history. Append, Flush, Load, ForEach and Stats are safe for
// concurrent use.
//
// Lock order: mu is never held while running a transaction or calling done.
type Store struct {
	db       *bolt.DB // immutable; never nil
	maxBatch int      // immutable
	maxDelay time.Duration
	maxQueue int
	keep     func(string) int

	mu      sync.Mutex
	space   sync.Cond // signalled when the queue shrinks or the store closes; uses mu
	queue   []item    // guarded by mu
	firstAt time.Time // when queue[0] was appended; guarded by mu
	closed  bool      // guarded by mu

	wake      chan struct{} // cap 1: the committer has something to look at
	toNotify  chan batch    // committer → notifier, in commit order
	free      chan []item   // notifier → committer: emptied batch buffers for reuse
	finished  chan struct{} // closed when the notifier has called every done
	closeOnce sync.Once
	closeErr  error

	batches, pubs, failed atomic.Uint64
	commitNanos           atomic.Int64

	// Owned by the committer goroutine.
	groups map[string]*group
	order  []*group
	arena  []byte
}

// group is one topic's share of a batch.
type group struct {
	topic string
	items []*item
}

// Open opens or creates the store file and starts its committer.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("store: Config.Path is empty")
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64 * cfg.MaxBatch
	}
	if cfg.MaxQueue < cfg.MaxBatch {
		cfg.MaxQueue = cfg.MaxBatch
	}
	keep := cfg.Keep
	if keep == nil {
		keep = func(string) int { return DefaultKeep }
	}
	if dir := filepath.Dir(cfg.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("store: create directory: %w", err)
		}
	}
	opts := &bolt.Options{
		Timeout: time.Second, // another process holds the file: fail instead of hanging
		// The freelist is rebuilt by scanning at open instead of written on every commit:
		// faster commits for a slower start, etcd's choice too.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
		NoSync:         cfg.NoSync,
	}
	if strconv.IntSize == 64 {
		// Address space only (the file grows as written). A mapping large enough for the file
		// means a commit never waits for open read transactions (Load) to remap.
		opts.InitialMmapSize = 1 << 30
	}
	db, err := bolt.Open(cfg.Path, 0o600, opts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	if err := initFile(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", cfg.Path, err)
	}
	s := &Store{
		db:       db,
		maxBatch: cfg.MaxBatch,
		maxDelay: cfg.MaxDelay,
		maxQueue: cfg.MaxQueue,
		keep:     keep,
		wake:     make(chan struct{}, 1),
		toNotify: make(chan batch, 2),
		free:     make(chan []item, 4),
		finished: make(chan struct{}),
		groups:   make(map[string]*group),
	}
	s.space.L = &s.mu
	go s.commitLoop()
	go s.notifyLoop()
	return s, nil
}

// initFile creates the buckets of a new file and checks the format of an existing one.
func initFile(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		st, err := tx.CreateBucketIfNotExists(bucketStore)
		if err != nil {
			return err
		}
		if v := st.Get(keyFormat); v != nil {
			if len(v) != 1 || v[0] != formatVersion {
				return fmt.Errorf("format %v, this build reads %d", v, formatVersion)
			}
		} else if err := st.Put(keyFormat, []byte{formatVersion}); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketMeta); err != nil {
			return err
		}
		_, err = tx.CreateBucketIfNotExists(bucketPubs)
		return err
	})
}

// Append queues p for the next batch and returns without waiting for the disk.
//
// The caller has set p's Topic, Offset and Epoch, and appends each topic's publications in
// offset order (typically under its per-topic lock, which it can release right after Append).
// A publication in a new epoch replaces everything stored for its topic.
//
// done, if not nil, is called exactly once: after the batch holding p is committed (err nil),
// or with what refused p (ErrOutOfOrder, ErrBadTopic) or failed its transaction. All done calls
// come from one goroutine, one at a time, in Append order across all topics, so doing the
// fan-out in done keeps each topic in offset order without holding the topic's lock across the
// fsync. done must not block for long (it delays every later publication) and must not call
// Flush or Close. After Close, done(ErrClosed) runs synchronously inside Append.
//
// Append blocks only while MaxQueue publications are waiting, i.e. when the disk is slower
// than the publishers. p must not be modified after Append.
func (s *Store) Append(p *hub.Publication, done func(err error)) {
	if err := s.enqueue(item{p: p, done: done}); err != nil && done != nil {
		done(err)
	}
}

// Flush waits until every publication appended before it is committed and its done has
// returned. It must not be called from a done callback.
func (s *Store) Flush() error {
	ch := make(chan error, 1)
	if err := s.enqueue(item{done: func(err error) { ch <- err }}); err != nil {
		return err
	}
	return <-ch
}

func (s *Store) enqueue(it item) error {
	s.mu.Lock()
	for len(s.queue) >= s.maxQueue && !s.closed {
		s.space.Wait()
	}
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if len(s.queue) == 0 {
		s.firstAt = time.Now()
	}
	s.queue = append(s.queue, it)
	n := len(s.queue)
	s.mu.Unlock()
	if n == 1 || n == s.maxBatch || it.p == nil {
		s.signal()
	}
	return nil
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close commits everything queued, calls the remaining done callbacks, and closes the file.
// Later Appends get ErrClosed. It must not be called from a done callback.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.space.Broadcast()
		s.mu.Unlock()
		s.signal()
		<-s.finished
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("store: close: %w", err)
		}
	})
	return s.closeErr
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	q := len(s.queue)
	s.mu.Unlock()
	return Stats{
		Batches:      s.batches.Load(),
		Publications: s.pubs.Load(),
		Failed:       s.failed.Load(),
		CommitTime:   time.Duration(s.commitNanos.Load()),
		Queued:       q,
	}
}

// commitLoop is the committer goroutine: it takes batches off the queue in order, commits each
// in one transaction and passes it to the notifier, so the next commit overlaps the fan-out of
// the previous batch.
func (s *Store) commitLoop() {
	defer close(s.toNotify)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			continue
		}
		if len(s.queue) < s.maxBatch && !s.closed && s.maxDelay > 0 && !s.hasBarrierLocked() {
			if wait := s.maxDelay - time.Since(s.firstAt); wait > 0 {
				s.mu.Unlock()
				timer.Reset(wait)
				select {
				case <-s.wake:
					timer.Stop()
				case <-timer.C:
				}
				continue
			}
		}
		var items []item
		select {
		case items = <-s.free:
		default:
		}
		k := min(len(s.queue), s.maxBatch)
		items = append(items[:0], s.queue[:k]...)
		rest := copy(s.queue, s.queue[k:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		// firstAt stays: what is left waited through a full batch already, so it goes next
		// without lingering.
		s.space.Broadcast()
		s.mu.Unlock()

		start := time.Now()
		err := s.db.Update(func(tx *bolt.Tx) error { return s.writeBatch(tx, items) })
		s.commitNanos.Add(int64(time.Since(start)))
		s.batches.Add(1)
		if err != nil {
			err = fmt.Errorf("store: commit %d publications: %w", len(items), err)
		}
		s.toNotify <- batch{items: items, err: err}
	}
}

// hasBarrierLocked reports whether a Flush waits in the queue, which should not linger.
// Barriers are rare and usually last, so checking the tail is enough. s.mu must be held.
func (s *Store) hasBarrierLocked() bool {
	return s.queue[len(s.queue)-1].p == nil
}

// notifyLoop calls done for every committed item in order, then closes finished.
func (s *Store) notifyLoop() {
	defer close(s.finished)
	for b := range s.toNotify {
		// Count before any done runs, so a Flush that returns sees its batch in Stats.
		var ok, bad uint64
		for i := range b.items {
			if b.items[i].p == nil {
				continue // a Flush barrier
			}
			if b.result(i) == nil {
				ok++
			} else {
				bad++
			}
		}
		s.pubs.Add(ok)
		s.failed.Add(bad)
		for i := range b.items {
			if done := b.items[i].done; done != nil {
				done(b.result(i))
			}
		}
		clear(b.items)
		select {
		case s.free <- b.items[:0]:
		default:
		}
	}
}
