package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/rtlab/rtlab/internal/app"
	"github.com/rtlab/rtlab/internal/procstat"
	"github.com/rtlab/rtlab/internal/transport"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("rtlab serve", func(w io.Writer) { fmt.Fprint(w, "usage: rtlab serve [flags]\n\nflags:\n") })
	fs.env = "RTLAB_"
	var cfg app.Config
	x := serveFlagTable(fs, &cfg)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if len(fs.positional) > 0 {
		fmt.Fprintf(stderr, "rtlab serve: unexpected argument %q; all settings are flags (rtlab serve -h)\n", fs.positional[0])
		return 2
	}
	if cfg.AppProxy != "" && cfg.AppProxySecret == "" {
		// Unsigned, anyone who reaches the backend could claim to be rtlab acting for any user.
		fmt.Fprintln(stderr, "rtlab serve: --app-proxy needs --app-proxy-secret (or RTLAB_APP_PROXY_SECRET), the key the backend checks rtlab's requests with")
		return 2
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(*x.logLevel)) // checked by its rule
	cfg.PrivateRooms, cfg.Durable, cfg.AllowedOrigins = commaList(*x.privateRooms), commaList(*x.durable), commaList(*x.origins)
	cfg.AppRoutes = commaList(*x.appRoutes)
	cfg.TrustedProxies, _ = transport.ParseProxies(*x.proxies) // checked by its rule
	cfg.PresenceOff = !*x.presence
	cfg.Version = version
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// go-redis logs through a logger of its own, process-wide, to stderr: a refused dial would
	// print a line of its own before ours says the same.
	redis.SetLogger(redisLogger{cfg.Logger})
	a, err := app.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rtlab serve: %v\n", explainBusy(err, cfg.DataDir))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // before the server says it serves
	defer signal.Stop(hup)
	go reloadOnHUP(ctx, hup, a, cfg.Logger)
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "rtlab serve: %v\n", err)
		return 1
	}
	return 0
}

// sockJSPath reports whether p may be --sockjs-path: empty (off), or an absolute path of plain
// segments other than / alone (which would take every route).
func sockJSPath(v any) bool {
	p := strings.TrimSuffix(v.(string), "/")
	if v.(string) == "" {
		return true
	}
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsFunc(seg, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '~' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		}) {
			return false
		}
	}
	return true
}

// commaList is a comma-separated flag's items, trimmed, without empty ones.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// reloadOnHUP rereads the TLS certificate on each SIGHUP until ctx ends. Without TLS the signal
// is logged and ignored: by default it would end the process without the graceful shutdown.
func reloadOnHUP(ctx context.Context, hup <-chan os.Signal, a *app.App, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			switch err := a.ReloadTLS(); {
			case errors.Is(err, app.ErrNoTLS):
				log.Info("SIGHUP ignored: " + err.Error())
			case err != nil:
				log.Error("SIGHUP", "err", err)
			default:
				log.Info("SIGHUP: TLS certificate reloaded")
			}
		}
	}
}

// explainBusy replaces bbolt's "timeout" when another process holds a file of dataDir with
// which process that is.
func explainBusy(err error, dataDir string) error {
	if dataDir == "" || !errors.Is(err, berrors.ErrTimeout) {
		return err
	}
	for _, name := range []string{"rtlab.db", "state.db", "archive.db"} {
		path := filepath.Join(dataDir, name)
		if who := procstat.LockHolder(path); who != "" {
			return fmt.Errorf("--data-dir %s: %s is in use by another process, %s; stop it, or give this server another --data-dir", dataDir, path, who)
		}
	}
	return fmt.Errorf("--data-dir %s: its files are locked by another process (another rtlab serve on this directory?); stop it, or give this server another --data-dir (%w)", dataDir, err)
}

// redisLogger sends go-redis's own log lines to the server's log at debug level: what they
// report (a refused dial, a dropped connection) reaches the operator through the broker's
// errors and the server's own warnings.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// serveExtras are the serve flags that are not a field of app.Config as given: lists and
// switches turned into the Config after parsing.
type serveExtras struct {
	logLevel                                *string
	origins, proxies, privateRooms, durable *string
	appRoutes                               *string
	presence                                *bool
}

