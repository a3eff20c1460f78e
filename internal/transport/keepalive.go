package transport

import "time"

// kaSlots is how many parts the keepalive loop handles the connections in, one part every
// kaPeriod/kaSlots: each connection is looked at once a period, always in its own part (so
// its looks stay a period apart, as STOMP's heart-beats need), while the pings and heart-beats
// due leave spread over the period instead of in one burst (at 10,000 WebSocket connections,
// 2,000 pings every 5 s delayed the deliveries written beside them).
const kaSlots = 50

// keepalive writes pings and heart-beats on idle connections. One loop for all connections
// instead of a timer each keeps idle connections cheap; each tick copies one part of them
// (Server.kaParts) under the lock long polls take too.
func (s *Server) keepalive() {
	t := time.NewTicker(max(s.kaPeriod/kaSlots, time.Millisecond))
	defer t.Stop()
	var ws []*writer
	for part := 0; ; part = (part + 1) % kaSlots {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			ws = ws[:0]
			s.mu.Lock()
			for w := range s.kaParts[part] {
				ws = append(ws, w)
			}
			s.mu.Unlock()
			for _, w := range ws {
				if ka, ok := w.f.(interface{ keepaliveDue(time.Duration) bool }); ok && !ka.keepaliveDue(w.idleFor(now)) {
					continue
				}
				if b := w.f.keepalive(); b != nil {
					w.sendRaw(b)
				}
			}
			clear(ws) // a closed connection's writer must not stay reachable from here
		}
	}
}
