// Package appproxy serves STOMP SENDs and SUBSCRIBEs to the application prefix (Spring's /app,
// the @MessageMapping handlers): each goes to the team's backend, or, without one, is
// rebroadcast on the topic an --app-route maps it to.
package appproxy

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/stomp"
	"github.com/rtlab/rtlab/internal/transport"
)

// Config is the application prefix and where its SENDs go. Zero values mean the defaults.
type Config struct {
	Prefix   string        // where STOMP SENDs go to the application; zero means /app/
	URL      string        // the backend each SEND is POSTed to; "" rebroadcasts by Routes
	Timeout  time.Duration // bounds a call to the backend; zero means 5 s
	Secret   string        // signs each request (HMAC-SHA256), verifies signed answers
	Conns    int           // connections to the backend; zero means 64
	Routes   []string      // "/app/x=/topic/y", or prefixes ending in /: rebroadcasts without a backend
	Reserved string        // the prefix of the nodes' own topics, which no answer may publish
	Logger   *slog.Logger
}

// Publisher publishes as a client does, and checks a batch first (transport.Policy,
// transport.PublishChecker).
type Publisher interface {
	Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error)
	CheckPublish(ctx context.Context, c transport.Client, reqs []hub.PublishRequest) error
}

// Dests serves STOMP SENDs to the application prefix: each goes to the team's backend, or,
// without one, is rebroadcast on the topic an --app-route maps it to.
type Dests struct {
	prefix   string
	proxy    string // URL the SENDs are POSTed to; "" without a backend
	secret   []byte // --app-proxy-secret: signs requests, verifies signed answers
	timeout  time.Duration
	routes   []appRoute
	hc       *http.Client
	hub      *hub.Hub
	p        Publisher
	reserved string                 // Config.Reserved
	outcome  *prometheus.CounterVec // by outcome: ok, refused, error, timeout
}

// appRoute maps a SEND destination (or, ending in "/", every one under it) to a topic
// destination (/topic/...; under a prefix, the rest is appended).
type appRoute struct{ from, to string }

// maxAppAnswer bounds what a backend's answer may hold.
const maxAppAnswer = 1 << 20

// parseAppRoutes parses --app-route values "FROM=TO": FROM under the prefix, TO a /topic/
// destination; both end in "/" or neither does.
func parseAppRoutes(prefix string, specs []string) ([]appRoute, error) {
	var routes []appRoute
	for _, spec := range specs {
		from, to, ok := strings.Cut(spec, "=")
		if !ok || !strings.HasPrefix(from, prefix) || !strings.HasPrefix(to, "/topic/") || strings.HasSuffix(from, "/") != strings.HasSuffix(to, "/") {
			return nil, fmt.Errorf("--app-route %q: want %s...=/topic/... (both ending in / for a prefix, or neither)", spec, prefix)
		}
		routes = append(routes, appRoute{from, to})
	}
	return routes, nil
}

// New checks cfg and makes the destinations; p publishes what a SEND comes to, as its sender
// would, and checks it first.
func New(cfg Config, h *hub.Hub, p Publisher, reg prometheus.Registerer) (*Dests, error) {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = "/app/"
	}
	if !strings.HasPrefix(prefix, "/") || strings.HasPrefix(prefix, "/topic/") || strings.HasPrefix(prefix, "/user/") || strings.HasPrefix(prefix, "/queue/") {
		return nil, fmt.Errorf("--app-prefix %q: want a destination prefix of its own, like /app", prefix)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	routes, err := parseAppRoutes(prefix, cfg.Routes)
	if err != nil {
		return nil, err
	}
	if cfg.URL != "" && !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("--app-proxy %q: want an http:// or https:// URL", cfg.URL)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	d := &Dests{prefix: prefix, proxy: cfg.URL, secret: []byte(cfg.Secret), timeout: timeout, routes: routes, hub: h, p: p, reserved: cfg.Reserved,
		hc: appClient(timeout, cfg.Conns),
		outcome: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_app_proxy_requests_total",
			Help: "STOMP SENDs and SUBSCRIBEs to the application prefix handed to --app-proxy, by outcome: ok, refused (the backend said no, or its answer broke the policy), error (unreachable, a redirect or a bad answer), timeout.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"ok", "refused", "error", "timeout"} {
		d.outcome.WithLabelValues(o)
	}
	reg.MustRegister(d.outcome)
	if d.proxy != "" && len(d.secret) == 0 && cfg.Logger != nil {
		cfg.Logger.Warn("--app-proxy without --app-proxy-secret: the backend cannot tell rtlab's requests from anyone else's")
	}
	return d, nil
}

