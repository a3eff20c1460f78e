package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// readBody reads a request body of at most MaxFrame bytes. An empty body is returned as nil.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.lim.MaxFrame)))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: body over %d bytes", hub.ErrTooLarge, s.lim.MaxFrame)
	}
	if isTimeout(err) {
		return nil, fmt.Errorf("%w: the body was not read within %s (--body-timeout)", ErrTimeout, s.lim.BodyTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	return body, nil
}

// HandlePublish serves POST /api/publish/{topic}: the body is the data.
func (s *Server) HandlePublish(w http.ResponseWriter, r *http.Request) {
	s.HandlePublishTo(w, r, r.PathValue("topic"), nil)
}

// HandlePublishTo publishes the request's body to topic and answers with the publication's
// position. A request without a body publishes what empty returns; with empty nil, a body is
// required.
func (s *Server) HandlePublishTo(w http.ResponseWriter, r *http.Request, topic string, empty func() json.RawMessage) {
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.allowHTTPPublish(r, ident.User)
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	if body == nil {
		if empty == nil {
			s.WriteError(w, r, fmt.Errorf("%w: body is required (the data to publish, as JSON)", ErrBadRequest))
			return
		}
		body = empty()
	} else if !json.Valid(body) {
		s.WriteError(w, r, fmt.Errorf("%w: body is not valid JSON", ErrBadRequest))
		return
	}
	p, err := s.policy.Publish(r.Context(), Client{Identity: ident}, hub.PublishRequest{
		Topic: topic, Data: body, Type: r.URL.Query().Get("type"), Sender: ident.User,
		Key: r.Header.Get("Idempotency-Key"),
	})
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	ans := map[string]any{"topic": p.Topic, "offset": p.Offset, "epoch": p.Epoch}
	if p.Duplicate {
		ans["duplicate"] = true
	}
	WriteJSON(w, http.StatusOK, ans)
}

// pollParams are the query parameters of poll and history reads.
type pollParams struct {
	opts hub.ReadOptions
	wait time.Duration
}

func (s *Server) parsePoll(r *http.Request, allowWait bool) (pollParams, error) {
	q := r.URL.Query()
	var pp pollParams
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return pp, fmt.Errorf("%w: since=%q is not an offset (a non-negative integer)", ErrBadRequest, v)
		}
		pp.opts.Recover, pp.opts.Since = true, n
	}
	pp.opts.Epoch = q.Get("epoch")
	pp.opts.Limit = 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return pp, fmt.Errorf("%w: limit=%q must be 1..1000", ErrBadRequest, v)
		}
		pp.opts.Limit = n
	}
	if v := q.Get("wait"); v != "" {
		if !allowWait {
			return pp, fmt.Errorf("%w: wait is only for /api/poll", ErrBadRequest)
		}
		d, err := parseWait(v)
		if err != nil || d < 0 || d > s.lim.LongPollMax {
			return pp, fmt.Errorf("%w: wait=%q must be a duration up to %s (like 25s, or seconds)", ErrBadRequest, v, s.lim.LongPollMax)
		}
		pp.wait = d
	}
	return pp, nil
}

func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	return time.ParseDuration(v)
}

// readParams parses a read's query (wait only when allowWait) and checks that the client may
// read topic.
func (s *Server) readParams(r *http.Request, topic string, allowWait bool) (pollParams, error) {
	pp, err := s.parsePoll(r, allowWait)
	if err == nil {
		err = s.canRead(r, topic)
	}
	return pp, err
}

