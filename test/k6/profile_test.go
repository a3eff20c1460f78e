package k6

import (
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/rtlab/rtlab/internal/peers"
	"github.com/rtlab/rtlab/internal/servertest"
)

// envelopeServer is examples/targets/ws-envelope.yaml's shape, as a team would write it: raw
// WebSocket at /ws/location?group=G; every text frame reaches every member of G as
// {"type":"LOCATION","payload":<frame>}.
func envelopeServer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	groups := map[string]map[*member]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/location", func(w http.ResponseWriter, r *http.Request) {
		conn, _, _, err := ws.UpgradeHTTP(r, w)
		if err != nil {
			return
		}
		defer conn.Close()
		g, m := r.URL.Query().Get("group"), &member{conn: conn}
		mu.Lock()
		if groups[g] == nil {
			groups[g] = map[*member]bool{}
		}
		groups[g][m] = true
		mu.Unlock()
		defer func() { mu.Lock(); delete(groups[g], m); mu.Unlock() }()
		for {
			p, op, err := wsutil.ReadClientData(conn)
			if err != nil {
				return
			}
			if op != ws.OpText {
				continue
			}
			msg := []byte(`{"type":"LOCATION","payload":` + string(p) + `}`)
			mu.Lock()
			members := make([]*member, 0, len(groups[g]))
			for o := range groups[g] {
				members = append(members, o)
			}
			mu.Unlock()
			for _, o := range members {
				o.send(msg)
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type member struct {
	mu   sync.Mutex
	conn net.Conn
}

func (m *member) send(msg []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = wsutil.WriteServerText(m.conn, msg)
}

// profileWorkload is the small workload both generators run on a profile.
var profileWorkload = []string{"--users", "30", "--stages", "3s:PEAK,15s:PEAK,2s:0", "--interval", "1s", "--group-size", "10"}

// TestProfileSecondOpinion exports examples/targets/ws-envelope.yaml's workload for k6 and runs
// it, then the bench on the same workload, each against a fresh server of that shape: k6 must
// read no loss and a latency, and the two must count alike. Both latencies are logged (the
// figures for BENCHMARKS.md), not compared: this machine is shared.
func TestProfileSecondOpinion(t *testing.T) {
	k6 := k6Binary(t)
	if testing.Short() {
		t.Skip("-short: two runs of 20 s")
	}
	profile, _ := filepath.Abs(filepath.Join("..", "..", "examples", "targets", "ws-envelope.yaml"))
	dir := t.TempDir()
	export := exec.Command(bin, append([]string{"bench", "--export-k6", dir, "--target", "http://127.0.0.1:1", "--profile", profile}, profileWorkload...)...)
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	k := runK6At(t, k6, dir, "ws", envelopeServer(t).URL)
	lab := runLabAt(t, envelopeServer(t).URL, append([]string{"--profile", profile, "--transport", "ws"}, profileWorkload...))
	d := lab.Delivery
	t.Logf("ws-envelope: k6 expected %d received %d lost %d dup %d p50 %.2f p99 %.2f ms; bench expected %d received %d lost %d dup %d p50 %.2f p99 %.2f ms",
		k.expected, k.received, k.lost, k.dup, k.p50, k.p99, d.Expected, d.Received, d.Expected-d.Received, d.Duplicates, d.Latency.P50, d.Latency.P99)
	if k.received == 0 || k.lost != 0 || k.dup != 0 || k.errors != 0 || k.p50 <= 0 {
		t.Errorf("k6: received %d, lost %d, duplicates %d, protocol errors %d, p50 %.2f ms; want deliveries, no loss and a latency", k.received, k.lost, k.dup, k.errors, k.p50)
	}
	if d.Received == 0 || d.Received != d.Expected || d.Duplicates != 0 {
		t.Errorf("bench: expected %d, received %d, duplicates %d", d.Expected, d.Received, d.Duplicates)
	}
	// k6 counts a receipt only once its VU runs again and cannot see a loss at a sender's ends,
	// so the two agree closely, not exactly.
	if off := math.Abs(float64(k.received-d.Received)) / float64(max(d.Received, 1)); off > 0.05 {
		t.Errorf("received: k6 %d, bench %d: %.1f %% apart, want ≤ 5 %%", k.received, d.Received, off*100)
	}
}

// TestProfileExportOnRTLab runs the scripts exported from profiles of rtlab's own routes on
// every transport k6 speaks for a profile: STOMP frames, polling with and without a cursor,
// readiness by a message, a text delivery read by a regex. Each must read no loss.
func TestProfileExportOnRTLab(t *testing.T) {
	k6 := k6Binary(t)
	if testing.Short() {
		t.Skip("-short: five k6 runs of 12 s")
	}
	p := servertest.Start(t, bin, "--max-conns-per-ip", "-1", "--read-rate-per-ip", "-1", "--http-pub-rate", "-1", "--user-msg-rate", "-1")
	testdata := filepath.Join("..", "..", "internal", "bench", "testdata")
	for _, c := range []struct{ profile, transports string }{
		{"builtin:seed", "stomp"}, // its long poll has no cursor: what comes between two polls is lost
		{filepath.Join(testdata, "rtlab-api.yaml"), "ws,shortpoll,longpoll"},
		{filepath.Join(testdata, "seed-text.yaml"), "ws"},
	} {
		dir := t.TempDir()
		args := []string{"bench", "--export-k6", dir, "--target", p.URL(), "--profile", c.profile, "--transport", c.transports,
			"--users", "20", "--stages", "2s:PEAK,8s:PEAK,1s:0", "--interval", "1s", "--group-size", "10"}
		export := exec.Command(bin, args...)
		export.Env = append(os.Environ(), "RTLAB_TEST_STOMP_ADDR=127.0.0.1:1") // rtlab-api.yaml's stomp-tcp, not exported
		if out, err := export.CombinedOutput(); err != nil {
			t.Fatalf("export %s: %v\n%s", c.profile, err, out)
		}
		for _, tr := range strings.Split(c.transports, ",") {
			t.Run(filepath.Base(c.profile)+"-"+tr, func(t *testing.T) {
				k := runK6At(t, k6, dir, tr, p.URL())
				t.Logf("k6: expected %d received %d lost %d dup %d errors %d p50 %.2f p99 %.2f ms", k.expected, k.received, k.lost, k.dup, k.errors, k.p50, k.p99)
				if k.received == 0 || k.lost != 0 || k.dup != 0 || k.errors != 0 {
					t.Errorf("received %d, lost %d, duplicates %d, protocol errors %d; want deliveries and none lost", k.received, k.lost, k.dup, k.errors)
				}
			})
		}
	}
}

// TestProfileExportOnCentrifugo runs builtin:centrifugo's export against a real Centrifugo that
// pings every 2 s: batched replies read line by line, pings answered, no loss.
func TestProfileExportOnCentrifugo(t *testing.T) {
	k6 := k6Binary(t)
	if testing.Short() {
		t.Skip("-short: starts Centrifugo")
	}
	cf, err := peers.CentrifugoBinary("", filepath.Join("..", "..", ".cache"))
	if err != nil {
		t.Skipf("centrifugo: %v", err)
	}
	const secret = "k6-secret"
	t.Setenv("CENTRIFUGO_CLIENT_TOKEN_HMAC_SECRET_KEY", secret)
	t.Setenv("CENTRIFUGO_CLIENT_PING_INTERVAL", "2s")
	t.Setenv("CENTRIFUGO_CLIENT_PONG_TIMEOUT", "1s")
	s, err := peers.StartCentrifugo(t.Context(), cf, peers.CentrifugoSettings{
		Engine: "memory", HistorySize: 100, HistoryTTL: time.Minute, Secret: secret, APIKey: "unused",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	dir := t.TempDir()
	export := exec.Command(bin, "bench", "--export-k6", dir, "--target", "http://"+s.Addr, "--profile", "builtin:centrifugo",
		"--users", "30", "--stages", "2s:PEAK,8s:PEAK,1s:0", "--interval", "1s", "--group-size", "10")
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	k := runK6At(t, k6, dir, "ws", "http://"+s.Addr)
	t.Logf("k6: expected %d received %d lost %d dup %d errors %d p50 %.2f p99 %.2f ms", k.expected, k.received, k.lost, k.dup, k.errors, k.p50, k.p99)
	if k.received == 0 || k.lost != 0 || k.dup != 0 || k.errors != 0 {
		t.Errorf("received %d, lost %d, duplicates %d, protocol errors %d; want deliveries and none lost", k.received, k.lost, k.dup, k.errors)
	}
}
