// Package app wires configuration into a running server: broker, hub, transports, the native
// and seed-compatible routes, metrics, and graceful shutdown.
package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rtlab/rtlab/internal/appproxy"
	"github.com/rtlab/rtlab/internal/archive"
	"github.com/rtlab/rtlab/internal/auth"
	"github.com/rtlab/rtlab/internal/broker"
	"github.com/rtlab/rtlab/internal/broker/memory"
	"github.com/rtlab/rtlab/internal/chat"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/location"
	"github.com/rtlab/rtlab/internal/login"
	"github.com/rtlab/rtlab/internal/metrics"
	"github.com/rtlab/rtlab/internal/notify"
	"github.com/rtlab/rtlab/internal/seed"
	"github.com/rtlab/rtlab/internal/serverapi"
	"github.com/rtlab/rtlab/internal/state"
	"github.com/rtlab/rtlab/internal/transport"
	"github.com/rtlab/rtlab/web"
)

// Config is everything `rtlab serve` can be told. Zero values mean the documented defaults.
type Config struct {
	Addr        string        // listen address; zero means 127.0.0.1:8080
	Broker      string        // "memory" (default) or a broker URL
	AMQPLinger  time.Duration // RabbitMQ: how long a request to the sequencer waits for others to share its message
	AMQPDirect  string        // RabbitMQ: where the sequencer takes other nodes' requests directly; empty: never
	HistorySize int           // publications kept per topic; zero means 100
	HistoryTTL  time.Duration // zero means 10 minutes
	// HistoryMaxBytes bounds the memory broker's non-durable history (memory.Config.MaxBytes):
	// zero means 256 MiB, negative unlimited.
	HistoryMaxBytes int64
	// AMQPRetryIDs bounds the publication ids a RabbitMQ node remembers to find a keyed retry
	// (amqp.Config.RetryIDs).
	AMQPRetryIDs int
	// MaxTopics bounds the topics the memory broker holds (memory.Config.MaxTopics): zero means
	// 100,000, negative unlimited.
	MaxTopics int
	// DurableMaxBytes bounds the memory of durable topics' windows (memory.Config.DurableMaxBytes):
	// zero means 64 MiB, negative unlimited.
	DurableMaxBytes int64
	Limits          transport.Limits
	Seed            seed.Config   // the seed-compatible routes (internal/seed)
	ShutdownTimeout time.Duration // zero means 5 s
	Auth            AuthConfig
	ChatMaxBytes    int           // largest chat message; zero means 4 KiB
	ChatMaxMembers  int           // members (and invited users) per chat room; zero means 1000
	ChatMaxRooms    int           // chat rooms one connection may have entered; zero means 1000
	ChatIdle        time.Duration // a chat room's in-memory view unused this long is dropped; zero means 10 min
	// PrivateRooms lists topic prefixes (e.g. chat/private/) whose rooms are members-only.
	PrivateRooms []string
	// DataDir holds durable history (rtlab.db). Empty disables durability.
	DataDir string
	// Durable lists topic prefixes whose history is kept in DataDir across restarts.
	Durable []string
	// DurableHistory is how many publications a durable topic keeps; zero means 1000.
	DurableHistory int
	// Archive keeps durable topics beyond their window: "embedded" (archive.db in DataDir; none
	// without DataDir), "off", or a PostgreSQL URL shared by every node. Empty means embedded
	// with the memory broker and off with a shared one.
	Archive string
	// ArchiveRetention is what the archive keeps (archive.ParseRetention); empty keeps all.
	ArchiveRetention string
	ArchiveQueue     int           // publications waiting to be archived; zero means 100,000
	ArchiveSweep     time.Duration // how often the broker's window is checked; zero means 30 s
	ArchiveGrace     time.Duration // age before a sweep archives another node's publication; zero means 10 s
	// ResultsDir is where /lab looks for bench results; zero means "bench-results".
	ResultsDir string
	// AllowedOrigins are the browser origins, besides the server's own host, that may open
	// WebSocket, STOMP and SSE connections and get CORS headers ("*" for any).
	AllowedOrigins []string
	// AdminAddr, when set, serves /metrics and /lab on a listener of their own instead of Addr.
	// Unset, they answer on Addr only requests straight from loopback (no proxy headers).
	AdminAddr string
	// Dev lets clients from other machines in while no auth is configured (open dev mode).
	// Without it open dev mode serves only requests straight from loopback, as Redis's
	// protected mode does.
	Dev bool
	// TrustedProxies are the proxies whose X-Forwarded-For gives the client's address.
	TrustedProxies transport.Proxies
	// TLSCert and TLSKey are PEM files; with both, Addr serves HTTPS (and wss://).
	TLSCert, TLSKey string
	// STOMPAddr, when set, serves STOMP over TCP (TLS with TLSCert) on a listener of its own:
	// the sessions of /api/stomp for clients that do not speak WebSocket.
	STOMPAddr string
	// AppPrefix is where STOMP SENDs go to the application (Spring's /app); zero means /app/.
	// AppProxy, when set, is the backend's URL each such SEND is POSTed to (its answer says
	// what to publish, or refuses); AppProxyTimeout bounds the call (zero means 5 s). Without
	// a backend, AppRoutes ("/app/x=/topic/y", or prefixes ending in /) rebroadcast SENDs.
	// AppProxySecret signs each request to AppProxy (HMAC-SHA256) and verifies the answers the
	// backend signs; AppProxyConns bounds the connections to it (zero means 64).
	AppPrefix       string
	AppProxy        string
	AppProxyTimeout time.Duration
	AppProxySecret  string
	AppProxyConns   int
	AppRoutes       []string
	// SockJSPath, when set (like "/ws"), serves the SockJS protocol there for sockjs-client,
	// carrying the STOMP sessions of /api/stomp.
	SockJSPath string
	// Location bounds the state kept for GET /cur/{group}.
	Location location.Limits
	// APIKey enables the server API for backends (internal/serverapi); empty leaves it off.
	APIKey string
	// PresenceOff disables presence; PresenceRefresh is how often a node resends its presence
	// entries to the others (zero means 5 s; entries expire after three missed refreshes).
	PresenceOff     bool
	PresenceRefresh time.Duration
	Version         string
	Logger          *slog.Logger
}

