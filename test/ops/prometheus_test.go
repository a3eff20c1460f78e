package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
)

// prometheusBin finds Prometheus and promtool (Debian's prometheus package), skipping the test
// without them unless RTLAB_REQUIRE_PROMETHEUS is set (CI installs them).
func prometheusBin(t *testing.T) (prometheus, promtool string) {
	t.Helper()
	p, err1 := exec.LookPath("prometheus")
	pt, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		if os.Getenv("RTLAB_REQUIRE_PROMETHEUS") != "" {
			t.Fatal("prometheus or promtool not installed (apt-get install prometheus), and RTLAB_REQUIRE_PROMETHEUS is set")
		}
		t.Skip("prometheus or promtool not installed (apt-get install prometheus); skipping the Prometheus test")
	}
	return p, pt
}

// TestPrometheusDashboard runs docs/prometheus.yml (promtool checks it; its targets replaced by
// two running nodes, one on memory and one on Redis, scraped every second) in a real
// Prometheus, and evaluates every query of the Grafana dashboard there as Grafana would: each
// must be valid PromQL and, unless it asks for one label value that may not have happened yet
// (a disconnect reason), return series.
func TestPrometheusDashboard(t *testing.T) {
	prom, promtool := prometheusBin(t)
	example := filepath.Join(root, "docs", "prometheus.yml")
	if out, err := exec.Command(promtool, "check", "config", example).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config docs/prometheus.yml: %v\n%s", err, out)
	}
	redis := brokertest.StartRedis(t)
	nodes := []*servertest.Proc{servertest.Start(t, bin), servertest.Start(t, bin, "--broker", redis.URL)}
	var targets []string
	for _, n := range nodes {
		exercise(t, n)
		targets = append(targets, n.Addr)
	}

	cfg, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	// The example's own targets and interval, replaced: the rest (job, path) is what is tested.
	text := regexp.MustCompile(`(?m)^(\s*)- 127\.0\.0\.1:808[0-9]\n`).ReplaceAllString(string(cfg), "")
	text = strings.Replace(text, "- targets:\n", "- targets: ['"+strings.Join(targets, "', '")+"']\n", 1)
	text = strings.ReplaceAll(text, "scrape_interval: 15s", "scrape_interval: 1s")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("the test's config: %v\n%s\n%s", err, out, text)
	}
	addr := servertest.FreeAddr(t)
	cmd := exec.Command(prom, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus log:\n%s", b)
		}
	})

	query := func(q string) (int, error) {
		res, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		var ans struct {
			Status, Error string
			Data          struct{ Result []json.RawMessage }
		}
		if err := json.NewDecoder(res.Body).Decode(&ans); err != nil {
			return 0, err
		}
		if ans.Status != "success" {
			return 0, fmt.Errorf("%s: %s", ans.Status, ans.Error)
		}
		return len(ans.Data.Result), nil
	}
	// Rates need two scrapes of both nodes in their window.
	eventually.Nil(t, 60*time.Second, func() error {
		n, err := query(`count_over_time(up{job="rtlab"}[1m]) >= 3`)
		if err == nil && n == 2 {
			return nil
		}
		return fmt.Errorf("prometheus has not scraped both nodes three times yet (%d, %v)", n, err)
	})
	if n, err := query(`up{job="rtlab"} == 1`); err != nil || n != 2 {
		t.Fatalf("up{job=rtlab}: %d nodes up, err %v; want 2", n, err)
	}

	qs := readDashboard(t).queries()
	var exprs []string
	for q := range qs {
		if !strings.HasPrefix(q, "label_values(") { // Grafana's, checked by TestDashboardSeriesExist
			exprs = append(exprs, q)
		}
	}
	sort.Strings(exprs)
	optional := regexp.MustCompile(`\b(reason|code|route|path)\s*=\s*"`)
	for _, q := range exprs {
		// As Grafana sends it with "All" nodes and transports picked.
		promQL := strings.NewReplacer(`$instance`, ".*", `$transport`, ".*", `$__rate_interval`, "1m").Replace(q)
		n, err := query(promQL)
		switch {
		case err != nil:
			t.Errorf("%s: %q: %v", qs[q], promQL, err)
		case n == 0 && !optional.MatchString(q):
			t.Errorf("%s: %q returned no series", qs[q], promQL)
		}
	}
}
