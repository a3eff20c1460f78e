package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
)

// multiPollRequest is the body of POST /api/poll: every topic a client follows, with where it
// stands, in one request. Positions travel in the body, so a client with many topics never
// outgrows a URL or header limit.
type multiPollRequest struct {
	Topics []struct {
		Topic string  `json:"topic"`
		Since *uint64 `json:"since"`
		Epoch string  `json:"epoch"`
	} `json:"topics"`
	Wait  json.RawMessage `json:"wait"` // seconds (a number) or a duration ("25s"); absent: short poll
	Limit int             `json:"limit"`
}

// multiPollEntry is one topic of a multi-topic poll while it is served.
type multiPollEntry struct {
	topic string
	opts  hub.ReadOptions
	err   error // refused or failed: answered as {"topic","error","reason"}
	news  bool  // answered with res
	res   hub.ReadResult
	sub   *hub.Subscription
	w     *pollWaiter
}

// HandleMultiPoll serves POST /api/poll: a short or long poll of many topics at once. The
// answer lists only the topics with something to tell (publications, a gap, a "from now"
// position, a refusal); a long poll answers as soon as one topic has news, or with an empty
// list when its wait passes. A topic the client may not read, or one past --max-subs, is
// refused alone; the others are served.
func (s *Server) HandleMultiPoll(w http.ResponseWriter, r *http.Request) {
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.allowRead(r, ident.User)
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	req, wait, err := s.parseMultiPoll(w, r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	entries := s.multiPollEntries(Client{Identity: ident}, req)
	var bye chan Reason
	if wait > 0 {
		release, err := s.admitLongPoll(r, ident.User)
		if err != nil {
			s.WriteError(w, r, err)
			return
		}
		bye = make(chan Reason, 1)
		defer s.waitPoll(ident, release, func(why Reason) {
			select {
			case bye <- why:
			default:
			}
		})()
	}
	r2, err := s.multiPoll(r.Context(), entries, wait, bye)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	more := capMultiPoll(entries, s.lim.PollAnswerBytes)
	// A client that does not read its answer is let go after --write-timeout, and the answer
	// with it.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
	writeMultiPoll(w, entries, r2, more)
}

func (s *Server) parseMultiPoll(w http.ResponseWriter, r *http.Request) (multiPollRequest, time.Duration, error) {
	var req multiPollRequest
	body, err := s.readBody(w, r)
	if err != nil {
		return req, 0, err
	}
	if body == nil {
		return req, 0, fmt.Errorf(`%w: body is required: {"topics":[{"topic":"a","since":0}],"wait":25}`, ErrBadRequest)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, 0, fmt.Errorf("%w: %s", ErrBadRequest, multiPollBodyError(err))
	}
	if len(req.Topics) == 0 {
		return req, 0, fmt.Errorf("%w: topics is empty", ErrBadRequest)
	}
	if req.Limit == 0 {
		req.Limit = 100
	}
	if req.Limit < 1 || req.Limit > 1000 {
		return req, 0, fmt.Errorf("%w: limit=%d must be 1..1000", ErrBadRequest, req.Limit)
	}
	var wait time.Duration
	if len(req.Wait) > 0 && string(req.Wait) != "null" {
		v := string(req.Wait)
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		d, err := parseWait(v)
		if err != nil || d < 0 || d > s.lim.LongPollMax {
			return req, 0, fmt.Errorf("%w: wait=%s must be a duration up to %s (like 25s, or seconds)", ErrBadRequest, req.Wait, s.lim.LongPollMax)
		}
		wait = d
	}
	return req, wait, nil
}

// multiPollBodyError says for people what is wrong with a body that does not decode.
func multiPollBodyError(err error) string {
	const want = `want {"topics":[{"topic":"a","since":0,"epoch":"…"}],"wait":25,"limit":100}`
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "the body is not JSON: " + want
	}
	switch te.Field {
	case "topics":
		return `"topics" must be an array of {"topic","since","epoch"}`
	case "topics.topic":
		return `each topic's "topic" must be a string`
	case "topics.since":
		return `each topic's "since" must be an offset (a non-negative integer)`
	case "topics.epoch":
		return `each topic's "epoch" must be a string`
	case "limit":
		return `"limit" must be an integer 1..1000`
	}
	return "the body must be a JSON object: " + want
}

