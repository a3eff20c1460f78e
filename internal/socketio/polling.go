package socketio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// polling is Engine.IO's HTTP long-polling transport: a GET waits for the server's packets,
// a POST carries the client's. The server refuses overlapping POSTs (and GETs), so sends are
// serialized by mu and only the reader GETs.
type polling struct {
	client     *http.Client
	url        string // the session's URL, with EIO, transport and sid
	header     http.Header
	maxPayload int64
	timeout    time.Duration // bounds a POST

	mu sync.Mutex // serializes POSTs
}

// newPollingClient makes the HTTP client of one connection, dialing through o.
func newPollingClient(o *Options) *http.Client {
	tr := &http.Transport{
		DialContext:         o.dial,
		TLSClientConfig:     o.TLSConfig,
		MaxIdleConnsPerHost: 2, // one held by the waiting GET, one for POSTs
		IdleConnTimeout:     90 * time.Second,
		ReadBufferSize:      2048, // not 4 KiB each: a lab runs thousands of these
		WriteBufferSize:     1024,
	}
	return &http.Client{Transport: tr}
}

func (p *polling) name() string { return "polling" }

// get waits for the server's next payload until deadline; what names the request in errors.
func (p *polling) get(ctx context.Context, url string, deadline time.Time, what string) ([]byte, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("socketio: polling request: %w", err)
	}
	copyHeader(req.Header, p.header)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("socketio: %s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("socketio: %s body: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(what, resp, body)
	}
	if int64(len(body)) > p.maxPayload {
		return nil, fmt.Errorf("socketio: polling payload over %d bytes", p.maxPayload)
	}
	return body, nil
}

func (p *polling) recv(ctx context.Context, deadline time.Time) ([][]byte, error) {
	body, err := p.get(ctx, p.url, deadline, "polling GET")
	if err != nil {
		return nil, err
	}
	return splitPayload(body)
}

func (p *polling) send(ctx context.Context, pkts ...[]byte) error {
	body := bytes.Join(pkts, []byte{recordSep})
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("socketio: polling request: %w", err)
	}
	copyHeader(req.Header, p.header)
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("socketio: polling POST: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	ans, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return statusError("polling POST", resp, ans)
	}
	return nil
}

func (p *polling) close() { p.client.CloseIdleConnections() }

// statusError describes a refused request with the start of the server's answer, which for
// Engine.IO is JSON such as {"code":1,"message":"Session ID unknown"}.
func statusError(what string, resp *http.Response, body []byte) error {
	return fmt.Errorf("socketio: %s: server answered %s: %.120q", what, resp.Status, strings.TrimSpace(string(body)))
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k][:0:0], vs...)
	}
}
