package transport

import (
	"bufio"
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

	"github.com/rtlab/rtlab/internal/metrics"
)

// SockJS carries STOMP sessions for clients that connect with sockjs-client (Spring's
// withSockJS endpoints): the info request, raw and framed WebSocket, xhr-streaming, xhr-polling
// and eventsource. The iframe-based transports (htmlfile, jsonp, the iframe page) are not
// served; sockjs-client falls back past them. A session is a STOMP session as on /api/stomp
// (same CONNECT tokens, limits, destinations and resume) whose bytes go through a sockjsConn.
const (
	sockjsHeartbeat     = 25 * time.Second // 'h' on an idle receiving request, as sockjs-node
	sockjsDisconnect    = 5 * time.Second  // a session without a receiving request for this long ends
	sockjsStreamLimit   = 128 << 10        // bytes an xhr-streaming or eventsource response carries before it ends
	sockjsPrelude       = 2048             // 'h' octets before xhr-streaming's first frame (browsers buffer)
	sockjsGoAway        = `c[3000,"Go away!"]`
	sockjsAnotherOpen   = `c[2010,"Another connection still open"]`
	sockjsMaxSendBody   = 1 << 20 // xhr_send bodies; frames beyond --max-frame are refused by STOMP anyway
	sockjsMaxSessionLen = 64
)

// sockjsServer holds one SockJS endpoint's sessions.
type sockjsServer struct {
	*Server
	mu       sync.Mutex
	sessions map[string]*sockjsSession // by session id; guarded by mu
}

// HandleSockJS serves the SockJS protocol under prefix (like "/ws"): register it for
// prefix+"/" (and prefix itself answers with a greeting).
func (srv *Server) HandleSockJS(prefix string) http.HandlerFunc {
	prefix = strings.TrimSuffix(prefix, "/")
	s := &sockjsServer{Server: srv, sessions: make(map[string]*sockjsSession)}
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
		sockjsCORS(w, r)
		w.Header().Set("Access-Control-Allow-Methods", "OPTIONS, POST")
		w.Header().Set("Cache-Control", "public, max-age=31536000")
		w.Header().Set("Access-Control-Max-Age", "31536000")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	switch transport {
	case "xhr_send":
		if r.Method != http.MethodPost {
			http.Error(w, "POST expected", http.StatusMethodNotAllowed)
			return
		}
		s.sockjsSend(w, r, id)
	case "xhr", "xhr_streaming":
		if r.Method != http.MethodPost {
			http.Error(w, "POST expected", http.StatusMethodNotAllowed)
			return
		}
		s.sockjsReceive(w, r, id, transport)
	case "eventsource":
		s.sockjsReceive(w, r, id, transport)
	case "websocket":
		s.sockjsWebSocket(w, r, id)
	default:
		s.WriteError(w, r, fmt.Errorf("%w: SockJS transport %q is not served (websocket, xhr_streaming, xhr, eventsource are)", ErrNotFound, transport))
	}
}

// sockjsCORS answers a cross-origin request the way sockjs-client needs (credentials on), for
// origins the server allows; others get no CORS headers and the browser refuses.
func sockjsCORS(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		origin = "*"
	} else {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
		h.Set("Access-Control-Allow-Headers", rh)
	}
}

func (s *sockjsServer) sockjsInfo(w http.ResponseWriter, r *http.Request) {
	if err := s.checkOrigin(r); err != nil {
		s.WriteError(w, r, err)
		return
	}
	sockjsCORS(w, r)
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "OPTIONS, GET")
		w.Header().Set("Cache-Control", "public, max-age=31536000")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store, no-cache, no-transform, must-revalidate, max-age=0")
	fmt.Fprintf(w, `{"websocket":true,"origins":["*:*"],"cookie_needed":false,"entropy":%d}`, binary.BigEndian.Uint32(b[:]))
}

// sockjsSession is one SockJS session: a STOMP session on a sockjsConn, reached by the
// requests that name its id.
type sockjsSession struct {
	id   string
	conn *sockjsConn
}