// appClient is the one client of the backend: its connections are kept alive and reused, at
// most conns of them, and a redirect is an answer (a 3xx), never followed elsewhere.
func appClient(timeout time.Duration, conns int) *http.Client {
	if conns <= 0 {
		conns = 64
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:       conns,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// Dest returns the route of a SEND (send) or SUBSCRIBE to dest under the prefix: with a
// backend, a SEND is prepared there and a SUBSCRIBE answered once (Spring's
// @SubscribeMapping); without, --app-route rebroadcasts SENDs.
func (d *Dests) Dest(dest string, send bool) (transport.STOMPRoute, bool) {
	if !strings.HasPrefix(dest, d.prefix) {
		return transport.STOMPRoute{}, false
	}
	if d.proxy != "" {
		r := transport.STOMPRoute{Topic: strings.TrimPrefix(dest, "/")}
		if send {
			r.Prepare = func(ctx context.Context, c transport.Client, req hub.PublishRequest) (func(context.Context) (*hub.Publication, error), error) {
				return d.prepare(ctx, c, dest, req)
			}
		} else {
			r.Reply = d.reply
		}
		return r, true
	}
	if !send {
		return transport.STOMPRoute{}, false
	}
	for _, r := range d.routes {
		if dest == r.from {
			return transport.STOMPRoute{Topic: strings.TrimPrefix(r.to, "/topic/")}, true
		}
		if rest, ok := strings.CutPrefix(dest, r.from); ok && strings.HasSuffix(r.from, "/") {
			return transport.STOMPRoute{Topic: strings.TrimPrefix(r.to, "/topic/") + rest}, true
		}
	}
	return transport.STOMPRoute{}, false
}

// Request is what the backend is POSTed for one SEND or SUBSCRIBE.
type Request struct {
	RequestID   string            `json:"request_id"`
	Command     string            `json:"command"` // SEND, or SUBSCRIBE (answered with reply)
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers"`
	Data        json.RawMessage   `json:"data,omitempty"` // the body: JSON as sent, other text as a JSON string
	User        string            `json:"user"`           // verified from the token; "" when anonymous
	Client      string            `json:"client"`
}

// appAnswer is the backend's answer: publications to make (a SEND's), a reply (a
// SUBSCRIBE's), or a refusal.
type appAnswer struct {
	Publish []struct {
		Topic string          `json:"topic"`
		Data  json.RawMessage `json:"data"`
		Type  string          `json:"type"`
	} `json:"publish"`
	Reply json.RawMessage `json:"reply"`
	Error *struct {
		Reason string `json:"reason"`
	} `json:"error"`
	signed bool // X-Rtlab-Signature verified with --app-proxy-secret
}

// Headers of the signed exchange with the backend. A request carries the time (Unix seconds)
// and HMAC-SHA256(secret, timestamp + "." + body); an answer may carry
// HMAC-SHA256(secret, request id + "." + body), which lets it publish as the backend.
const (
	hdrTimestamp = "X-Rtlab-Timestamp"
	hdrSignature = "X-Rtlab-Signature"
	hdrRequestID = "X-Rtlab-Request-Id"
)

// forwardedHeaders are the SEND headers the backend is told, besides x-* ones (names are
// lowercased). Credentials, cookies and user claims never pass: the backend has the verified
// user.
var forwardedHeaders = map[string]bool{
	"content-type": true, "content-length": true, "type": true, "receipt": true, "correlation-id": true,
	"reply-to": true, "priority": true, "persistent": true, "expires": true, "id": true, "ack": true,
}

// forwardHeaders picks the frame's headers the backend may see; the first of a name counts.
func forwardHeaders(hs []stomp.Header) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		k := strings.ToLower(h.Key)
		if !forwardedHeaders[k] && !strings.HasPrefix(k, "x-") {
			continue
		}
		if _, dup := out[k]; !dup {
			out[k] = h.Value
		}
	}
	return out
}

