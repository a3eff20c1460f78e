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

	"github.com/redis/go-redis/v9"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/rtlab/rtlab/internal/app"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("rtlab serve", func(w io.Writer) { fmt.Fprint(w, "usage: rtlab serve [flags]\n\nflags:\n") })
	var cfg app.Config
	lim := &cfg.Limits
	logLevel := "info"
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address (host:port)")
	fs.StringVar(&cfg.Broker, "broker", "memory", "broker: memory (embedded, one node), redis://host:port/db, nats://host:port or amqp://user:pass@host:port/vhost")
	fs.StringVar(&cfg.AMQPDirect, "amqp-direct", "127.0.0.1:0", "RabbitMQ broker: while this node is the sequencer, take the other nodes' publish requests on this address (port 0: any free port), so that they skip a trip through RabbitMQ; the other nodes must reach it; empty = always through RabbitMQ")
	fs.DurationVar(&cfg.AMQPLinger, "amqp-linger", 0, "RabbitMQ broker: hold a request to the sequencer up to this long so that others share its message (0 = send at once)")
	fs.IntVar(&cfg.HistorySize, "history-size", 100, "publications kept per topic for resume and history reads")
	fs.DurationVar(&cfg.HistoryTTL, "history-ttl", 0, "how long a publication stays in history (0 = 10m)")
	fs.Int64Var(&cfg.HistoryMaxBytes, "history-max-bytes", app.DefaultHistoryMaxBytes, "memory broker: bytes the history of non-durable topics may hold; over it the least recently used topics lose their history (-1 = unlimited)")
	fs.IntVar(&cfg.MaxTopics, "max-topics", app.DefaultMaxTopics, "memory broker: topics held in memory; a new topic over it makes room by forgetting the least recently used one without subscribers (-1 = unlimited)")
	fs.Int64Var(&cfg.DurableMaxBytes, "durable-max-bytes", app.DefaultDurableMaxBytes, "memory broker: bytes durable topics' windows may hold in memory; over it the least recently used leave memory and are read back from --data-dir when used (-1 = unlimited)")
	fs.IntVar(&lim.MaxFrame, "max-frame", 64<<10, "largest client frame, request body or publication, in bytes")
	fs.IntVar(&lim.QueueBytes, "queue-bytes", 1<<20, "bytes queued per connection before it is cut off as a slow consumer")
	fs.DurationVar(&lim.WriteTimeout, "write-timeout", 0, "a socket write taking longer cuts the client off (0 = 10s)")
	fs.IntVar(&lim.MaxSubs, "max-subs", 128, "subscriptions (topics) per connection")
	fs.Float64Var(&lim.MsgRate, "msg-rate", 100, "publishes per second per connection (-1 = unlimited)")
	fs.IntVar(&lim.MsgBurst, "msg-burst", 0, "publish burst per connection (0 = 2 x msg-rate, at least 10)")
	fs.Float64Var(&lim.OpRate, "op-rate", 200, "messages of any kind (publish, subscribe, ping, history, refresh) per second per WebSocket or STOMP connection; a client sending faster is read no faster (-1 = unlimited)")
	fs.IntVar(&lim.OpBurst, "op-burst", 0, "message burst per connection (0 = 2 x op-rate, at least 10)")
	fs.DurationVar(&lim.PingInterval, "ping-interval", 0, "WebSocket ping on idle connections (0 = 25s)")
	fs.DurationVar(&lim.SSEHeartbeat, "sse-heartbeat", 0, "SSE heart-beat comment on idle streams (0 = 15s)")
	fs.DurationVar(&lim.StompHeartbeat, "stomp-heartbeat", 0, "STOMP heart-beat offered both ways (0 = 10s)")
	fs.DurationVar(&lim.LongPollMax, "long-poll-max", 0, "longest wait a long poll may ask for (0 = 60s)")
	fs.DurationVar(&cfg.Seed.LongTimeout, "seed-long-timeout", 0, "wait of the seed route GET /location/long/{group} (0 = 10s)")
	fs.IntVar(&lim.StompTxFrames, "stomp-tx-frames", 100, "SEND frames one STOMP transaction may hold")
	fs.IntVar(&lim.StompTxBytes, "stomp-tx-bytes", 1<<20, "body bytes one STOMP transaction may hold")
	fs.IntVar(&lim.StompTxMax, "stomp-tx-max", 16, "open transactions per STOMP session")
	fs.IntVar(&lim.UnackedMsgs, "stomp-unacked", 1000, "unacknowledged messages per STOMP subscription (ack client modes) before the client is cut off")
	fs.IntVar(&lim.UnackedBytes, "stomp-unacked-bytes", 4<<20, "data bytes of those unacknowledged messages")
	fs.DurationVar(&lim.FirstFrameTimeout, "first-frame-timeout", 0, "time from a STOMP upgrade to its CONNECT frame (0 = 10s)")
	fs.DurationVar(&lim.BodyTimeout, "body-timeout", 0, "time to read one request body (0 = 10s)")
	fs.Float64Var(&lim.HTTPPubRate, "http-pub-rate", 100, "HTTP publishes per second per user, or per address when anonymous (-1 = unlimited)")
	fs.IntVar(&lim.HTTPPubBurst, "http-pub-burst", 0, "HTTP publish burst (0 = 2 x http-pub-rate, at least 10)")
	fs.IntVar(&lim.MaxConns, "max-conns", 10000, "streaming connections (WebSocket, STOMP, SSE, waiting long polls) in all (-1 = unlimited)")
	fs.IntVar(&lim.MaxConnsPerIP, "max-conns-per-ip", 2000, "connections (HTTP keep-alive ones, streaming ones and waiting long polls) per client address, an IPv6 /64 counting as one; at most half the open-file limit (-1 = unlimited)")
	fs.IntVar(&lim.MaxConnsPerUser, "max-conns-per-user", 500, "streaming connections per authenticated user (-1 = unlimited)")
	fs.DurationVar(&lim.HTTPIdleTimeout, "http-idle-timeout", 0, "close a keep-alive HTTP connection idle this long (0 = 30s)")
	fs.Float64Var(&lim.LoginRate, "login-rate", 2, "password checks (POST /api/login with --login-users) per second per client address and per user name, before bcrypt runs (-1 = unlimited)")
	fs.IntVar(&lim.LoginBurst, "login-burst", 10, "password check burst per address and per user")
	origins := fs.String("allowed-origins", "", "comma-separated browser origins besides the server's own host that may connect (scheme://host[:port], https://*.example.com, or *); open dev mode also allows localhost")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "", "serve /metrics and /lab on this address instead (empty: on --addr, and with auth on only to loopback clients)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) file: serve HTTPS and wss:// (with --tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	fs.IntVar(&cfg.Location.Groups, "location-groups", 1000, "location groups whose latest positions are kept for GET /cur/{group}")
	fs.IntVar(&cfg.Location.Members, "location-members", 10000, "members kept per location group")
	fs.IntVar(&cfg.Location.Bytes, "location-bytes", 4<<20, "position data kept per location group, in bytes")
	fs.DurationVar(&cfg.Location.MemberTTL, "location-member-ttl", 0, "a member's position older than this is dropped from its group (0 = 5m)")
	fs.DurationVar(&cfg.Seed.SSETimeout, "seed-sse-timeout", 0, "the seed route GET /location/sse/connect ends each stream cleanly after this long, like Spring's SseEmitter (0 = 30s, negative = never)")
	fs.DurationVar(&lim.SSEMaxAge, "sse-max-age", 0, "end each /api/sse stream cleanly after about this long, for proxies that cut long streams; clients resume with Last-Event-ID (0 = never)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 0, "graceful shutdown budget (0 = 5s)")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	ac := &cfg.Auth
	fs.StringVar(&ac.Secret, "auth-secret", os.Getenv("RTLAB_AUTH_SECRET"), "HMAC secret verifying HS256/384/512 tokens (default $RTLAB_AUTH_SECRET); with no secret, key or JWKS the server runs in open dev mode")
	fs.StringVar(&ac.PublicKeyFile, "auth-public-key", "", "PEM file of public keys verifying RS256/384/512 and ES256/384 tokens")
	fs.StringVar(&ac.JWKSURL, "auth-jwks", "", "URL of a JWKS whose keys verify RS/ES tokens (fetched at start, cached, refetched for an unknown kid at most every 30s)")
	fs.StringVar(&ac.Issuer, "auth-issuer", "", "required iss of tokens (empty: not checked)")
	fs.StringVar(&ac.Audience, "auth-audience", "", "required aud of tokens (empty: not checked)")
	fs.DurationVar(&ac.Leeway, "auth-leeway", 0, "clock skew tolerated on a token's exp, nbf and iat")
	fs.StringVar(&ac.LoginUsers, "login-users", "", "file of name:bcrypt-hash lines: POST /api/login checks these passwords (needs --auth-secret); without it login is off unless in open dev mode")
	fs.DurationVar(&ac.TokenTTL, "token-ttl", 0, "lifetime of tokens POST /api/login issues (0 = 24h)")
	fs.IntVar(&ac.MaxRevocations, "max-revocations", 100_000, "revoked tokens kept (each until it expires); a logout past it is refused")
	fs.IntVar(&ac.Cache, "auth-cache", 10_000, "verified tokens remembered (each for a minute at most, never past its exp), so a token sent with every poll is not checked every time (0 = none)")
	fs.IntVar(&cfg.ChatMaxBytes, "chat-max", 4<<10, "largest chat message in bytes")
	fs.IntVar(&cfg.ChatMaxMembers, "chat-max-members", 1000, "members (and invited users) per chat room")
	fs.IntVar(&cfg.ChatMaxRooms, "chat-max-rooms", 1000, "chat rooms one connection may have entered; an ENTER past it is refused")
	fs.DurationVar(&cfg.ChatIdle, "chat-idle", 0, "a chat room's in-memory view unused this long is dropped; its state stays in the store (0 = 10m)")
	privateRooms := fs.String("private-rooms", "", "comma-separated topic prefixes (e.g. chat/private/) whose chat rooms are members-only")
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "directory for durable history (empty: keep everything in memory)")
	durable := fs.String("durable", "chat/", "comma-separated topic prefixes whose history is durable: kept across restarts, never expiring by time, archived")
	fs.IntVar(&cfg.DurableHistory, "durable-history", 1000, "publications kept per durable topic in the live window (the broker's)")
	fs.StringVar(&cfg.Archive, "archive", "", "archive of durable topics beyond the window: embedded (archive.db in --data-dir), off, or postgres://user:pass@host:port/db shared by every node; empty = embedded with --broker memory, off with a shared broker")
	fs.StringVar(&cfg.ArchiveRetention, "archive-retention", "", "what the archive keeps: empty or 0 = everything, a count per topic (100000), or an age (720h, 30d)")
	fs.IntVar(&cfg.ArchiveQueue, "archive-queue", 100_000, "publications waiting to be archived before new ones are left to the sweeps")
	fs.DurationVar(&cfg.ArchiveSweep, "archive-sweep", 0, "how often each node checks the broker's window for publications nobody archived (0 = 30s)")
	fs.DurationVar(&cfg.ArchiveGrace, "archive-grace", 0, "how old a publication must be before a sweep archives it for the node that acknowledged it (0 = 10s)")
	fs.StringVar(&cfg.ResultsDir, "results-dir", "bench-results", "folder of bench results listed by the page at /lab")
	fs.StringVar(&cfg.APIKey, "api-key", os.Getenv("RTLAB_API_KEY"), "key of the server API for backends, sent as Authorization: apikey KEY (default $RTLAB_API_KEY); empty leaves the API off")
	presence := fs.Bool("presence", true, "track who is connected to each topic (GET /api/topics/{topic}/presence, join/leave events)")
	fs.DurationVar(&cfg.PresenceRefresh, "presence-refresh", 0, "how often a node resends its presence entries to the others; entries expire after three missed refreshes (0 = 5s)")
	// What each value must be; durations not named here must not be negative (0: the default).
	fs.rule(atLeast(1), "max-frame", "queue-bytes", "max-subs", "stomp-tx-frames", "stomp-tx-bytes",
		"stomp-tx-max", "stomp-unacked", "stomp-unacked-bytes", "location-groups", "location-members",
		"location-bytes", "max-revocations", "chat-max", "chat-max-members", "chat-max-rooms", "durable-history", "archive-queue")
	fs.rule(between(1, 1_000_000), "history-size")
	fs.rule(atLeast(0), "msg-burst", "op-burst", "http-pub-burst", "login-burst", "auth-cache")
	fs.rule(unlimitedOrAtLeast(1), "max-conns", "max-conns-per-ip", "max-conns-per-user", "history-max-bytes", "max-topics", "durable-max-bytes")
	fs.rule(rateRule, "msg-rate", "op-rate", "http-pub-rate", "login-rate")
	fs.rule(anyDuration, "seed-sse-timeout")
	fs.rule(hostPort(false), "addr")
	fs.rule(hostPort(true), "admin-addr", "amqp-direct")
	fs.rule(oneOf("debug", "info", "warn", "error"), "log-level")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if len(fs.positional) > 0 {
		fmt.Fprintf(stderr, "rtlab serve: unexpected argument %q; all settings are flags (rtlab serve -h)\n", fs.positional[0])
		return 2
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(logLevel)) // checked by its rule
	for _, p := range strings.Split(*privateRooms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.PrivateRooms = append(cfg.PrivateRooms, p)
		}
	}
	for _, p := range strings.Split(*durable, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Durable = append(cfg.Durable, p)
		}
	}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	cfg.PresenceOff = !*presence
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
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "rtlab serve: %v\n", err)
		return 1
	}
	return 0
}

// explainBusy replaces bbolt's "timeout" when another process holds a file of dataDir with
// which process that is.
func explainBusy(err error, dataDir string) error {
	if dataDir == "" || !errors.Is(err, berrors.ErrTimeout) {
		return err
	}
	for _, name := range []string{"rtlab.db", "state.db", "archive.db"} {
		path := filepath.Join(dataDir, name)
		if who := lockHolder(path); who != "" {
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
