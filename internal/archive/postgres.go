package archive

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rtlab/rtlab/internal/hub"
)

// Postgres is a Store in PostgreSQL, shared by every node. Tables (created when missing):
//
//	rtlab_archive         (topic, epoch, "offset") primary key; time, sender, type, data (json, as published)
//	rtlab_archive_epochs  (topic, epoch) primary key; first_time: orders a topic's epochs
//
// Writes insert with ON CONFLICT DO NOTHING, so two nodes writing the same publication (its
// node, and another one's sweep) store it once. Rows are sent sorted by key, so concurrent
// batches take their locks in one order and never deadlock.
type Postgres struct {
	pool *pgxpool.Pool
	url  string // redacted, for logs

	mu    sync.Mutex
	known map[[2]string]struct{} // (topic, epoch) pairs in rtlab_archive_epochs; guarded by mu
}

var _ Store = (*Postgres)(nil)

const pgSchema = `
CREATE TABLE IF NOT EXISTS rtlab_archive (
  topic    text        NOT NULL,
  epoch    text        NOT NULL,
  "offset" bigint      NOT NULL,
  time     timestamptz NOT NULL,
  sender   text        NOT NULL,
  type     text        NOT NULL,
  data     json        NOT NULL,
  archived timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (topic, epoch, "offset")
);
CREATE TABLE IF NOT EXISTS rtlab_archive_epochs (
  topic      text        NOT NULL,
  epoch      text        NOT NULL,
  first_time timestamptz NOT NULL,
  PRIMARY KEY (topic, epoch)
);`

// OpenPostgres connects to the database at dsn (postgres://user:pass@host:port/db) and creates
// the tables when missing. It fails when the database does not answer within ctx.
func OpenPostgres(ctx context.Context, dsn string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	// A pool connection broken by a database restart is dropped at its next use; checking
	// idle ones each minute keeps the pool from handing out many dead ones after an outage.
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	p := &Postgres{pool: pool, url: redacted(dsn), known: make(map[[2]string]struct{})}
	if _, err := pool.Exec(ctx, pgSchema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("archive: create tables in %s: %w", p.url, err)
	}
	return p, nil
}

func redacted(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "postgres"
}

// String names the store for logs, without its password.
func (p *Postgres) String() string { return "PostgreSQL " + p.url }

const pgInsert = `
INSERT INTO rtlab_archive (topic, epoch, "offset", time, sender, type, data)
SELECT t, e, o, tm, s, ty, d::json
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::text[], $6::text[], $7::text[]) AS r(t, e, o, tm, s, ty, d)
ON CONFLICT DO NOTHING`

const pgInsertEpochs = `
INSERT INTO rtlab_archive_epochs (topic, epoch, first_time)
SELECT t, e, tm FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS r(t, e, tm)
ON CONFLICT DO NOTHING`

// Write stores the publications not stored yet, in one round trip (two for a new epoch).
func (p *Postgres) Write(ctx context.Context, pubs []*hub.Publication) (int, error) {
	if len(pubs) == 0 {
		return 0, nil
	}
	sorted := append([]*hub.Publication(nil), pubs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Epoch != b.Epoch {
			return a.Epoch < b.Epoch
		}
		return a.Offset < b.Offset
	})
	n := len(sorted)
	var (
		topics, epochs, senders, types, data = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		offsets                              = make([]int64, n)
		times                                = make([]time.Time, n)
		newT, newE                           []string
		newTm                                []time.Time
	)
	p.mu.Lock()
	for i, q := range sorted {
		topics[i], epochs[i], offsets[i], times[i] = q.Topic, q.Epoch, int64(q.Offset), q.Time
		senders[i], types[i], data[i] = q.Sender, q.Type, string(q.Data)
		k := [2]string{q.Topic, q.Epoch}
		if _, ok := p.known[k]; !ok && (len(newT) == 0 || newT[len(newT)-1] != q.Topic || newE[len(newE)-1] != q.Epoch) {
			newT, newE, newTm = append(newT, q.Topic), append(newE, q.Epoch), append(newTm, q.Time)
		}
	}
	p.mu.Unlock()
	var b pgx.Batch
	if len(newT) > 0 {
		b.Queue(pgInsertEpochs, newT, newE, newTm)
	}
	ins := b.Queue(pgInsert, topics, epochs, offsets, times, senders, types, data)
	written := 0
	ins.Exec(func(tag pgconn.CommandTag) error { written = int(tag.RowsAffected()); return nil })
	if err := p.pool.SendBatch(ctx, &b).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23")) {
			// Data exception or integrity violation (a NUL in text, say): the server is up and
			// refuses these rows.
			return 0, fmt.Errorf("archive: write %d publications: %w: %w", n, ErrRefused, err)
		}
		return 0, fmt.Errorf("archive: write %d publications: %w", n, err)
	}
	p.mu.Lock()
	for i := range newT {
		p.known[[2]string{newT[i], newE[i]}] = struct{}{}
	}
	if len(p.known) > 100_000 {
		clear(p.known) // only a cache of what need not be inserted again
	}
	p.mu.Unlock()
	return written, nil
}

