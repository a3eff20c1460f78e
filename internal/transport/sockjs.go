package transport

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transports"
)

// SockJS carries STOMP sessions for clients that connect with sockjs-client (Spring's
// withSockJS endpoints): the info request, raw and framed WebSocket, xhr-streaming, xhr-polling
// and eventsource. The iframe-based transports (htmlfile, jsonp, the iframe page) are not
// served; sockjs-client falls back past them. A session is a STOMP session as on /api/stomp
// (same CONNECT tokens, limits, destinations and resume) whose bytes go through a sockjsConn.
//
// A session belongs to the address (an IPv6 /64) and the request identity (its token's user,
// or anonymous) that opened it: sessions are found by owner and id together, so a request of
// anyone else for that id meets no session, exactly as for an id nobody opened, and requests
// for sessions that do not exist are limited per address (--sockjs-miss-rate).
const (
	sockjsHeartbeat     = 25 * time.Second // 'h' on an idle receiving request, as sockjs-node
	sockjsDisconnect    = 5 * time.Second  // a session without a receiving request for this long ends
	sockjsStreamLimit   = 128 << 10        // bytes an xhr-streaming or eventsource response carries before it ends
	sockjsPrelude       = 2048             // 'h' octets before xhr-streaming's first frame (browsers buffer)
	sockjsGoAway        = `c[3000,"Go away!"]`
	sockjsAnotherOpen   = `c[2010,"Another connection still open"]`
	sockjsMaxSessionLen = 64
	sockjsMaxAge        = "600" // seconds a browser keeps a preflight, as the other routes
)

// sockjsServer holds one SockJS endpoint's sessions.
type sockjsServer struct {
	*Server
	misses   *keyedLimiter // requests for missing sessions, per address
	mu       sync.Mutex
	sessions map[sockjsKey]*sockjsSession // guarded by mu
}

// sockjsOwner is who a session belongs to: the address (addrKey) and the user (empty when
// anonymous) of the request that opened it.
type sockjsOwner struct{ addr, user string }

// sockjsKey finds a session: its owner and the id the client chose.
type sockjsKey struct {
	owner sockjsOwner
	id    string
}

// HandleSockJS serves the SockJS protocol under prefix (like "/ws"): register it for
// prefix+"/" (and prefix itself answers with a greeting).
func (srv *Server) HandleSockJS(prefix string) http.HandlerFunc {
	prefix = strings.TrimSuffix(prefix, "/")
	s := &sockjsServer{Server: srv, sessions: make(map[sockjsKey]*sockjsSession),
		misses: newKeyedLimiter(srv.lim.SockJSMissRate, max(10, int(2*srv.lim.SockJSMissRate)))}
	return func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		rest = strings.Trim(rest, "/")
		switch {
		case rest == "":
			w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
			_, _ = io.WriteString(w, "Welcome to SockJS!\n")
			return
		case rest == "info":
			s.sockjsInfo(w, r)
			return
		case rest == "websocket":
			s.HandleSTOMP(w, r) // raw WebSocket: STOMP frames as messages, as on /api/stomp
			return
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || !sockjsID(parts[0]) || !sockjsID(parts[1]) {
			s.WriteError(w, r, fmt.Errorf("%w: SockJS paths are %s/info and %s/{server}/{session}/{transport}", ErrNotFound, prefix, prefix))
			return
		}
		s.sockjsTransport(w, r, parts[1], parts[2])
	}
}

// sockjsID reports whether a server or session id is one: non-empty, no dots, bounded.
func sockjsID(v string) bool {
	return v != "" && len(v) <= sockjsMaxSessionLen && !strings.ContainsAny(v, ".")
}