func (d *Dests) request(ctx context.Context, c transport.Client, command, dest string, data json.RawMessage) Request {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return Request{RequestID: hex.EncodeToString(id[:]), Command: command, Destination: dest, Headers: forwardHeaders(transport.SendHeaders(ctx)),
		Data: data, User: c.User, Client: c.ID}
}

// ask sends one request to the backend and counts its outcome; a refusal is ErrForbidden.
func (d *Dests) ask(ctx context.Context, ar Request) (*appAnswer, error) {
	body, _ := json.Marshal(ar)
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	ans, err := d.call(ctx, ar.RequestID, body)
	if err != nil {
		outcome := "error"
		if ne := net.Error(nil); errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			outcome = "timeout"
		}
		d.outcome.WithLabelValues(outcome).Inc()
		var redirect *redirectError
		if errors.As(err, &redirect) {
			return nil, fmt.Errorf("%w: %v", transport.ErrForbidden, err)
		}
		// The URL stays out of what the client is told.
		return nil, fmt.Errorf("%w: the application's backend did not answer (%s)", hub.ErrNotReady, outcome)
	}
	if ans.Error != nil {
		d.outcome.WithLabelValues("refused").Inc()
		return nil, fmt.Errorf("%w: %s", transport.ErrForbidden, ans.Error.Reason)
	}
	return ans, nil
}

// prepare hands a SEND to the backend and checks what it answers; the commit publishes it,
// with the user as sender. A SEND is not idempotent: a failed call is not retried, the client
// is told.
func (d *Dests) prepare(ctx context.Context, c transport.Client, dest string, req hub.PublishRequest) (func(context.Context) (*hub.Publication, error), error) {
	ans, err := d.ask(ctx, d.request(ctx, c, "SEND", dest, json.RawMessage(req.Data)))
	if err != nil {
		return nil, err
	}
	pubs := make([]hub.PublishRequest, len(ans.Publish))
	for i, p := range ans.Publish {
		pubs[i] = hub.PublishRequest{Topic: p.Topic, Data: p.Data, Type: p.Type, Sender: c.User}
	}
	if err := d.checkAnswer(ctx, c, pubs, ans.signed); err != nil {
		d.outcome.WithLabelValues("refused").Inc()
		return nil, err
	}
	d.outcome.WithLabelValues("ok").Inc()
	return func(ctx context.Context) (*hub.Publication, error) { return d.publishAnswer(ctx, c, pubs, ans.signed) }, nil
}

// reply hands a SUBSCRIBE to the backend; its answer's reply goes to the subscriber once.
func (d *Dests) reply(ctx context.Context, c transport.Client, dest string) (json.RawMessage, error) {
	ans, err := d.ask(ctx, d.request(ctx, c, "SUBSCRIBE", dest, nil))
	if err != nil {
		return nil, err
	}
	d.outcome.WithLabelValues("ok").Inc()
	return ans.Reply, nil
}

// userTopicOwner returns the user of a user/{user}/... topic.
func userTopicOwner(topic string) (string, bool) {
	rest, ok := strings.CutPrefix(topic, "user/")
	if !ok {
		return "", false
	}
	owner, _, _ := strings.Cut(rest, "/")
	return owner, true
}