// DefaultHistoryMaxBytes is the default of Config.HistoryMaxBytes (--history-max-bytes).
const DefaultHistoryMaxBytes = memory.DefaultMaxBytes

// Defaults of Config.MaxTopics (--max-topics) and Config.DurableMaxBytes (--durable-max-bytes).
const (
	DefaultMaxTopics       = memory.DefaultMaxTopics
	DefaultDurableMaxBytes = memory.DefaultDurableMaxBytes
)

// App is a configured server.
type App struct {
	cfg       Config
	log       *slog.Logger
	hub       *hub.Hub
	tr        *transport.Server
	locations *location.Groups
	policy    *policy
	seed      *seed.Routes // the seed routes and STOMP destinations, the application prefix's too
	chat      *chat.Rooms
	notes     *notify.Notes
	files     []broker.File     // what the broker keeps beside itself (durable topics), closed last
	durableAt string            // the file of durable topics, empty without one
	archive   *archive.Archiver // nil without an archive
	archDesc  string            // the archive, for the start line
	state     state.Store       // rooms and revocations; never nil
	revoker   *login.Revoker
	login     *auth.Signer // nil: POST /api/login is off
	users     *auth.Users  // nil: login takes any name (open dev mode)
	reg       *prometheus.Registry
	metrics   *metrics.Metrics
	handler   http.Handler
	admin     http.Handler // /metrics and /lab when they have a listener of their own (AdminAddr)
	cert      *certHolder  // the TLS certificate, reread by ReloadTLS; nil without TLS
}