func (s *sockjsServer) sockjsTransport(w http.ResponseWriter, r *http.Request, id, transport string) {
	if r.Method == http.MethodOptions {
		s.sockjsPreflight(w, r, "OPTIONS, POST")
		return
	}
	own, err := s.sockjsOwnerOf(r)
	if err != nil {
		s.WriteError(w, r, err)
		return
	}
	key := sockjsKey{owner: own, id: id}
	s.sockjsCORS(w, r)
	switch transport {
	case "xhr_send":
		if r.Method != http.MethodPost {
			http.Error(w, "POST expected", http.StatusMethodNotAllowed)
			return
		}
		s.sockjsSend(w, r, key)
	case "xhr", "xhr_streaming":
		if r.Method != http.MethodPost {
			http.Error(w, "POST expected", http.StatusMethodNotAllowed)
			return
		}
		s.sockjsReceive(w, r, key, transport)
	case "eventsource":
		s.sockjsReceive(w, r, key, transport)
	case "websocket":
		s.sockjsWebSocket(w, r, key)
	default:
		s.WriteError(w, r, fmt.Errorf("%w: SockJS transport %q is not served (websocket, xhr_streaming, xhr, eventsource are)", ErrNotFound, transport))
	}
}

// sockjsOwnerOf is who a transport request comes from. A browser on an origin the server does
// not allow, and a request with bad credentials, are refused whatever session they name.
func (s *sockjsServer) sockjsOwnerOf(r *http.Request) (sockjsOwner, error) {
	if err := s.checkOrigin(r); err != nil {
		return sockjsOwner{}, err
	}
	ident, err := s.policy.Authenticate(r) // anonymous is fine: STOMP CONNECT may carry the token
	if err != nil {
		return sockjsOwner{}, err
	}
	return sockjsOwner{addr: addrKey(s.clientIP(r)), user: ident.User}, nil
}

// errSockJSNoSession is the answer to a request naming a session its client has not opened,
// whether someone else has or nobody: the same status and body, so ids are no oracle.
var errSockJSNoSession = fmt.Errorf("%w: no such SockJS session: open one with a receiving request (xhr, xhr_streaming, eventsource, websocket)", ErrNotFound)

// sockjsMiss answers a request for a session the client does not have, counted against
// --sockjs-miss-rate for its address: guessing ids is throttled.
func (s *sockjsServer) sockjsMiss(w http.ResponseWriter, r *http.Request, own sockjsOwner) {
	if ok, wait := s.misses.allow("a:"+own.addr, time.Now()); !ok {
		err := &retryError{fmt.Errorf("%w: at most %g requests per second for SockJS sessions that do not exist from address %s (--sockjs-miss-rate)", ErrRateLimited, s.lim.SockJSMissRate, own.addr), wait}
		Tarpit(r, err)
		s.WriteError(w, r, err)
		return
	}
	s.WriteError(w, r, errSockJSNoSession)
}

// sockjsCORS lets an allowed cross-origin browser read the answer with credentials, as
// sockjs-client asks; other origins get no CORS headers (they are refused before anyway).
func (s *sockjsServer) sockjsCORS(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || !s.origins.allowed(origin, r.Host) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	if h.Get("Vary") == "" {
		h.Add("Vary", "Origin")
	}
	return true
}

// sockjsPreflight answers an OPTIONS request (the ones CORS did not answer as a preflight).
func (s *sockjsServer) sockjsPreflight(w http.ResponseWriter, r *http.Request, methods string) {
	if s.sockjsCORS(w, r) {
		w.Header().Set("Access-Control-Allow-Methods", methods)
		w.Header().Set("Access-Control-Max-Age", sockjsMaxAge)
		if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
			w.Header().Set("Access-Control-Allow-Headers", rh)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *sockjsServer) sockjsInfo(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		s.WriteError(w, r, err)
		return
	}
	if r.Method == http.MethodOptions {
		s.sockjsPreflight(w, r, "OPTIONS, GET")
		return
	}
	s.sockjsCORS(w, r)
	var b [4]byte
	_, _ = rand.Read(b[:])
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store, no-cache, no-transform, must-revalidate, max-age=0")
	fmt.Fprintf(w, `{"websocket":true,"origins":["*:*"],"cookie_needed":false,"entropy":%d}`, binary.BigEndian.Uint32(b[:]))
}

