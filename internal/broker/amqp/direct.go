package amqp

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Requests straight to the sequencer's node (Config.Direct).
//
// A request through the sequencer queue costs a trip through RabbitMQ before the publication's
// own trip to every node; on a busy machine that first trip is most of the latency the other
// nodes add. So the sequencer also listens on a TCP port and announces it, with a token, on the
// live exchange (a sequencer entry, sent again every announceEvery so that nodes starting
// later find one in the part of the log they read). Another node connects, presents the token,
// and writes its request messages there instead of to the queue. The sequencer takes them as
// its own node's; the publications still go out through RabbitMQ, so order, offsets and the
// log are as before.
//
// What is sent on a link is not acknowledged. When the link breaks (the sequencer's node went,
// or its connection to RabbitMQ did, which ends the listener), the node sends every request of
// that link still waiting for its publication to the sequencer queue again. A sequencer skips
// a request it has assigned in its session or whose publication it applied, so whichever copy
// of a request comes second is skipped, as with a request RabbitMQ delivers again.

const (
	// announceEvery is how often the sequencer announces its address again: well inside
	// catchUpMargin, the part of the log a reconnecting node reads.
	announceEvery = 20 * time.Second
	// directHandshake bounds dialing a sequencer and its answer to the hello.
	directHandshake = 2 * time.Second
	// directWriteTimeout bounds writing one request message on a link.
	directWriteTimeout = 2 * time.Second
	// maxDirectMessage bounds one request message on a link: a batch of maxBatch requests or
	// about maxBatchBytes, each up to a publication's size.
	maxDirectMessage = 64 << 20
)

// announcement is a sequencer's address and token, as read from a sequencer entry.
type announcement struct {
	token, addr string
}

// hello is what a node sends first on a link: the shared name, so that nodes of another
// cluster are told apart, and the sequencer's token.
func (b *Broker) hello(token string) string {
	return "rtlab-sequencer " + b.cfg.Name + " " + token + "\n"
}

// listenDirect starts taking requests on Config.Direct for the session's sequencer, until ctx
// ends (the role or the session), and announces where. It returns the token and the
// listener's address; a listener that cannot be opened is logged, and requests keep coming
// through the queue.
func (b *Broker) listenDirect(ctx context.Context, s *session) (token, addr string) {
	if b.cfg.Direct == "" {
		return "", ""
	}
	l, err := net.Listen("tcp", b.cfg.Direct)
	if err != nil {
		b.log.Warn("amqp broker: cannot take requests directly; they go through the sequencer queue", "direct", b.cfg.Direct, "err", err)
		return "", ""
	}
	context.AfterFunc(ctx, func() { _ = l.Close() })
	if a, ok := l.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		// Announced as is, it names every node's own machine.
		b.log.Warn("amqp broker: --amqp-direct has no host; nodes on other machines will send requests through the queue", "direct", b.cfg.Direct)
	}
	token = newID()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed with the session
			}
			go b.serveDirect(ctx, s, c, token)
		}
	}()
	return token, l.Addr().String()
}

// announced takes a sequencer entry read from the live queue or the log.
func (b *Broker) announced(a announcement) {
	if old := b.seqAt.Swap(&a); old != nil && *old == a {
		return // announced again
	}
	select {
	case b.seqNews <- struct{}{}:
	default:
	}
}

// announce sends the sequencer entry to the live exchange, so to every node and the log.
func (b *Broker) announce(s *session, token, addr string) error {
	if err := s.pub.PublishWithContext(s.ctx, b.liveX, controlKey, false, false, amqp.Publishing{Body: appendSequencer(token, addr)}); err != nil {
		return fmt.Errorf("announce the sequencer: %w", err)
	}
	return nil
}

// serveDirect takes request messages from one link until it or ctx ends.
func (b *Broker) serveDirect(ctx context.Context, s *session, c net.Conn, token string) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(directHandshake))
	line, err := r.ReadSlice('\n')
	if err != nil || string(line) != b.hello(token) {
		_, _ = io.WriteString(c, "no\n")
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, "ok\n"); err != nil {
		return
	}
	var head [4]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n == 0 || n > maxDirectMessage {
			b.m.malformed.Inc()
			b.log.Error("amqp broker: closing a link that sent a message of a wrong size", "size", n, "peer", c.RemoteAddr())
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		select {
		case s.local <- body:
		case <-s.ctx.Done():
			return
		}
	}
}

