// Package stomp is a STOMP 1.2 frame codec: a streaming parser and an encoder that work on
// []byte. It does no networking; the server's STOMP-over-WebSocket transport and the load
// generator's STOMP client both sit on top of it.
//
// Decoding is lenient where real clients differ from the spec (CRLF or LF, NUL followed by
// EOLs, missing host and content-length, unescaped colons in values, a missing blank line
// before the NUL) and strict where sloppiness would make frames ambiguous (unknown commands,
// bad escapes, bad content-length, bare CR or NUL inside header lines).
package stomp

import (
	"errors"
	"strconv"
	"strings"
)

// Commands defined by STOMP 1.2. The parser returns these exact strings, so callers may compare
// with == and the parser allocates nothing for the command.
const (
	CmdConnect     = "CONNECT"
	CmdStomp       = "STOMP"
	CmdSend        = "SEND"
	CmdSubscribe   = "SUBSCRIBE"
	CmdUnsubscribe = "UNSUBSCRIBE"
	CmdBegin       = "BEGIN"
	CmdCommit      = "COMMIT"
	CmdAbort       = "ABORT"
	CmdAck         = "ACK"
	CmdNack        = "NACK"
	CmdDisconnect  = "DISCONNECT"

	CmdConnected = "CONNECTED"
	CmdMessage   = "MESSAGE"
	CmdReceipt   = "RECEIPT"
	CmdError     = "ERROR"
)

// HdrContentLength is the one header the codec itself interprets.
const HdrContentLength = "content-length"

// Default limits, used for zero (or negative) fields of Limits.
const (
	DefaultMaxFrame      = 64 << 10
	DefaultMaxHeaders    = 64
	DefaultMaxHeaderLine = 8 << 10
)

// Header is one header line of a frame. Key and Value are unescaped.
type Header struct{ Key, Value string }

// Frame is one STOMP frame.
type Frame struct {
	Command string   // "CONNECT", "SEND", "MESSAGE", ...
	Headers []Header // in wire order; repeated keys allowed
	Body    []byte
}

// Get returns the value of the first header named key. STOMP 1.2 says that when a header is
// repeated only the first occurrence counts.
func (f *Frame) Get(key string) (string, bool) {
	for i := range f.Headers {
		if f.Headers[i].Key == key {
			return f.Headers[i].Value, true
		}
	}
	return "", false
}

// Set replaces the value of the first header named key, or appends the header when it is
// absent. Later repeats of key are left alone; they are ignored by readers anyway.
func (f *Frame) Set(key, value string) {
	for i := range f.Headers {
		if f.Headers[i].Key == key {
			f.Headers[i].Value = value
			return
		}
	}
	f.Headers = append(f.Headers, Header{key, value})
}

// Del removes every header named key.
func (f *Frame) Del(key string) {
	h := f.Headers[:0]
	for _, kv := range f.Headers {
		if kv.Key != key {
			h = append(h, kv)
		}
	}
	clear(f.Headers[len(h):]) // let the dropped strings be collected
	f.Headers = h
}

// Limits bounds what the parser buffers and accepts from one peer.
type Limits struct {
	MaxFrame      int // total bytes of one frame (command+headers+body); zero means 64 KiB
	MaxHeaders    int // zero means 64
	MaxHeaderLine int // bytes per header line; zero means 8 KiB
}

// withDefaults fills zero (and nonsensical negative) fields.
func (l Limits) withDefaults() Limits {
	if l.MaxFrame <= 0 {
		l.MaxFrame = DefaultMaxFrame
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = DefaultMaxHeaders
	}
	if l.MaxHeaderLine <= 0 {
		l.MaxHeaderLine = DefaultMaxHeaderLine
	}
	return l
}

// Sentinel errors. Parse errors are *ParseError values wrapping one of these; test with
// errors.Is.
var (
	ErrUnknownCommand    = errors.New("stomp: unknown command")
	ErrBadHeader         = errors.New("stomp: bad header")
	ErrBadEscape         = errors.New("stomp: bad header escape")
	ErrBadContentLength  = errors.New("stomp: bad content-length")
	ErrMissingNUL        = errors.New("stomp: missing NUL after body")
	ErrFrameTooLarge     = errors.New("stomp: frame too large")
	ErrTooManyHeaders    = errors.New("stomp: too many headers")
	ErrHeaderLineTooLong = errors.New("stomp: header line too long")
)

// ParseError describes why the parser gave up. Its Error text is one short line, fit to be
// sent back to the peer in an ERROR frame's message header.
type ParseError struct {
	Err     error  // one of the Err* sentinels
	State   string // what the parser was reading: "command", "header", "body"
	Detail  string // optional precision, e.g. "missing colon"
	Snippet string // start of the offending line or frame, raw (Error quotes it)
	Offset  int64  // stream offset of the offending line or frame
}

// snippetMax bounds how much input an error message echoes.
const snippetMax = 32

// Error formats as `<sentinel> (<detail>) in <state>: "<snippet>"`, quoted to ASCII.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.Detail != "" {
		b.WriteString(" (")
		b.WriteString(e.Detail)
		b.WriteByte(')')
	}
	b.WriteString(" in ")
	b.WriteString(e.State)
	if e.Snippet != "" {
		b.WriteString(": ")
		// QuoteToASCII keeps the message on one line whatever the input holds.
		if len(e.Snippet) > snippetMax {
			b.WriteString(strconv.QuoteToASCII(e.Snippet[:snippetMax]))
			b.WriteString("...")
		} else {
			b.WriteString(strconv.QuoteToASCII(e.Snippet))
		}
	}
	return b.String()
}

// Unwrap returns the sentinel, so errors.Is(err, ErrFrameTooLarge) works.
func (e *ParseError) Unwrap() error { return e.Err }

// ClientCommand reports whether cmd is a frame a client may send to a server.
func ClientCommand(cmd string) bool {
	switch cmd {
	case CmdConnect, CmdStomp, CmdSend, CmdSubscribe, CmdUnsubscribe, CmdBegin, CmdCommit,
		CmdAbort, CmdAck, CmdNack, CmdDisconnect:
		return true
	}
	return false
}

// ServerCommand reports whether cmd is a frame a server may send to a client.
func ServerCommand(cmd string) bool {
	switch cmd {
	case CmdConnected, CmdMessage, CmdReceipt, CmdError:
		return true
	}
	return false
}

// literalHeaders reports whether headers of cmd are written without escaping. The spec says so
// for CONNECT and CONNECTED (1.0 compatibility); STOMP is CONNECT under another name and
// carries the same passcodes, so it is treated alike.
func literalHeaders(cmd string) bool {
	return cmd == CmdConnect || cmd == CmdConnected || cmd == CmdStomp
}

// command maps a command line to its constant without allocating.
func command(b []byte) (string, bool) {
	switch string(b) {
	case CmdSend:
		return CmdSend, true
	case CmdMessage:
		return CmdMessage, true
	case CmdAck:
		return CmdAck, true
	case CmdSubscribe:
		return CmdSubscribe, true
	case CmdUnsubscribe:
		return CmdUnsubscribe, true
	case CmdConnect:
		return CmdConnect, true
	case CmdStomp:
		return CmdStomp, true
	case CmdConnected:
		return CmdConnected, true
	case CmdReceipt:
		return CmdReceipt, true
	case CmdError:
		return CmdError, true
	case CmdNack:
		return CmdNack, true
	case CmdBegin:
		return CmdBegin, true
	case CmdCommit:
		return CmdCommit, true
	case CmdAbort:
		return CmdAbort, true
	case CmdDisconnect:
		return CmdDisconnect, true
	}
	return "", false
}