// serveFlagTable defines every serve flag with its default (from app.Defaults) and its rule:
// the one place a serve setting is stated; -h and docs/serve.md show this table (sorted by
// name, so the order of the groups below is free).
func serveFlagTable(fs *flags, cfg *app.Config) serveExtras {
	d := app.Defaults() // every default, stated once
	var x serveExtras
	serveListenFlags(fs, cfg, d, &x)
	serveAuthFlags(fs, cfg, d)
	serveLimitFlags(fs, cfg, d)
	serveBrokerFlags(fs, cfg, d)
	serveDurableFlags(fs, cfg, d, &x)
	serveAppFlags(fs, cfg, d, &x)
	serveFlagRules(fs)
	return x
}

// serveListenFlags defines the serve flags that are where and how the server listens: addresses,
// TLS, who may connect and how it logs.
func serveListenFlags(fs *flags, cfg *app.Config, d app.Config, x *serveExtras) {
	fs.StringVar(&cfg.Addr, "addr", d.Addr, "listen address (host:port)")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "", "serve /metrics and /lab on this address instead (empty: on --addr, only to requests straight from loopback)")
	fs.StringVar(&cfg.STOMPAddr, "stomp-addr", "", "serve STOMP over TCP on this address too (TLS with --tls-cert), admitted as --addr's clients; off when empty")
	fs.StringVar(&cfg.SockJSPath, "sockjs-path", "", "serve SockJS (sockjs-client, Spring's withSockJS) carrying STOMP at this path, like /ws (not /); off when empty")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS and wss:// (with --tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	x.origins = fs.String("allowed-origins", "", "comma-separated browser origins besides the server's own host that may connect (scheme://host[:port], https://*.example.com, or *); open dev mode also allows localhost")
	fs.BoolVar(&cfg.Dev, "dev", false, "open dev mode (no --auth-*) also serves other machines; without it only requests straight from loopback are served")
	x.proxies = fs.String("trusted-proxies", "", "comma-separated CIDRs or addresses of reverse proxies whose X-Forwarded-For gives the client's address (empty: none)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "graceful shutdown budget")
	x.logLevel = fs.String("log-level", "info", "log level: debug, info, warn, error")
}