// sockjsOpen returns the session id names, starting it when it does not exist and create is
// set. A start is admitted like any streaming connection; a refusal has been answered.
func (s *sockjsServer) sockjsOpen(w http.ResponseWriter, r *http.Request, id string, create bool) (*sockjsSession, bool) {
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil || !create {
		return ss, ss != nil
	}
	err := s.checkOrigin(r)
	var release func()
	if err == nil {
		release, err = s.admit(r, "")
	}
	if err != nil {
		s.WriteError(w, r, err)
		return nil, false
	}
	ss = &sockjsSession{id: id, conn: newSockJSConn(s.lim.QueueBytes, s.clientIP(r))}
	s.mu.Lock()
	if old := s.sessions[id]; old != nil { // another request started it meanwhile
		s.mu.Unlock()
		release()
		return old, true
	}
	s.sessions[id] = ss
	s.mu.Unlock()
	ss.conn.onClose = func() {
		s.mu.Lock()
		if s.sessions[id] == ss {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
	}
	if !s.startBareSTOMP(ss.conn, metrics.SockJS, release) {
		return nil, false
	}
	return ss, true
}

// sockjsSend takes a client's messages (a JSON array of strings) for its session.
func (s *sockjsServer) sockjsSend(w http.ResponseWriter, r *http.Request, id string) {
	sockjsCORS(w, r)
	ss, ok := s.sockjsOpen(w, r, id, false)
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, sockjsMaxSendBody+1))
	if err != nil || len(body) > sockjsMaxSendBody {
		http.Error(w, "Payload too large or unreadable.", http.StatusRequestEntityTooLarge)
		return
	}
	if len(body) == 0 {
		http.Error(w, "Payload expected.", http.StatusInternalServerError)
		return
	}
	var msgs []string
	if err := json.Unmarshal(body, &msgs); err != nil {
		http.Error(w, "Broken JSON encoding.", http.StatusInternalServerError)
		return
	}
	for _, m := range msgs {
		if !ss.conn.feed([]byte(m)) {
			http.NotFound(w, r) // closed meanwhile
			return
		}
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
func (s *sockjsServer) sockjsReceive(w http.ResponseWriter, r *http.Request, id, transport string) {
	fr := sockjsFramings[transport]
	sockjsCORS(w, r)
	ss, ok := s.sockjsOpen(w, r, id, true)
	if !ok {
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", fr.contentType)
	w.Header().Set("Cache-Control", "no-store, no-cache, no-transform, must-revalidate, max-age=0")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	c := ss.conn
	var buf []byte
	if !c.attach() {
		_, _ = w.Write(fr.frame(append(buf, fr.prelude...), sockjsAnotherOpen))
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
			if _, err := w.Write(buf); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
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
				_, _ = w.Write(buf)
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// sockjsWebSocket serves the framed WebSocket transport: SockJS frames as WebSocket messages,
// the client's messages as JSON arrays of strings.
func (s *sockjsServer) sockjsWebSocket(w http.ResponseWriter, r *http.Request, id string) {
	ss, ok := s.sockjsOpen(w, r, id, true)
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
			for _, m := range msgs {
				if !c.feed([]byte(m)) {
					return
				}
			}
		}
	}()
	defer func() {
		_ = conn.Close()
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
	limit    int           // bytes of messages waiting for a receiver before writes fail
	outReady chan struct{} // signalled when messages or the close are ready
	inReady  chan struct{} // signalled when input arrives or the read deadline changes
	onClose  func()

	mu        sync.Mutex
	in        []byte    // guarded by mu
	out       []string  // messages not yet taken; guarded by mu
	outBytes  int       // guarded by mu
	opened    bool      // the 'o' frame was taken; guarded by mu
	receiving bool      // a receiving request is attached; guarded by mu
	closed    bool      // guarded by mu
	rdl       time.Time // read deadline; guarded by mu
	idle      *time.Timer
}

func newSockJSConn(limit int, ip string) *sockjsConn {
	c := &sockjsConn{addr: sockjsAddr(ip), limit: limit, outReady: make(chan struct{}, 1), inReady: make(chan struct{}, 1)}
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

// feed hands a client's message to the session's reader; false once the session is closed.
func (c *sockjsConn) feed(p []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.in = append(c.in, p...)
	signal(c.inReady)
	return true
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

// errSockJSBacklog fails a write when nobody has fetched the session's messages for too long.
var errSockJSBacklog = errors.New("sockjs: messages not fetched by the client")

func (c *sockjsConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.outBytes+len(p) > c.limit {
		return 0, errSockJSBacklog
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
	return nil
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

// SetWriteDeadline does nothing: writes never block; a backlog fails them instead.
func (c *sockjsConn) SetWriteDeadline(time.Time) error { return nil }

type sockjsAddr string

func (a sockjsAddr) Network() string { return "sockjs" }
func (a sockjsAddr) String() string  { return string(a) }

// startBareSTOMP starts a STOMP session whose frames go on conn bare (STOMP over TCP and
// SockJS), admitted by release. It reports false when the server is shutting down.
func (s *Server) startBareSTOMP(conn net.Conn, transport string, release func()) bool {
	c := s.newSTOMPConn(Identity{}, true, release)
	if !c.start(conn, c, transport) {
		return false
	}
	c.connectBy = time.Now().Add(s.lim.FirstFrameTimeout)
	_ = conn.SetReadDeadline(c.readDeadline())
	go c.run(conn, &streamReader{br: bufio.NewReaderSize(conn, 4096), keep: &c.published})
	return true
}
