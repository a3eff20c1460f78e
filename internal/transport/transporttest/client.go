package transporttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/stomp"
)

// Client follows one topic over one transport as a real client would: whenever its session
// ends it resumes after the last publication it received, on the same node or, when that one
// refused it or is gone, on the next. It tells what happens as Events.
type Client interface {
	Kind() Kind
	// Subscribe starts following topic after since (from the topic's first publication with
	// Position{}), or from now when since is nil. A client follows one topic: call it once.
	Subscribe(topic string, since *Position)
	// Publish publishes data (JSON) to topic and returns its position. WebSocket and STOMP
	// clients publish over their session, and wait for one to be up; the others over HTTP.
	// A refusal is a *Refusal.
	Publish(ctx context.Context, topic, data string) (Position, error)
	// Events delivers what the client is told, in order. Nothing is lost while it is not read.
	Events() <-chan Event
	// Close ends the client and waits for its goroutines.
	Close()
}

// EventKind is what an Event tells.
type EventKind int

// The events.
const (
	Message EventKind = iota // a publication
	Gap                      // publications the client asked for, or that followed, are gone
	State                    // a session came up (subscribed) or ended
)

func (k EventKind) String() string { return [...]string{"message", "gap", "state"}[k] }

// Event is one thing a client was told.
type Event struct {
	Kind EventKind
	// Publication is a Message's publication; for a Gap, the topic and where it stands.
	Publication
	Up     bool   // State: subscribed; false: the session ended
	Node   string // State: the base URL of the session's node
	Reason string // Gap: what is gone; State, when not Up: why the session ended
}

func (e Event) String() string {
	switch e.Kind {
	case Message:
		return fmt.Sprintf("message %s %v %s", e.Topic, e.Pos(), e.Data)
	case Gap:
		return fmt.Sprintf("gap %s at %v: %s", e.Topic, e.Pos(), e.Reason)
	case State:
		if e.Up {
			return "up on " + e.Node
		}
		return fmt.Sprintf("down on %s: %s", e.Node, e.Reason)
	}
	return "?"
}

// Options configure a Client.
type Options struct {
	Nodes  []string      // base URLs (http://host:port) of the servers, home node first
	Dialer Dialer        // how connections are opened; a token goes in its Header (see Bearer)
	Every  time.Duration // short polling: the pause between polls; zero means 20 ms
	Wait   time.Duration // long polling: the wait asked for; zero means 5 s
	Retry  time.Duration // the pause before a new session; zero means 50 ms
}

// New returns a client of kind k, closed when the test ends.
func New(t testing.TB, k Kind, o Options) Client {
	if len(o.Nodes) == 0 {
		t.Fatal("transporttest: a client needs at least one node")
	}
	if o.Every <= 0 {
		o.Every = 20 * time.Millisecond
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 50 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &client{kind: k, o: o, hc: o.Dialer.HTTP(), box: newMailbox(), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), live: make(chan struct{})}
	t.Cleanup(c.Close)
	return c
}

// client is every Client: the session loop, resuming and failing over, is shared; each kind
// has its session (session*).
type client struct {
	kind   Kind
	o      Options
	hc     *http.Client
	box    *mailbox
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run ends
	once   sync.Once     // Subscribe

	mu    sync.Mutex
	topic string        // guarded by mu
	pos   *Position     // resume after it; nil: from now; guarded by mu
	sseID string        // the last SSE event id, sent back as Last-Event-ID; guarded by mu
	node  string        // the current session's node; guarded by mu
	sess  publisher     // the session publishes go over (WebSocket, STOMP); nil when none; guarded by mu
	live  chan struct{} // closed while sess is set; guarded by mu
}

// publisher publishes over a session.
type publisher interface {
	publish(ctx context.Context, topic, data string) (Position, error)
}

func (c *client) Kind() Kind           { return c.kind }
func (c *client) Events() <-chan Event { return c.box.out }

func (c *client) Subscribe(topic string, since *Position) {
	c.once.Do(func() {
		c.mu.Lock()
		c.topic, c.node = topic, c.o.Nodes[0]
		if since != nil {
			p := *since
			c.pos = &p
		}
		c.mu.Unlock()
		go c.run()
	})
}

func (c *client) Close() {
	c.cancel()
	c.once.Do(func() {}) // no Subscribe from now on
	c.mu.Lock()
	started := c.topic != ""
	c.mu.Unlock()
	if started {
		<-c.done
	}
	c.box.close()
}

