package bench

import "time"

// link is one connection of a user as the accounting sees it. The drivers read their wire and
// turn it into a few events (opened, subscribed, message, gap, answered, refused, closed);
// link does the bookkeeping of each once, for every transport and server: connection counts,
// the subscription's position and delivery window, the scenario's greeting, receipts,
// publication answers.
type link struct {
	a       *activity
	start   time.Time // when the connection attempt began (connect time counts from it)
	open    bool      // the connection got to usable (opened)
	counted bool      // the user counts in cell.connected on this connection
	// greet sends the scenario's greeting (its type, "ENTER") on this connection; nil when
	// the user's greeting goes over the HTTP pool.
	greet func(typ string) error
}

// newLink starts the accounting of a connection attempt of a's user that began at start.
func newLink(a *activity, start time.Time) *link { return &link{a: a, start: start} }

// reply names the request an answer is for: the session's greeting (ENTER) or LEAVE, or a
// publication by its seq.
type reply struct {
	kind replyKind
	seq  int64
}

type replyKind uint8

const (
	replyPub replyKind = iota
	replyGreeting
	replyLeave
)

// opened: the connection got to usable (the server said hello, or answered the request).
func (l *link) opened() {
	l.open = true
	l.a.v.c.connOpened(l.a, time.Since(l.start))
}

// subscribed: the server confirmed the subscription at now, at position offset in epoch;
// lost is set when it could not resume where the user left off (a gap). The user counts as
// connected and publishes from now on; the scenario's greeting, when it has one and it is due,
// goes out on the connection (greet) or over the HTTP pool. The error is the greeting's.
func (l *link) subscribed(now int64, offset uint64, epoch []byte, lost bool) error {
	a := l.a
	c := a.v.c
	if lost {
		a.v.gap()
	}
	a.mu.Lock()
	a.ready = true
	a.mu.Unlock()
	a.established(now, offset, epoch)
	l.serving()
	if !a.greetDue() {
		return nil
	}
	if l.greet == nil {
		return c.greetHTTP(a)
	}
	return l.greet(c.scn.greeting())
}

// serving: the connection serves the user (subscribed; a poll answered), who counts as
// connected on it until done.
func (l *link) serving() {
	if !l.counted {
		l.counted = true
		l.a.v.c.connected.Add(1)
	}
}

// message: a publication arrived at now, size bytes on the wire, carrying d; at offset in
// epoch when positioned (servers that give positions).
func (l *link) message(now int64, positioned bool, offset uint64, epoch []byte, d dataFields, size int) {
	v := l.a.v
	if positioned {
		v.position(offset, epoch)
	}
	v.receive(l.a, d, size, now)
}

// gap: the server said history was lost.
func (l *link) gap() { l.a.v.gap() }

// answered: the server accepted request r at now. It reports whether the connection has
// nothing more to do: the session's LEAVE is answered, or a leaving user's last publication.
func (l *link) answered(now int64, r reply) (end bool) {
	a := l.a
	switch r.kind {
	case replyGreeting:
		a.v.c.enteredAt(a, now)
		return false
	case replyLeave:
		a.sessDone.Store(true)
		return true
	}
	return a.answered(r.seq, true, nil)
}

// refused: the server refused request r with err. A refused greeting or LEAVE ends the
// connection (a greeting is tried again on the next one; a refused LEAVE still ends the
// session); a refused publication is counted as failed.
func (l *link) refused(r reply, err error) (end bool) {
	a := l.a
	switch r.kind {
	case replyGreeting:
		return true
	case replyLeave:
		a.sessDone.Store(true)
		return true
	}
	return a.answered(r.seq, false, err)
}

// closed: the connection ended with err. It counts a failed attempt when it never got to
// usable, a drop otherwise (neither when the user was leaving), and reports whether it had
// opened.
func (l *link) closed(err error) (opened bool) {
	c := l.a.v.c
	if l.open {
		c.connDropped(l.a, err)
	} else {
		c.connFailed(l.a, err)
	}
	return l.open
}

// done ends the link's accounting: the user no longer counts as connected on it. Drivers
// defer it.
func (l *link) done() {
	if l.counted {
		l.a.v.c.connected.Add(-1)
		l.counted = false
	}
}

// greetDue reports whether the scenario's greeting is due: the scenario has one, the user is
// subscribed, has not been answered on this connection (HTTP: in this session) and its
// session is not leaving.
func (a *activity) greetDue() bool {
	return a.v.c.scn.greeting() != "" && a.estab.Load() != 0 && !a.entered.Load() && !a.leaving.Load()
}
