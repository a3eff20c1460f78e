package stomp

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Parser states. Between frames the parser is idle and skips heart-beats.
const (
	stIdle = iota
	stCommand
	stHeaders
	stBody
)

// State names used in ParseError.State.
const (
	inCommand = "command line"
	inHeader  = "header line"
	inBody    = "body"
)

// keepCap is the largest buffer kept across messages once drained; a connection that sent one
// big frame should not pin that much memory while idle.
const keepCap = 16 << 10

// span locates one header's key and value, relative to the frame start (while emitting a
// frame with escapes, relative to the scratch buffer instead).
type span struct {
	k0, k1, v0, v1 int
}

// Parser is a streaming STOMP frame parser. Feed it bytes as they arrive, then call Next until
// it reports that more input is needed.
//
// STOMP over WebSocket usually carries one frame per WebSocket message, but clients may split a
// frame over several messages (stompjs splitLargeFrames) or put several frames, or bare EOL
// heart-beats, in one message. State is kept across Feed calls, and work already done on a
// partial frame is not repeated when more bytes arrive.
//
// Limits are enforced as bytes arrive: a frame fails as soon as its buffered part shows that it
// will exceed a limit, so a caller that calls Next after every Feed never buffers more than
// Limits.MaxFrame plus one Feed.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	lim      Limits
	buf      []byte
	off      int   // start of the current frame, or of unread input when idle
	consumed int64 // stream bytes dropped from the front of buf, for error offsets

	// Positions below are relative to buf[off:], so compacting buf moves nothing.
	state   uint8
	line    int // start of the line being read
	scan    int // how far the current line or body has been searched
	cmd     string
	literal bool   // CONNECT-like frame: header values are not unescaped
	anyEsc  bool   // some header line holds an escape to decode
	scratch []byte // where escaped headers are decoded, reused
	hdrs    []span // reused from frame to frame
	hdr0    int    // start of the first header line
	hdr1    int    // end of the last header line's content
	clen    int    // first content-length, or -1
	body    int    // start of the body

	trailer bool // EOLs now are the last frame's trailer, not heart-beats
	beats   uint64
	last    int // raw size (command to NUL) of the last frame returned
	err     error
}

// NewParser returns a parser enforcing lim; zero fields take the defaults.
func NewParser(lim Limits) *Parser {
	return &Parser{lim: lim.withDefaults(), clen: -1}
}

// Limits returns the limits in force, defaults filled in.
func (p *Parser) Limits() Limits { return p.lim }

// HeartBeats returns how many heart-beats (bare EOLs between frames) have been skipped.
//
// The spec allows any number of EOLs after a frame's NUL, and on the wire they look exactly
// like heart-beats. The parser counts EOLs that directly follow a NUL in the same Feed as the
// frame's trailer, not as heart-beats, so "...\x00\n" from a seed script counts none while a
// "\n" WebSocket message from stompjs counts one. That holds when the caller drains Next after
// every Feed, as a transport does. Liveness should still be judged by any inbound bytes: the
// count is for metrics.
func (p *Parser) HeartBeats() uint64 { return p.beats }

// Buffered returns how many bytes are held for frames not yet complete.
func (p *Parser) Buffered() int { return len(p.buf) - p.off }

// Feed appends data to the parser's input. The parser copies what it keeps; data may be reused
// as soon as Feed returns. After an error Feed discards its input.
func (p *Parser) Feed(data []byte) {
	if p.err != nil || len(data) == 0 {
		return
	}
	switch {
	case p.off == len(p.buf):
		// Drained: this call starts a new message, so its leading EOLs are heart-beats.
		p.trailer = false
		p.consumed += int64(p.off)
		p.off = 0
		if cap(p.buf) > keepCap && len(data) <= keepCap {
			p.buf = nil
		} else {
			p.buf = p.buf[:0]
		}
	case p.off > 0 && len(p.buf)+len(data) > cap(p.buf):
		// Slide the unfinished frame to the front instead of growing the buffer.
		n := copy(p.buf, p.buf[p.off:])
		p.consumed += int64(p.off)
		p.buf = p.buf[:n]
		p.off = 0
	}
	p.buf = append(p.buf, data...)
}