// checkAnswer holds the backend's publications to the policy of the sender's own publishes,
// all of them before any is published: the server's own topics never, another user's
// user/ topics only when the answer is signed, and the rest as the sender itself may publish
// unless signed. The sender's own user/{user}/ topics are its to be answered on.
func (d *Dests) checkAnswer(ctx context.Context, c transport.Client, pubs []hub.PublishRequest, signed bool) error {
	var own []hub.PublishRequest
	for i, p := range pubs {
		if err := hub.ValidateTopic(p.Topic); err != nil {
			return fmt.Errorf("the backend's publish %d: %w", i+1, err)
		}
		if d.reserved != "" && strings.HasPrefix(p.Topic, d.reserved) {
			return fmt.Errorf("%w: the backend's publish %d: %s* topics are the server's own", transport.ErrForbidden, i+1, d.reserved)
		}
		if err := hub.CheckName("type", p.Type); err != nil {
			return fmt.Errorf("the backend's publish %d: %w", i+1, err)
		}
		if signed {
			continue
		}
		if owner, ok := userTopicOwner(p.Topic); ok {
			if owner == "" || owner != c.User {
				return fmt.Errorf("%w: the backend's publish %d on %s: an unsigned answer reaches only the sender's own user/%s/ (sign it with --app-proxy-secret)", transport.ErrForbidden, i+1, p.Topic, c.User)
			}
			continue
		}
		own = append(own, p)
	}
	if err := d.p.CheckPublish(ctx, c, own); err != nil {
		return fmt.Errorf("the backend's answer, unsigned, publishes as its sender: %w", err)
	}
	return nil
}

// publishAnswer publishes what checkAnswer let through: a signed answer, and the sender's own
// user/ topics, as the server with the user as sender; the rest as the sender publishes.
func (d *Dests) publishAnswer(ctx context.Context, c transport.Client, pubs []hub.PublishRequest, signed bool) (*hub.Publication, error) {
	var first *hub.Publication
	for _, req := range pubs {
		publish := d.p.Publish
		if _, user := userTopicOwner(req.Topic); signed || user {
			publish = func(ctx context.Context, _ transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
				return d.hub.Publish(ctx, req)
			}
		}
		pub, err := publish(ctx, c, req)
		if err != nil {
			return first, fmt.Errorf("publishing the backend's answer on %q: %w", req.Topic, err)
		}
		if first == nil {
			first = pub
		}
	}
	return first, nil
}

// redirectError is a backend's 3xx: not followed, the SEND is refused.
type redirectError struct{ status string }

func (e *redirectError) Error() string {
	return "the application's backend answered " + e.status + ", a redirect, which is not followed"
}

func (d *Dests) call(ctx context.Context, requestID string, body []byte) (*appAnswer, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, d.proxy, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(hdrRequestID, requestID)
	if len(d.secret) > 0 {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		r.Header.Set(hdrTimestamp, ts)
		r.Header.Set(hdrSignature, d.sign(ts, body))
	}
	res, err := d.hc.Do(r)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAppAnswer))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 == 3 {
		return nil, &redirectError{res.Status}
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("answered %s", res.Status)
	}
	var ans appAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %w", err)
	}
	if sig := res.Header.Get(hdrSignature); sig != "" {
		if len(d.secret) == 0 || !hmac.Equal([]byte(sig), []byte(d.sign(requestID, b))) {
			return nil, errors.New("the answer's signature does not verify")
		}
		ans.signed = true
	}
	return &ans, nil
}

// sign is "sha256=" and the hex HMAC-SHA256 of prefix + "." + body with --app-proxy-secret.
func (d *Dests) sign(prefix string, body []byte) string {
	m := hmac.New(sha256.New, d.secret)
	m.Write([]byte(prefix))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Form names the prefix's destinations in a refusal's list of what a SEND (send) or SUBSCRIBE
// may name; "" when the prefix takes none.
func (d *Dests) Form(send bool) string {
	switch {
	case send && (d.proxy != "" || len(d.routes) > 0):
		return d.prefix + "... (the application's), "
	case !send && d.proxy != "":
		return d.prefix + "... (answered once by the application), "
	}
	return ""
}