// run holds sessions until the client is closed.
func (c *client) run() {
	defer close(c.done)
	for i := 0; c.ctx.Err() == nil; {
		node := c.o.Nodes[i]
		c.mu.Lock()
		c.node = node
		c.mu.Unlock()
		var up bool
		var err error
		switch c.kind {
		case WS:
			up, err = c.sessionWS(node)
		case STOMP:
			up, err = c.sessionSTOMP(node)
		case SSE:
			up, err = c.sessionSSE(node)
		case ShortPoll, LongPoll:
			up, err = c.sessionPoll(node, c.kind == LongPoll)
		default:
			err = fmt.Errorf("transporttest: no such transport %q", c.kind)
		}
		if c.ctx.Err() != nil {
			return
		}
		c.box.put(Event{Kind: State, Node: node, Reason: fmt.Sprint(err)})
		if !up {
			i = (i + 1) % len(c.o.Nodes) // refused, or gone: try the next node
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(c.o.Retry):
		}
	}
}

// up records that a session on node subscribed; s is what publishes go over (nil: HTTP).
// at, when known, is where the topic stood: a client following from now resumes from there.
func (c *client) up(node string, s publisher, at *Position) {
	c.mu.Lock()
	if c.pos == nil && at != nil {
		p := *at
		c.pos = &p
	}
	if s != nil {
		c.sess = s
		close(c.live)
	}
	c.mu.Unlock()
	c.box.put(Event{Kind: State, Up: true, Node: node})
}

func (c *client) message(p Publication, sseID string) {
	c.mu.Lock()
	pos := p.Pos()
	c.pos = &pos
	if sseID != "" {
		c.sseID = sseID
	}
	c.mu.Unlock()
	c.box.put(Event{Kind: Message, Publication: p})
}

func (c *client) gap(topic string, at Position, reason string) {
	c.box.put(Event{Kind: Gap, Publication: Publication{Topic: topic, Offset: at.Offset, Epoch: at.Epoch}, Reason: reason})
}

// down forgets session s, so publishes wait for the next one instead of failing on s.
func (c *client) down(s publisher) {
	c.mu.Lock()
	if c.sess == s {
		c.sess, c.live = nil, make(chan struct{})
	}
	c.mu.Unlock()
}

// resume returns the topic and where to resume (nil: from now).
func (c *client) resume() (string, *Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pos == nil {
		return c.topic, nil
	}
	p := *c.pos
	return c.topic, &p
}

func (c *client) Publish(ctx context.Context, topic, data string) (Position, error) {
	if c.kind != WS && c.kind != STOMP { // publishes over HTTP
		c.mu.Lock()
		node := c.node
		c.mu.Unlock()
		if node == "" {
			node = c.o.Nodes[0]
		}
		return PublishHTTP(ctx, c.hc, c.o.Dialer, node, topic, data)
	}
	for {
		c.mu.Lock()
		s, live := c.sess, c.live
		c.mu.Unlock()
		if s != nil {
			pos, err := s.publish(ctx, topic, data)
			if !errors.Is(err, errEnded) {
				return pos, err
			}
			continue // nothing was sent, and the session forgot itself (down) before it ended
		}
		select {
		case <-live:
		case <-ctx.Done():
			return Position{}, fmt.Errorf("publish over %s: no session: %w", c.kind, ctx.Err())
		}
	}
}

// PublishHTTP publishes data to topic on the server at base (POST /api/publish/{topic}) with
// d's headers, and returns the publication's position or the refusal (*Refusal).
func PublishHTTP(ctx context.Context, hc *http.Client, d Dialer, base, topic, data string) (Position, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/publish/"+topic, strings.NewReader(data))
	if err != nil {
		return Position{}, err
	}
	for k, v := range d.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return Position{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Position{}, fmt.Errorf("reading the answer (%q so far): %w", b, err)
	}
	if res.StatusCode != http.StatusOK {
		return Position{}, refusal(res.StatusCode, b)
	}
	var p Position
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("answer %q: %w", b, err)
	}
	return p, nil
}

// refusal decodes an HTTP error answer {"error","reason"}.
func refusal(status int, body []byte) *Refusal {
	var e struct{ Error, Reason string }
	if json.Unmarshal(body, &e) != nil {
		e.Reason = string(body)
	}
	return &Refusal{Status: status, Code: e.Error, Reason: e.Reason}
}

// errEnded: a publish was not sent because its session had ended.
var errEnded = errors.New("session ended")

// pending are the publishes of a session waiting for their answer, by id.
type pending struct {
	mu    sync.Mutex
	next  atomic.Uint64
	wait  map[string]chan pubResult // guarded by mu
	ended error                     // why the session ended; guarded by mu
}