// Next returns the next complete frame. ok is false when more input is needed. Heart-beats are
// skipped (see HeartBeats). An error is a *ParseError; after one the parser is unusable and
// Next keeps returning it.
//
// The returned frame owns its memory: the header strings of one frame share a single
// allocation and the body is a fresh slice, so keeping a frame pins nothing of the parser's.
func (p *Parser) Next() (f Frame, ok bool, err error) {
	if p.err != nil {
		return Frame{}, false, p.err
	}
	// Each step consumes what it can in its state. It either ends the call (a frame, an error,
	// or more input needed while staying in its state) or moves on to the next state.
	for {
		st := p.state
		switch st {
		case stIdle:
			p.skipBeats()
		case stCommand:
			err = p.commandLine()
		case stHeaders:
			f, ok, err = p.headerLines()
		case stBody:
			f, ok, err = p.bodyPart()
		}
		if ok || err != nil || p.state == st {
			return f, ok, err
		}
	}
}

// skipBeats skips the EOLs between frames and enters stCommand at the first other byte.
func (p *Parser) skipBeats() {
	for {
		data := p.buf[p.off:]
		if len(data) == 0 {
			return
		}
		switch data[0] {
		case '\n':
			p.off++
			p.beat()
			continue
		case '\r':
			if len(data) < 2 {
				return // CRLF may be split over two Feeds
			}
			if data[1] == '\n' {
				p.off += 2
				p.beat()
				continue
			}
		}
		p.trailer = false
		p.state = stCommand
		p.line, p.scan = 0, 0
		return
	}
}

// commandLine reads the command line and enters stHeaders once it is complete and known.
func (p *Parser) commandLine() error {
	data := p.buf[p.off:]
	lf, end, err := p.findLine(data, inCommand, ErrUnknownCommand)
	if err != nil || lf < 0 {
		return err
	}
	cmd, known := command(data[:end])
	if !known {
		return p.failErr(ErrUnknownCommand, inCommand, "", 0, data[:end])
	}
	p.cmd = cmd
	p.literal = literalHeaders(cmd)
	p.hdrs = p.hdrs[:0]
	p.clen = -1
	p.anyEsc = false
	p.line, p.scan = lf+1, lf+1
	p.hdr0, p.hdr1 = lf+1, lf+1
	p.state = stHeaders
	return nil
}

// headerLines reads header lines up to the blank line, then enters stBody. A NUL in place of
// a header line ends a body-less frame, which it returns.
func (p *Parser) headerLines() (Frame, bool, error) {
	data := p.buf[p.off:]
	for {
		if p.line < len(data) && p.line < p.lim.MaxFrame && data[p.line] == 0 {
			// NUL where a header or the blank line belongs: some hand-written clients
			// omit the blank line of a body-less frame. Accept it as an empty body.
			if p.clen > 0 {
				return p.fail(ErrBadContentLength, inHeader, "frame ended before body", p.line, data[p.line:p.line+1])
			}
			return p.emit(data, p.line, p.line, p.line+1)
		}
		lf, end, err := p.findLine(data, inHeader, ErrBadHeader)
		if err != nil || lf < 0 {
			return Frame{}, false, err
		}
		if end == p.line { // blank line: headers done
			p.body = lf + 1
			if p.clen >= 0 && p.body+p.clen+1 > p.lim.MaxFrame {
				return p.fail(ErrFrameTooLarge, inBody, p.limitDetail(p.lim.MaxFrame, " bytes"), 0, data[:min(len(data), p.lim.MaxFrame)])
			}
			p.scan = p.body
			p.state = stBody
			return Frame{}, false, nil
		}
		if err := p.header(data, end); err != nil {
			return Frame{}, false, err
		}
		p.line, p.scan = lf+1, lf+1
	}
}

// bodyPart looks for the body's end: at content-length when given, else at the first NUL.
func (p *Parser) bodyPart() (Frame, bool, error) {
	data := p.buf[p.off:]
	if p.clen >= 0 {
		end := p.body + p.clen // where the NUL must be
		if len(data) <= end {
			return Frame{}, false, nil
		}
		if data[end] != 0 {
			return p.fail(ErrMissingNUL, inBody, "content-length "+strconv.Itoa(p.clen), p.body, data[p.body:end+1])
		}
		return p.emit(data, p.body, end, end+1)
	}
	stop := min(len(data), p.lim.MaxFrame)
	if p.scan < stop {
		if i := bytes.IndexByte(data[p.scan:stop], 0); i >= 0 {
			end := p.scan + i
			return p.emit(data, p.body, end, end+1)
		}
		p.scan = stop
	}
	if stop == p.lim.MaxFrame {
		return p.fail(ErrFrameTooLarge, inBody, p.limitDetail(p.lim.MaxFrame, " bytes"), 0, data[:min(len(data), p.lim.MaxFrame)])
	}
	return Frame{}, false, nil
}

