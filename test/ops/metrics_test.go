// Package ops checks, against the real binary, what operators and new users rely on without
// reading the code: the README's tour runs as written, every series on /metrics is documented,
// and the Grafana dashboard and the Prometheus example query series that exist.
package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rtlab/rtlab/internal/broker/brokertest"
	"github.com/rtlab/rtlab/internal/eventually"
	"github.com/rtlab/rtlab/internal/servertest"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// bin is the rtlab binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) { servertest.Main(m, &bin) }

// root is the checkout, where README.md and docs/ are.
const root = "../.."

// families reads p's /metrics: metric family name → its family.
func families(t *testing.T, p *servertest.Proc) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(p.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// exercise drives one of each thing a dashboard shows on p, so that the series born with their
// first event exist: a WebSocket subscriber that receives a publication and leaves, an HTTP
// publish, a refused poll.
func exercise(t *testing.T, p *servertest.Proc) {
	t.Helper()
	p.Await("/readyz", http.StatusOK, 60*time.Second) // a RabbitMQ node replays its log first
	c := tt.DialWS(t, p.WS("/api/ws"))
	c.Send(`{"op":"subscribe","topic":"ops/probe"}`)
	c.Op("subscribed")
	post(t, p.URL()+"/api/publish/ops/probe", `{"n":1}`, http.StatusOK)
	c.Op("message")
	_ = c.Goodbye()
	get(t, p.URL()+"/api/poll/ops/probe?since=x", http.StatusBadRequest)
	// The close is counted once the server has read it.
	eventually.Nil(t, 10*time.Second, func() error {
		if _, ok := families(t, p)["rtlab_disconnects_total"]; !ok {
			return fmt.Errorf("no rtlab_disconnects_total after the WebSocket closed")
		}
		return nil
	})
}

func post(t *testing.T, url, body string, want int) []byte {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	return answer(t, "POST "+url, res, err, want)
}

func get(t *testing.T, url string, want int) []byte {
	t.Helper()
	res, err := http.Get(url)
	return answer(t, "GET "+url, res, err, want)
}

func answer(t *testing.T, what string, res *http.Response, err error, want int) []byte {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s: %s %s, want %d", what, res.Status, b, want)
	}
	return b
}

// TestMetricsDocumented checks that every rtlab series a server exposes, on every broker this
// machine has (memory always; Redis, NATS and RabbitMQ when installed, which CI requires), has
// its row in docs/serve.md, and follows the conventions: counters end in _total, code holds a
// status code, rtlab_build_info is there, delivery lag is by transport.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "serve.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name  string
		start func(testing.TB) *brokertest.Server
	}{
		{"memory", nil}, {"redis", brokertest.StartRedis}, {"nats", brokertest.StartNATS}, {"rabbitmq", brokertest.StartRabbit},
	} {
		t.Run(b.name, func(t *testing.T) { // a missing broker skips only its subtest
			var args []string
			if b.start != nil {
				args = []string{"--broker", b.start(t).URL}
			}
			p := servertest.Start(t, bin, args...)
			exercise(t, p)
			checkDocumented(t, families(t, p), doc)
		})
	}
}

func checkDocumented(t *testing.T, fams map[string]*dto.MetricFamily, doc []byte) {
	t.Helper()
	for fam, mf := range fams {
		if !strings.HasPrefix(fam, "rtlab_") {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+fam)) {
			t.Errorf("%s is on /metrics but not in docs/serve.md", fam)
		}
		if mf.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(fam, "_total") {
			t.Errorf("counter %s does not end in _total", fam)
		}
	}
	for _, m := range fams["rtlab_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" && !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(l.GetValue()) {
				t.Errorf("rtlab_http_requests_total code=%q is not a status code", l.GetValue())
			}
		}
	}
	if bi := fams["rtlab_build_info"]; bi == nil || len(bi.GetMetric()) != 1 || bi.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("rtlab_build_info missing or not 1: %v", bi)
	}
	if lag := fams["rtlab_delivery_lag_seconds"]; lag == nil || !labelNames(lag)["transport"] {
		t.Errorf("rtlab_delivery_lag_seconds has no transport label")
	}
}

// labelNames is every label name on any series of mf.
func labelNames(mf *dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			names[l.GetName()] = true
		}
	}
	return names
}

// dashboard is what the test reads of docs/grafana/rtlab.json.
type dashboard struct {
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
	Templating struct {
		List []struct {
			Name       string
			Definition string
		}
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "grafana", "rtlab.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("docs/grafana/rtlab.json: %v", err)
	}
	return d
}

// queries is every PromQL expression of the dashboard, with the panel it belongs to.
func (d dashboard) queries() map[string]string {
	q := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q[tg.Expr] = p.Title
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			q[v.Definition] = "variable $" + v.Name
		}
	}
	return q
}