type pubResult struct {
	pos Position
	err error
}

// add registers a publish and returns its id and where its answer comes.
func (p *pending) add() (string, chan pubResult, error) {
	id := strconv.FormatUint(p.next.Add(1), 10)
	ch := make(chan pubResult, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended != nil {
		return "", nil, fmt.Errorf("%w: %w", errEnded, p.ended)
	}
	if p.wait == nil {
		p.wait = make(map[string]chan pubResult)
	}
	p.wait[id] = ch
	return id, ch, nil
}

// answer hands the answer of publish id over, and reports whether one was waiting.
func (p *pending) answer(id string, r pubResult) bool {
	p.mu.Lock()
	ch, ok := p.wait[id]
	delete(p.wait, id)
	p.mu.Unlock()
	if ok {
		ch <- r
	}
	return ok
}

// end fails every waiting publish with err, and later ones too.
func (p *pending) end(err error) {
	if err == nil {
		err = errors.New("session closed")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = err
	for id, ch := range p.wait {
		ch <- pubResult{err: err}
		delete(p.wait, id)
	}
}

// await waits for the answer of a publish.
func (p *pending) await(ctx context.Context, id string, ch chan pubResult) (Position, error) {
	select {
	case r := <-ch:
		return r.pos, r.err
	case <-ctx.Done():
		p.answer(id, pubResult{})
		return Position{}, ctx.Err()
	}
}

// wsSession is a session of the WebSocket JSON protocol.
type wsSession struct {
	conn *WSConn
	wmu  sync.Mutex // serializes writes
	pending
}

func (s *wsSession) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.Write(string(b))
}

func (s *wsSession) publish(ctx context.Context, topic, data string) (Position, error) {
	id, ch, err := s.add()
	if err != nil {
		return Position{}, err
	}
	n, _ := strconv.ParseUint(id, 10, 64)
	msg := map[string]any{"op": "publish", "topic": topic, "id": n, "data": json.RawMessage(data)}
	if err := s.write(msg); err != nil {
		// The session is going: its reader hands the reason (a refusal of this very
		// message, often) to every waiting publish.
		s.conn.Close()
	}
	return s.await(ctx, id, ch)
}

func (c *client) sessionWS(node string) (up bool, err error) {
	conn, err := c.o.Dialer.TryWS(c.ctx, WSURL(node, "/api/ws"))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer context.AfterFunc(c.ctx, func() { conn.Close() })()
	s := &wsSession{conn: conn}
	defer func() { c.down(s); s.end(err) }()
	topic, pos := c.resume()
	sub := map[string]any{"op": "subscribe", "topic": topic}
	if pos != nil {
		sub["since"], sub["epoch"] = pos.Offset, pos.Epoch
	}
	if err := s.write(sub); err != nil {
		return false, err
	}
	for {
		b, err := conn.Next(time.Hour) // closing the client closes the connection
		if err != nil {
			return up, err
		}
		var m Msg
		if err := json.Unmarshal(b, &m); err != nil {
			return up, fmt.Errorf("ws message %q: %w", b, err)
		}
		switch m.Op {
		case "subscribed":
			up = true
			c.up(node, s, &Position{m.Offset, m.Epoch})
		case "gap": // also after a subscribed that did not recover
			c.gap(m.Topic, m.Pos(), m.Reason)
		case "message":
			c.message(m.Publication, "")
		case "ack":
			s.answer(string(m.ID), pubResult{pos: m.Pos()})
		case "error":
			r := &Refusal{Code: m.Code, Reason: m.Reason}
			if len(m.ID) > 0 && s.answer(string(m.ID), pubResult{err: r}) {
				continue
			}
			return up, r
		case "disconnect":
			return up, &Refusal{Code: m.Code, Reason: m.Reason}
		}
	}
}

// stompSession is a STOMP session.
type stompSession struct {
	conn *WSConn
	wmu  sync.Mutex
	pending
}

func (s *stompSession) publish(ctx context.Context, topic, data string) (Position, error) {
	id, ch, err := s.add()
	if err != nil {
		return Position{}, err
	}
	s.wmu.Lock()
	err = s.conn.Write("SEND\ndestination:/topic/" + topic + "\ncontent-type:application/json\nreceipt:p" + id + "\n\n" + data + "\x00")
	s.wmu.Unlock()
	if err != nil {
		s.conn.Close() // as for WebSocket: the reader says why the session ended
	}
	return s.await(ctx, id, ch)
}

// framePos is the position a STOMP frame's offset and epoch headers name.
func framePos(f stomp.Frame) Position {
	off, _ := strconv.ParseUint(Header(f, "offset"), 10, 64)
	return Position{off, Header(f, "epoch")}
}

// FramePublication is the publication a STOMP MESSAGE carries.
func FramePublication(f stomp.Frame) Publication {
	pos := framePos(f)
	return Publication{Topic: strings.TrimPrefix(Header(f, "destination"), "/topic/"), Offset: pos.Offset, Epoch: pos.Epoch,
		Time: Header(f, "time"), Sender: Header(f, "sender"), Type: Header(f, "type"), Data: json.RawMessage(f.Body)}
}

func (c *client) sessionSTOMP(node string) (up bool, err error) {
	d := c.o.Dialer
	d.Protocols = []string{"v12.stomp"}
	conn, err := d.TryWS(c.ctx, WSURL(node, "/api/stomp"))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer context.AfterFunc(c.ctx, func() { conn.Close() })()
	s := &stompSession{conn: conn}
	defer func() { c.down(s); s.end(err) }()
	topic, pos := c.resume()
	frames := "CONNECT\naccept-version:1.2\n\n\x00SUBSCRIBE\nid:1\ndestination:/topic/" + topic + "\nreceipt:sub\n"
	if pos != nil {
		frames += "since:" + strconv.FormatUint(pos.Offset, 10) + "\n"
		if pos.Epoch != "" {
			frames += "epoch:" + pos.Epoch + "\n"
		}
	}
	if err := conn.Write(frames + "\n\x00"); err != nil {
		return false, err
	}
	p := newParser()
	for {
		b, err := conn.Next(time.Hour)
		if err != nil {
			return up, err
		}
		p.Feed(b)
		for {
			f, ok, err := p.Next()
			if err != nil {
				return up, err
			}
			if !ok {
				break
			}
			switch f.Command {
			case stomp.CmdReceipt:
				if id := Header(f, "receipt-id"); id == "sub" {
					up = true
					at := framePos(f)
					c.up(node, s, &at)
				} else {
					s.answer(strings.TrimPrefix(id, "p"), pubResult{pos: framePos(f)})
				}
			case stomp.CmdMessage:
				switch {
				case Header(f, "presence") != "":
				case Header(f, "gap") == "true":
					var g Position
					_ = json.Unmarshal(f.Body, &g)
					c.gap(topic, g, Header(f, "reason"))
				default:
					c.message(FramePublication(f), "")
				}
			case stomp.CmdError:
				r := &Refusal{Reason: Header(f, "message")}
				if id, ok := f.Get("receipt-id"); ok {
					s.answer(strings.TrimPrefix(id, "p"), pubResult{err: r})
					// The server reads nothing after its ERROR: a publish still waiting was
					// never taken, and goes again on the next session.
					return up, fmt.Errorf("%w: %w", errEnded, r)
				}
				return up, r
			}
		}
	}
}

func (c *client) sessionSSE(node string) (up bool, err error) {
	topic, pos := c.resume()
	c.mu.Lock()
	lastID := c.sseID
	c.mu.Unlock()
	u := node + "/api/sse?topic=" + url.QueryEscape(topic)
	if lastID == "" && pos != nil {
		u += "&since=" + strconv.FormatUint(pos.Offset, 10) + "&epoch=" + url.QueryEscape(pos.Epoch)
	}
	s, err := c.o.Dialer.TrySSE(c.ctx, u, lastID)
	if err != nil {
		return false, err
	}
	defer s.Close()
	var ev SSEEvent
	for {
		line, err := s.ReadLine()
		if err != nil {
			return up, err
		}
		if line == ": connected" { // sent once the subscription exists
			up = true
			c.up(node, nil, nil)
			continue
		}
		if !ev.add(line) {
			continue
		}
		switch ev.Event {
		case "":
			var p Publication
			if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
				return up, fmt.Errorf("sse data %q: %w", ev.Data, err)
			}
			c.message(p, ev.ID)
		case "gap":
			var g struct {
				Topic string `json:"topic"`
				Position
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal([]byte(ev.Data), &g)
			c.gap(g.Topic, g.Position, g.Reason)
		case "disconnect":
			var d struct{ Code, Reason string }
			_ = json.Unmarshal([]byte(ev.Data), &d)
			return up, &Refusal{Code: d.Code, Reason: d.Reason}
		case "refused":
			return up, &Refusal{Reason: ev.Data}
		}
		ev = SSEEvent{}
	}
}

// sessionPoll polls node until a request fails. The first request is a short poll, so the
// client is up at once; a long-polling client then waits in each.
func (c *client) sessionPoll(node string, long bool) (up bool, err error) {
	for {
		topic, pos := c.resume()
		u := node + "/api/poll/" + topic + "?limit=1000"
		if pos != nil {
			u += "&since=" + strconv.FormatUint(pos.Offset, 10) + "&epoch=" + url.QueryEscape(pos.Epoch)
		}
		if long && up {
			u += "&wait=" + c.o.Wait.String()
		}
		req, _ := http.NewRequestWithContext(c.ctx, "GET", u, nil)
		for k, v := range c.o.Dialer.Header {
			req.Header[k] = v
		}
		res, err := c.hc.Do(req)
		if err != nil {
			return up, err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return up, err
		}
		if res.StatusCode != http.StatusOK {
			return up, refusal(res.StatusCode, b)
		}
		var ans PollAnswer
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&ans); err != nil {
			return up, fmt.Errorf("poll answer %q: %w", b, err)
		}
		top := Position{ans.Offset, ans.Epoch}
		if !up {
			up = true
			c.up(node, nil, &top)
		}
		if pos != nil && !ans.Recovered {
			c.gap(topic, top, ans.Reason)
		}
		for _, p := range ans.Publications {
			c.message(p, "")
		}
		if len(ans.Publications) == 0 && pos != nil && top != *pos {
			c.mu.Lock()
			c.pos = &top // history was lost and nothing published since: go on from where it stands
			c.mu.Unlock()
		}
		if !long && len(ans.Publications) < 1000 {
			select {
			case <-c.ctx.Done():
				return up, c.ctx.Err()
			case <-time.After(c.o.Every):
			}
		}
	}
}