// sockjsSession is one SockJS session: a STOMP session on a sockjsConn, reached by the
// requests that name its id.
type sockjsSession struct {
	key     sockjsKey
	conn    *sockjsConn
	sending chan struct{} // one xhr_send at a time reads its body and feeds it
}

// sockjsOpen returns the session id names, starting it when it does not exist and create is
// set. A start is admitted like any streaming connection; a refusal has been answered.
func (s *sockjsServer) sockjsOpen(w http.ResponseWriter, r *http.Request, key sockjsKey, create bool) (*sockjsSession, bool) {
	s.mu.Lock()
	ss := s.sessions[key]
	s.mu.Unlock()
	if ss != nil || !create {
		return ss, ss != nil
	}
	release, err := s.admit(r, "") // the user is counted at CONNECT, as on STOMP over TCP
	if err != nil {
		s.WriteError(w, r, err)
		return nil, false
	}
	ss = &sockjsSession{key: key, conn: newSockJSConn(s.lim, s.clientIP(r)), sending: make(chan struct{}, 1)}
	s.mu.Lock()
	if old := s.sessions[key]; old != nil { // another request started it meanwhile
		s.mu.Unlock()
		release()
		return old, true
	}
	s.sessions[key] = ss
	s.mu.Unlock()
	ss.conn.onClose = func() {
		s.mu.Lock()
		if s.sessions[key] == ss {
			delete(s.sessions, key)
		}
		s.mu.Unlock()
	}
	if !s.startBareSTOMP(ss.conn, transports.SockJS, release) {
		return nil, false
	}
	return ss, true
}

