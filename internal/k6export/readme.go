package k6export

import (
	"fmt"
	"strings"

	"github.com/rtlab/rtlab/internal/bench"
)

// readme is the README.md of an export: how to run the scripts on one host, on several, and on
// Kubernetes, and what the figures mean next to the bench's.
func readme(command string, peak int, w bench.Workload, written, skipped []string, note string) string {
	var st []string
	for _, s := range w.Stages {
		st = append(st, fmt.Sprintf("%s:%d", fmtDuration(s.Duration), s.Target))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The location workload for k6\n\nWritten by `%s`: %d users in %d groups (user i in group i %% %d, topic `location/{group}`), each publishing its position every %s at its own phase (the bench's, from --seed), stages %s, grace %s.\n\n",
		command, peak, w.Groups, w.Groups, w.Interval, strings.Join(st, ","), w.Grace)
	if note != "" {
		b.WriteString(note + "\n\n")
	}
	fmt.Fprintf(&b, "Scripts: %s (lib.js and config.js beside them).", "`"+strings.Join(written, "`, `")+"`")
	if len(skipped) > 0 {
		fmt.Fprintf(&b, " Not written: %s (k6 has no streaming HTTP client for SSE, nor a STOMP over TCP or SockJS client).", strings.Join(skipped, ", "))
	}
	b.WriteString(`

## Run on one host

    k6 run -e BASE=http://127.0.0.1:8080 ws.js

- ` + "`BASE`" + `: the server (default http://127.0.0.1:8080).
- ` + "`AUTH_SECRET`" + `: the server's --auth-secret; each user then signs its own HS256 token (subject
  k6-u{id}), as the bench does.
- ` + "`P99_MS`" + `: the delivery_latency p99 threshold (default 1000).

Metrics: ` + "`delivery_latency`" + ` (intended send time → receipt, over exactly the receipts counted in
` + "`deliveries_received`" + `), ` + "`deliveries_expected`" + `, ` + "`deliveries_lost`" + `, ` + "`deliveries_duplicate`" + `,
` + "`deliveries_outside_window`" + ` (sent before the receiver's subscription was confirmed),
` + "`publications_sent`" + `, ` + "`publications_failed`" + `, ` + "`protocol_errors`" + `. Thresholds: ` + "`delivered`" + `
(received ÷ expected) ≥ 99.9 %, the bench's bar, and the p99 above; k6 exits 99 when one is crossed.
` + "`k6 run --summary-export summary.json`" + ` keeps them for comparison with the bench's results.json.

How they are counted, as the bench does: a receipt counts once the receiver has stayed the grace
period after the publication (a user leaving sooner was not expected to get it); each sender's
sequence numbers tell duplicates and the publications lost between two received. Unlike the
bench, which knows every publication, k6 cannot see one lost before a receiver's first or after
its last receipt from a sender, nor a sender never heard. A user whose socket drops starts a new
iteration with a fresh subscription (no resume). k6's clock has millisecond resolution: receipts
are placed in the middle of their millisecond, so its latency is unbiased but ±0.5 ms coarse, and
each VU's messages wait for its JavaScript event loop, which adds k6's own delay.

## Several hosts, groups never split (no clock sync needed)

Run the same directory on n hosts with

    k6 run -e BASE=http://server:8080 -e INSTANCES=3 -e INSTANCE=0 ws.js   # host 0
    k6 run -e BASE=http://server:8080 -e INSTANCES=3 -e INSTANCE=1 ws.js   # host 1 …

Host i runs the users of every group g with g % n = i, with the stages scaled to its share. Every
publication's sender and receivers are on one host, so latency is measured on one clock and the
hosts' clocks need not agree; start them within a second or so of each other (the users publish
at their phase from their own host's start). Add up the counters over the hosts; latency
percentiles do not add: read each host's, or send every host's metrics to one backend
(` + "`--out`" + ` to Prometheus remote write, InfluxDB, …) and take the percentiles there.

## Several hosts with execution segments

    k6 run --execution-segment 0:1/3 --execution-segment-sequence 0,1/3,2/3,1 -e BASE=… ws.js
    k6 run --execution-segment 1/3:2/3 --execution-segment-sequence 0,1/3,2/3,1 -e BASE=… ws.js
    k6 run --execution-segment 2/3:1 --execution-segment-sequence 0,1/3,2/3,1 -e BASE=… ws.js

k6 splits the users between the hosts itself, so a group's members sit on several hosts and a
publication is timestamped on one clock and received on another: the hosts' clock offset adds to
(or subtracts from) every latency. Keep them synchronised (chrony or NTP; within a data centre
well under a millisecond — check ` + "`chronyc tracking`" + `) and start the runs together (the
scripts publish from each host's scenario start).

## k6-operator (Kubernetes)

    kubectl create configmap rtlab-k6 --from-file=.
    kubectl apply -f - <<'YAML'
    apiVersion: k6.io/v1alpha1
    kind: TestRun
    metadata: { name: rtlab-ws }
    spec:
      parallelism: 4
      script: { configMap: { name: rtlab-k6, file: ws.js } }
      arguments: -e BASE=http://rtlab.default.svc:8080
    YAML

The operator starts the runners together and gives each an execution segment, so the clock note
above applies (nodes of one cluster are normally NTP-synchronised). To keep groups on one runner
instead, apply one TestRun per host share with ` + "`parallelism: 1`" + ` and
` + "`-e INSTANCES=n -e INSTANCE=i`" + ` in its arguments.
`)
	return b.String()
}