// serveAuthFlags defines the serve flags that are how tokens are verified and issued.
func serveAuthFlags(fs *flags, cfg *app.Config, d app.Config) {
	fs.StringVar(&cfg.Auth.Secret, "auth-secret", "", "HMAC secret verifying HS256/384/512 tokens; with no secret, key or JWKS the server runs in open dev mode (given empty: refused)")
	fs.StringVar(&cfg.Auth.PublicKeyFile, "auth-public-key", "", "PEM file of public keys verifying RS256/384/512 and ES256/384 tokens")
	fs.StringVar(&cfg.Auth.JWKSURL, "auth-jwks", "", "URL of a JWKS whose keys verify RS/ES tokens (fetched at start, cached, refetched for an unknown kid at most every 30s)")
	fs.StringVar(&cfg.Auth.Issuer, "auth-issuer", "", "required iss of tokens (empty: not checked)")
	fs.StringVar(&cfg.Auth.Audience, "auth-audience", "", "required aud of tokens (empty: not checked)")
	fs.DurationVar(&cfg.Auth.Leeway, "auth-leeway", 0, "clock skew tolerated on a token's exp, nbf and iat")
	fs.StringVar(&cfg.Auth.LoginUsers, "login-users", "", "file of name:bcrypt-hash lines: POST /api/login checks these passwords (needs --auth-secret); without it login is off unless in open dev mode")
	fs.DurationVar(&cfg.Auth.TokenTTL, "token-ttl", d.Auth.TokenTTL, "lifetime of tokens POST /api/login issues")
	fs.IntVar(&cfg.Auth.MaxRevocations, "max-revocations", d.Auth.MaxRevocations, "revoked tokens kept (each until it expires); a logout past it is refused")
	fs.IntVar(&cfg.Auth.Cache, "auth-cache", d.Auth.Cache, "verified tokens remembered (each for a minute at most, never past its exp), so a token sent with every poll is not checked every time (0 = none)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "key of the server API for backends, sent as Authorization: apikey KEY; empty leaves the API off")
}

// serveLimitFlags defines the serve flags that are the per-connection, per-address and per-user
// limits.
func serveLimitFlags(fs *flags, cfg *app.Config, d app.Config) {
	fs.IntVar(&cfg.Limits.MaxFrame, "max-frame", d.Limits.MaxFrame, "largest client frame, request body or publication, in bytes")
	fs.IntVar(&cfg.Limits.QueueBytes, "queue-bytes", d.Limits.QueueBytes, "bytes queued per connection before it is cut off as a slow consumer")
	fs.DurationVar(&cfg.Limits.WriteTimeout, "write-timeout", d.Limits.WriteTimeout, "a socket write taking longer cuts the client off")
	fs.IntVar(&cfg.Limits.MaxSubs, "max-subs", d.Limits.MaxSubs, "subscriptions (topics) per connection")
	fs.Float64Var(&cfg.Limits.MsgRate, "msg-rate", d.Limits.MsgRate, "publishes per second per connection (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.MsgBurst, "msg-burst", 0, "publish burst per connection (0 = 2 x msg-rate, at least 10)")
	fs.Float64Var(&cfg.Limits.UserMsgRate, "user-msg-rate", 0, "WebSocket and STOMP publishes per second per user across its connections, per client address when anonymous; burst twice that (0 = 2 x msg-rate, -1 = unlimited)")
	fs.Float64Var(&cfg.Limits.OpRate, "op-rate", d.Limits.OpRate, "messages of any kind (publish, subscribe, ping, history, refresh) per second per WebSocket or STOMP connection, a client sending faster being read no faster (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.OpBurst, "op-burst", 0, "message burst per connection (0 = 2 x op-rate, at least 10)")
	fs.DurationVar(&cfg.Limits.PingInterval, "ping-interval", d.Limits.PingInterval, "WebSocket ping to a connection written nothing or heard nothing from this long; a client silent twice as long and 10 s is dropped; at least 100ms")
	fs.DurationVar(&cfg.Limits.SSEHeartbeat, "sse-heartbeat", d.Limits.SSEHeartbeat, "SSE heart-beat comment on idle streams; at least 100ms")
	fs.DurationVar(&cfg.Limits.StompHeartbeat, "stomp-heartbeat", d.Limits.StompHeartbeat, "STOMP heart-beat offered both ways; at least 100ms")
	fs.DurationVar(&cfg.Limits.LongPollMax, "long-poll-max", d.Limits.LongPollMax, "longest wait a long poll may ask for")
	fs.DurationVar(&cfg.Limits.SSEMaxAge, "sse-max-age", 0, "end each /api/sse stream cleanly after about this long, for proxies that cut long streams; clients resume with Last-Event-ID (0: never)")
	fs.IntVar(&cfg.Limits.StompTxFrames, "stomp-tx-frames", d.Limits.StompTxFrames, "SEND frames one STOMP transaction may hold")
	fs.IntVar(&cfg.Limits.StompTxBytes, "stomp-tx-bytes", d.Limits.StompTxBytes, "bytes one STOMP transaction may hold: its SENDs' bodies and headers (32 bytes more per header)")
	fs.IntVar(&cfg.Limits.StompTxMax, "stomp-tx-max", d.Limits.StompTxMax, "open transactions per STOMP session")
	fs.IntVar(&cfg.Limits.UnackedMsgs, "stomp-unacked", d.Limits.UnackedMsgs, "unacknowledged messages per STOMP subscription (ack client modes) before the client is cut off")
	fs.IntVar(&cfg.Limits.UnackedBytes, "stomp-unacked-bytes", d.Limits.UnackedBytes, "data bytes of those unacknowledged messages")
	fs.DurationVar(&cfg.Limits.FirstFrameTimeout, "first-frame-timeout", d.Limits.FirstFrameTimeout, "time from a STOMP upgrade to its CONNECT frame")
	fs.DurationVar(&cfg.Limits.BodyTimeout, "body-timeout", d.Limits.BodyTimeout, "time to read one request body")
	fs.Float64Var(&cfg.Limits.HTTPPubRate, "http-pub-rate", d.Limits.HTTPPubRate, "HTTP publishes per second per user, or per address when anonymous (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.HTTPPubBurst, "http-pub-burst", 0, "HTTP publish burst (0 = 2 x http-pub-rate, at least 10)")
	fs.IntVar(&cfg.Limits.MaxConns, "max-conns", d.Limits.MaxConns, "streaming connections (WebSocket, STOMP, SSE, waiting long polls) in all (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.MaxConnsPerIP, "max-conns-per-ip", d.Limits.MaxConnsPerIP, "connections (HTTP keep-alive ones, streaming ones and waiting long polls) per client address, an IPv6 /64 counting as one; at most half the open-file limit (-1 = unlimited)")
	fs.Float64Var(&cfg.Limits.ReadRatePerUser, "read-rate-per-user", d.Limits.ReadRatePerUser, "HTTP reads (polls, history, presence, member lists) per second per authenticated user, burst twice that; over it 429 (-1 = unlimited)")
	fs.Float64Var(&cfg.Limits.ReadRatePerIP, "read-rate-per-ip", d.Limits.ReadRatePerIP, "HTTP reads (polls, history, presence, member lists) per second per client address, burst twice that; over it 429 (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.MaxConnsPerUser, "max-conns-per-user", d.Limits.MaxConnsPerUser, "streaming connections and waiting long polls per authenticated user (-1 = unlimited)")
	fs.DurationVar(&cfg.Limits.HTTPIdleTimeout, "http-idle-timeout", d.Limits.HTTPIdleTimeout, "close a keep-alive HTTP connection idle this long")
	fs.Float64Var(&cfg.Limits.LoginRate, "login-rate", d.Limits.LoginRate, "password checks (POST /api/login with --login-users) per second per client address (before the body is read), and failed ones per user name for addresses that failed for it, before bcrypt runs; a refusal is answered when it could be retried, at most 1 s later (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.LoginBurst, "login-burst", d.Limits.LoginBurst, "password check burst per address and per user")
	fs.IntVar(&cfg.Limits.SockJSInput, "sockjs-input-bytes", d.Limits.SockJSInput, "input a SockJS session holds not yet read, and the largest xhr_send body, in bytes (at least 2 x max-frame); a send waits for room up to body-timeout, then 429")
	fs.Float64Var(&cfg.Limits.SockJSMissRate, "sockjs-miss-rate", d.Limits.SockJSMissRate, "requests per second per client address naming a SockJS session that does not exist or is not theirs, burst twice that (at least 10); over it 429 (-1 = unlimited)")
	fs.IntVar(&cfg.Limits.PollAnswerBytes, "poll-answer-bytes", d.Limits.PollAnswerBytes, "publication bytes in one POST /api/poll answer; the rest waits for the next poll (at least one publication per topic answered)")
}

// serveBrokerFlags defines the serve flags that are the broker and what it keeps in memory.
func serveBrokerFlags(fs *flags, cfg *app.Config, d app.Config) {
	fs.StringVar(&cfg.Broker, "broker", d.Broker, "broker: memory (embedded, one node), redis://host:port/db, redis+cluster://host:port[?addr=host:port&addr=…] (a Redis Cluster), nats://host:port or amqp://user:pass@host:port/vhost; several of one kind, space-separated, shard topics over them")
	fs.StringVar(&cfg.AMQPDirect, "amqp-direct", d.AMQPDirect, "RabbitMQ broker: while this node is the sequencer, take the other nodes' publish requests on this address (port 0: any free port), so that they skip a trip through RabbitMQ; the other nodes must reach it; empty = always through RabbitMQ")
	fs.IntVar(&cfg.AMQPRetryIDs, "amqp-retry-ids", d.AMQPRetryIDs, "RabbitMQ broker: the most publication ids a node remembers to find a keyed retry; it remembers those of the history TTL, at least the latest 16384")
	fs.DurationVar(&cfg.AMQPLinger, "amqp-linger", 0, "RabbitMQ broker: hold a request to the sequencer up to this long so that others share its message (0: send at once)")
	fs.IntVar(&cfg.HistorySize, "history-size", d.HistorySize, "publications kept per topic for resume and history reads")
	fs.DurationVar(&cfg.HistoryTTL, "history-ttl", d.HistoryTTL, "how long a publication stays in history")
	fs.Int64Var(&cfg.HistoryMaxBytes, "history-max-bytes", d.HistoryMaxBytes, "memory broker: bytes the history of non-durable topics may hold; over it the least recently used topics lose their history (-1 = unlimited)")
	fs.IntVar(&cfg.MaxTopics, "max-topics", d.MaxTopics, "memory broker: topics held in memory; a new topic over it makes room by forgetting the least recently used one without subscribers (-1 = unlimited)")
	fs.Int64Var(&cfg.DurableMaxBytes, "durable-max-bytes", d.DurableMaxBytes, "memory broker: bytes durable topics' windows may hold in memory; over it the least recently used leave memory and are read back from --data-dir when used (-1 = unlimited)")
}

// serveDurableFlags defines the serve flags that are durable history: the data directory and the
// archive beyond the broker's window.
func serveDurableFlags(fs *flags, cfg *app.Config, d app.Config, x *serveExtras) {
	fs.StringVar(&cfg.DataDir, "data-dir", d.DataDir, "directory for durable history (empty: keep everything in memory)")
	x.durable = fs.String("durable", strings.Join(d.Durable, ","), "comma-separated topic prefixes whose history is durable: kept across restarts, never expiring by time, archived")
	fs.IntVar(&cfg.DurableHistory, "durable-history", d.DurableHistory, "publications kept per durable topic in the live window (the broker's)")
	fs.StringVar(&cfg.Archive, "archive", "", "archive of durable topics beyond the window: embedded (archive.db in --data-dir), off, or postgres://user:pass@host:port/db shared by every node; empty = embedded with --broker memory, off with a shared broker")
	fs.StringVar(&cfg.ArchiveRetention, "archive-retention", "", "what the archive keeps: empty or 0 = everything, a count per topic (100000), or an age (720h, 30d)")
	fs.IntVar(&cfg.ArchiveQueue, "archive-queue", d.ArchiveQueue, "publications waiting to be archived before new ones are left to the sweeps")
	fs.DurationVar(&cfg.ArchiveSweep, "archive-sweep", d.ArchiveSweep, "how often each node checks the broker's window for publications nobody archived")
	fs.DurationVar(&cfg.ArchiveGrace, "archive-grace", d.ArchiveGrace, "how old a publication must be before a sweep archives it for the node that acknowledged it")
}

// serveAppFlags defines the serve flags that are the application's own features: STOMP routes to
// the backend, chat, location, presence and the lab page.
func serveAppFlags(fs *flags, cfg *app.Config, d app.Config, x *serveExtras) {
	fs.StringVar(&cfg.AppPrefix, "app-prefix", d.AppPrefix, "STOMP SENDs under this destination prefix go to the application: --app-proxy, or --app-route")
	fs.StringVar(&cfg.AppProxy, "app-proxy", "", "URL of the application's backend: each STOMP SEND under --app-prefix is POSTed there, and its answer says what to publish or refuses")
	fs.DurationVar(&cfg.AppProxyTimeout, "app-proxy-timeout", d.AppProxyTimeout, "longest wait for --app-proxy's answer; a SEND is never retried")
	fs.StringVar(&cfg.AppProxySecret, "app-proxy-secret", "", "key signing each request to --app-proxy (X-Rtlab-Signature, HMAC-SHA256; required with it); an answer signed with it may publish beyond the sender's own rights")
	fs.IntVar(&cfg.AppProxyConns, "app-proxy-conns", d.AppProxyConns, "connections to --app-proxy at most, kept alive and reused")
	x.appRoutes = fs.String("app-route", "", "without --app-proxy: comma-separated FROM=TO rebroadcasts of SENDs, like /app/chat.send=/topic/public (a prefix when both end in /)")
	fs.IntVar(&cfg.ChatMaxBytes, "chat-max", d.ChatMaxBytes, "largest chat message in bytes")
	fs.IntVar(&cfg.ChatMaxMembers, "chat-max-members", d.ChatMaxMembers, "members (and invited users) per chat room")
	fs.IntVar(&cfg.ChatMaxRooms, "chat-max-rooms", d.ChatMaxRooms, "chat rooms one connection may have entered; an ENTER past it is refused")
	fs.DurationVar(&cfg.ChatIdle, "chat-idle", d.ChatIdle, "a chat room's in-memory view unused this long is dropped; its state stays in the store")
	x.privateRooms = fs.String("private-rooms", "", "comma-separated topic prefixes (e.g. chat/private/) whose chat rooms are members-only")
	fs.IntVar(&cfg.Location.Groups, "location-groups", d.Location.Groups, "location groups whose latest positions are kept for GET /cur/{group}")
	fs.IntVar(&cfg.Location.Members, "location-members", d.Location.Members, "members kept per location group")
	fs.IntVar(&cfg.Location.Bytes, "location-bytes", d.Location.Bytes, "position data kept per location group, in bytes")
	fs.DurationVar(&cfg.Location.MemberTTL, "location-member-ttl", d.Location.MemberTTL, "a member's position older than this is dropped from its group")
	fs.DurationVar(&cfg.Seed.LongTimeout, "seed-long-timeout", d.Seed.LongTimeout, "wait of the seed route GET /location/long/{group}")
	fs.DurationVar(&cfg.Seed.SSETimeout, "seed-sse-timeout", d.Seed.SSETimeout, "the seed route GET /location/sse/connect ends each stream cleanly after this long, like Spring's SseEmitter (negative = never)")
	x.presence = fs.Bool("presence", true, "track who is connected to each topic (GET /api/topics/{topic}/presence, join/leave events)")
	fs.DurationVar(&cfg.PresenceRefresh, "presence-refresh", d.PresenceRefresh, "how often a node resends its presence entries to the others; entries expire after three missed refreshes")
	fs.StringVar(&cfg.ResultsDir, "results-dir", d.ResultsDir, "folder of bench results listed by the page at /lab")
}

// serveFlagRules states what each serve flag's value must be.
func serveFlagRules(fs *flags) {
	// What each value must be; durations not named here must not be negative (0: the default).
	fs.rule(atLeast(1), "max-frame", "queue-bytes", "max-subs", "stomp-tx-frames", "stomp-tx-bytes",
		"stomp-tx-max", "stomp-unacked", "stomp-unacked-bytes", "location-groups", "location-members",
		"location-bytes", "max-revocations", "chat-max", "chat-max-members", "chat-max-rooms", "durable-history", "archive-queue",
		"sockjs-input-bytes", "poll-answer-bytes")
	fs.rule(between(1, 1_000_000), "history-size")
	fs.rule(atLeast(1), "app-proxy-conns")
	fs.rule(atLeast(16384), "amqp-retry-ids")
	fs.rule(atLeast(0), "msg-burst", "op-burst", "http-pub-burst", "login-burst", "auth-cache")
	fs.rule(unlimitedOrAtLeast(1), "max-conns", "max-conns-per-ip", "max-conns-per-user", "history-max-bytes", "max-topics", "durable-max-bytes")
	fs.rule(rateRule, "msg-rate", "op-rate", "http-pub-rate", "login-rate", "read-rate-per-ip", "read-rate-per-user", "sockjs-miss-rate")
	fs.rule(rule{func(v any) bool { f := v.(float64); return f == -1 || f >= 0 }, "-1 (unlimited), 0 (2 x msg-rate) or a number per second"}, "user-msg-rate")
	fs.rule(anyDuration, "seed-sse-timeout")
	fs.rule(minDuration(100*time.Millisecond), "ping-interval", "sse-heartbeat", "stomp-heartbeat")
	fs.rule(nonEmpty("a value; empty would start open dev mode (no auth): to run without auth, leave the setting out"), "auth-secret", "auth-public-key", "auth-jwks")
	fs.rule(rule{sockJSPath, "empty (off), or a path such as /ws (not /)"}, "sockjs-path")
	fs.rule(hostPort(false), "addr")
	fs.rule(hostPort(true), "admin-addr", "amqp-direct")
	fs.rule(oneOf("debug", "info", "warn", "error"), "log-level")
	fs.rule(rule{func(v any) bool { _, err := transport.ParseProxies(v.(string)); return err == nil },
		"comma-separated CIDRs (10.0.0.0/8) or addresses (127.0.0.1)"}, "trusted-proxies")
}