// sockjsSend takes a client's messages (a JSON array of strings) for its session. The
// session's input not yet read is bounded (--sockjs-input-bytes): a send waits for room up to
// --body-timeout, then is refused; one send at a time holds its body.
func (s *sockjsServer) sockjsSend(w http.ResponseWriter, r *http.Request, key sockjsKey) {
	ss, ok := s.sockjsOpen(w, r, key, false)
	if !ok {
		s.sockjsMiss(w, r, key.owner)
		return
	}
	limit := s.lim.SockJSInput
	tooLarge := fmt.Errorf("%w: an xhr_send body over %d bytes (--sockjs-input-bytes)", hub.ErrTooLarge, limit)
	if r.ContentLength > int64(limit) {
		s.WriteError(w, r, tooLarge)
		return
	}
	select {
	case ss.sending <- struct{}{}:
		defer func() { <-ss.sending }()
	case <-r.Context().Done():
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	switch {
	case err != nil:
		s.WriteError(w, r, fmt.Errorf("%w: reading the xhr_send body: %v", ErrTimeout, err))
		return
	case len(body) > limit:
		s.WriteError(w, r, tooLarge)
		return
	}
	s.sockjsFeed(w, r, ss, body)
}

// sockjsFeed hands an xhr_send body's messages to the session, answering as sockjs-node
// does for bad bodies.
func (s *sockjsServer) sockjsFeed(w http.ResponseWriter, r *http.Request, ss *sockjsSession, body []byte) {
	if len(body) == 0 {
		http.Error(w, "Payload expected.", http.StatusInternalServerError)
		return
	}
	var msgs []string
	if err := json.Unmarshal(body, &msgs); err != nil {
		http.Error(w, "Broken JSON encoding.", http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.lim.BodyTimeout)
	defer cancel()
	switch err := ss.conn.feed(ctx, msgs); {
	case errors.Is(err, net.ErrClosed):
		s.WriteError(w, r, errSockJSNoSession) // closed meanwhile
		return
	case err != nil:
		s.WriteError(w, r, &retryError{fmt.Errorf("%w: the SockJS session has not read its earlier input (at most %d bytes wait, --sockjs-input-bytes) within %s (--body-timeout)", ErrRateLimited, s.lim.SockJSInput, s.lim.BodyTimeout), time.Second})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(http.StatusNoContent)
}

// sockjsFraming is how one receiving transport writes SockJS frames.
type sockjsFraming struct {
	contentType string
	prelude     string
	frame       func(dst []byte, f string) []byte
	streaming   bool // the response goes on until sockjsStreamLimit; else one frame per request
}

var sockjsFramings = map[string]sockjsFraming{
	"xhr": {contentType: "application/javascript; charset=UTF-8",
		frame: func(dst []byte, f string) []byte { return append(append(dst, f...), '\n') }},
	"xhr_streaming": {contentType: "application/javascript; charset=UTF-8", streaming: true,
		prelude: strings.Repeat("h", sockjsPrelude) + "\n",
		frame:   func(dst []byte, f string) []byte { return append(append(dst, f...), '\n') }},
	"eventsource": {contentType: "text/event-stream; charset=UTF-8", streaming: true, prelude: "\r\n",
		frame: func(dst []byte, f string) []byte {
			return append(append(append(dst, "data: "...), f...), "\r\n\r\n"...)
		}},
}

// sockjsReceive serves a receiving request: xhr (one frame), xhr_streaming or eventsource.
func (s *sockjsServer) sockjsReceive(w http.ResponseWriter, r *http.Request, key sockjsKey, transport string) {
	fr := sockjsFramings[transport]
	ss, ok := s.sockjsOpen(w, r, key, true)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	write := func(b []byte) error { // a client that does not read is let go after --write-timeout
		_ = rc.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	w.Header().Set("Content-Type", fr.contentType)
	w.Header().Set("Cache-Control", "no-store, no-cache, no-transform, must-revalidate, max-age=0")
	w.WriteHeader(http.StatusOK)
	c := ss.conn
	var buf []byte
	if !c.attach() {
		_ = write(fr.frame(append(buf, fr.prelude...), sockjsAnotherOpen))
		return
	}
	defer c.detach()
	buf = append(buf, fr.prelude...)
	written := 0
	hb := time.NewTimer(sockjsHeartbeat)
	defer hb.Stop()
	for {
		f, closed := c.take()
		if f != "" {
			buf = fr.frame(buf, f)
		}
		if len(buf) > 0 {
			if write(buf) != nil {
				return
			}
			written += len(buf)
			buf = buf[:0]
		}
		if closed || (f != "" && (!fr.streaming || written >= sockjsStreamLimit)) {
			return
		}
		if f != "" {
			continue
		}
		hb.Reset(sockjsHeartbeat)
		select {
		case <-c.outReady:
		case <-hb.C:
			buf = fr.frame(buf, "h")
			if !fr.streaming {
				_ = write(buf)
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// sockjsWebSocket serves the framed WebSocket transport: SockJS frames as WebSocket messages,
// the client's messages as JSON arrays of strings.
func (s *sockjsServer) sockjsWebSocket(w http.ResponseWriter, r *http.Request, key sockjsKey) {
	ss, ok := s.sockjsOpen(w, r, key, true)
	if !ok {
		return
	}
	c := ss.conn
	if !c.attach() {
		http.Error(w, "Another connection still open", http.StatusConflict)
		return
	}
	conn, br, _, err := upgrade(w, r, nil)
	if err != nil {
		c.detach()
		return
	}
	var wmu sync.Mutex
	write := func(f string) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(s.lim.WriteTimeout))
		_, err := conn.Write(appendWSText(nil, []byte(f)))
		return err
	}
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the client's messages
		defer close(done)
		rd := newMessageReader(br, s.lim.MaxFrame+64, func(p []byte) {
			wmu.Lock()
			defer wmu.Unlock()
			_, _ = conn.Write(wsPong(p))
		}, nil, nil)
		for {
			_, msg, err := rd.readMessage()
			if err != nil {
				return
			}
			var msgs []string
			if json.Unmarshal(msg, &msgs) != nil {
				var one string
				if json.Unmarshal(msg, &one) != nil {
					return // not SockJS: the session ends as the socket does
				}
				msgs = []string{one}
			}
			if c.feed(ctx, msgs) != nil { // waits for room: the socket is not read meanwhile
				return
			}
		}
	}()
	defer func() {
		_ = conn.Close()
		cancel()
		<-done
		c.detach()
		c.Close() // a WebSocket session ends with its socket
	}()
	hb := time.NewTicker(sockjsHeartbeat)
	defer hb.Stop()
	for {
		f, closed := c.take()
		if f != "" {
			if write(f) != nil || closed {
				return
			}
			continue
		}
		select {
		case <-c.outReady:
		case <-hb.C:
			if write("h") != nil {
				return
			}
		case <-done:
			return
		}
	}
}

// sockjsConn is the net.Conn a SockJS session's STOMP session reads and writes: what clients
// send is fed in, what the session writes waits as messages for the next receiving request.
type sockjsConn struct {
	addr     sockjsAddr
	limit    int           // bytes of messages waiting for a receiver before writes wait
	inLimit  int           // bytes of input not yet read before feeds wait
	outReady chan struct{} // signalled when messages or the close are ready
	outSpace chan struct{} // signalled when a receiver took the messages, or on close
	inReady  chan struct{} // signalled when input arrives or the read deadline changes
	inSpace  chan struct{} // signalled when input was read, or on close
	onClose  func()

	mu        sync.Mutex
	in        []byte    // guarded by mu
	out       []string  // messages not yet taken; guarded by mu
	outBytes  int       // guarded by mu
	opened    bool      // the 'o' frame was taken; guarded by mu
	receiving bool      // a receiving request is attached; guarded by mu
	closed    bool      // guarded by mu
	rdl       time.Time // read deadline; guarded by mu
	wdl       time.Time // write deadline; guarded by mu
	idle      *time.Timer
}

func newSockJSConn(lim Limits, ip string) *sockjsConn {
	c := &sockjsConn{addr: sockjsAddr(ip), limit: lim.QueueBytes, inLimit: lim.SockJSInput,
		outReady: make(chan struct{}, 1), outSpace: make(chan struct{}, 1),
		inReady: make(chan struct{}, 1), inSpace: make(chan struct{}, 1)}
	c.idle = time.AfterFunc(sockjsDisconnect, c.expire)
	return c
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// attach marks a receiving request; false when another one is attached.
func (c *sockjsConn) attach() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.receiving {
		return false
	}
	c.receiving = true
	if !c.closed { // a closed session is forgotten on time whoever asks for it
		c.idle.Stop()
	}
	return true
}

// detach ends a receiving request; without another within sockjsDisconnect the session ends.
func (c *sockjsConn) detach() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.receiving = false
	if !c.closed {
		c.idle.Reset(sockjsDisconnect)
	}
}

// expire closes a session no receiving request came back for, and forgets a closed one once
// its disconnect delay is over.
func (c *sockjsConn) expire() {
	c.mu.Lock()
	closed, gone := c.closed, !c.receiving
	c.mu.Unlock()
	switch {
	case closed:
		if c.onClose != nil {
			c.onClose()
		}
	case gone:
		c.Close()
	}
}

// take returns the next SockJS frame for a receiver: 'o' first, then the waiting messages as
// one 'a' frame, then, once closed, the close frame, with closed set: the receiver writes it and
// finishes. "" when there is nothing yet.
func (c *sockjsConn) take() (frame string, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.opened:
		c.opened = true
		return "o", false
	case len(c.out) > 0:
		b := append(make([]byte, 0, c.outBytes+16*len(c.out)+2), 'a')
		b, _ = appendJSONStrings(b, c.out)
		clear(c.out)
		c.out, c.outBytes = c.out[:0], 0
		signal(c.outSpace)
		return string(b), false
	case c.closed:
		// Every receiver of a closed session, one coming back included, gets the close
		// frame until the session is forgotten.
		return sockjsGoAway, true
	}
	return "", false
}

func appendJSONStrings(dst []byte, msgs []string) ([]byte, error) {
	b, err := json.Marshal(msgs)
	return append(dst, b...), err
}

// feed hands a client's messages to the session's reader, all or none. While the input not
// yet read would go over inLimit it waits for the reader, until ctx ends (its error); once the
// session is closed it fails with net.ErrClosed.
func (c *sockjsConn) feed(ctx context.Context, msgs []string) error {
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	c.mu.Lock()
	for !c.closed && len(c.in) > 0 && len(c.in)+n > c.inLimit {
		c.mu.Unlock()
		select {
		case <-c.inSpace:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	for _, m := range msgs {
		c.in = append(c.in, m...)
	}
	signal(c.inReady)
	return nil
}

func (c *sockjsConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.in) > 0 {
			n := copy(p, c.in)
			c.in = c.in[n:]
			if len(c.in) == 0 {
				c.in = nil
			}
			c.mu.Unlock()
			signal(c.inSpace)
			return n, nil
		}
		if c.closed {
			c.mu.Unlock()
			return 0, io.EOF
		}
		dl := c.rdl
		c.mu.Unlock()
		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			expired = t.C
			select {
			case <-c.inReady:
				t.Stop()
			case <-expired:
				return 0, os.ErrDeadlineExceeded
			}
			continue
		}
		<-c.inReady
	}
}

// Write adds p to the messages waiting for a receiver. Over limit it waits until a receiver
// takes them, as a socket write waits for the client to read: a resume of any size goes out
// over several polls. A client that fetches nothing until the write deadline is cut off.
func (c *sockjsConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed && c.outBytes > 0 && c.outBytes+len(p) > c.limit {
		dl := c.wdl
		c.mu.Unlock()
		err := waitSpace(c.outSpace, dl)
		c.mu.Lock()
		if err != nil {
			return 0, err
		}
	}
	if c.closed {
		return 0, net.ErrClosed
	}
	c.out = append(c.out, string(p))
	c.outBytes += len(p)
	signal(c.outReady)
	return len(p), nil
}

func (c *sockjsConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	// The session stays for the disconnect delay, so that a receiver not attached when it
	// closed still gets its last messages and the close frame; expire then forgets it.
	c.idle.Reset(sockjsDisconnect)
	c.mu.Unlock()
	signal(c.inReady)
	signal(c.outReady)
	signal(c.inSpace)
	signal(c.outSpace)
	return nil
}

// waitSpace waits for a signal on space until the deadline dl; without one it does not wait.
func waitSpace(space chan struct{}, dl time.Time) error {
	d := time.Until(dl)
	if dl.IsZero() || d <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-space:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

func (c *sockjsConn) LocalAddr() net.Addr  { return sockjsAddr("sockjs") }
func (c *sockjsConn) RemoteAddr() net.Addr { return c.addr }

func (c *sockjsConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }

func (c *sockjsConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	signal(c.inReady)
	return nil
}

// SetWriteDeadline bounds how long a Write waits for a receiver to take the messages.
func (c *sockjsConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return nil
}

type sockjsAddr string

func (a sockjsAddr) Network() string { return "sockjs" }
func (a sockjsAddr) String() string  { return string(a) }

// startBareSTOMP starts a STOMP session whose frames go on conn bare (STOMP over TCP and
// SockJS), admitted by release. It reports false when the server is shutting down.
func (s *Server) startBareSTOMP(conn net.Conn, transport string, release func()) bool {
	c := s.newSTOMPConn(Identity{}, true, release)
	c.addr = s.bareAddr(conn)
	if !c.start(conn, c, transport) {
		return false
	}
	c.connectBy = time.Now().Add(s.lim.FirstFrameTimeout)
	_ = conn.SetReadDeadline(c.readDeadline())
	go c.run(conn, &streamReader{br: bufio.NewReaderSize(conn, 4096), keep: &c.published})
	return true
}
