package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rtlab/rtlab/internal/procstat"
	"github.com/rtlab/rtlab/internal/results"
)

// targetCost samples what a --target costs, as a spawned server is sampled: the process trees
// of --target-pid, or else a Prometheus endpoint (--target-metrics, or an rtlab or Centrifugo
// target's /metrics).
type targetCost struct {
	trees   []*procstat.Tree
	pids    []string
	url     string // the endpoint; "" when there is none
	client  *http.Client
	cpu     float64 // CPU seconds so far, as the endpoint says (or as integrated from a usage ratio)
	first   float64 // cpu at the first sample
	at      time.Time
	sampled bool
	jvm     bool // memory is Micrometer's jvm_memory_used_bytes, not an RSS
}

// newTargetCost sets up the sampling of o's target of kind.
func newTargetCost(o *Options, kind string) *targetCost {
	t := &targetCost{url: o.TargetMetrics, client: o.httpClient(800 * time.Millisecond)}
	for _, p := range o.TargetPIDs {
		t.trees = append(t.trees, procstat.NewTree(p))
	}
	t.pids = o.TargetPIDs
	if t.url == "" && (kind == results.KindRTLab || kind == results.KindCentrifugo) {
		scheme := "http://"
		if o.tlsConf != nil {
			scheme = "https://"
		}
		t.url = scheme + o.targetHost + string(o.withQuery([]byte("/metrics")))
	}
	return t
}

// local reports whether the target's processes are sampled from /proc.
func (t *targetCost) local() bool { return len(t.trees) > 0 }

// sample reads the target's CPU (percent of one core since the last sample), RSS, goroutines
// and threads; ok is false when nothing could be read.
func (t *targetCost) sample(ctx context.Context, now time.Time) (cpu float64, rss uint64, gor, threads int64, ok bool) {
	if t.local() {
		tab := procstat.Table()
		for _, tr := range t.trees {
			if c, r, th, live := tr.Sample(tab, now); live {
				cpu, rss, threads, ok = cpu+c, rss+r, threads+th, true
			}
		}
		if t.url != "" {
			if pm, err := t.scrape(ctx); err == nil {
				gor = pm.goroutines
			}
		}
		return cpu, rss, gor, threads, ok
	}
	if t.url == "" {
		return 0, 0, 0, 0, false
	}
	pm, err := t.scrape(ctx)
	if err != nil || !pm.hasCPU {
		return 0, 0, pm.goroutines, 0, false
	}
	t.jvm = pm.jvm
	return t.rate(pm, now), pm.rss, pm.goroutines, 0, true
}

// note says where the target's cost came from, for the run's notes.
func (t *targetCost) note() string {
	switch {
	case t.local():
		return "the target's cost is that of processes " + strings.Join(t.pids, ", ") + " and their children, from /proc"
	case t.jvm:
		return "the target's cost is from " + t.url + ": Micrometer's process_cpu_usage (of all cores) and its JVM memory in use (jvm_memory_used_bytes, summed over areas) standing for RSS"
	}
	return "the target's cost is from " + t.url
}

// rate turns the endpoint's figures into percent of one core since the last sample, and keeps
// the cumulative CPU seconds.
func (t *targetCost) rate(pm promProcess, now time.Time) float64 {
	cpu := pm.cpuSeconds
	if !pm.cumulative { // a usage ratio: integrate it over the interval
		cpu = t.cpu
		if t.sampled {
			cpu += pm.usage * now.Sub(t.at).Seconds()
		}
	}
	p := 0.0
	if !t.sampled {
		t.first, t.sampled = cpu, true
	} else if dt := now.Sub(t.at).Seconds(); dt > 0 {
		p = max(0, 100*(cpu-t.cpu)/dt)
	}
	t.cpu, t.at = cpu, now
	return p
}

// total is the CPU time the target used over the run.
func (t *targetCost) total() time.Duration {
	if t.local() {
		var d time.Duration
		for _, tr := range t.trees {
			d += tr.Total
		}
		return d
	}
	return time.Duration((t.cpu - t.first) * float64(time.Second))
}

// promProcess is what a Prometheus endpoint says about its process.
type promProcess struct {
	cpuSeconds float64 // process_cpu_seconds_total
	cumulative bool    // cpuSeconds is there; else usage is
	usage      float64 // cores busy: Micrometer's process_cpu_usage × system_cpu_count
	hasCPU     bool
	rss        uint64 // process_resident_memory_bytes, or the sum of jvm_memory_used_bytes
	jvm        bool   // rss is the JVM's memory in use
	goroutines int64
}

// scrape reads the endpoint once.
func (t *targetCost) scrape(ctx context.Context) (promProcess, error) {
	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return promProcess{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := t.client.Do(req)
	if err != nil {
		return promProcess{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return promProcess{}, fmt.Errorf("GET %s: HTTP %d", t.url, resp.StatusCode)
	}
	return parseProm(io.LimitReader(resp.Body, 8<<20))
}

// parseProm reads the process figures of a text exposition: the standard process collector's,
// or Spring Boot Micrometer's (a CPU ratio of all cores, the JVM's memory areas).
func parseProm(r io.Reader) (promProcess, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return promProcess{}, fmt.Errorf("reading the metrics: %w", err)
	}
	var pm promProcess
	if v, ok := promSum(fams["process_cpu_seconds_total"]); ok {
		pm.cpuSeconds, pm.cumulative, pm.hasCPU = v, true, true
	} else if v, ok := promSum(fams["process_cpu_usage"]); ok {
		cores, ok := promSum(fams["system_cpu_count"])
		if !ok || cores < 1 {
			cores = 1
		}
		pm.usage, pm.hasCPU = v*cores, true
	}
	if v, ok := promSum(fams["process_resident_memory_bytes"]); ok {
		pm.rss = uint64(v)
	} else if v, ok := promSum(fams["jvm_memory_used_bytes"]); ok {
		pm.rss, pm.jvm = uint64(v), true
	}
	if v, ok := promSum(fams["go_goroutines"]); ok {
		pm.goroutines = int64(v)
	}
	return pm, nil
}

// promSum adds the values of every series of a gauge, counter or untyped family.
func promSum(f *dto.MetricFamily) (float64, bool) {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		switch {
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, true
}
