package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/rtlab/rtlab/internal/results"
)

func TestParseThresholds(t *testing.T) {
	ts, err := ParseThresholds("p99<250ms, ratio>=0.999,failed==0,pubfailed<1%,p50<=2.5,max<1.5s,ratio>99%,dups!=3")
	if err != nil {
		t.Fatal(err)
	}
	want := []Threshold{
		{Expr: "p99<250ms", Metric: "p99", Op: "<", Value: 250},
		{Expr: "ratio>=0.999", Metric: "ratio", Op: ">=", Value: 0.999},
		{Expr: "failed==0", Metric: "failed", Op: "==", Value: 0},
		{Expr: "pubfailed<1%", Metric: "pubfailed", Op: "<", Value: 0.01, Share: true},
		{Expr: "p50<=2.5", Metric: "p50", Op: "<=", Value: 2.5},
		{Expr: "max<1.5s", Metric: "max", Op: "<", Value: 1500},
		{Expr: "ratio>99%", Metric: "ratio", Op: ">", Value: 0.99},
		{Expr: "dups!=3", Metric: "dups", Op: "!=", Value: 3},
	}
	if len(ts) != len(want) {
		t.Fatalf("%d thresholds, want %d", len(ts), len(want))
	}
	for i := range want {
		if ts[i] != want[i] {
			t.Errorf("threshold %d = %+v, want %+v", i, ts[i], want[i])
		}
	}
	if ts, err := ParseThresholds(""); err != nil || ts != nil {
		t.Errorf("empty: %v, %v", ts, err)
	}
	metrics := strings.Join(ThresholdMetrics(), ", ")
	for in, msg := range map[string]string{
		"p99":           `"p99": want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics,
		"p98<1ms":       `"p98<1ms": unknown metric "p98"; want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics,
		"p99<soon":      `"p99<soon": "soon" is not a duration like 250ms or 1.5s (delivery latency)`,
		"ratio>=1.5":    `"ratio>=1.5": "1.5" is not a ratio from 0 to 1 (0.999) or a percentage (99.9%) (delivery ratio)`,
		"failed<=-1":    `"failed<=-1": "-1" is not a count (a whole number, 0 or more) (failed connections)`,
		"p99<1ms,,":     `"": want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics,
		"pubfailed<x%":  `"pubfailed<x%": "x%" is not a percentage from 0 to 100 (refused or failed publishes)`,
		"p99 =< 250ms":  `"p99 =< 250ms": want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics,
		"failed == 0 x": `"failed == 0 x": want metric, operator and value like p99<250ms, ratio>=0.999 or failed==0; metrics: ` + metrics,
	} {
		if _, err := ParseThresholds(in); err == nil || err.Error() != msg {
			t.Errorf("ParseThresholds(%q) = %v, want %q", in, err, msg)
		}
	}
}

func TestThresholdCheck(t *testing.T) {
	r := &results.Run{
		Delivery:    results.Delivery{Expected: 1000, Received: 995, Ratio: 0.995, Latency: results.Latencies{Count: 995, P99: 312.4, P50: 5}},
		Connections: results.Connections{Failed: 2},
		Publish:     results.Publish{Sent: 200, Failed: 3},
	}
	for expr, pass := range map[string]bool{
		"p99<250ms": false, "p99<=312.4ms": true, "p50<10ms": true, "ratio>=0.999": false, "ratio>=99%": true,
		"failed==0": false, "failed<=2": true, "pubfailed==0": false, "pubfailed<2%": true, "pubfailed<1%": false,
	} {
		ts, err := ParseThresholds(expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := ts[0].Check(r); got.Pass != pass || !got.Measured {
			t.Errorf("%s on p99 312.4 ms, ratio 99.5 %%, 2 failed, 3 of 200 refused: %+v, want pass=%v", expr, got, pass)
		}
	}
	// A figure the run did not measure fails: no deliveries, no p99.
	ts, _ := ParseThresholds("p99<250ms,ratio>=0.999")
	empty := &results.Run{}
	for _, th := range ts {
		if got := th.Check(empty); got.Pass || got.Measured {
			t.Errorf("%s on a run without deliveries: %+v, want failed and not measured", th.Expr, got)
		}
	}
	res := &results.Results{Runs: []results.Run{{Thresholds: []results.ThresholdResult{{Pass: true}, {Pass: false}}}, {Thresholds: []results.ThresholdResult{{Pass: false}}}}}
	if n := res.ThresholdsCrossed(); n != 2 {
		t.Errorf("ThresholdsCrossed = %d, want 2", n)
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := newHist()
	for _, us := range []int64{90, 100, 110, 1000, 1000, 1000, 12000} {
		_ = h.RecordValue(us)
	}
	got := histogramBuckets(h)
	var total int64
	for i, b := range got {
		total += b.Count
		if i > 0 && b.UpToMs <= got[i-1].UpToMs {
			t.Errorf("buckets not ascending: %+v", got)
		}
	}
	if total != 7 {
		t.Errorf("buckets hold %d values, want 7: %+v", total, got)
	}
	// 1 ms falls in the bucket ending at 1 ms (10^30/10 µs); 12 ms in the one ending at 12.59 ms.
	want := map[float64]int64{1: 3, 12.59: 1}
	for _, b := range got {
		if n, ok := want[b.UpToMs]; ok && n != b.Count {
			t.Errorf("bucket up to %v ms holds %d, want %d", b.UpToMs, b.Count, n)
		}
		delete(want, b.UpToMs)
	}
	if len(want) > 0 {
		t.Errorf("no buckets ending at %v in %+v", want, got)
	}
}

// FuzzParseThresholds checks that any --threshold either parses into thresholds that parse
// again from their own expressions to the same, and check any run without panicking, or is
// refused with an error naming the part at fault.
func FuzzParseThresholds(f *testing.F) {
	for _, s := range []string{"p99<250ms,ratio>=0.999,failed==0", "pubfailed<1%", "max<=1.5s", "dups!=3", "p50<2.5", "ratio>99.9%", "p99", "x<y", "p99<1e309ms", "ratio>=NaN", "p99<inf", "pubfailed<NaN%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseThresholds(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), `"`) {
				t.Fatalf("error does not start with the part at fault: %v", err)
			}
			return
		}
		var exprs []string
		for _, th := range ts {
			exprs = append(exprs, th.Expr)
			_ = th.Check(&results.Run{Delivery: results.Delivery{Expected: 1, Ratio: 1, Latency: results.Latencies{Count: 1, P99: 3}}})
		}
		again, err := ParseThresholds(strings.Join(exprs, ","))
		if err != nil || len(again) != len(ts) {
			t.Fatalf("%q parsed, but its expressions %q do not: %v", s, exprs, err)
		}
		for i := range ts {
			if again[i] != ts[i] || math.IsNaN(ts[i].Value) || math.IsInf(ts[i].Value, 0) {
				t.Fatalf("%q: %+v parses again as %+v", s, ts[i], again[i])
			}
		}
	})
}