// multiPollEntries checks each topic on its own: the refused ones carry their error.
func (s *Server) multiPollEntries(c Client, req multiPollRequest) []*multiPollEntry {
	entries := make([]*multiPollEntry, len(req.Topics))
	seen := make(map[string]bool, len(req.Topics))
	for i, t := range req.Topics {
		e := &multiPollEntry{topic: t.Topic, opts: hub.ReadOptions{Epoch: t.Epoch, Limit: req.Limit}}
		if t.Since != nil {
			e.opts.Recover, e.opts.Since = true, *t.Since
		}
		switch {
		case i >= s.lim.MaxSubs:
			e.err = fmt.Errorf("%w: at most %d topics per poll (--max-subs)", ErrTooManySubs, s.lim.MaxSubs)
		case seen[t.Topic]:
			e.err = fmt.Errorf("%w: topic %q given twice", ErrBadRequest, t.Topic)
		default:
			if e.err = hub.ValidateTopic(t.Topic); e.err == nil {
				e.err = s.policy.CanRead(c, t.Topic)
			}
		}
		seen[t.Topic] = true
		if e.err != nil {
			code, _ := errorCode(e.err)
			s.m.Refused.WithLabelValues("http", code).Inc()
		}
		entries[i] = e
	}
	return entries
}