// mailbox queues a client's events without bound, so a test that reads late loses nothing and
// never holds the client's sessions up.
type mailbox struct {
	mu     sync.Mutex
	q      []Event // guarded by mu
	wake   chan struct{}
	out    chan Event
	closed chan struct{}
	once   sync.Once
}

func newMailbox() *mailbox {
	m := &mailbox{wake: make(chan struct{}, 1), out: make(chan Event), closed: make(chan struct{})}
	go m.pump()
	return m
}

func (m *mailbox) put(e Event) {
	m.mu.Lock()
	m.q = append(m.q, e)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *mailbox) pump() {
	for {
		m.mu.Lock()
		if len(m.q) == 0 {
			m.mu.Unlock()
			select {
			case <-m.wake:
				continue
			case <-m.closed:
				return
			}
		}
		e := m.q[0]
		m.q[0] = Event{}
		m.q = m.q[1:]
		m.mu.Unlock()
		select {
		case m.out <- e:
		case <-m.closed:
			return
		}
	}
}

func (m *mailbox) close() { m.once.Do(func() { close(m.closed) }) }

// Await reads c's events until match accepts one, and returns it. It fails the test after
// within, naming the events it passed over.
func Await(t testing.TB, c Client, within time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case e := <-c.Events():
			if match(e) {
				return e
			}
			if len(seen) < 10 {
				seen = append(seen, e.String())
			}
		case <-timer.C:
			t.Fatalf("%s client: no %s within %v (passed over: %q)", c.Kind(), what, within, seen)
			return Event{}
		}
	}
}