// fill sets the defaults of what cfg leaves zero and checks what the flag table cannot (pairs,
// files); it returns the TLS certificate, if any.
func (c *Config) fill() (*tls.Certificate, error) {
	d := Defaults()
	if c.Addr == "" {
		c.Addr = d.Addr
	}
	if c.Broker == "" {
		c.Broker = d.Broker
	}
	orDefault(&c.ShutdownTimeout, d.ShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// Values are checked once, by the flag table (cmd/rtlab); zero means the default.
	orDefault(&c.DurableHistory, d.DurableHistory)
	orDefault(&c.ChatMaxBytes, d.ChatMaxBytes)
	orDefault(&c.ChatMaxMembers, d.ChatMaxMembers)
	orDefault(&c.ChatMaxRooms, d.ChatMaxRooms)
	orDefault(&c.ChatIdle, d.ChatIdle)
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	var cert *tls.Certificate
	if p := c.SockJSPath; p != "" && (!strings.HasPrefix(p, "/") || strings.HasPrefix(p, "/api/") || p == "/api" || strings.ContainsAny(p, "{} ")) {
		return nil, fmt.Errorf("--sockjs-path %q: want a path of its own, like /ws", p)
	}
	if c.TLSCert != "" {
		c, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cert = &c
	}
	return cert, nil
}

// historyPolicy is a topic's history unless durable: --history-size and --history-ttl, their
// zeros resolved to hub's defaults.
func (c *Config) historyPolicy() hub.HistoryPolicy {
	return hub.HistoryPolicy{Size: c.HistorySize, TTL: c.HistoryTTL}.Resolved()
}

// historyPolicies gives each topic's history policy (durable topics: --durable-history, never
// expiring) and tells durable topics apart.
func (c *Config) historyPolicies() (policy func(string) hub.HistoryPolicy, durable func(string) bool) {
	history := c.historyPolicy()
	durableHistory := hub.HistoryPolicy{Size: c.DurableHistory, TTL: -1}.Resolved()
	isDurable := func(topic string) bool {
		for _, p := range c.Durable {
			if p != "" && strings.HasPrefix(topic, p) {
				return true
			}
		}
		return false
	}
	policyFor := func(topic string) hub.HistoryPolicy {
		if isDurable(topic) {
			return durableHistory
		}
		return history
	}
	return policyFor, isDurable
}

// New builds the server from cfg without starting it.
func New(cfg Config) (*App, error) {
	cert, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	policyFor, isDurable := cfg.historyPolicies()
	reg := prometheus.NewRegistry()
	bctx, bcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer bcancel()
	ob, err := openBrokers(bctx, cfg, policyFor, isDurable, reg)
	if err != nil {
		return nil, err
	}
	b := ob.Broker
	arch, archDesc, err := newArchive(bctx, cfg, b, isDurable, reg)
	if err != nil {
		ob.close()
		return nil, err
	}
	hc := hub.Config{Broker: b, MaxDataBytes: cfg.Limits.MaxFrame,
		Presence: hub.PresenceConfig{Off: cfg.PresenceOff, Refresh: cfg.PresenceRefresh}}
	if arch != nil {
		hc.Archive = arch
	}
	h := hub.New(hc)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerHubStats(reg, h)
	m := metrics.New(reg, cfg.Version)
	a := &App{cfg: cfg, log: cfg.Logger, cert: newCertHolder(cert), hub: h, reg: reg, metrics: m, locations: location.New(h, cfg.Location), files: ob.Files, durableAt: ob.DurableAt, state: ob.State, archive: arch, archDesc: archDesc}
	fail := func(err error) (*App, error) {
		if arch != nil {
			_ = arch.Close(0)
		}
		ob.close()
		return nil, err
	}
	revoked := auth.NewRevocations(cfg.Auth.MaxRevocations, nil)
	verifier, required, err := a.setupAuth(bctx, revoked)
	if err != nil {
		return fail(err)
	}
	if cfg.Dev && required {
		return fail(errors.New("--dev opens open dev mode to other machines; with --auth-secret, --auth-public-key or --auth-jwks tokens are required and --dev has no meaning: drop one"))
	}
	a.notes = notify.New(h, cfg.Logger)
	a.chat = chat.New(h, a.state, a.notes, chat.Config{
		MaxMsg: cfg.ChatMaxBytes, MaxMembers: cfg.ChatMaxMembers, MaxRooms: cfg.ChatMaxRooms, Private: cfg.PrivateRooms, Idle: cfg.ChatIdle,
	}, cfg.Logger)
	a.policy = &policy{hub: h, verifier: verifier, required: required, chat: a.chat}
	appd, err := appproxy.New(appproxy.Config{
		Prefix: cfg.AppPrefix, URL: cfg.AppProxy, Timeout: cfg.AppProxyTimeout, Secret: cfg.AppProxySecret,
		Conns: cfg.AppProxyConns, Routes: cfg.AppRoutes, Reserved: controlPrefix, Logger: cfg.Logger,
	}, h, a.policy, reg)
	if err != nil {
		return fail(err)
	}
	a.seed = seed.New(cfg.Seed, a.policy, a.chat, appd)
	a.tr = transport.New(transport.Config{
		Hub: h, Policy: a.policy, Limits: cfg.Limits, STOMPDests: a.seed.Dests(), Metrics: m, Logger: cfg.Logger,
		Origins: transport.Origins{Allowed: cfg.AllowedOrigins, Localhost: !required},
		Proxies: cfg.TrustedProxies,
	})
	a.revoker = login.NewRevoker(h, a.state, revoked, a.tr, controlPrefix+"revocations", cfg.Logger)
	a.handler, a.admin = a.routes()
	return a, nil
}

// Handler returns the HTTP handler with every route; tests serve it with httptest.
func (a *App) Handler() http.Handler { return a.handler }

// Start starts the hub's broker and background work. Run calls it; tests that serve Handler
// themselves call it directly.
func (a *App) Start(ctx context.Context) error {
	go a.locations.Sweep(ctx)
	go a.chat.Sweep(ctx)
	go returnMemory(ctx, a.mappedFiles(), a.log)
	if err := a.hub.Run(ctx); err != nil {
		return err
	}
	if a.archive != nil {
		a.archive.Run(ctx) // its first sweep catches up what a stopped node left unarchived
	}
	return a.revoker.Start(ctx)
}

// Shutdown tells clients to reconnect, flushes and closes connections, and stops the hub.
func (a *App) Shutdown(ctx context.Context) error {
	err := a.tr.Shutdown(ctx)
	return errors.Join(err, a.hub.Close(), a.closeStore())
}

// closeStore writes what the archive has queued, commits what is queued and closes the
// durable history and state.
func (a *App) closeStore() error {
	err := a.state.Close()
	if a.archive != nil {
		err = errors.Join(err, a.archive.Close(a.cfg.ShutdownTimeout))
	}
	for _, f := range a.files {
		err = errors.Join(err, f.Close())
	}
	return err
}

// Run listens on cfg.Addr and serves until ctx ends, then shuts down gracefully within
// ShutdownTimeout.
func (a *App) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
	}
	return a.Serve(ctx, ln)
}

