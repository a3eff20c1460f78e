package transporttest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/bench"
	"github.com/rtlab/rtlab/internal/metrics"
	"github.com/rtlab/rtlab/internal/transport"
	tt "github.com/rtlab/rtlab/internal/transport/transporttest"
)

// TestEveryKindEverywhere: every transport the server serves (transport.Kinds) has a metric
// label, a driver in the load lab and a client here (the kind it carries, for STOMP's other
// carriers), and nothing names a transport that is not one of them. A transport added in one
// place and forgotten in another fails here; ARCHITECTURE.md ("Adding to it") lists the files.
func TestEveryKindEverywhere(t *testing.T) {
	benchName := func(k string) string { return strings.ReplaceAll(k, "_", "-") }
	driven := append(bench.Transports(), bench.TransportSTOMPTCP, bench.TransportSockJS)
	for _, k := range transport.Kinds {
		if !slices.Contains(metrics.Transports, k) {
			t.Errorf("transport %s has no metric label: add it to metrics.Transports", k)
		}
		if !slices.Contains(driven, benchName(k)) {
			t.Errorf("transport %s has no driver in the load lab: add %q to internal/bench (Transports, newCell)", k, benchName(k))
		}
		client := k
		if carried, ok := transport.Carries[k]; ok {
			client = carried
		}
		if !slices.Contains(tt.Kinds, tt.Kind(client)) {
			t.Errorf("transport %s has no transporttest client: add it to transporttest.Kinds and New", k)
		}
	}
	for _, l := range metrics.Transports {
		if !slices.Contains(transport.Kinds, l) {
			t.Errorf("metric label %s names no transport.Kinds entry", l)
		}
	}
	for _, d := range driven {
		if !slices.ContainsFunc(transport.Kinds, func(k string) bool { return benchName(k) == d }) {
			t.Errorf("the load lab drives %s, which names no transport.Kinds entry", d)
		}
	}
	for _, k := range tt.Kinds {
		if !slices.Contains(transport.Kinds, string(k)) {
			t.Errorf("transporttest client %s names no transport.Kinds entry", k)
		}
	}
}
