#!/usr/bin/env bash
# fault-matrix.sh: the fault matrix, bigger than the one `make test` runs: per broker (Redis
# without persistence, NATS JetStream, RabbitMQ, each a private server the lab starts) two
# nodes, WebSocket users on durable topics, and the schedule below. Prints one row per broker
# and fault (the figures of docs/bench.md#faults), as a Markdown table.
#
#   scripts/fault-matrix.sh [users]
#   make fault-matrix USERS_FAULTS=200
#
# Environment: OUT (results folder, default /tmp/fault-matrix-<time>), BROKERS (default
# redis,nats,amqp), FAULTS (--fault), STAGES (--stages), BENCH_ARGS (more bench flags).
set -euo pipefail
cd "$(dirname "$0")/.."

users=${1:-200}
out=${OUT:-/tmp/fault-matrix-$(date +%Y%m%d-%H%M%S)}
brokers=${BROKERS:-redis,nats,amqp}
faults=${FAULTS:-20s:restart-broker,40s:partition-node=1:10s,60s:kill-node=2:5s,75s:delay-broker=200ms:10s}
stages=${STAGES:-5s:PEAK,90s:PEAK,5s:0}
mkdir -p "$out"
go build -o "$out/rtlab" ./cmd/rtlab

# shellcheck disable=SC2086 # BENCH_ARGS is split on purpose
"$out/rtlab" bench --transport ws --users "$users" --broker "$brokers" --nodes 2 --interval 1s \
  --stages "$stages" --fault "$faults" --server-args "--durable location/" --out "$out/results" ${BENCH_ARGS:-} >"$out/summary.txt" || true

echo "fault matrix: $users WebSocket users, 2 nodes, --fault $faults ($out)"
echo
echo "| broker | fault | at | due | delivered | told | silently lost | gaps | dups | reordered | refused pubs | recovery |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
jq -r '.runs[] | (.broker // "-") as $b | .faults[]? |
  "| \($b) | \(.kind)\(if .node then "=\(.node)" else "" end)\(if .delay then "=\(.delay)" else "" end)\(if .for then ":\(.for)" else "" end)\(if .late then " (\(.late) late)" else "" end)\(if .error then " (failed: \(.error))" else "" end) | \(.at) | \(.expected) | \(.delivered) | \(.told) | \(.silentlyLost) | \(.gaps) | \(.duplicates) | \(.reordered) | \(.publishFailed) | \(.recovery // "none") |"' \
  "$out/results/results.json"