// listenSTOMP opens the STOMP over TCP listener of STOMPAddr, with TLS when a certificate
// is configured.
func (a *App) listenSTOMP() (net.Listener, error) {
	ln, err := net.Listen("tcp", a.cfg.STOMPAddr)
	if err != nil {
		return nil, fmt.Errorf("--stomp-addr %s: %w", a.cfg.STOMPAddr, err)
	}
	if a.cfg.TLSCert == "" {
		return ln, nil
	}
	cert, err := tls.LoadX509KeyPair(a.cfg.TLSCert, a.cfg.TLSKey)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

// Serve is Run on an existing listener. It answers at once: while the broker catches up
// (a RabbitMQ node replays its log), /healthz and /metrics answer, /readyz says the node is
// starting, and every other route answers 503, so probes do not take a starting node for a
// dead one.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Bool
	ln = a.tr.Listener(ln) // every TCP connection counts toward the caps
	srv := &http.Server{
		Handler:           whileStarting(&started, a.handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       a.tr.Limits().HTTPIdleTimeout,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() {
		if a.cert != nil {
			srv.TLSConfig = &tls.Config{GetCertificate: a.cert.get, MinVersion: tls.VersionTLS12}
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	if a.admin != nil {
		aln, err := net.Listen("tcp", a.cfg.AdminAddr)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("--admin-addr %s: %w", a.cfg.AdminAddr, err)
		}
		aln = a.tr.Listener(aln) // the admin address is a door like the others
		asrv := &http.Server{Handler: a.admin, ReadHeaderTimeout: 10 * time.Second, ErrorLog: srv.ErrorLog}
		go func() { _ = asrv.Serve(aln) }()
		defer asrv.Close()
		a.log.Info("rtlab admin endpoints", "addr", aln.Addr().String(), "paths", "/metrics /lab")
	}
	var sln net.Listener
	if a.cfg.STOMPAddr != "" {
		var err error
		if sln, err = a.listenSTOMP(); err != nil {
			_ = srv.Close()
			return err
		}
		// TCP cannot answer probes, so protected mode refuses other machines at the door.
		sln = a.tr.Admit(sln, transport.Admission{STOMP: true, LoopbackOnly: a.protectedMode()})
		defer sln.Close()
	}
	startc := make(chan error, 1)
	go func() { startc <- a.Start(runCtx) }()
	select {
	case err := <-startc:
		if err != nil {
			_ = srv.Close()
			return err
		}
	case err := <-errc:
		cancel()
		<-startc
		return errors.Join(fmt.Errorf("serve: %w", err), a.hub.Close(), a.closeStore())
	case <-ctx.Done():
		// Stopped while starting: nobody is connected but probes.
		cancel()
		<-startc
		_ = srv.Close()
		return errors.Join(a.hub.Close(), a.closeStore())
	}
	started.Store(true)
	if sln != nil {
		go func() {
			if err := a.tr.ServeSTOMP(sln); err != nil {
				a.log.Error("STOMP over TCP stopped", "addr", sln.Addr().String(), "err", err)
			}
		}()
		a.log.Info("rtlab STOMP over TCP", "addr", sln.Addr().String(), "tls", a.cfg.TLSCert != "")
	}
	lim := a.tr.Limits()
	a.log.Info("rtlab serving", "addr", ln.Addr().String(), "broker", redactedURL(a.cfg.Broker),
		"history_size", a.cfg.historyPolicy().Size, "history_ttl", a.cfg.historyPolicy().TTL,
		"max_frame", lim.MaxFrame, "queue_bytes", lim.QueueBytes, "write_timeout", lim.WriteTimeout,
		"max_subs", lim.MaxSubs, "msg_rate", lim.MsgRate, "http_pub_rate", lim.HTTPPubRate,
		"max_conns", lim.MaxConns, "max_conns_per_ip", lim.MaxConnsPerIP, "tls", a.cfg.TLSCert != "", "auth", a.authMode(),
		"durable", a.durableMode(), "archive", a.archDesc,
		"version", a.cfg.Version)
	a.warnOpen(ln.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	start := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer scancel()
	// Streaming connections are told to reconnect while the listener closes; long polls return.
	trErr := make(chan error, 1)
	if sln != nil {
		_ = sln.Close() // no new STOMP sessions; Shutdown ends the open ones
	}
	go func() { trErr <- a.tr.Shutdown(sctx) }()
	err := srv.Shutdown(sctx)
	err = errors.Join(err, <-trErr, a.hub.Close(), a.closeStore())
	a.log.Info("rtlab stopped", "addr", ln.Addr().String(), "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// whileStarting serves h once started is true. Before that it answers /healthz and /metrics
// from h, /readyz with 503 "starting", and anything else with 503 and a JSON reason.
func whileStarting(started *atomic.Bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if started.Load() {
			h.ServeHTTP(w, r)
			return
		}
		switch r.URL.Path {
		case "/healthz", "/metrics":
			h.ServeHTTP(w, r)
		case "/readyz":
			transport.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "starting: catching up with the broker"})
		default:
			w.Header().Set("Retry-After", "1")
			transport.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "reason": "starting: catching up with the broker"})
		}
	})
}

