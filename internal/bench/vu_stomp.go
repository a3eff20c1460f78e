package bench

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/stomp"
)

// stompDriver is a STOMP 1.2 client over WebSocket (subprotocol v12.stomp), as stomp.js
// behaves: CONNECT, wait for CONNECTED, SUBSCRIBE to the group's destination with a receipt,
// then SEND to publish, each with a receipt that carries the answer. After a drop it
// reconnects and resubscribes; on rtlab with since and epoch headers, so nothing is lost.
// The same client runs over plain TCP (stomp-tcp) and over SockJS xhr-streaming (sockjs).
type stompDriver struct {
	c    *cell
	d    stompDialect
	over stompCarrier
}

// stompCarrier is what carries a STOMP session's frames.
type stompCarrier uint8

const (
	overWS     stompCarrier = iota // a WebSocket message per frame
	overTCP                        // bare frames on a TCP stream (stomp-tcp)
	overSockJS                     // SockJS messages: xhr-streaming down, xhr_send up (sockjs)
)

// stompStream reads what the server sends: WebSocket messages (wsStream), chunks of a TCP
// stream (tcpStream) or SockJS messages (sockjsConn); the parser finds the frames in any.
type stompStream interface {
	next(pong func(payload []byte) error) ([]byte, error)
}

// tcpStream is STOMP over TCP's stompStream.
type tcpStream struct {
	br  *bufio.Reader
	buf []byte
}

func (s *tcpStream) next(func([]byte) error) ([]byte, error) {
	n, err := s.br.Read(s.buf)
	return s.buf[:n], err
}

// wire appends frame as the connection carries it: in a masked WebSocket message, or bare
// (the SockJS connection wraps each write in its own request).
func (d *stompDriver) wire(dst, frame []byte) []byte {
	if d.over != overWS {
		return append(dst, frame...)
	}
	return appendClientFrame(dst, ws.OpText, frame)
}

