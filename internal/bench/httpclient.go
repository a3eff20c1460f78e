package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The generator speaks HTTP/1.1 itself instead of using net/http: an http.Client keeps a
// persistConn per connection with a read and a write goroutine and 4 KiB buffers on each side,
// about 20 KiB and two goroutines for every user before any data moves. Here a polling user
// owns a net.Conn and borrows a read buffer from a pool for the few milliseconds a response
// takes to arrive; an SSE user keeps one small reader for its stream.

// Buffer sizes. A response that fits in the reader is parsed where it lies; larger bodies are
// copied into a pooled buffer.
const (
	pollBufSize   = 4096
	streamBufSize = 1024
)

var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, pollBufSize) }}
	bodyPool   = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}
	bufPool    = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
)

// StatusError is a non-2xx answer from the server.
type StatusError struct {
	Code int
	Body string // start of the body: the server's {"error","reason"}
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.Code, e.Body)
}

// respHead is the part of a response header the client acts on.
type respHead struct {
	status  int
	length  int64 // -1 when unknown
	chunked bool
	close   bool // Connection: close
	stream  bool // Content-Type: text/event-stream
}

// readHead reads a status line and headers.
func readHead(br *bufio.Reader) (respHead, error) {
	h := respHead{length: -1}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("reading status line: %w", err)
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return h, fmt.Errorf("%w: status line %q", errBadResponse, bytes.TrimSpace(line))
	}
	h.status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return h, fmt.Errorf("%w: status line %q", errBadResponse, bytes.TrimSpace(line))
	}
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return h, fmt.Errorf("reading headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return h, nil
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			h.length, err = strconv.ParseInt(string(v), 10, 64)
			if err != nil || h.length < 0 {
				return h, fmt.Errorf("%w: Content-Length %q", errBadResponse, v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			h.chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			h.close = bytes.EqualFold(v, []byte("close"))
		case bytes.EqualFold(k, []byte("Content-Type")):
			h.stream = bytes.HasPrefix(v, []byte("text/event-stream"))
		}
	}
}

// httpConn is one keep-alive HTTP/1.1 connection used for one request at a time.
type httpConn struct {
	conn net.Conn
	host string // Host header
	br   *bufio.Reader
	own  bool // br is owned (kept while idle) rather than borrowed per request
}

// newHTTPConn wraps conn. With own the reader is kept for the connection's life (publish pool,
// long polls that hold it anyway); otherwise one is borrowed per request.
func newHTTPConn(conn net.Conn, host string, own bool) *httpConn {
	h := &httpConn{conn: conn, host: host, own: own}
	if own {
		h.br = bufio.NewReaderSize(conn, pollBufSize)
	}
	return h
}

func (h *httpConn) close() { _ = h.conn.Close() }

// appendRequest appends an HTTP/1.1 request. extra holds complete header lines, each ending
// in \r\n.
func appendRequest(dst []byte, method, host string, path []byte, extra string, body []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUser-Agent: rtlab-bench\r\n"...)
	dst = append(dst, extra...)
	if body != nil {
		dst = append(dst, "Content-Type: application/json\r\nContent-Length: "...)
		dst = strconv.AppendInt(dst, int64(len(body)), 10)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// roundTrip writes req and reads the answer, calling fn with the status and the body. The body
// is valid only during fn. A non-nil error from fn is returned as is; transport errors leave
// the connection unusable (the caller closes it).
func (h *httpConn) roundTrip(req []byte, deadline time.Time, fn func(status int, body []byte) error) error {
	_ = h.conn.SetDeadline(deadline)
	if _, err := h.conn.Write(req); err != nil {
		return fmt.Errorf("writing request: %w", err)
	}
	br := h.br
	if !h.own {
		br = readerPool.Get().(*bufio.Reader)
		br.Reset(h.conn)
		defer func() {
			br.Reset(nil)
			readerPool.Put(br)
		}()
	}
	head, err := readHead(br)
	if err != nil {
		return err
	}
	ferr, err := readBody(br, head, fn)
	if err != nil {
		return err
	}
	if head.close {
		return errors.Join(ferr, errConnClose)
	}
	if !h.own && br.Buffered() > 0 {
		return errors.Join(ferr, fmt.Errorf("%w: %d bytes after the body", errBadResponse, br.Buffered()))
	}
	return ferr
}

// readBody reads the body described by head and hands it to fn. It returns fn's error and,
// separately, a read error.
func readBody(br *bufio.Reader, head respHead, fn func(status int, body []byte) error) (ferr, err error) {
	switch {
	case head.status == http.StatusNoContent || head.status == http.StatusNotModified:
		return fn(head.status, nil), nil // no body, whatever the headers say
	case head.chunked:
		bp := bodyPool.Get().(*[]byte)
		defer bodyPool.Put(bp)
		b, err := readChunked(br, (*bp)[:0])
		*bp = b[:0]
		if err != nil {
			return nil, err
		}
		return fn(head.status, b), nil
	case head.length >= 0 && head.length <= int64(br.Size()):
		n := int(head.length)
		b, err := br.Peek(n)
		if err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		ferr = fn(head.status, b)
		_, _ = br.Discard(n)
		return ferr, nil
	case head.length >= 0:
		bp := bodyPool.Get().(*[]byte)
		defer bodyPool.Put(bp)
		b := grow((*bp)[:0], int(head.length))
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
		*bp = b[:0]
		return fn(head.status, b), nil
	default:
		return nil, fmt.Errorf("%w: neither Content-Length nor chunked", errBadResponse)
	}
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// maxBody bounds a chunked body the client accepts.
const maxBody = 16 << 20

func readChunked(br *bufio.Reader, dst []byte) ([]byte, error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return dst, fmt.Errorf("reading chunk size: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 16, 32)
		if err != nil || len(dst)+int(n) > maxBody {
			return dst, fmt.Errorf("%w: chunk size %q", errBadResponse, line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return dst, fmt.Errorf("reading trailer: %w", err)
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return dst, nil
				}
			}
		}
		start := len(dst)
		dst = append(dst, make([]byte, n)...)
		if _, err := io.ReadFull(br, dst[start:]); err != nil {
			return dst, fmt.Errorf("reading chunk: %w", err)
		}
		if _, err := br.Discard(2); err != nil { // CRLF after the chunk
			return dst, fmt.Errorf("reading chunk end: %w", err)
		}
	}
}
