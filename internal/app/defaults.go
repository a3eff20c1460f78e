package app

import (
	"time"

	"github.com/rtlab/rtlab/internal/archive"
	"github.com/rtlab/rtlab/internal/auth"
	amqpbroker "github.com/rtlab/rtlab/internal/broker/amqp"
	"github.com/rtlab/rtlab/internal/hub"
	"github.com/rtlab/rtlab/internal/location"
	"github.com/rtlab/rtlab/internal/seed"
	"github.com/rtlab/rtlab/internal/transport"
)

// Defaults is every setting's default, stated once: `rtlab serve`'s flag table takes its
// defaults from it (and -h and docs/serve.md show them), and New fills a zero setting from it.
// Settings whose zero value means something else (DataDir, Durable, Archive) hold the flag's
// default here and are taken as given by New.
func Defaults() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		Broker:          "memory",
		AMQPDirect:      "127.0.0.1:0",
		AMQPRetryIDs:    amqpbroker.DefaultRetryIDs,
		HistorySize:     hub.DefaultHistorySize,
		HistoryTTL:      hub.DefaultHistoryTTL,
		HistoryMaxBytes: DefaultHistoryMaxBytes,
		MaxTopics:       DefaultMaxTopics,
		DurableMaxBytes: DefaultDurableMaxBytes,
		Limits:          transport.DefaultLimits(),
		Seed:            seed.DefaultConfig(),
		ShutdownTimeout: 5 * time.Second,
		Auth:            AuthConfig{TokenTTL: auth.DefaultTTL, MaxRevocations: 100_000, Cache: 10_000},
		ChatMaxBytes:    4 << 10,
		ChatMaxMembers:  1000,
		ChatMaxRooms:    1000,
		ChatIdle:        10 * time.Minute,
		DataDir:         "./data",
		Durable:         []string{"chat/"},
		DurableHistory:  1000,
		ArchiveQueue:    archive.DefaultQueue,
		ArchiveSweep:    archive.DefaultSweep,
		ArchiveGrace:    archive.DefaultGrace,
		ResultsDir:      "bench-results",
		Location:        location.DefaultLimits(),
		PresenceRefresh: hub.DefaultPresenceRefresh,
		AppPrefix:       "/app",
		AppProxyTimeout: 5 * time.Second,
		AppProxyConns:   64,
	}
}

// orDefault sets *v to d when it is zero or less: a Config field left zero means its default.
func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
