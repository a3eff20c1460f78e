package peers

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/results"
)

// CentrifugoVersion is the Centrifugo release the lab is written against and CI installs
// (go install github.com/centrifugal/centrifugo/v6@CentrifugoVersion).
const CentrifugoVersion = "v6.9.1"

// CentrifugoBinary finds the centrifugo executable: bin (--centrifugo-bin), else PATH, else
// what `make peers` installed into the peer cache.
func CentrifugoBinary(bin, cache string) (string, error) {
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", setupErr("--centrifugo-bin", "%v", err)
		}
		// Absolute: the server runs in a directory of its own, where a relative path means another file.
		return filepath.Abs(bin)
	}
	if p, err := exec.LookPath("centrifugo"); err == nil {
		return filepath.Abs(p)
	}
	p := filepath.Join(cache, "centrifugo-"+CentrifugoVersion, "centrifugo")
	if _, err := os.Stat(p); err == nil {
		return filepath.Abs(p)
	}
	return "", setupErr("--server", "centrifugo: no centrifugo in PATH or %s; install it (GOBIN=%s go install github.com/centrifugal/centrifugo/v6@%s, or make peers) or give --centrifugo-bin",
		p, filepath.Dir(p), CentrifugoVersion)
}

// CentrifugoVersionOf says which Centrifugo bin is: a release build knows its version, one built
// with go install says 0.0.0 but carries its module version.
func CentrifugoVersionOf(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return "Centrifugo " + strings.TrimPrefix(bi.Main.Version, "v")
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "Centrifugo (version unknown)"
	}
	return strings.TrimSpace(string(out))
}

// CentrifugoSettings are the settings of a spawned Centrifugo, taken from the run's.
type CentrifugoSettings struct {
	Port        int    // set by StartCentrifugo
	Engine      string // "memory" or a redis:// URL
	HistorySize int
	HistoryTTL  time.Duration
	Secret      string // HMAC key of connection tokens
	Insecure    bool   // clients connect without a token (rtlab's open dev mode)
	APIKey      string
}

// CentrifugoConfig writes Centrifugo v6's config.json for s: the engine, history and recovery
// as rtlab keeps them, clients allowed to subscribe and publish in every channel, the HTTP API
// (the SSE users' publish path), unidirectional SSE, /health and /metrics.
func CentrifugoConfig(s CentrifugoSettings) ([]byte, error) {
	engine := map[string]any{"type": "memory"}
	if s.Engine != "memory" {
		engine = map[string]any{"type": "redis", "redis": map[string]any{"address": []string{s.Engine}}}
	}
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": s.Port},
		"log":         map[string]any{"level": "error"},
		"engine":      engine,
		"client": map[string]any{
			"insecure":        s.Insecure,
			"token":           map[string]any{"hmac_secret_key": s.Secret},
			"allowed_origins": []string{"*"},
		},
		"channel": map[string]any{
			"without_namespace": map[string]any{
				"history_size":               s.HistorySize,
				"history_ttl":                s.HistoryTTL.String(),
				"force_recovery":             true,
				"allow_subscribe_for_client": true,
				"allow_publish_for_client":   true,
			},
		},
		"http_api":   map[string]any{"key": s.APIKey},
		"uni_sse":    map[string]any{"enabled": true},
		"health":     map[string]any{"enabled": true},
		"prometheus": map[string]any{"enabled": true},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// StartCentrifugo starts bin, a Centrifugo node, on a free port of 127.0.0.1 with settings s
// and waits until /health answers.
func StartCentrifugo(ctx context.Context, bin string, s CentrifugoSettings, logw io.Writer) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	s.Port = port
	cfg, err := CentrifugoConfig(s)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rtlab-bench-centrifugo-")
	if err != nil {
		return nil, fmt.Errorf("creating Centrifugo's working directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	srv, err := launch{kind: results.KindCentrifugo, bin: bin, args: []string{"--config", "config.json"}, env: os.Environ(), dir: dir, addr: addr,
		ready: func(ctx context.Context, s *Server) error { return ProbeStatus(ctx, s.Addr, "/health") }}.start(ctx, logw)
	if srv != nil {
		srv.Metrics = srv.Addr
	}
	return srv, err
}
