package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/stomp"
)

// Paging back through a topic's history ("load older messages"): the same read over HTTP
// (GET /api/topics/{topic}/history?before=N), the WebSocket protocol (op "history") and STOMP
// (SUBSCRIBE to /history/{topic}), with the permissions of subscribing to the topic. A page is
// newest first and names the next, older one (see docs/protocol.md).

// pageParams are a page request's parameters as the client sent them (strings, so that every
// transport parses them alike); empty means absent.
type pageParams struct {
	before, epoch, limit string
}

func parsePage(pp pageParams) (hub.PageOptions, error) {
	var o hub.PageOptions
	if pp.before != "" {
		n, err := strconv.ParseUint(pp.before, 10, 64)
		if err != nil {
			return o, fmt.Errorf("%w: before=%q is not an offset (0 for the newest page)", ErrBadRequest, pp.before)
		}
		o.Before = n
	}
	o.Epoch = pp.epoch
	if pp.limit != "" {
		n, err := strconv.Atoi(pp.limit)
		if err != nil || n < 1 || n > hub.MaxPageLimit {
			return o, fmt.Errorf("%w: limit=%q must be 1..%d", ErrBadRequest, pp.limit, hub.MaxPageLimit)
		}
		o.Limit = n
	}
	return o, nil
}

// page checks c may read topic's history (Policy.CanRead: what may be subscribed) and reads
// one page.
func (s *Server) page(ctx context.Context, c Client, topic string, pp pageParams) (hub.PageResult, error) {
	if err := hub.ValidateTopic(topic); err != nil {
		return hub.PageResult{}, err
	}
	opts, err := parsePage(pp)
	if err != nil {
		return hub.PageResult{}, err
	}
	if err := s.policy.CanRead(c, topic); err != nil {
		return hub.PageResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return s.hub.Page(ctx, topic, opts)
}

// maxPageBytes bounds a page's encoding: it is queued whole on a streaming connection, and
// must leave room in the send queue. A page cut short names the next page from where it stops.
func (s *Server) maxPageBytes() int { return max(s.lim.QueueBytes/2, 16<<10) }

// appendPage appends the page's JSON fields (without braces): topic, epoch, offset,
// publications (newest first) and next, which it returns too (nil: no older page).
func appendPage(b []byte, topic string, res hub.PageResult, maxBytes int) ([]byte, *hub.PageCursor) {
	b = append(b, `"topic":`...)
	b = hub.AppendJSONString(b, topic)
	b = append(b, `,"epoch":`...)
	b = hub.AppendJSONString(b, res.Top.Epoch)
	b = append(b, `,"offset":`...)
	b = strconv.AppendUint(b, res.Top.Offset, 10)
	b = append(b, `,"publications":[`...)
	start, next := len(b), res.Next
	for i, p := range res.Publications {
		js := p.JSON()
		if i > 0 && len(b)-start+len(js) > maxBytes {
			next = &hub.PageCursor{Before: res.Publications[i-1].Offset, Epoch: res.Publications[i-1].Epoch}
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, js...)
	}
	b = append(b, `],"next":`...)
	if next == nil {
		return append(b, "null"...), nil
	}
	b = append(b, `{"before":`...)
	b = strconv.AppendUint(b, next.Before, 10)
	b = append(b, `,"epoch":`...)
	b = hub.AppendJSONString(b, next.Epoch)
	return append(b, '}'), next
}

// handlePage serves GET /api/topics/{topic}/history?before=N[&epoch=E][&limit=M].
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request, topic string) {
	ident, err := s.authenticate(r)
	if err == nil {
		err = s.allowRead(r, ident.User)
	}
	var res hub.PageResult
	if err == nil {
		q := r.URL.Query()
		res, err = s.page(r.Context(), Client{Identity: ident}, topic, pageParams{q.Get("before"), q.Get("epoch"), q.Get("limit")})
	}
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	b := append(make([]byte, 0, 4096), '{')
	b, _ = appendPage(b, topic, res, s.maxPageBytes())
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// wsHistoryRequest is the native protocol's history op.
type wsHistoryRequest struct {
	Topic  string          `json:"topic"`
	Before *uint64         `json:"before"`
	Epoch  string          `json:"epoch"`
	Limit  *int            `json:"limit"`
	ID     json.RawMessage `json:"id"`
}

// history answers {"op":"history","topic",...} with {"op":"history","id",...page}.
func (c *wsConn) history(ctx context.Context, msg []byte) {
	var req wsHistoryRequest
	if err := json.Unmarshal(msg, &req); err != nil {
		c.replyError(fmt.Errorf("%w: history: %v", ErrBadRequest, err), nil, "")
		return
	}
	if !c.rl.allow(time.Now()) {
		c.replyError(c.s.errRateLimited(), req.ID, req.Topic)
		return
	}
	var pp pageParams
	if req.Before != nil {
		pp.before = strconv.FormatUint(*req.Before, 10)
	}
	if req.Limit != nil {
		pp.limit = strconv.Itoa(*req.Limit)
	}
	pp.epoch = req.Epoch
	res, err := c.s.page(ctx, c.client(), req.Topic, pp)
	if err != nil {
		c.replyError(err, req.ID, req.Topic)
		return
	}
	b := append(make([]byte, 0, 4096), `{"op":"history","id":`...)
	if len(req.ID) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, req.ID...)
	}
	b = append(b, ',')
	b, _ = appendPage(b, req.Topic, res, c.s.maxPageBytes())
	b = append(b, '}')
	c.w.sendRaw(appendWSText(nil, b))
}

// historyDest is the STOMP destination prefix of history pages.
const historyDest = "/history/"

// onHistory answers SUBSCRIBE to /history/{topic} (headers before, epoch, limit) with one
// MESSAGE whose body is the page, as the HTTP read answers it; headers next-before and
// next-epoch name the next page. The subscription is done with it: nothing else is delivered on
// it, and UNSUBSCRIBE is optional.
func (c *stompConn) onHistory(ctx context.Context, f *stomp.Frame, dest string) bool {
	id, ok := f.Get("id")
	if !ok {
		id = dest
	}
	if !c.rl.allow(time.Now()) {
		c.fail(c.s.errRateLimited(), f, 4000)
		return false
	}
	var pp pageParams
	pp.before, _ = f.Get("before")
	pp.epoch, _ = f.Get("epoch")
	pp.limit, _ = f.Get("limit")
	topic := strings.TrimPrefix(dest, historyDest)
	res, err := c.s.page(ctx, c.client(), topic, pp)
	if err != nil {
		code := uint16(4000)
		if _, status := errorCode(err); status == http.StatusForbidden || status == http.StatusUnauthorized {
			code = 4003
		}
		c.fail(err, f, code)
		return false
	}
	body := append(make([]byte, 0, 4096), '{')
	body, next := appendPage(body, topic, res, c.s.maxPageBytes())
	body = append(body, '}')
	h := []stomp.Header{
		{Key: "destination", Value: dest}, {Key: "subscription", Value: id},
		{Key: "message-id", Value: id + ":history"}, {Key: "content-type", Value: "application/json"},
		{Key: "offset", Value: strconv.FormatUint(res.Top.Offset, 10)}, {Key: "epoch", Value: res.Top.Epoch},
	}
	if next != nil {
		h = append(h, stomp.Header{Key: "next-before", Value: strconv.FormatUint(next.Before, 10)},
			stomp.Header{Key: "next-epoch", Value: next.Epoch})
	}
	c.receipt(f)
	c.sendFrame(&stomp.Frame{Command: stomp.CmdMessage, Headers: h, Body: body})
	return true
}
