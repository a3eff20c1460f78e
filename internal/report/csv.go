package report

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"

	"github.com/rtlab/rtlab/internal/results"
)

// csvColumns are the columns of WriteCSV after the run's identity (transport, server, broker,
// round, peak users) and the second: one per series of results.Series, in its units.
var csvColumns = []struct {
	name string
	get  func(s *results.Series, i int) string
}{
	{"users", func(s *results.Series, i int) string { return at(s.Users, i) }},
	{"sent", func(s *results.Series, i int) string { return at(s.Sent, i) }},
	{"received", func(s *results.Series, i int) string { return at(s.Received, i) }},
	{"errors", func(s *results.Series, i int) string { return at(s.Errors, i) }},
	{"publish_failed", func(s *results.Series, i int) string { return at(s.PublishFailed, i) }},
	{"latency_p50_ms", func(s *results.Series, i int) string { return latencyAt(s, s.LatencyP50, i) }},
	{"latency_p99_ms", func(s *results.Series, i int) string { return latencyAt(s, s.LatencyP99, i) }},
	{"bytes_in", func(s *results.Series, i int) string { return at(s.BytesIn, i) }},
	{"http_requests", func(s *results.Series, i int) string { return at(s.Requests, i) }},
	{"server_cpu_pct", func(s *results.Series, i int) string { return at(s.ServerCPU, i) }},
	{"server_rss_bytes", func(s *results.Series, i int) string { return at(s.ServerRSS, i) }},
	{"server_goroutines", func(s *results.Series, i int) string { return at(s.ServerGorout, i) }},
	{"server_threads", func(s *results.Series, i int) string { return at(s.ServerThreads, i) }},
	{"generator_cpu_pct", func(s *results.Series, i int) string { return at(s.GeneratorCPU, i) }},
	{"generator_rss_bytes", func(s *results.Series, i int) string { return at(s.GeneratorRSS, i) }},
	{"broker_cpu_pct", func(s *results.Series, i int) string { return at(s.BrokerCPU, i) }},
	{"steal_pct", func(s *results.Series, i int) string { return at(s.MachineSteal, i) }},
	{"logins", func(s *results.Series, i int) string { return at(s.Logins, i) }},
}

// WriteCSV writes the per-second series of every run of r as CSV, one row per run and second
// (second i covers [i s, i+1 s) of the run). A series a run does not have (broker CPU without a
// measured broker) is an empty cell, and so is the latency of a second without deliveries.
func WriteCSV(w io.Writer, r *results.Results) error {
	cw := csv.NewWriter(w)
	head := []string{"transport", "server", "broker", "round", "peak_users", "second"}
	for _, c := range csvColumns {
		head = append(head, c.name)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, l := range levelsOf(r) {
		for _, run := range l.runs {
			for i := range run.Series.Users {
				row := []string{run.Transport, run.ServerKind, run.Broker, strconv.Itoa(run.Round), strconv.Itoa(run.Peak), strconv.Itoa(i)}
				for _, c := range csvColumns {
					row = append(row, c.get(&run.Series, i))
				}
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// at formats vs[i], or "" past its end.
func at[T int | int64 | uint64 | float64](vs []T, i int) string {
	if i >= len(vs) {
		return ""
	}
	switch v := any(vs[i]).(type) {
	case float64:
		return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	}
	return ""
}

// latencyAt is a latency of second i, "" when nothing was delivered in it.
func latencyAt(s *results.Series, vs []float64, i int) string {
	if i < len(s.Received) && s.Received[i] == 0 {
		return ""
	}
	return at(vs, i)
}