// AwaitUp waits until c's session is up: from then on, nothing published is missed.
func AwaitUp(t testing.TB, c Client) Event {
	t.Helper()
	return Await(t, c, 10*time.Second, "subscription", func(e Event) bool { return e.Kind == State && e.Up })
}

// Messages reads the next n publications c receives and returns them. It fails the test on a
// gap, or when they have not all come within within. Call it from the test's goroutine; others
// call Collect.
func Messages(t testing.TB, c Client, n int, within time.Duration) []Publication {
	t.Helper()
	out, err := Collect(c, n, within)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Collect reads the next n publications c receives, and says what went wrong when a gap comes
// first or they have not all come within within.
func Collect(c Client, n int, within time.Duration) ([]Publication, error) {
	out := make([]Publication, 0, n)
	timer := time.NewTimer(within)
	defer timer.Stop()
	for len(out) < n {
		select {
		case e := <-c.Events():
			switch e.Kind {
			case Message:
				out = append(out, e.Publication)
			case Gap:
				return out, fmt.Errorf("%s client: %v after %d of %d publications", c.Kind(), e, len(out), n)
			}
		case <-timer.C:
			return out, fmt.Errorf("%s client: %d of %d publications within %v", c.Kind(), len(out), n, within)
		}
	}
	return out, nil
}
