package amqp

import (
	"errors"
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
	closed bool             // guarded by mu
}

var errSharedClosed = errors.New("amqp: connection closed")

func newShared(url string, heartbeat time.Duration) *shared {
	return &shared{url: url, cfg: amqp.Config{
		Heartbeat:  heartbeat,
		Locale:     "en_US",
		Dial:       amqp.DefaultDial(3 * time.Second),
		Properties: amqp.Table{"connection_name": "rtlab"},
	}}
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
	conn, err := amqp.DialConfig(c.url, c.cfg)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// drop closes conn, a connection its user found broken, so that the next get dials again.
func (c *shared) drop(conn *amqp.Connection) {
	c.mu.Lock()
	if c.conn == conn {
		c.conn = nil
	}
	c.mu.Unlock()
	_ = conn.Close()
}

// close closes the connection for good.
func (c *shared) close() {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.conn = nil
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}