// newArchive opens the archive cfg names, if any, with b's window to catch up from. It returns
// nil when there is none, and a description for the start line.
func newArchive(ctx context.Context, cfg Config, b hub.Broker, durable func(string) bool, reg prometheus.Registerer) (*archive.Archiver, string, error) {
	ret, err := archive.ParseRetention(cfg.ArchiveRetention)
	if err != nil {
		return nil, "", fmt.Errorf("--archive-retention: %w", err)
	}
	if ret.Count > 0 && ret.Count < cfg.DurableHistory {
		return nil, "", fmt.Errorf("--archive-retention %d: keep at least --durable-history (%d) per topic, or sweeps would archive again what it deletes", ret.Count, cfg.DurableHistory)
	}
	var st archive.Store
	switch spec := cfg.Archive; {
	case spec == "" && cfg.Broker != "memory":
		// Nodes on a shared broker share one archive; an embedded one per node is opt-in.
		return nil, "off (several nodes share --archive postgres://…; one node may use --archive embedded)", nil
	case spec == "off" || len(cfg.Durable) == 0 || ((spec == "" || spec == "embedded") && cfg.DataDir == ""):
		return nil, "off", nil
	case spec == "" || spec == "embedded":
		bs, err := archive.OpenBolt(filepath.Join(cfg.DataDir, "archive.db"), archive.BoltOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("--archive (embedded in --data-dir %s): %w", cfg.DataDir, err)
		}
		st = bs
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		ps, err := archive.OpenPostgres(ctx, spec)
		if err != nil {
			return nil, "", fmt.Errorf("--archive: %w", err)
		}
		st = ps
	default:
		return nil, "", fmt.Errorf("--archive %q: want embedded (archive.db in --data-dir), off, or postgres://user:pass@host:port/db", redactedURL(spec))
	}
	a := archive.New(archive.Config{
		Store: st, Source: b, Durable: durable, Queue: cfg.ArchiveQueue, Sweep: cfg.ArchiveSweep,
		Grace: cfg.ArchiveGrace, Retention: ret, Logger: cfg.Logger, Registerer: reg,
	})
	return a, fmt.Sprintf("%v, keeping %v", st, ret), nil
}