var (
	selectorRE = regexp.MustCompile(`\b((?:rtlab|process|go)_[a-zA-Z0-9_]+)\s*(\{[^}]*\})?`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	byRE       = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	labelArgRE = regexp.MustCompile(`label_values\(\s*[a-zA-Z0-9_]+\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// scrapeLabels are added by Prometheus, not exposed by the server.
var scrapeLabels = map[string]bool{"instance": true, "job": true}

// sampleLabels maps every sample name on /metrics (histograms as _bucket, _sum and _count) to
// its label names.
func sampleLabels(fams map[string]*dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name, mf := range fams {
		labels := labelNames(mf)
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			withLE := map[string]bool{"le": true}
			for l := range labels {
				withLE[l] = true
			}
			out[name+"_bucket"] = withLE
			out[name+"_sum"], out[name+"_count"] = labels, labels
		case dto.MetricType_SUMMARY:
			withQ := map[string]bool{"quantile": true}
			for l := range labels {
				withQ[l] = true
			}
			out[name], out[name+"_sum"], out[name+"_count"] = withQ, labels, labels
		default:
			out[name] = labels
		}
	}
	return out
}

// TestDashboardSeriesExist checks every query of docs/grafana/rtlab.json against the /metrics
// of running servers (memory and, for the broker panels, Redis): each series it names exists,
// with every label it filters or groups by.
func TestDashboardSeriesExist(t *testing.T) {
	d := readDashboard(t)
	memory := servertest.Start(t, bin)
	exercise(t, memory)
	have := sampleLabels(families(t, memory))
	redis := brokertest.StartRedis(t) // skips without redis-server, unless RTLAB_REQUIRE_BROKERS
	onRedis := servertest.Start(t, bin, "--broker", redis.URL)
	exercise(t, onRedis)
	for name, labels := range sampleLabels(families(t, onRedis)) {
		if have[name] == nil {
			have[name] = labels
		}
	}
	checkQueries(t, d.queries(), have)
}

// checkQueries checks each query's series and labels against have.
func checkQueries(t *testing.T, queries map[string]string, have map[string]map[string]bool) {
	t.Helper()
	var exprs []string
	for q := range queries {
		exprs = append(exprs, q)
	}
	sort.Strings(exprs)
	for _, q := range exprs {
		panel := queries[q]
		sels := selectorRE.FindAllStringSubmatch(q, -1)
		if len(sels) == 0 {
			t.Errorf("%s: %q queries no rtlab, process or go series", panel, q)
		}
		union := map[string]bool{}
		for _, s := range sels {
			labels, ok := have[s[1]]
			if !ok {
				t.Errorf("%s: %s is not on /metrics (query %q)", panel, s[1], q)
				continue
			}
			for l := range labels {
				union[l] = true
			}
			for _, m := range matcherRE.FindAllStringSubmatch(s[2], -1) {
				if !labels[m[1]] && !scrapeLabels[m[1]] {
					t.Errorf("%s: %s has no label %q (query %q)", panel, s[1], m[1], q)
				}
			}
		}
		var grouped []string
		for _, by := range byRE.FindAllStringSubmatch(q, -1) {
			grouped = append(grouped, strings.Split(by[1], ",")...)
		}
		for _, m := range labelArgRE.FindAllStringSubmatch(q, -1) {
			grouped = append(grouped, m[1])
		}
		for _, l := range grouped {
			if l = strings.TrimSpace(l); l != "" && !union[l] && !scrapeLabels[l] {
				t.Errorf("%s: no series of %q has the label %q it groups by", panel, q, l)
			}
		}
	}
}

// sample is the value of the series of family name with the given labels on p's /metrics, 0
// when there is none.
func sample(t *testing.T, p *servertest.Proc, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range families(t, p)[name].GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			match = match && found
		}
		if match {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestRefusalCountedOnce checks a refused connection as an operator's alert would see it: one
// refusal, one HTTP answer with its status code.
func TestRefusalCountedOnce(t *testing.T) {
	p := servertest.Start(t, bin, "--max-conns", "1")
	tt.DialWS(t, p.WS("/api/ws"))
	if _, err := (tt.Dialer{}).TryWS(t.Context(), p.WS("/api/ws")); err == nil {
		t.Fatal("second connection accepted past --max-conns 1")
	}
	if n := sample(t, p, "rtlab_refused_total", map[string]string{"transport": "http", "reason": "server_full"}); n != 1 {
		t.Errorf("rtlab_refused_total{reason=server_full} = %v, want 1", n)
	}
	if n := sample(t, p, "rtlab_http_requests_total", map[string]string{"route": "/api/ws", "code": "503"}); n != 1 {
		t.Errorf("rtlab_http_requests_total{route=/api/ws,code=503} = %v, want 1", n)
	}
}