// multiPoll fills the entries' answers. With wait, each topic waits through one subscription
// (which reads what is already there first); the first publication or gap on any of them ends
// the wait for all.
func (s *Server) multiPoll(ctx context.Context, entries []*multiPollEntry, wait time.Duration, bye <-chan Reason) (*Reason, error) {
	signal := make(chan struct{}, 1)
	news := false
	defer func() {
		for _, e := range entries {
			if e.sub != nil {
				s.hub.Unsubscribe(e.sub)
				e.sub = nil
			}
		}
	}()
	for _, e := range entries {
		if e.err != nil {
			continue
		}
		if !e.opts.Recover || wait <= 0 {
			// "From now" answers where now is at once, so the client can resume from there.
			e.res, e.err = s.hub.Read(ctx, e.topic, e.opts)
			if !e.opts.Recover {
				e.res.Recovered = true // nothing was asked for, so nothing is missing
			}
			e.news = e.err != nil || !e.opts.Recover || len(e.res.Publications) > 0 || !e.res.Recovered
			news = news || e.news
			continue
		}
		e.w = &pollWaiter{limit: e.opts.Limit, signal: signal}
		e.sub, e.res, e.err = s.hub.Subscribe(ctx, e.topic, e.w, e.opts)
		if e.err != nil || len(e.res.Publications) > 0 || !e.res.Recovered {
			e.news, news = true, true
			if len(e.res.Publications) > e.opts.Limit {
				e.res.Publications = e.res.Publications[:e.opts.Limit]
			}
		}
	}
	if news || wait <= 0 {
		return nil, ctx.Err()
	}
	for _, e := range entries {
		if e.sub != nil {
			e.sub.Start()
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-signal:
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.draining:
	case r := <-bye:
		return &r, nil // told instead of publications: the client resumes from where it was
	}
	for _, e := range entries {
		if e.w == nil {
			continue
		}
		s.hub.Unsubscribe(e.sub)
		e.sub = nil
		e.w.mu.Lock()
		if len(e.w.pubs) > 0 || e.w.gap != "" {
			e.news = true
			e.res.Publications = e.w.pubs
			if e.w.gap != "" {
				e.res.Recovered, e.res.Reason = false, e.w.gap
			}
			if n := len(e.res.Publications); n > 0 {
				last := e.res.Publications[n-1]
				e.res.Top = hub.Position{Offset: last.Offset, Epoch: last.Epoch}
			}
		}
		e.w.mu.Unlock()
	}
	return nil, nil
}

// capMultiPoll keeps the answer's publications within budget bytes (and at least one, so that a
// client always gets ahead): a topic cut short answers up to its last publication kept, where
// the client continues, and a topic left no room is left out, to be answered by the next poll
// from the position the client still has. It reports whether anything was cut.
func capMultiPoll(entries []*multiPollEntry, budget int) bool {
	used, kept, more := 0, 0, false
	for _, e := range entries {
		if e.err != nil || !e.news || len(e.res.Publications) == 0 {
			continue
		}
		pubs := e.res.Publications
		n := 0
		for ; n < len(pubs); n++ {
			size := len(pubs[n].JSON()) + 1
			if kept > 0 && used+size > budget {
				break
			}
			used += size
			kept++
		}
		if n == len(pubs) {
			continue
		}
		more = true
		if n == 0 {
			e.news = false
			continue
		}
		last := pubs[n-1]
		e.res.Publications = pubs[:n]
		e.res.Top = hub.Position{Offset: last.Offset, Epoch: last.Epoch}
	}
	return more
}

// writeMultiPoll answers {"topics":[...]}: each topic with news as a poll answers it, each
// refused one as {"topic","error","reason"}; with more, "more":true says the answer was cut at
// --poll-answer-bytes and the next poll continues. A poll ended by a disconnect has
// "disconnect":{"code","reason","reconnect"} and no topics.
func writeMultiPoll(w http.ResponseWriter, entries []*multiPollEntry, bye *Reason, more bool) {
	b := make([]byte, 0, 256)
	if bye != nil {
		msg, _ := json.Marshal(map[string]any{"code": bye.Code, "reason": bye.Text, "reconnect": bye.Reconnect})
		b = fmt.Appendf(b, `{"disconnect":%s,"topics":[]}`+"\n", msg)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
		return
	}
	b = append(b, `{"topics":[`...)
	first := true
	for _, e := range entries {
		if e.err == nil && !e.news {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if e.err != nil {
			b = appendRefusal(b, e.topic, e.err)
			continue
		}
		b = appendReadResult(b, e.topic, e.res)
	}
	b = append(b, ']')
	if more {
		b = append(b, `,"more":true`...)
	}
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func appendRefusal(b []byte, topic string, err error) []byte {
	code, _ := errorCode(err)
	if errors.Is(err, context.Canceled) {
		code = "unavailable"
	}
	b = append(b, `{"topic":`...)
	b = hub.AppendJSONString(b, topic)
	b = append(b, `,"error":`...)
	b = hub.AppendJSONString(b, code)
	b = append(b, `,"reason":`...)
	b = hub.AppendJSONString(b, reasonText(err))
	return append(b, '}')
}

// appendReadResult appends a read's answer as GET /api/poll gives it.
func appendReadResult(b []byte, topic string, res hub.ReadResult) []byte {
	b = append(b, `{"topic":`...)
	b = hub.AppendJSONString(b, topic)
	b = append(b, `,"epoch":`...)
	b = hub.AppendJSONString(b, res.Top.Epoch)
	b = append(b, `,"offset":`...)
	b = strconv.AppendUint(b, res.Top.Offset, 10)
	b = append(b, `,"recovered":`...)
	b = strconv.AppendBool(b, res.Recovered)
	if !res.Recovered {
		b = append(b, `,"reason":`...)
		b = hub.AppendJSONString(b, res.Reason)
	}
	b = append(b, `,"publications":[`...)
	for i, p := range res.Publications {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.JSON()...)
	}
	return append(b, "]}"...)
}
