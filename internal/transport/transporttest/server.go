package transporttest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/metrics"
	"github.com/rtlab/rtlab/internal/transport"
)

// ServerConfig configures a Server. Zero values mean the transports' defaults, except that the
// publish rates are unlimited (tests publish in bursts).
type ServerConfig struct {
	Limits  transport.Limits
	History hub.HistoryPolicy // every topic's
	Broker  hub.Broker        // nil: the in-memory broker, with History
	Policy  transport.Policy  // nil: Open
	// Routes, when set, adds routes of the test's own (a raw socket, say) to the transports'.
	Routes func(mux *http.ServeMux, tr *transport.Server)
	// STOMPDests, when set, gives the STOMP destinations besides /topic/ (publishing through
	// the server's policy p).
	STOMPDests func(p transport.Policy) transport.STOMPDests
}

// Server is a transport server on a hub over the in-memory broker, on a loopback port: the
// server a transport's own tests run against. It is shut down when the test ends.
type Server struct {
	*httptest.Server
	Hub       *hub.Hub
	Transport *transport.Server
	Metrics   *metrics.Metrics
}

// NewServer starts a Server.
func NewServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.Limits.MsgRate == 0 {
		cfg.Limits.MsgRate = -1
	}
	if cfg.Limits.HTTPPubRate == 0 {
		cfg.Limits.HTTPPubRate = -1
	}
	if cfg.Broker == nil {
		cfg.Broker = memory.New(memory.Config{Policy: func(string) hub.HistoryPolicy { return cfg.History }})
	}
	h := hub.New(hub.Config{
		Broker:       cfg.Broker,
		MaxDataBytes: cfg.Limits.MaxFrame,
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.Run(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	if cfg.Policy == nil {
		cfg.Policy = Open{Hub: h}
	}
	m := metrics.New(prometheus.NewRegistry(), "test")
	var dests transport.STOMPDests
	if cfg.STOMPDests != nil {
		dests = cfg.STOMPDests(cfg.Policy)
	}
	tr := transport.New(transport.Config{Hub: h, Policy: cfg.Policy, Limits: cfg.Limits, STOMPDests: dests, Metrics: m})
	mux := http.NewServeMux()
	tr.Routes(mux)
	if cfg.Routes != nil {
		cfg.Routes(mux, tr)
	}
	srv := httptest.NewServer(tr.CORS(tr.BodyDeadline(mux)))
	s := &Server{Server: srv, Hub: h, Transport: tr, Metrics: m}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = tr.Shutdown(sctx)
		srv.Close()
		_ = h.Close()
		cancel()
	})
	return s
}

// WS is the ws:// URL of path on the server.
func (s *Server) WS(path string) string { return WSURL(s.URL, path) }

// Client returns a client of kind k of this server (options as New takes them; Nodes is
// filled in), subscribed to topic after since (nil: from now), once its session is up.
func (s *Server) Client(t testing.TB, k Kind, topic string, since *Position, o ...Options) Client {
	t.Helper()
	var opt Options
	if len(o) > 0 {
		opt = o[0]
	}
	opt.Nodes = []string{s.URL}
	c := New(t, k, opt)
	c.Subscribe(topic, since)
	AwaitUp(t, c)
	return c
}

// Publish publishes data to topic through the hub and returns its position.
func (s *Server) Publish(t testing.TB, topic, data string) Position {
	t.Helper()
	p, err := s.Hub.Publish(context.Background(), hub.PublishRequest{Topic: topic, Data: []byte(data)})
	if err != nil {
		t.Fatalf("publish to %s: %v", topic, err)
	}
	return Position{p.Offset, p.Epoch}
}

// Subscriptions is how many subscriptions the hub holds.
func (s *Server) Subscriptions() int64 { return s.Hub.Stats().Subscriptions.Load() }

// AwaitSubscriptions waits until the hub holds n subscriptions: clients have subscribed, or a
// long poll is waiting.
func (s *Server) AwaitSubscriptions(t testing.TB, n int64) {
	t.Helper()
	eventually.Nil(t, 10*time.Second, func() error {
		if got := s.Subscriptions(); got != n {
			return fmt.Errorf("the hub holds %d subscriptions, want %d", got, n)
		}
		return nil
	})
}

// Open is a Policy that lets everyone do everything: the transports' own rules alone apply.
// It takes a bearer token as the user's name, so that tests can act as users.
type Open struct{ Hub *hub.Hub }

var _ transport.Policy = Open{}

func (Open) Authenticate(r *http.Request) (transport.Identity, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.URL.Query().Get("access_token")
	}
	return transport.Identity{User: tok}, nil
}

func (Open) AuthenticateToken(tok string) (transport.Identity, error) {
	return transport.Identity{User: tok}, nil
}

func (Open) AuthRequired() bool { return false }

func (Open) CanSubscribe(transport.Client, string) (transport.Guard, error) { return nil, nil }

func (Open) CanRead(transport.Client, string) error { return nil }

func (o Open) Publish(ctx context.Context, c transport.Client, req hub.PublishRequest) (*hub.Publication, error) {
	return o.Hub.Publish(ctx, req)
}

func (Open) Disconnected(transport.Client) {}

// Count is a counter's value, such as s.Metrics.QueueOverflows.WithLabelValues("ws").
func Count(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