// beat counts one EOL seen between frames.
func (p *Parser) beat() {
	if !p.trailer {
		p.beats++
	}
}

// findLine looks for the LF ending the line that starts at p.line. It returns lf < 0 when more
// input is needed. end is where the line's content ends (before LF or CRLF).
//
// The search window is capped by the line and frame limits, so an over-long line fails as soon
// as its buffered part proves it too long, and bytes already searched are not searched again.
// Every decision depends only on bytes inside the window, which is what makes the outcome the
// same however the input is split.
func (p *Parser) findLine(data []byte, state string, nulErr error) (lf, end int, err error) {
	contentCap := p.line + p.lim.MaxHeaderLine // an LF at or before this is within the limit
	stop := min(len(data), contentCap+1, p.lim.MaxFrame)
	if p.scan < stop {
		w := data[p.scan:stop]
		i := bytes.IndexByte(w, '\n')
		if i >= 0 {
			w = w[:i]
		}
		// A NUL inside a line means a truncated frame; saying so beats reading the next frame
		// as headers.
		if n := bytes.IndexByte(w, 0); n >= 0 {
			return -1, 0, p.failErr(nulErr, state, "NUL in line", p.line, data[p.line:p.scan+n+1])
		}
		if i >= 0 {
			lf = p.scan + i
			end = lf
			if end > p.line && data[end-1] == '\r' {
				end--
			}
			return lf, end, nil
		}
		p.scan = stop
	}
	if stop == contentCap+1 {
		// MaxHeaderLine+1 bytes and no LF: too long, unless they end with the CR of a CRLF.
		if data[contentCap] != '\r' || contentCap+1 >= p.lim.MaxFrame {
			if data[contentCap] == '\r' {
				return -1, 0, p.failErr(ErrFrameTooLarge, state, p.limitDetail(p.lim.MaxFrame, " bytes"), 0, data[:min(len(data), p.lim.MaxFrame)])
			}
			return -1, 0, p.failErr(ErrHeaderLineTooLong, state, p.limitDetail(p.lim.MaxHeaderLine, " bytes"), p.line, data[p.line:stop])
		}
		if len(data) == contentCap+1 {
			return -1, 0, nil
		}
		if data[contentCap+1] != '\n' {
			return -1, 0, p.failErr(ErrHeaderLineTooLong, state, p.limitDetail(p.lim.MaxHeaderLine, " bytes"), p.line, data[p.line:stop])
		}
		return contentCap + 1, contentCap, nil
	}
	if stop == p.lim.MaxFrame {
		return -1, 0, p.failErr(ErrFrameTooLarge, state, p.limitDetail(p.lim.MaxFrame, " bytes"), 0, data[:min(len(data), p.lim.MaxFrame)])
	}
	return -1, 0, nil
}

// header validates the header line data[p.line:end] and records it.
func (p *Parser) header(data []byte, end int) error {
	line := data[p.line:end]
	if len(p.hdrs) == p.lim.MaxHeaders {
		return p.failErr(ErrTooManyHeaders, inHeader, p.limitDetail(p.lim.MaxHeaders, ""), p.line, line)
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return p.failErr(ErrBadHeader, inHeader, "CR in line", p.line, line)
	}
	if !utf8.Valid(line) {
		// STOMP 1.2 headers are UTF-8; values are echoed (receipt, subscription ids) in text
		// frames, which a browser drops the connection over when they are not.
		return p.failErr(ErrBadHeader, inHeader, "not UTF-8", p.line, line)
	}
	// Split on the first colon; later colons belong to the value. 1.2 wants them escaped but
	// many clients do not bother, and nothing is ambiguous about it.
	c := bytes.IndexByte(line, ':')
	if c < 0 {
		return p.failErr(ErrBadHeader, inHeader, "missing colon", p.line, line)
	}
	if c == 0 {
		return p.failErr(ErrBadHeader, inHeader, "empty name", p.line, line)
	}
	s := span{k0: p.line, k1: p.line + c, v0: p.line + c + 1, v1: end}
	if !p.literal && bytes.IndexByte(line, '\\') >= 0 {
		if bad := badEscape(line); bad != "" {
			return p.failErr(ErrBadEscape, inHeader, bad, p.line, line)
		}
		p.anyEsc = true
	}
	// Escapes never produce letters or '-', so comparing the raw key is exact.
	if p.clen < 0 && string(line[:c]) == HdrContentLength {
		n, ok, tooBig := parseLength(line[c+1:], p.lim.MaxFrame)
		switch {
		case !ok:
			return p.failErr(ErrBadContentLength, inHeader, "", p.line, line)
		case tooBig:
			return p.failErr(ErrFrameTooLarge, inHeader, p.limitDetail(p.lim.MaxFrame, " bytes"), p.line, line)
		}
		p.clen = n
	}
	p.hdrs = append(p.hdrs, s)
	p.hdr1 = end
	return nil
}