// longPoll waits for what follows opts (see poll), the request admitted as a streaming
// connection meanwhile (admitLongPoll) and in the registry (waitPoll): it ends when the
// request's token expires or is revoked (logout), answering 401 instead of publications its
// token no longer covers. On an error the client has been answered and ok is false.
func (s *Server) longPoll(w http.ResponseWriter, r *http.Request, topic string, opts hub.ReadOptions, wait time.Duration) (res hub.ReadResult, ok bool) {
	ident, _ := s.authenticate(r) // checked before; verified tokens are cached
	release, err := s.admitLongPoll(r, ident.User)
	if err != nil {
		s.WriteError(w, r, err)
		return res, false
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer s.waitPoll(ident, release, func(why Reason) { cancel(pollError(why)) })()
	if res, err = s.poll(ctx, topic, opts, wait); err != nil {
		if cause := context.Cause(ctx); cause != nil && r.Context().Err() == nil {
			err = cause // the token expired or was revoked while waiting
		}
		s.WriteError(w, r, err)
		return res, false
	}
	return res, true
}

// HandlePoll serves GET /api/poll/{topic}?since=N[&wait=25s]: short poll, or long poll with wait.
func (s *Server) HandlePoll(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	pp, err := s.readParams(r, topic, true)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	res, ok := hub.ReadResult{}, true
	if pp.wait > 0 {
		res, ok = s.longPoll(w, r, topic, pp.opts, pp.wait)
	} else if res, err = s.hub.Read(r.Context(), topic, pp.opts); err != nil {
		s.WriteError(w, r, err)
		ok = false
	}
	if !ok {
		return
	}
	writeReadResult(w, topic, res)
}

// HandleHistory serves a history read of topic (GET /api/topics/{topic}/history).
func (s *Server) HandleHistory(w http.ResponseWriter, r *http.Request, topic string) {
	if r.URL.Query().Has("before") {
		s.handlePage(w, r, topic) // paging back (history.go)
		return
	}
	pp, err := s.readParams(r, topic, false)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	if !pp.opts.Recover {
		pp.opts.Recover = true // history without since starts at the oldest retained
	}
	res, err := s.hub.Read(r.Context(), topic, pp.opts)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	writeReadResult(w, topic, res)
}

func (s *Server) canRead(r *http.Request, topic string) error {
	if err := hub.ValidateTopic(topic); err != nil {
		return err
	}
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.allowRead(r, ident.User)
	}
	if err != nil {
		return err
	}
	return s.policy.CanRead(Client{Identity: ident}, topic)
}

// poll reads after opts.Since; with wait it blocks until at least one publication exists, the
// wait passes, the client leaves or the server shuts down. A long poll costs one history read:
// the subscription's own read answers at once when something is there, and otherwise the
// publications that arrive are collected by the sink.
func (s *Server) poll(ctx context.Context, topic string, opts hub.ReadOptions, wait time.Duration) (hub.ReadResult, error) {
	if wait <= 0 {
		return s.hub.Read(ctx, topic, opts)
	}
	if !opts.Recover {
		// "From now": learn where now is, then wait for what comes after it.
		res, err := s.hub.Read(ctx, topic, opts)
		if err != nil {
			return res, err
		}
		opts = hub.ReadOptions{Recover: true, Since: res.Top.Offset, Epoch: res.Top.Epoch, Limit: opts.Limit}
	}
	w := &pollWaiter{limit: opts.Limit, signal: make(chan struct{}, 1)}
	sub, res, err := s.hub.Subscribe(ctx, topic, w, opts)
	if err != nil {
		return res, err
	}
	if len(res.Publications) > 0 || !res.Recovered {
		s.hub.Unsubscribe(sub)
		if opts.Limit > 0 && len(res.Publications) > opts.Limit {
			res.Publications = res.Publications[:opts.Limit]
		}
		return res, nil
	}
	sub.Start()
	t := time.NewTimer(wait)
	select {
	case <-w.signal:
	case <-t.C:
	case <-ctx.Done():
	case <-s.draining:
	}
	t.Stop()
	s.hub.Unsubscribe(sub)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	w.mu.Lock()
	res.Publications = w.pubs
	if w.gap != "" {
		res.Recovered, res.Reason = false, w.gap
	}
	w.mu.Unlock()
	if n := len(res.Publications); n > 0 {
		last := res.Publications[n-1]
		res.Top = hub.Position{Offset: last.Offset, Epoch: last.Epoch}
	}
	return res, nil
}

// pollWaiter collects what a waiting long poll receives.
type pollWaiter struct {
	limit  int
	signal chan struct{}
	mu     sync.Mutex
	pubs   []*hub.Publication // guarded by mu
	gap    string             // why history broke while waiting; guarded by mu
}

// Gap records that the epoch changed while the poll waited: the answer says so.
func (w *pollWaiter) Gap(_ string, _ hub.Position, reason string) {
	w.mu.Lock()
	w.gap = reason
	w.mu.Unlock()
}

func (w *pollWaiter) Deliver(p *hub.Publication) {
	w.mu.Lock()
	if w.limit <= 0 || len(w.pubs) < w.limit {
		w.pubs = append(w.pubs, p)
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func writeReadResult(w http.ResponseWriter, topic string, res hub.ReadResult) {
	b := append(appendReadResult(make([]byte, 0, 256), topic, res), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// HandleDataLongPoll serves a long poll of topic without offsets, for an application's own
// dialect: it answers the data of the next publication(s) as a JSON list, or [] after wait.
func (s *Server) HandleDataLongPoll(w http.ResponseWriter, r *http.Request, topic string, wait time.Duration) {
	pp, err := s.readParams(r, topic, false)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	res, ok := s.longPoll(w, r, topic, pp.opts, wait)
	if !ok {
		return
	}
	b := []byte{'['}
	for i, p := range res.Publications {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.Data...)
	}
	b = append(b, "]\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
