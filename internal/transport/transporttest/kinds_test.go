package transporttest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/k6export"
	"github.com/rtlab/rtlab/internal/metrics"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
	"github.com/rtlab/rtlab/internal/transports"
)

// TestEveryKindEverywhere ties the transport table (internal/transports) to what reads it: every
// row has a metric series from the start, a driver in the load lab, a client here (the session
// it carries, for STOMP's other carriers), a label and a colour of its own; and nothing names a
// transport that is not a row. ARCHITECTURE.md ("Adding to it") lists the files of a transport.
func TestEveryKindEverywhere(t *testing.T) {
	rows := transports.All()
	driven := append(bench.Transports(), bench.TransportSTOMPTCP, bench.TransportSockJS)
	series := metricSeries(t)
	colours := map[string]string{}
	for _, r := range rows {
		if !series[r.Name] {
			t.Errorf("transport %s has no rtlab_connections series: metrics.New registers one per row", r.Name)
		}
		if !slices.Contains(driven, transports.LabName(r.Name)) {
			t.Errorf("transport %s has no driver in the load lab: add %q to internal/bench (newCell)", r.Name, transports.LabName(r.Name))
		}
		if !slices.Contains(tt.Kinds, tt.Kind(r.Wire)) {
			t.Errorf("transport %s carries %s, which has no transporttest client (New)", r.Name, r.Wire)
		}
		if r.Label == "" || r.Colour == "" {
			t.Errorf("transport %s needs a label and a colour for reports", r.Name)
		}
		if other, dup := colours[r.Colour]; dup {
			t.Errorf("transports %s and %s share the colour %s", other, r.Name, r.Colour)
		}
		colours[r.Colour] = r.Name
	}
	named := slices.Concat(driven, k6export.Speakable())
	for _, k := range tt.Kinds {
		named = append(named, string(k))
	}
	for _, n := range named {
		if _, _, ok := transports.Lookup(transports.FromLab(n)); !ok {
			t.Errorf("%s names no row of the transport table (internal/transports)", n)
		}
	}
}

// metricSeries returns the transport label values of a new server's rtlab_connections.
func metricSeries(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.New(reg, "test")
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	series := map[string]bool{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "rtlab_connections") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "transport" {
					series[l.GetValue()] = true
				}
			}
		}
	}
	return series
}
