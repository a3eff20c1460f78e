// Package archive keeps every publication of durable topics (chat rooms) beyond the broker's
// window, so that clients can page back to a room's first message: on one node in an embedded
// bbolt file (Bolt), on several in PostgreSQL (Postgres).
//
// An Archiver runs on every node. It writes what the node had acknowledged (Add, after the
// broker's Publish returned), in batches, off the publish path. Each publication is stored once:
// its key is (topic, epoch, offset) and a write skips keys already stored. A node that dies with
// publications still queued, or an archive that is down for a while, leaves holes; every node
// sweeps the broker's window now and then and writes what is older than a grace period and
// still missing (catch-up). So an acknowledged publication is missing from the archive only if
// it left the window before any node swept it: more than the window's size of newer
// publications on its topic, and no node running a sweep meanwhile.
package archive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// ErrRefused is wrapped by a Store's Write when the store refused the data itself.
var ErrRefused = errors.New("archive: refused by the store")

// Store is where archived publications are kept. Implementations are safe for concurrent use.
type Store interface {
	// Write stores the publications whose (topic, epoch, offset) is not stored yet and returns
	// how many were new. Publications carry Topic, Epoch, Offset, Time, Sender, Type and Data.
	// An error wrapping ErrRefused means the store refused what it was given (a row it cannot
	// hold), not that it is unavailable: the same write would fail again.
	Write(ctx context.Context, pubs []*hub.Publication) (int, error)
	// Count returns how many offsets in [from, to] of topic's epoch are stored.
	Count(ctx context.Context, topic, epoch string, from, to uint64) (int, error)
	// Page returns up to limit publications of topic's epoch with offset < before, newest first.
	Page(ctx context.Context, topic, epoch string, before uint64, limit int) ([]*hub.Publication, error)
	// PrevEpoch returns the epoch of topic stored before epoch (by the time of its first
	// publication) and its latest stored offset; false when there is none.
	PrevEpoch(ctx context.Context, topic, epoch string) (hub.Position, bool, error)
	// Prune deletes what r no longer keeps: publications older than r.Age everywhere, and for
	// each of topics all but its newest r.Count. It returns how many it deleted.
	Prune(ctx context.Context, r Retention, now time.Time, topics []string) (int, error)
	// Close releases the store.
	Close() error
}

// Retention is how long archived publications are kept. The zero value keeps everything.
type Retention struct {
	Age   time.Duration // publications older than this are deleted; zero keeps them
	Count int           // publications kept per topic (its newest epoch's newest); zero keeps all
}

// IsZero reports whether r keeps everything.
func (r Retention) IsZero() bool { return r.Age <= 0 && r.Count <= 0 }

func (r Retention) String() string {
	switch {
	case r.Age > 0:
		return "publications younger than " + r.Age.String()
	case r.Count > 0:
		return "the newest " + strconv.Itoa(r.Count) + " per topic"
	}
	return "everything"
}

// ErrBadRetention is returned by ParseRetention.
var ErrBadRetention = errors.New("archive: bad retention")

// ParseRetention reads --archive-retention: empty or "0" keeps everything, a plain number is a
// count per topic, and a duration (720h, or days as 30d) an age.
func ParseRetention(s string) (Retention, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return Retention{}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return Retention{}, fmt.Errorf("%w: %q: a count must be positive", ErrBadRetention, s)
		}
		return Retention{Count: n}, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return Retention{Age: time.Duration(n) * 24 * time.Hour}, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return Retention{}, fmt.Errorf("%w: %q: want a count per topic (100000), an age (720h, 30d) or 0 for everything", ErrBadRetention, s)
	}
	return Retention{Age: d}, nil
}

// maxOffset is the largest offset a store can hold (PostgreSQL's bigint).
const maxOffset = 1<<63 - 1

func clampOffset(o uint64) uint64 { return min(o, maxOffset) }
