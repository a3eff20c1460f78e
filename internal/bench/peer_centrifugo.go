package bench

import (
	"bufio"
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

	"github.com/gobwas/ws"

	"github.com/rtlab/rtlab/internal/results"
)

// CentrifugoVersion is the Centrifugo release the lab is written against and CI installs
// (go install github.com/centrifugal/centrifugo/v6@CentrifugoVersion).
const CentrifugoVersion = "v6.9.1"

// centrifugoBinary finds the centrifugo executable: --centrifugo-bin, else PATH, else what
// `make peers` installed into the peer cache.
func (o *Options) centrifugoBinary() (string, error) {
	if o.CentrifugoBin != "" {
		if _, err := os.Stat(o.CentrifugoBin); err != nil {
			return "", usageErr("--centrifugo-bin", "%v", err)
		}
		// Absolute: the server runs in a directory of its own, where a relative path means another file.
		return filepath.Abs(o.CentrifugoBin)
	}
	if p, err := exec.LookPath("centrifugo"); err == nil {
		return filepath.Abs(p)
	}
	p := filepath.Join(o.peerCache(), "centrifugo-"+CentrifugoVersion, "centrifugo")
	if _, err := os.Stat(p); err == nil {
		return filepath.Abs(p)
	}
	return "", usageErr("--server", "centrifugo: no centrifugo in PATH or %s; install it (GOBIN=%s go install github.com/centrifugal/centrifugo/v6@%s, or make peers) or give --centrifugo-bin",
		p, filepath.Dir(p), CentrifugoVersion)
}

// centrifugoVersion says which Centrifugo bin is: a release build knows its version, one built
// with go install says 0.0.0 but carries its module version.
func centrifugoVersion(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return "Centrifugo " + strings.TrimPrefix(bi.Main.Version, "v")
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "Centrifugo (version unknown)"
	}
	return strings.TrimSpace(string(out))
}

// cfSettings are the settings of a spawned Centrifugo, taken from the run's.
type cfSettings struct {
	port        int
	engine      string // "memory" or a redis:// URL
	historySize int
	historyTTL  time.Duration
	secret      string // HMAC key of connection tokens
	insecure    bool   // clients connect without a token (rtlab's open dev mode)
	apiKey      string
}

// centrifugoConfig writes Centrifugo v6's config.json for s: the engine, history and recovery
// as rtlab keeps them, clients allowed to subscribe and publish in every channel, the HTTP API
// (the SSE users' publish path), unidirectional SSE, /health and /metrics.
func centrifugoConfig(s cfSettings) ([]byte, error) {
	engine := map[string]any{"type": "memory"}
	if s.engine != "memory" {
		engine = map[string]any{"type": "redis", "redis": map[string]any{"address": []string{s.engine}}}
	}
	cfg := map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": s.port},
		"log":         map[string]any{"level": "error"},
		"engine":      engine,
		"client": map[string]any{
			"insecure":        s.insecure,
			"token":           map[string]any{"hmac_secret_key": s.secret},
			"allowed_origins": []string{"*"},
		},
		"channel": map[string]any{
			"without_namespace": map[string]any{
				"history_size":               s.historySize,
				"history_ttl":                s.historyTTL.String(),
				"force_recovery":             true,
				"allow_subscribe_for_client": true,
				"allow_publish_for_client":   true,
			},
		},
		"http_api":   map[string]any{"key": s.apiKey},
		"uni_sse":    map[string]any{"enabled": true},
		"health":     map[string]any{"enabled": true},
		"prometheus": map[string]any{"enabled": true},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// rtlabHistory returns the history size and TTL the rtlab servers of the run keep: rtlab's
// defaults, or what --server-args sets. Centrifugo gets the same.
func rtlabHistory(args []string) (size int, ttl time.Duration) {
	size, ttl = 100, 10*time.Minute
	for i := 0; i < len(args); i++ {
		name, val, ok := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !ok && i+1 < len(args) && (name == "history-size" || name == "history-ttl") {
			val = args[i+1]
			i++
		}
		switch name {
		case "history-size":
			if n, err := strconv.Atoi(val); err == nil && n > 0 {
				size = n
			}
		case "history-ttl":
			if d, err := time.ParseDuration(val); err == nil && d > 0 {
				ttl = d
			}
		}
	}
	return size, ttl
}

// startCentrifugo starts a Centrifugo node on a free port of 127.0.0.1 with the run's settings
// on broker (memory, or a Redis URL) and waits until /health answers.
func (o *Options) startCentrifugo(ctx context.Context, broker string, logw io.Writer) (*server, error) {
	bin, err := o.centrifugoBinary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	size, ttl := rtlabHistory(o.ServerArgs)
	cfg, err := centrifugoConfig(cfSettings{
		port: port, engine: brokerURL(broker), historySize: size, historyTTL: ttl,
		secret: string(o.cfSecret), insecure: o.AuthSecret == "", apiKey: o.cfKey,
	})
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
	s, err := launch{kind: results.KindCentrifugo, bin: bin, args: []string{"--config", "config.json"}, env: os.Environ(), dir: dir, addr: addr,
		ready: func(ctx context.Context, s *server) error { return probeStatus(ctx, s.addr, "/health") }}.start(ctx, logw)
	if s != nil {
		s.metrics = s.addr
	}
	return s, err
}

// probeCentrifugo connects to a Centrifugo target over its WebSocket protocol and waits for
// the connect reply.
func probeCentrifugo(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, br, _, err := ws.Dialer{Timeout: 3 * time.Second}.Dial(ctx, "ws://"+o.targetHost+"/connection/websocket")
	if err != nil {
		return err
	}
	defer conn.Close()
	s := &wsStream{conn: conn, br: bufio.NewReaderSize(conn, streamBufSize)}
	if br != nil {
		ws.PutReader(br)
		return fmt.Errorf("websocket: unexpected data after the handshake")
	}
	token := ""
	if len(o.cfSecret) > 0 {
		token = cfToken(o.cfSecret, "rtlab-bench-probe", nil, time.Now().Add(time.Minute).Unix())
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	if _, err := conn.Write(appendClientFrame(nil, ws.OpText, appendCfConnect(nil, token))); err != nil {
		return err
	}
	p, err := s.next(func([]byte) error { return nil })
	if err != nil {
		return err
	}
	var m cfMsg
	if err := parseCf(p, &m); err != nil {
		return fmt.Errorf("connect reply %.80q: %w", p, err)
	}
	if m.err {
		return fmt.Errorf("connect refused: %d %s", m.errCode, m.errMsg)
	}
	if !m.connect {
		return fmt.Errorf("connect reply %.80q", p)
	}
	return nil
}
