package amqp

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// shared is the AMQP connection a node's broker and state store share, each on channels of
// its own. Whoever finds it broken drops it; the next one to need it dials again, so both
// move to the same new connection.
type shared struct {
	url string
	cfg amqp.Config

	mu     sync.Mutex
	conn   *amqp.Connection // nil until dialed, or after a drop; guarded by mu
	watch  *watchConn       // conn's socket; guarded by mu
	dialed *watchConn       // the socket the dial in progress opened; guarded by mu
	closed bool             // guarded by mu
}

var errSharedClosed = errors.New("amqp: connection closed")

// newShared dials url with heartbeat; log receives the losses the socket's watchdog finds.
func newShared(url string, heartbeat time.Duration, log *slog.Logger) *shared {
	c := &shared{url: url}
	dial := amqp.DefaultDial(3 * time.Second)
	c.cfg = amqp.Config{
		Heartbeat: heartbeat,
		Locale:    "en_US",
		// Called by DialConfig in get, with mu held.
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := dial(network, addr)
			if err != nil {
				return nil, err
			}
			c.dialed = watch(conn, heartbeat, log)
			return c.dialed, nil
		},
		Properties: amqp.Table{"connection_name": "rtlab"},
	}
	return c
}

// get returns the current connection, dialing one if there is none or it closed.
func (c *shared) get() (*amqp.Connection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errSharedClosed
	}
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	c.dialed = nil
	conn, err := amqp.DialConfig(c.url, c.cfg)
	if err != nil {
		if c.dialed != nil {
			_ = c.dialed.Close() // its watchdog would report a loss
		}
		return nil, err
	}
	c.conn, c.watch = conn, c.dialed
	return conn, nil
}

// lost is closed when conn's socket is found dead (watchConn); at once if conn is no longer
// the current connection.
func (c *shared) lost(conn *amqp.Connection) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != conn || c.watch == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return c.watch.dead
}

// drop closes conn, a connection its user found broken, so that the next get dials again.
func (c *shared) drop(conn *amqp.Connection) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn, c.watch = nil, nil
	}
	c.mu.Unlock()
	_ = conn.Close()
}

// close closes the connection for good.
func (c *shared) close() {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.conn, c.watch = nil, nil
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// watchConn is the socket under an AMQP connection. It notices a dead path to RabbitMQ by
// itself: amqp091-go's heartbeats run on a goroutine that a stalled write blocks, and a
// black-holed path (no FIN, no RST) stalls writes once the send buffer fills. RabbitMQ sends a
// frame (a heartbeat at least) more often than every heartbeat interval, so no byte read in
// silentFor, or a write RabbitMQ has not taken in stalledFor, closes the socket: the
// connection's reader fails and NotifyClose fires.
type watchConn struct {
	net.Conn
	silentFor, stalledFor time.Duration
	log                   *slog.Logger
	timer                 *time.Timer
	once                  sync.Once
	dead                  chan struct{} // closed when the watchdog closed the socket
}

// The watchdog's bounds, in heartbeat intervals. A write may wait longer than a read: RabbitMQ
// stops reading a connection it blocks (a resource alarm) while still sending heartbeats.
const (
	silentBeats  = 2
	stalledBeats = 5
)

func watch(conn net.Conn, heartbeat time.Duration, log *slog.Logger) *watchConn {
	w := &watchConn{
		Conn: conn, silentFor: silentBeats * heartbeat, stalledFor: stalledBeats * heartbeat,
		log: log, dead: make(chan struct{}),
	}
	w.timer = time.AfterFunc(w.silentFor, func() { w.kill("nothing read from RabbitMQ in " + w.silentFor.String()) })
	return w
}

func (w *watchConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.timer.Reset(w.silentFor)
	}
	return n, err
}

func (w *watchConn) Write(p []byte) (int, error) {
	_ = w.Conn.SetWriteDeadline(time.Now().Add(w.stalledFor))
	n, err := w.Conn.Write(p)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.kill("a write not taken by RabbitMQ in " + w.stalledFor.String())
	}
	return n, err
}

func (w *watchConn) Close() error {
	w.timer.Stop()
	w.once.Do(func() {}) // closed on purpose: not a loss
	return w.Conn.Close()
}

// kill closes the socket once, for reason.
func (w *watchConn) kill(reason string) {
	w.once.Do(func() {
		w.log.Warn("amqp broker: connection lost: " + reason)
		close(w.dead)
		_ = w.Conn.Close()
	})
}
