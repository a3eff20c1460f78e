package transport

import "github.com/gobwas/ws"

// stompCarrier is what carries a STOMP session's frames, and all that differs between the
// carriers: over WebSocket (/api/stomp) each frame is a text message and an idle session is
// pinged; over TCP and SockJS frames go bare, and a session without heart-beats may be silent.
type stompCarrier struct {
	head func(dst []byte, n int) []byte          // appends what goes before a frame of n bytes
	end  func(code uint16, reason string) []byte // what closes the connection after the last frame; nil: nothing
	beat []byte                                  // a heart-beat
	// idle is written to an idle session that has no heart-beats; nil: nothing (on TCP,
	// keep-alive probes find dead peers).
	idle []byte
	// silent: a connected session that asked for no heart-beats is never cut for silence.
	silent bool
}

var (
	stompOverWS = &stompCarrier{
		head: func(dst []byte, n int) []byte { return appendWSHeader(dst, ws.OpText, n) },
		end:  wsClose,
		beat: appendWSText(nil, []byte{'\n'}),
		idle: wsPing,
	}
	stompBare = &stompCarrier{
		head:   func(dst []byte, _ int) []byte { return dst },
		end:    func(uint16, string) []byte { return nil },
		beat:   []byte{'\n'},
		silent: true,
	}
)

// wire wraps one encoded frame for the carrier: a WebSocket text message, or the frame itself.
func (k *stompCarrier) wire(frame []byte) []byte {
	h := k.head(nil, len(frame))
	if h == nil {
		return frame
	}
	return append(h, frame...)
}