// emit builds the frame whose body is data[b0:b1] and whose raw bytes end at end (after the
// NUL), then moves past it.
func (p *Parser) emit(data []byte, b0, b1, end int) (Frame, bool, error) {
	f := Frame{Command: p.cmd}
	if n := len(p.hdrs); n > 0 {
		// One string holds all keys and values, so a frame costs three allocations (block,
		// header slice, body) whatever its header count.
		var block string
		base := p.hdr0
		if p.anyEsc {
			// Decode every line into the scratch buffer and point the spans at it.
			sc := p.scratch[:0]
			for i := range p.hdrs {
				s := &p.hdrs[i]
				k0 := len(sc)
				sc = appendUnescaped(sc, data[s.k0:s.k1])
				v0 := len(sc)
				sc = appendUnescaped(sc, data[s.v0:s.v1])
				s.k0, s.k1, s.v0, s.v1 = k0, v0, v0, len(sc)
			}
			block = string(sc)
			if cap(sc) <= keepCap {
				p.scratch = sc
			}
			base = 0
		} else {
			block = string(data[p.hdr0:p.hdr1])
		}
		f.Headers = make([]Header, n)
		for i, s := range p.hdrs {
			f.Headers[i] = Header{block[s.k0-base : s.k1-base], block[s.v0-base : s.v1-base]}
		}
	}
	if b1 > b0 {
		f.Body = bytes.Clone(data[b0:b1])
	}
	p.last = end
	p.off += end
	p.state = stIdle
	p.trailer = true
	if p.off == len(p.buf) {
		p.consumed += int64(p.off)
		p.buf = p.buf[:0]
		p.off = 0
	}
	return f, true, nil
}

// fail records a *ParseError about the input at relative position at and poisons the parser.
func (p *Parser) fail(sentinel error, state, detail string, at int, snippet []byte) (Frame, bool, error) {
	if len(snippet) > snippetMax+1 {
		snippet = snippet[:snippetMax+1] // one extra byte tells Error to add "..."
	}
	p.err = &ParseError{
		Err:     sentinel,
		State:   state,
		Detail:  detail,
		Snippet: string(snippet),
		Offset:  p.consumed + int64(p.off+at),
	}
	p.buf = nil
	p.off = 0
	p.hdrs = nil
	p.scratch = nil
	return Frame{}, false, p.err
}

// failErr is fail for callers that only want the error.
func (p *Parser) failErr(sentinel error, state, detail string, at int, snippet []byte) error {
	_, _, err := p.fail(sentinel, state, detail, at, snippet)
	return err
}

func (p *Parser) limitDetail(n int, unit string) string {
	return "limit " + strconv.Itoa(n) + unit
}

// parseLength parses a content-length value: decimal digits only. tooBig reports a value over
// max; the digits are still all checked so that garbage is reported as garbage.
func parseLength(b []byte, max int) (n int, ok, tooBig bool) {
	if len(b) == 0 {
		return 0, false, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if !tooBig {
			n = n*10 + int(c-'0')
			tooBig = n > max
		}
	}
	return n, true, tooBig
}

// badEscape returns the first invalid escape in a header line, or "" when all are valid.
func badEscape(line []byte) string {
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		if i+1 == len(line) {
			return `trailing \`
		}
		switch line[i+1] {
		case 'r', 'n', 'c', '\\':
			i++
		default:
			if c := line[i+1]; c > ' ' && c < 0x7f {
				return `\` + string(c)
			}
			return `\x` + strconv.FormatUint(uint64(line[i+1]), 16)
		}
	}
	return ""
}

// appendUnescaped appends b with header escapes decoded; b has been validated.
func appendUnescaped(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 == len(b) {
			return append(dst, b...)
		}
		dst = append(dst, b[:i]...)
		switch b[i+1] {
		case 'r':
			dst = append(dst, '\r')
		case 'n':
			dst = append(dst, '\n')
		case 'c':
			dst = append(dst, ':')
		default: // '\\'
			dst = append(dst, '\\')
		}
		b = b[i+2:]
	}
}
