package stomp

import "strconv"

// needsEscape marks the octets STOMP 1.2 escapes in header names and values.
var needsEscape = [256]bool{'\\': true, '\n': true, '\r': true, ':': true}

// AppendFrame appends the wire form of f to dst and returns the extended slice.
//
// Lines end with LF and the frame ends with a bare NUL (no trailing EOL). Header names and
// values are escaped, except in CONNECT, CONNECTED and STOMP frames whose headers the spec
// keeps literal; there only CR and LF (and a colon in a name), which would break the frame,
// are escaped, so such a frame stays well-formed even if it cannot be read back exactly.
//
// Content-length policy: the body's real length is always what is written. The first
// content-length header of f, if any, is written in place with len(f.Body) whatever its value
// (a stale value would corrupt the stream); otherwise a content-length header is appended after
// the others when the body is non-empty, so bodies containing NUL survive and readers need not
// scan for the NUL. Frames without a body get none. Later repeats of content-length are written
// as given (readers ignore them). The command is written as given; it is not validated.
func AppendFrame(dst []byte, f *Frame) []byte {
	dst = append(dst, f.Command...)
	dst = append(dst, '\n')
	literal := literalHeaders(f.Command)
	hasLength := false
	for _, h := range f.Headers {
		if !hasLength && h.Key == HdrContentLength {
			hasLength = true
			dst = appendLength(dst, len(f.Body))
			continue
		}
		if literal {
			dst = appendLiteral(dst, h.Key, true)
			dst = append(dst, ':')
			dst = appendLiteral(dst, h.Value, false)
			dst = append(dst, '\n')
		} else {
			dst = AppendHeader(dst, h.Key, h.Value)
		}
	}
	if !hasLength && len(f.Body) > 0 {
		dst = appendLength(dst, len(f.Body))
	}
	dst = append(dst, '\n')
	dst = append(dst, f.Body...)
	return append(dst, 0)
}

// AppendHeader appends the escaped header line "key:value\n". It is for frames built by hand on
// hot paths: write the command line, the headers, then "\n", the body and a NUL.
func AppendHeader(dst []byte, key, value string) []byte {
	dst = appendEscaped(dst, key)
	dst = append(dst, ':')
	dst = appendEscaped(dst, value)
	return append(dst, '\n')
}

// AppendHeaderInt appends the header line "key:v\n" with key escaped, without formatting v
// into a temporary string.
func AppendHeaderInt(dst []byte, key string, v int64) []byte {
	dst = appendEscaped(dst, key)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '\n')
}

func appendLength(dst []byte, n int) []byte {
	dst = append(dst, HdrContentLength+":"...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\n')
}

// AppendEscaped appends s as it appears inside a header value, with STOMP 1.2 escapes.
func AppendEscaped(dst []byte, s string) []byte { return appendEscaped(dst, s) }

// appendEscaped appends s with STOMP 1.2 header escapes. The common case, nothing to escape,
// is a scan and one copy.
func appendEscaped(dst []byte, s string) []byte {
	i := 0
	for i < len(s) && !needsEscape[s[i]] {
		i++
	}
	if i == len(s) {
		return append(dst, s...)
	}
	dst = append(dst, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case ':':
			dst = append(dst, '\\', 'c')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// appendLiteral appends a CONNECT-style header name or value: verbatim except for the octets
// that would end the line (or, in a name, the name).
func appendLiteral(dst []byte, s string, name bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == ':' && name:
			dst = append(dst, '\\', 'c')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
