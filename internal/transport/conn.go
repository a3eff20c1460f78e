package transport

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// conn is what every streaming connection is, whatever its framing: WebSocket (ws.go), SSE
// (sse.go) and STOMP over WebSocket, TCP or SockJS (stomp.go) embed it and keep only their
// framing and requests. It owns the connection's id, who it is and until when, its admission,
// its subscriptions (subscribe.go) and its end (close). Its fields are owned by the reader
// goroutine unless noted.
type conn struct {
	s  *Server
	w  *writer // safe for concurrent use; nil for a waiting long poll
	id string  // one scheme for all: a letter for the protocol, a number unique on the server
	// addr is the client's address as limits key it (addrKey), for --user-msg-rate when
	// anonymous; empty when unknown (a trusted proxy's STOMP over TCP).
	addr string
	// kaSlot is the part of the connections the keepalive loop looks at this one with.
	kaSlot uint8

	subs []subscriber // subscribe.go; in no order

	// release gives back the connection's admission (Server.admit); close calls it.
	release func()
	tracked bool // in the registry (Server.track): keepalive, shutdown and CloseWhere reach it
	// stop ends a waiting long poll (w nil) with a reason, from any goroutine: it answers.
	stop func(Reason)

	// ident is who the connection is. The reader writes it under authMu and reads it as it is;
	// other goroutines read it under authMu (identity).
	authMu sync.Mutex
	ident  Identity
	expiry *time.Timer // closes the connection when ident expires; guarded by authMu
}

// newConn is a connection of ident, admitted by release, whose id starts with prefix.
func (s *Server) newConn(prefix string, ident Identity, release func()) conn {
	n := s.nextID.Add(1)
	return conn{s: s, id: prefix + strconv.FormatUint(n, 36), kaSlot: uint8(n % kaSlots), ident: ident, release: release}
}

// client is who is acting, for the reader goroutine's calls to the Policy.
func (c *conn) client() Client { return Client{ID: c.id, Identity: c.ident} }

// identity returns who the connection is, from any goroutine.
func (c *conn) identity() Identity {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	return c.ident
}

// bindIdentity records the connection's identity and arms the timer that closes it when the
// identity expires. Binding again (a refresh, a STOMP CONNECT) replaces both.
func (c *conn) bindIdentity(id Identity) {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	c.ident = id
	c.stopExpiryLocked()
	if id.Expires.IsZero() {
		return
	}
	c.expiry = time.AfterFunc(time.Until(id.Expires), c.expired)
}

// expired closes the connection whose identity expired.
func (c *conn) expired() {
	if c.w != nil {
		c.s.m.Refused.WithLabelValues(c.w.stats.transport, ReasonTokenExpired.Code).Inc()
	}
	c.kick(ReasonTokenExpired)
}

// kick closes the connection with r from any goroutine: a stream's writer says goodbye and
// closes the socket (its reader then ends it: close); a waiting long poll answers.
func (c *conn) kick(r Reason) {
	if c.w == nil {
		c.stop(r)
		return
	}
	c.w.close(r, false)
}

func (c *conn) stopExpiryLocked() {
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
}

// admitUser counts a connection admitted anonymously that has since named its user (a STOMP
// CONNECT with a token) against the per-user cap; its release is given back with the rest.
func (c *conn) admitUser(user string) error {
	userRelease, err := c.s.admitUser(user)
	if err != nil {
		return err
	}
	addrRelease := c.release
	c.release = func() { userRelease(); addrRelease() }
	return nil
}

// start gives a connection its writer on nc with framer f, arms its expiry and registers it
// (keepalive, shutdown, CloseWhere). During shutdown it closes the connection (close) and
// returns false. On success the caller starts the connection's reader (s.wg counts it: track),
// which calls close as it returns.
func (c *conn) start(nc net.Conn, f framer, transport string) bool {
	return c.startResponse(nc, f, transport, nil)
}

// startResponse is start for a connection that is an HTTP response (SSE): head is queued
// first and written even if the connection is cut off at once, so every answer is valid HTTP;
// nothing else (a keepalive, a goodbye) can come before it.
func (c *conn) startResponse(nc net.Conn, f framer, transport string, head []byte) bool {
	c.w = newWriter(nc, f, &c.s.lim, c.s.connStats(transport))
	if head != nil {
		c.w.send(item{raw: head, sub: keepItem})
	}
	c.bindIdentity(c.ident)
	if !c.s.track(c) {
		c.close(ReasonShutdown)
		return false
	}
	return true
}

// close ends the connection; its reader goroutine calls it once, as it returns. The socket is
// closed with r unless it was closed already (then the first reason stands: it is what the
// client was told and what metrics count), the subscriptions end, the connection leaves the
// registry, gives its admission back, and the Policy is told (Policy.Disconnected): every
// streaming connection ends here, so none misses a step.
func (c *conn) close(r Reason) {
	c.unsubscribeAll()
	c.w.close(r, false)
	if c.tracked {
		c.s.untrack(c)
	}
	c.authMu.Lock()
	c.stopExpiryLocked()
	c.authMu.Unlock()
	c.release()
	c.s.policy.Disconnected(c.client())
}

// waitPoll registers a waiting long poll of ident, admitted by release, so that CloseWhere
// reaches it as it reaches streams, and arms its expiry; stop answers it with a reason. done
// ends it and gives the admission back.
func (s *Server) waitPoll(ident Identity, release func(), stop func(Reason)) (done func()) {
	if ident.User == "" && ident.Session == "" && ident.Expires.IsZero() {
		// Nothing can end it early: CloseWhere matches users and sessions, shutdown drains
		// long polls without the registry. 10,000 pollers then share no lock for it.
		return release
	}
	c := &conn{s: s, ident: ident, release: release, stop: stop}
	c.bindIdentity(ident)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.authMu.Lock()
		c.stopExpiryLocked()
		c.authMu.Unlock()
		c.release()
	}
}

// CloseWhere closes every connection whose identity match accepts, with reason r, and returns
// how many it closed: streams (told why: a WebSocket disconnect message, an SSE event, a STOMP
// ERROR) and waiting long polls (answered) alike. The application closes by token when one is
// revoked (BySession), by user for the server API's disconnect (ByUser), on every node.
func (s *Server) CloseWhere(match func(Identity) bool, r Reason) int {
	s.mu.Lock()
	var hit []*conn
	for c := range s.conns {
		if match(c.identity()) {
			hit = append(hit, c)
		}
	}
	s.mu.Unlock()
	for _, c := range hit {
		c.kick(r)
	}
	return len(hit)
}

// ByUser matches the connections of user; an empty user (anonymous) matches none.
func ByUser(user string) func(Identity) bool {
	return func(id Identity) bool { return user != "" && id.User == user }
}

// BySession matches the connections of the credentials named session (a token id); an empty
// one matches none.
func BySession(session string) func(Identity) bool {
	return func(id Identity) bool { return session != "" && id.Session == session }
}