// redactedURL is a broker URL fit for logs: its password, if any, replaced by "xxxxx".
func redactedURL(s string) string {
	if parts := strings.Fields(s); len(parts) > 1 {
		for i, p := range parts {
			parts[i] = redactedURL(p)
		}
		return strings.Join(parts, " ")
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// devSecret is the signing key of open dev mode, where tokens identify users but are not
// required. It is kept under dataDir so tokens stay valid across restarts; without a data dir
// it lives as long as the process.
func devSecret(dataDir string) ([]byte, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("dev secret: %w", err)
	}
	if dataDir == "" {
		return secret, nil
	}
	path := filepath.Join(dataDir, "dev-secret")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	// Created exclusively, so two nodes starting together in one directory share one key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.Write(secret)
		return secret, errors.Join(err, f.Close())
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("--data-dir: keep dev secret: %w", err)
	}
	for range 50 { // the creator may still be writing it
		if b, err := os.ReadFile(path); err == nil && len(b) >= 16 {
			return b, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("--data-dir: %s is not a usable dev secret (delete it)", path)
}

func (a *App) durableMode() string {
	switch {
	case a.cfg.Broker != "memory":
		return fmt.Sprintf("%s: %d kept per topic by the broker, never expiring", strings.Join(a.cfg.Durable, ","), a.cfg.DurableHistory)
	case a.durableAt == "":
		return "off (all history in memory)"
	}
	return fmt.Sprintf("%s in %s (%d kept per topic)", strings.Join(a.cfg.Durable, ","), a.durableAt, a.cfg.DurableHistory)
}

// warnOpen says loudly at start what open dev mode lets in on addr.
func (a *App) warnOpen(addr net.Addr) {
	switch {
	case a.policy.required:
	case a.cfg.Dev:
		a.log.Warn("OPEN DEV MODE WITH --dev: every client that reaches "+addr.String()+" is served without a token and POST /api/login signs any name it is given; never expose this server", "addr", addr.String())
	case !isLoopback(addr):
		a.log.Warn("open dev mode on "+addr.String()+": only requests straight from this machine are served, others get 403; configure auth (--auth-secret, --auth-public-key or --auth-jwks), or start with --dev to let other machines in", "addr", addr.String())
	}
}

// isLoopback reports whether a listener's address accepts only this machine's clients.
func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func (a *App) authMode() string {
	switch {
	case !a.policy.required && a.cfg.Dev:
		return "open (dev mode with --dev: no --auth-secret, --auth-public-key or --auth-jwks; anyone may connect and POST /api/login takes any name)"
	case !a.policy.required:
		return "open (dev mode: no --auth-secret, --auth-public-key or --auth-jwks; only this machine's clients are served, POST /api/login takes any name)"
	}
	login := "POST /api/login off (tokens come from the application's backend)"
	if a.users != nil {
		login = fmt.Sprintf("POST /api/login for %d users of --login-users", a.users.Len())
	}
	return "tokens required: " + strings.Join(a.cfg.Auth.methods(), ", ") + "; " + login
}

// routes returns the handler of the main listener and, when AdminAddr is set, that of the
// admin listener, which then alone serves /metrics and /lab.
func (a *App) routes() (http.Handler, http.Handler) {
	mux := http.NewServeMux()
	tr := a.tr
	fail := func(w http.ResponseWriter, r *http.Request, err error) { tr.WriteError(w, r, err) }

	// Native API: the transports' routes, then the application's.
	tr.Routes(mux)
	mux.HandleFunc("GET /api/location/{group}", a.locations.Handler(tr, a.policy))
	login.Routes(mux, tr, a.revoker, login.Config{Signer: a.login, Users: a.users, Verifier: a.policy.verifier})
	a.chat.Routes(mux, tr, a.policy)
	a.notes.Routes(mux, tr, a.policy)
	serverapi.Routes(mux, a.cfg.APIKey, a.hub, tr, a.chat, a.log)

	// Seed-compatible routes: paths, methods and status codes exactly as the seed servers had
	// (internal/seed).
	a.seed.Register(mux, tr, a.locations.Handler(tr, a.policy))

	// SockJS (sockjs-client, Spring's withSockJS endpoints) carrying the STOMP sessions.
	if p := strings.TrimSuffix(a.cfg.SockJSPath, "/"); p != "" {
		h := tr.HandleSockJS(p)
		mux.Handle(p+"/", h)
		mux.Handle(p, h)
	}

	// Operations.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		transport.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !a.hub.Ready() {
			transport.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "broker unreachable"})
			return
		}
		transport.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})

	// The demo page and the lab's results browser.
	resultsDir := a.cfg.ResultsDir
	if resultsDir == "" {
		resultsDir = "bench-results"
	}
	page := web.Handler(resultsDir)
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /static/", page)
	mux.Handle("GET /rtlab.js", page)
	notFound := func(w http.ResponseWriter, r *http.Request) {
		fail(w, r, fmt.Errorf("%w: no route %s %s", transport.ErrNotFound, r.Method, r.URL.Path))
	}
	mux.HandleFunc("/", notFound)

	// The operator's endpoints: on the admin listener when there is one; otherwise here,
	// and with auth on only for clients on loopback.
	admin := mux
	var adminMux *http.ServeMux
	if a.cfg.AdminAddr != "" {
		adminMux = http.NewServeMux()
		adminMux.HandleFunc("/", notFound)
		admin = adminMux
	}
	guard := func(h http.Handler) http.Handler {
		if adminMux != nil {
			return h
		}
		return localOnly(h, fail, "%s is for the operator: on --addr it answers only requests straight from loopback (no proxy headers); give it --admin-addr to serve it elsewhere")
	}
	admin.Handle("GET /metrics", guard(promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{})))
	admin.Handle("GET /lab", guard(page))
	admin.Handle("GET /lab/", guard(page))
	public := a.tr.CORS(a.tr.BodyDeadline(a.metrics.Instrument(mux, requestRoute)))
	if adminMux == nil {
		if a.protectedMode() {
			public = protected(public, fail, a.cfg.Addr)
		}
		return public, nil
	}
	if a.protectedMode() {
		return protected(public, fail, a.cfg.Addr), protected(adminMux, fail, a.cfg.AdminAddr)
	}
	return public, adminMux
}