// write writes one frame on a's connection under its lock.
func (d *stompDriver) write(a *activity, frame []byte) error {
	if d.over == overWS {
		return a.writeFrame(ws.OpText, frame)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writeLocked(frame)
}

// open opens a's connection: a WebSocket, a TCP connection to the node's STOMP listener, or a
// SockJS session. ok is false when it failed or was abandoned; otherwise end closes it.
func (d *stompDriver) open(a *activity) (s stompStream, start time.Time, end func(), ok bool) {
	c := d.c
	switch d.over {
	case overWS:
		ws, start, ok := c.openWS(a, d.d.path, []string{"v12.stomp"}, "stomp")
		if !ok {
			return nil, start, nil, false
		}
		return ws, start, func() { a.endStream(ws) }, true
	case overSockJS:
		sj, start, ok := c.openSockJS(a)
		return sj, start, a.clearConn, ok
	}
	return c.openSTOMPTCP(a)
}

// openSTOMPTCP opens a's TCP connection to a node's STOMP listener; ok is false when it failed
// or was abandoned, otherwise end clears it.
func (c *cell) openSTOMPTCP(a *activity) (s stompStream, start time.Time, end func(), ok bool) {
	v := a.v
	c.connTried(v)
	start = time.Now()
	conn, err := c.dialAny(a.ctx, v, c.stompNodes)
	if err != nil {
		c.connFailed(a, fmt.Errorf("stomp-tcp: %w", err))
		return nil, start, nil, false
	}
	if !a.setConn(conn) {
		_ = conn.Close()
		c.connAbandoned(v)
		return nil, start, nil, false
	}
	return &tcpStream{br: bufio.NewReaderSize(conn, streamBufSize), buf: make([]byte, streamBufSize)}, start, a.clearConn, true
}

// stompDialect is what differs between STOMP servers: where the endpoint is, what the
// destinations are called, what CONNECT carries, and whether a subscription can resume.
type stompDialect struct {
	path     string // WebSocket endpoint
	sub, pub string // destinations with {group}; "" means rtlab's /topic/{topic}
	host     string // CONNECT's host header; "" means the server's host:port
	login    string // CONNECT's login and passcode; "" sends the chat token when there is one
	passcode string
	resume   bool // rtlab: MESSAGEs carry offset and epoch, SUBSCRIBE resumes with since and epoch
}

// stompDialectFor returns the dialect of a kind of server (o's flags for a STOMP target).
func stompDialectFor(kind string, o *Options) stompDialect {
	switch kind {
	case results.KindRabbitMQ:
		// Web-STOMP: /topic/{key} publishes to and binds on amq.topic; the host header names the
		// virtual host.
		return stompDialect{path: "/ws", sub: "/topic/location.{group}", pub: "/topic/location.{group}", host: "/", login: "guest", passcode: "guest"}
	case results.KindSpring:
		return stompDialect{path: "/location", sub: "/sub/location/{group}", pub: "/pub/location/{group}"}
	case results.KindSTOMP:
		// Either destination defaults to the other, both to rtlab's.
		d := stompDialect{path: o.targetPath, host: "/"}
		d.pub = nonEmptyStr(o.StompPub, nonEmptyStr(o.StompSub, Defaults(o.Scenario).StompPub))
		d.sub = nonEmptyStr(o.StompSub, d.pub)
		d.login, d.passcode, _ = strings.Cut(o.StompLogin, ":")
		return d
	}
	return stompDialect{path: "/api/stomp", resume: true}
}

// appendDest appends a destination: the dialect's tmpl with {group} replaced, or rtlab's
// /topic/{topic}.
func appendDest(dst []byte, tmpl, topic string, group int) []byte {
	if tmpl == "" {
		dst = append(dst, "/topic/"...)
		return append(dst, topic...)
	}
	before, after, ok := strings.Cut(tmpl, "{group}")
	dst = append(dst, before...)
	if ok {
		dst = strconv.AppendInt(dst, int64(group), 10)
	}
	return append(dst, after...)
}

func (d *stompDriver) httpPublish() bool { return false }

func (d *stompDriver) leave(w *pubWorker, job pubJob) {
	w.buf = appendChatSend(w.buf[:0], job.a.v.room, "LEAVE", receiptLeave)
	w.frame = d.wire(w.frame[:0], w.buf)
	streamLeave(job.a, w.frame)
}

// appendChatSend appends a SEND of an ENTER or LEAVE to room, asking for a receipt.
func appendChatSend(dst []byte, room, typ, receipt string) []byte {
	body := `{"message":"` + typ + `"}`
	dst = append(dst, "SEND\ndestination:/topic/"...)
	dst = append(dst, room...)
	dst = append(dst, "\ntype:"...)
	dst = append(dst, typ...)
	dst = append(dst, "\ncontent-type:application/json\nreceipt:"...)
	dst = append(dst, receipt...)
	dst = append(dst, "\ncontent-length:"...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\n\n"...)
	dst = append(dst, body...)
	return append(dst, 0)
}

func (d *stompDriver) run(a *activity) { runStream(a, d.session) }

// subReceipt is the receipt id of the SUBSCRIBE frame; publications use their seq.
const subReceipt = "sub"

func (d *stompDriver) session(a *activity) (opened bool) {
	v, c := a.v, d.c
	s, start, end, ok := d.open(a)
	if !ok {
		return false
	}
	defer end()
	if err := d.write(a, d.connect(a)); err != nil {
		c.connFailed(a, fmt.Errorf("stomp: CONNECT: %w", err))
		return false
	}
	l := newLink(a, start)
	defer l.done()
	l.greet = func(typ string) error { return d.write(a, appendChatSend(nil, v.room, typ, receiptEnter)) }
	return stompRead(a, l, s, &c.clk, d.frame)
}

// stompRead reads a STOMP session's frames from s, answering the WebSocket's pings, and hands
// each to frame (with the size of the message it came in and when that arrived) until frame
// says the session is over or reading fails, which l.closed accounts.
func stompRead(a *activity, l *link, s stompStream, clk *clock, frame func(l *link, fr *stomp.Frame, size int, now int64) (end bool, err error)) (opened bool) {
	pong := func(p []byte) error { return a.writeFrame(ws.OpPong, p) }
	parser := stomp.NewParser(stomp.Limits{})
	for {
		p, err := s.next(pong)
		if err != nil {
			if !l.open {
				err = fmt.Errorf("waiting for CONNECTED: %w", err)
			}
			return l.closed(fmt.Errorf("stomp: %w", err))
		}
		now := clk.now()
		parser.Feed(p)
		for {
			fr, ok, err := parser.Next()
			if err != nil {
				return l.closed(fmt.Errorf("stomp: %w", err))
			}
			if !ok {
				break
			}
			if end, err := frame(l, &fr, len(p), now); end {
				if err != nil {
					return l.closed(err)
				}
				return true
			}
		}
	}
}

// connect is the session's CONNECT frame. The client sends no heart-beats of its own (cx = 0):
// it publishes at its own pace, a notify owner never does, and the WebSocket pings the server
// sends idle connections are answered, which is what keeps a quiet session open. Promising
// heart-beats it does not send would get a user with an --interval over 20 s cut off.
func (d *stompDriver) connect(a *activity) []byte {
	v := a.v
	f := append(make([]byte, 0, 256), "CONNECT\naccept-version:1.2\nhost:"...)
	if d.d.host != "" {
		f = append(f, d.d.host...)
	} else {
		f = append(f, d.c.nodes[v.at()]...)
	}
	f = append(f, "\nheart-beat:0,10000\n"...)
	if d.d.login != "" {
		f = append(f, "login:"...)
		f = append(f, d.d.login...)
		f = append(f, "\npasscode:"...)
		f = append(f, d.d.passcode...)
		f = append(f, '\n')
	} else if t := v.token.Load(); t != nil {
		f = append(f, "login:"...)
		f = append(f, v.name...)
		f = append(f, "\npasscode:"...)
		f = append(f, *t...)
		f = append(f, '\n')
	}
	return append(f, "\n\x00"...)
}

// frame hands one frame of the server (in a read of size bytes) to the link. It reports
// whether the session is over, and why when it failed.
func (d *stompDriver) frame(l *link, fr *stomp.Frame, size int, now int64) (end bool, err error) {
	a := l.a
	switch fr.Command {
	case stomp.CmdMessage:
		d.message(l, fr, size, now)
	case stomp.CmdReceipt:
		id, _ := fr.Get("receipt-id")
		if id == subReceipt {
			off, _ := fr.Get("offset")
			offset, _ := strconv.ParseUint(off, 10, 64)
			epoch, _ := fr.Get("epoch")
			if err := l.subscribed(now, offset, []byte(epoch), false); err != nil {
				return true, fmt.Errorf("stomp: ENTER: %w", err)
			}
			return false, nil
		}
		if r, ok := stompReply(id); ok {
			return l.answered(now, r), nil
		}
	case stomp.CmdConnected:
		l.opened()
		if err := d.subscribe(a); err != nil {
			return true, fmt.Errorf("stomp: SUBSCRIBE: %w", err)
		}
	case stomp.CmdError:
		msg, _ := fr.Get("message")
		err := fmt.Errorf("stomp: ERROR %s", msg)
		rid, _ := fr.Get("receipt-id")
		if r, ok := stompReply(rid); ok {
			if r.kind != replyPub {
				err = fmt.Errorf("chat: %w", err)
			}
			l.refused(r, err)
		}
		return true, err
	}
	return false, nil
}

// message hands a MESSAGE to the link: on rtlab with its position, or the gap it reports.
func (d *stompDriver) message(l *link, fr *stomp.Frame, size int, now int64) {
	if !d.d.resume {
		l.message(now, false, 0, nil, parseData(fr.Body), size)
		return
	}
	if g, _ := fr.Get("gap"); g == "true" {
		l.gap()
		return
	}
	off, _ := fr.Get("offset")
	offset, err := strconv.ParseUint(off, 10, 64)
	if err != nil {
		l.a.v.sh.fail(fmt.Errorf("stomp: MESSAGE with offset %q", off), nil)
		return
	}
	epoch, _ := fr.Get("epoch")
	l.message(now, true, offset, []byte(epoch), parseData(fr.Body), size)
}

// stompReply names the request a RECEIPT or an ERROR answers, by its receipt id; ok is false
// for one the client did not ask (or the subscription's).
func stompReply(id string) (r reply, ok bool) {
	switch id {
	case receiptEnter:
		return reply{kind: replyGreeting}, true
	case receiptLeave:
		return reply{kind: replyLeave}, true
	}
	seq, err := strconv.ParseInt(id, 10, 64)
	return reply{seq: seq}, err == nil
}

// subscribe sends SUBSCRIBE with a receipt; after a reconnect it resumes with since and epoch.
func (d *stompDriver) subscribe(a *activity) error {
	v := a.v
	f := append(make([]byte, 0, 192), "SUBSCRIBE\nid:0\ndestination:"...)
	f = appendDest(f, d.d.sub, v.topic, v.group)
	f = append(f, "\nack:auto\nreceipt:"+subReceipt+"\n"...)
	if a.estab.Load() != 0 && d.d.resume {
		f = append(f, "since:"...)
		f = strconv.AppendUint(f, v.last, 10)
		f = append(f, "\nepoch:"...)
		f = append(f, v.epoch...)
		f = append(f, '\n')
	}
	f = append(f, "\n\x00"...)
	return d.write(a, f)
}

func (d *stompDriver) publish(w *pubWorker, job pubJob) {
	a := job.a
	v := a.v
	p := &v.pubs[job.seq]
	topic, typ := d.c.scn.publishTo(v)
	w.body = d.c.appendPub(w.body[:0], v, job.seq, p.ts)
	b := append(w.buf[:0], "SEND\ndestination:"...)
	b = appendDest(b, d.d.pub, topic, v.group)
	if typ != "" {
		b = append(b, "\ntype:"...)
		b = append(b, typ...)
	}
	b = append(b, "\ncontent-type:application/json\nreceipt:"...)
	b = strconv.AppendInt(b, int64(job.seq), 10)
	b = append(b, "\ncontent-length:"...)
	b = strconv.AppendInt(b, int64(len(w.body)), 10)
	b = append(b, "\n\n"...)
	b = append(b, w.body...)
	b = append(b, 0)
	w.buf = b
	w.frame = d.wire(w.frame[:0], b)
	a.writePublication(job.seq, w.frame)
}