// Count returns how many offsets in [from, to] of topic's epoch are stored.
func (p *Postgres) Count(ctx context.Context, topic, epoch string, from, to uint64) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM rtlab_archive WHERE topic = $1 AND epoch = $2 AND "offset" BETWEEN $3 AND $4`,
		topic, epoch, int64(clampOffset(from)), int64(clampOffset(to))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("archive: count %s: %w", topic, err)
	}
	return n, nil
}

// Page returns up to limit publications with offset < before, newest first.
func (p *Postgres) Page(ctx context.Context, topic, epoch string, before uint64, limit int) ([]*hub.Publication, error) {
	rows, err := p.pool.Query(ctx, `SELECT "offset", time, sender, type, data::text FROM rtlab_archive
		WHERE topic = $1 AND epoch = $2 AND "offset" < $3 ORDER BY "offset" DESC LIMIT $4`,
		topic, epoch, int64(clampOffset(before)), limit)
	if err != nil {
		return nil, fmt.Errorf("archive: page of %s: %w", topic, err)
	}
	defer rows.Close()
	out := make([]*hub.Publication, 0, limit)
	for rows.Next() {
		q := &hub.Publication{Topic: topic, Epoch: epoch}
		var off int64
		var data string
		if err := rows.Scan(&off, &q.Time, &q.Sender, &q.Type, &data); err != nil {
			return nil, fmt.Errorf("archive: page of %s: %w", topic, err)
		}
		q.Offset, q.Time, q.Data = uint64(off), q.Time.UTC(), []byte(data)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("archive: page of %s: %w", topic, err)
	}
	return out, nil
}

// PrevEpoch returns the epoch stored before epoch and its latest offset.
func (p *Postgres) PrevEpoch(ctx context.Context, topic, epoch string) (hub.Position, bool, error) {
	var (
		e   string
		top *int64
	)
	err := p.pool.QueryRow(ctx, `
		SELECT x.epoch, (SELECT max("offset") FROM rtlab_archive a WHERE a.topic = x.topic AND a.epoch = x.epoch)
		FROM rtlab_archive_epochs x
		WHERE x.topic = $1 AND x.epoch <> $2 AND x.first_time <= coalesce(
		  (SELECT first_time FROM rtlab_archive_epochs WHERE topic = $1 AND epoch = $2), 'infinity')
		ORDER BY x.first_time DESC LIMIT 1`, topic, epoch).Scan(&e, &top)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && top == nil) {
		return hub.Position{}, false, nil
	}
	if err != nil {
		return hub.Position{}, false, fmt.Errorf("archive: epochs of %s: %w", topic, err)
	}
	return hub.Position{Offset: uint64(*top), Epoch: e}, true, nil
}

// Prune deletes what r no longer keeps, in chunks, so no statement holds locks for long.
func (p *Postgres) Prune(ctx context.Context, r Retention, now time.Time, topics []string) (int, error) {
	total := 0
	if r.Age > 0 {
		if _, err := p.pool.Exec(ctx, `CREATE INDEX IF NOT EXISTS rtlab_archive_time ON rtlab_archive (time)`); err != nil {
			return 0, fmt.Errorf("archive: prune: %w", err)
		}
		for {
			tag, err := p.pool.Exec(ctx, `DELETE FROM rtlab_archive WHERE ctid IN
				(SELECT ctid FROM rtlab_archive WHERE time < $1 LIMIT 10000)`, now.Add(-r.Age))
			if err != nil {
				return total, fmt.Errorf("archive: prune: %w", err)
			}
			total += int(tag.RowsAffected())
			if tag.RowsAffected() < 10000 {
				break
			}
		}
	}
	if r.Count > 0 {
		for _, t := range topics {
			tag, err := p.pool.Exec(ctx, `
				WITH newest AS (
				  SELECT e.epoch, (SELECT max("offset") FROM rtlab_archive a WHERE a.topic = e.topic AND a.epoch = e.epoch) AS top
				  FROM rtlab_archive_epochs e WHERE e.topic = $1 ORDER BY e.first_time DESC LIMIT 1)
				DELETE FROM rtlab_archive a USING newest n
				WHERE a.topic = $1 AND n.top IS NOT NULL AND (
				  (a.epoch = n.epoch AND a."offset" <= n.top - $2) OR (a.epoch <> n.epoch AND n.top >= $2))`, t, r.Count)
			if err != nil {
				return total, fmt.Errorf("archive: prune %s: %w", t, err)
			}
			total += int(tag.RowsAffected())
		}
	}
	return total, nil
}

// Close closes the pool.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}