// link is a node's connection to the sequencer's node.
type link struct {
	token string
	conn  net.Conn
	buf   []byte
	down  chan struct{} // closed when the sequencer closes it or it fails
}

// dialDirect connects to the sequencer at a and says hello.
func (b *Broker) dialDirect(ctx context.Context, a announcement) (*link, error) {
	ctx, cancel := context.WithTimeout(ctx, directHandshake)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	answer := make([]byte, 3)
	if _, err := io.WriteString(c, b.hello(a.token)); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := io.ReadFull(c, answer); err != nil {
		c.Close()
		return nil, fmt.Errorf("read the answer to hello: %w", err)
	}
	if string(answer) != "ok\n" {
		c.Close()
		return nil, fmt.Errorf("hello refused: answered %q", answer)
	}
	_ = c.SetDeadline(time.Time{})
	l := &link{token: a.token, conn: c, down: make(chan struct{})}
	go func() {
		// The sequencer sends nothing more: a read returns when the link ends.
		_, _ = c.Read(answer)
		close(l.down)
	}()
	return l, nil
}

// send writes one request message. A sequencer that takes nothing for a while (its node is
// stuck, or gone without closing the connection) fails the send, and the request loop goes
// back to the queue rather than wait on it.
func (l *link) send(body []byte) error {
	l.buf = binary.BigEndian.AppendUint32(l.buf[:0], uint32(len(body)))
	l.buf = append(l.buf, body...)
	_ = l.conn.SetWriteDeadline(time.Now().Add(directWriteTimeout))
	_, err := l.conn.Write(l.buf)
	return err
}

// directLinks is the requestLoop's side of Config.Direct: the link it sends on, the one being
// dialed, and the announcements it gave up on.
type directLinks struct {
	b       *Broker
	s       *session
	cur     *link
	dialing bool
	dialed  chan dialResult
	// failed is the token of the last sequencer that could not be dialed or whose link
	// broke: requests go through the queue until another sequencer is announced.
	failed string
}

type dialResult struct {
	l   *link
	err error
	a   announcement
}

// use returns the link to send on, or nil for the queue. It starts dialing a newly announced
// sequencer in the background, and drops a link to a sequencer that is no longer announced.
func (d *directLinks) use() *link {
	a := d.b.seqAt.Load()
	if d.b.cfg.Direct == "" || d.s.sequencer.Load() || a == nil {
		d.drop()
		return nil
	}
	if d.cur != nil && d.cur.token != a.token {
		d.drop()
	}
	if d.cur == nil && !d.dialing && a.token != d.failed {
		d.dialing = true
		go func() {
			l, err := d.b.dialDirect(d.s.ctx, *a)
			d.dialed <- dialResult{l, err, *a}
		}()
	}
	return d.cur
}

// took takes the result of a dial.
func (d *directLinks) took(r dialResult) {
	d.dialing = false
	if r.err != nil {
		d.failed = r.a.token
		d.b.log.Info("amqp broker: cannot reach the sequencer directly; requests go through the queue", "addr", r.a.addr, "err", r.err)
		return
	}
	if d.s.ctx.Err() != nil {
		r.l.conn.Close()
		return
	}
	d.cur = r.l
	d.b.log.Info("amqp broker: requests go straight to the sequencer's node", "addr", r.a.addr)
}

// down is closed when the current link ends; nil without one.
func (d *directLinks) down() <-chan struct{} {
	if d.cur == nil {
		return nil
	}
	return d.cur.down
}

// drop closes the current link, if any, and sends what is still waiting on it to the queue.
func (d *directLinks) drop() {
	if d.cur == nil {
		return
	}
	l := d.cur
	d.cur = nil
	d.failed = l.token // the sequencer that closed it is gone or going
	l.conn.Close()
	for _, req := range d.b.resend(l) {
		if err := d.s.pub.PublishWithContext(d.s.ctx, "", d.b.seqQ, false, false, amqp.Publishing{Body: req}); err != nil {
			return // the session is ending: these publishes fail with it
		}
		d.b.m.retried.Inc()
	}
}

// close closes the link at the session's end, and the one being dialed.
func (d *directLinks) close() {
	if d.cur != nil {
		d.cur.conn.Close()
	}
	if d.dialing {
		go func() {
			if r := <-d.dialed; r.l != nil {
				r.l.conn.Close()
			}
		}()
	}
}