// protectedMode is open dev mode without --dev: only this machine's clients are served, on
// every listener.
func (a *App) protectedMode() bool { return !a.policy.required && !a.cfg.Dev }

// localOnly serves h to requests straight from loopback and refuses others with 403 and
// why (a format with the path).
func localOnly(h http.Handler, fail func(http.ResponseWriter, *http.Request, error), why string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !transport.LocalDirect(r) {
			fail(w, r, fmt.Errorf("%w: "+why, transport.ErrForbidden, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// protected is open dev mode without --dev: only requests straight from loopback are served,
// besides the probes, which say nothing and take no identity. A request must also name this
// machine in its Host (a loopback address or name, or the listen address addr): a page whose
// name an attacker rebinds to 127.0.0.1 (DNS rebinding) is a loopback client too.
func protected(h http.Handler, fail func(http.ResponseWriter, *http.Request, error), addr string) http.Handler {
	refuse := localOnly(h, fail, "%s: open dev mode serves only requests straight from this machine; configure auth (--auth-secret, --auth-public-key or --auth-jwks), or start the server with --dev to let other machines in")
	listenHost, _, _ := net.SplitHostPort(addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			h.ServeHTTP(w, r)
			return
		}
		if !transport.LocalDirect(r) {
			refuse.ServeHTTP(w, r) // refused with its reason
			return
		}
		if !localHost(r.Host, listenHost) {
			fail(w, r, fmt.Errorf("%w: Host %q is not this machine: open dev mode serves only localhost, loopback addresses and its listen address (against DNS rebinding); use http://localhost:PORT, or --dev", transport.ErrForbidden, r.Host))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// localHost reports whether a request's Host names this machine: localhost (or a name under
// .localhost, which browsers resolve to loopback themselves), a loopback address, or the
// listen address's host when it is not the unspecified one.
func localHost(hostport, listenHost string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	// No Host at all (HTTP/1.0) has no name to rebind.
	if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	listenHost = strings.ToLower(strings.Trim(listenHost, "[]"))
	if ip, err := netip.ParseAddr(listenHost); listenHost == "" || (err == nil && ip.IsUnspecified()) {
		return false
	}
	return host == listenHost
}

// registerHubStats exports the hub's counters.
func registerHubStats(reg prometheus.Registerer, h *hub.Hub) {
	st := h.Stats()
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter("rtlab_publications_total", "Publications accepted on this node.", func() float64 { return float64(st.Publications.Load()) })
	counter("rtlab_publications_received_total", "Publications received from the broker.", func() float64 { return float64(st.Received.Load()) })
	counter("rtlab_deliveries_total", "Publications handed to subscribers' queues.", func() float64 { return float64(st.Deliveries.Load()) })
	counter("rtlab_duplicates_dropped_total", "Publications dropped because the subscriber had them.", func() float64 { return float64(st.Duplicates.Load()) })
	counter("rtlab_gaps_filled_total", "Publications fetched from history after a delivery gap.", func() float64 { return float64(st.GapsFilled.Load()) })
	counter("rtlab_gaps_reported_total", "Breaks in a subscription's history its client was told of: the epoch changed, or missed publications were no longer retained.", func() float64 { return float64(st.GapsReported.Load()) })
	gauge("rtlab_subscriptions", "Current subscriptions.", func() float64 { return float64(st.Subscriptions.Load()) })
	gauge("rtlab_topics", "Topics with local subscribers.", func() float64 { return float64(st.Topics.Load()) })
}
