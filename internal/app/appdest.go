package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/transport"
)

// appDests serves STOMP SENDs to the application prefix (Spring's /app, the
// @MessageMapping handlers): each goes to the team's backend (AppProxy), or, without one,
// is rebroadcast on the topic AppRoutes maps it to.
type appDests struct {
	prefix  string
	proxy   string // URL the SENDs are POSTed to; "" without a backend
	timeout time.Duration
	routes  []appRoute
	hc      *http.Client
	hub     *hub.Hub
	p       *policy
	outcome *prometheus.CounterVec // by outcome: ok, refused, error, timeout
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

func newAppDests(cfg *Config, h *hub.Hub, p *policy, reg prometheus.Registerer) (*appDests, error) {
	prefix := cfg.AppPrefix
	if prefix == "" {
		prefix = "/app/"
	}
	if !strings.HasPrefix(prefix, "/") || strings.HasPrefix(prefix, "/topic/") || strings.HasPrefix(prefix, "/user/") {
		return nil, fmt.Errorf("--app-prefix %q: want a destination prefix of its own, like /app", prefix)
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	routes, err := parseAppRoutes(prefix, cfg.AppRoutes)
	if err != nil {
		return nil, err
	}
	if cfg.AppProxy != "" && !strings.HasPrefix(cfg.AppProxy, "http://") && !strings.HasPrefix(cfg.AppProxy, "https://") {
		return nil, fmt.Errorf("--app-proxy %q: want an http:// or https:// URL", cfg.AppProxy)
	}
	timeout := cfg.AppProxyTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	d := &appDests{prefix: prefix, proxy: cfg.AppProxy, timeout: timeout, routes: routes, hub: h, p: p,
		hc: &http.Client{Timeout: timeout},
		outcome: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rtlab_app_proxy_requests_total",
			Help: "STOMP SENDs to the application prefix handed to --app-proxy, by outcome: ok, refused (the backend said no), error (unreachable or a bad answer), timeout.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{"ok", "refused", "error", "timeout"} {
		d.outcome.WithLabelValues(o)
	}
	reg.MustRegister(d.outcome)
	return d, nil
}

// dest returns the route of a SEND to dest under the prefix.
func (d *appDests) dest(dest string) (transport.STOMPRoute, bool) {
	if !strings.HasPrefix(dest, d.prefix) {
		return transport.STOMPRoute{}, false
	}
	if d.proxy != "" {
		return transport.STOMPRoute{Topic: strings.TrimPrefix(dest, "/"), Publish: func(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
			return d.forward(ctx, c, dest, req)
		}}, true
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

// appRequest is what the backend is POSTed for one SEND.
type appRequest struct {
	RequestID   string            `json:"request_id"`
	Destination string            `json:"destination"`
	Headers     map[string]string `json:"headers"`
	Data        json.RawMessage   `json:"data,omitempty"` // the body: JSON as sent, other text as a JSON string
	User        string            `json:"user"`           // verified from the token; "" when anonymous
	Client      string            `json:"client"`
}

// appAnswer is the backend's answer: publications to make, or a refusal.
type appAnswer struct {
	Publish []struct {
		Topic string          `json:"topic"`
		Data  json.RawMessage `json:"data"`
		Type  string          `json:"type"`
	} `json:"publish"`
	Error *struct {
		Reason string `json:"reason"`
	} `json:"error"`
}

// forward hands a SEND to the backend and publishes what it answers, as the server, with the
// user as sender. A SEND is not idempotent: a failed call is not retried, the client is told.
func (d *appDests) forward(ctx context.Context, c transport.Client, dest string, req hub.PublishRequest) (*hub.Publication, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	ar := appRequest{RequestID: hex.EncodeToString(id[:]), Destination: dest, Headers: map[string]string{}, Data: json.RawMessage(req.Data), User: c.User, Client: c.ID}
	for _, h := range transport.SendHeaders(ctx) {
		switch h.Key {
		case "passcode", "Authorization", "login":
			continue // credentials stay here: the backend is told the verified user instead
		}
		if _, dup := ar.Headers[h.Key]; !dup {
			ar.Headers[h.Key] = h.Value
		}
	}
	body, _ := json.Marshal(ar)
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	ans, err := d.call(ctx, body)
	if err != nil {
		outcome := "error"
		if errors.Is(err, context.DeadlineExceeded) {
			outcome = "timeout"
		}
		d.outcome.WithLabelValues(outcome).Inc()
		// The URL stays out of what the client is told.
		return nil, fmt.Errorf("%w: the application's backend did not answer (%s)", hub.ErrNotReady, outcome)
	}
	if ans.Error != nil {
		d.outcome.WithLabelValues("refused").Inc()
		return nil, fmt.Errorf("%w: %s", transport.ErrForbidden, ans.Error.Reason)
	}
	d.outcome.WithLabelValues("ok").Inc()
	var first *hub.Publication
	for _, p := range ans.Publish {
		pub, err := d.hub.Publish(ctx, hub.PublishRequest{Topic: p.Topic, Data: p.Data, Type: p.Type, Sender: c.User})
		if err != nil {
			return first, fmt.Errorf("publishing the backend's answer on %q: %w", p.Topic, err)
		}
		if first == nil {
			first = pub
		}
	}
	return first, nil
}

func (d *appDests) call(ctx context.Context, body []byte) (*appAnswer, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, d.proxy, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := d.hc.Do(r)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAppAnswer))
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("answered %s", res.Status)
	}
	var ans appAnswer
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %w", err)
	}
	return &ans, nil
}
