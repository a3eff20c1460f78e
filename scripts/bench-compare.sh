#!/usr/bin/env bash
# bench-compare.sh REF: is a hot-path change slower? Builds REF and the work tree, then runs the
# same bench (this work tree's) in --target mode against a fresh server of each build, the
# builds alternating (A B A B …), and prints per build and transport the median and spread of
# p99, server CPU per delivery and RSS per user, then `rtlab report`'s comparison of the
# median rounds. Alternating in one sitting is what makes a noisy machine's figures comparable.
#
#   scripts/bench-compare.sh REF [transports [users [rounds]]]
#   make bench-compare REF=6e1cc73 TRANSPORTS=ws,stomp USERS=10000 ROUNDS=3
#
# Environment: OUT (results folder, default /tmp/bench-compare-<time>), STAGES (bench
# --stages), BENCH_ARGS (more bench flags), SERVE_ARGS (more serve flags for both builds).
set -euo pipefail
cd "$(dirname "$0")/.."

ref=${1:?usage: bench-compare.sh REF [transports [users [rounds]]]}
transports=${2:-ws}
users=${3:-10000}
rounds=${4:-2}
out=${OUT:-/tmp/bench-compare-$(date +%Y%m%d-%H%M%S)}
stages=${STAGES:-20s:300,30s:PEAK,10s:0}
mkdir -p "$out/bin"

echo "bench-compare: building $ref (A) and the work tree (B) into $out/bin"
src=$(mktemp -d)
trap 'git worktree remove --force "$src" >/dev/null 2>&1 || rm -rf "$src"' EXIT
git worktree add --detach -q "$src" "$ref"
# -X names both the older builds' variable and today's; the linker skips one that is missing.
(cd "$src" && go build -ldflags "-X main.commit=$(git rev-parse --short HEAD) -X main.described=$ref" -o "$out/bin/A" ./cmd/rtlab)
go build -ldflags "-X main.described=$(./scripts/version.sh)" -o "$out/bin/B" ./cmd/rtlab
ulimit -n 20000 2>/dev/null || true

# serve_args lifts every per-client limit a load test would hit; flags the build lacks are
# left out (an older build may not know --read-rate-per-ip).
serve_args() {
  local bin=$1 help args=(--data-dir=) f
  help=$("$bin" serve -h 2>&1)
  for f in max-conns max-conns-per-ip max-conns-per-user read-rate-per-ip msg-rate user-msg-rate http-pub-rate; do
    grep -qE -- "^  --?$f( |$)" <<<"$help" && args+=("--$f" -1)
  done
  # shellcheck disable=SC2206
  args+=(${SERVE_ARGS:-})
  echo "${args[@]}"
}

# one runs build $1's server on a free port, the bench against it for transport $2, into $3.
one() {
  local bin=$out/bin/$1 tr=$2 dir=$3 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # shellcheck disable=SC2046
  "$bin" serve --addr "127.0.0.1:$port" $(serve_args "$bin") >"$dir.serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  # shellcheck disable=SC2086
  "$out/bin/B" bench --target "http://127.0.0.1:$port" --transport "$tr" --users "$users" \
    --stages "$stages" --out "$dir" ${BENCH_ARGS:-} >"$dir.bench.log" 2>&1 || true
  kill "$pid" 2>/dev/null || echo "  (the server had stopped: see $dir.serve.log)"; wait "$pid" 2>/dev/null || true
  tail -n 12 "$dir.bench.log" | grep -iE "^  (short|long|SSE|Web|STOMP)" || echo "  (no summary: see $dir.bench.log)"
}

for r in $(seq "$rounds"); do
  for tr in ${transports//,/ }; do
    # A B in odd rounds, B A in even ones, so neither build always runs first.
    order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
    for b in $order; do
      echo "round $r · $tr · build $b ($( [ "$b" = A ] && echo "$ref" || echo work tree))"
      one "$b" "$tr" "$out/$tr-$b-$r"
    done
  done
done

# The table: medians over rounds, and each figure's range as its spread.
python3 - "$out" "$transports" "$rounds" "$ref" <<'EOF'
import json, os, statistics, sys
out, transports, rounds, ref = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
def fig(path):
    try:
        run = json.load(open(os.path.join(path, "results.json")))["runs"][0]
    except (OSError, KeyError, IndexError, ValueError):
        return None
    d, s = run["delivery"], run["server"]
    per = s["cpuSeconds"] / d["received"] * 1e6 if d["received"] else float("nan")
    return {"p99 ms": d["latency"]["p99"], "ratio %": 100 * d["ratio"], "CPU µs/delivery": per,
            "KiB/user": s["bytesPerUser"] / 1024, "failed": run["connections"]["failed"]}
print(f"\nmedian (min–max) over {rounds} alternating rounds; A = {ref}, B = work tree")
print(f"{'transport':10} {'build':5} " + " ".join(f"{k:>22}" for k in ["p99 ms", "ratio %", "CPU µs/delivery", "KiB/user", "failed"]))
for tr in transports:
    for b in "AB":
        rs = [f for r in range(1, rounds + 1) if (f := fig(f"{out}/{tr}-{b}-{r}"))]
        if not rs:
            print(f"{tr:10} {b:5} no results"); continue
        cells = []
        for k in ["p99 ms", "ratio %", "CPU µs/delivery", "KiB/user", "failed"]:
            v = [x[k] for x in rs]
            cells.append(f"{statistics.median(v):9.2f} ({min(v):.2f}–{max(v):.2f})")
        print(f"{tr:10} {b:5} " + " ".join(f"{c:>22}" for c in cells))
EOF
# rtlab report's comparison of the first round of each build (B against A), per transport.
for tr in ${transports//,/ }; do
  [ -f "$out/$tr-A-1/results.json" ] && [ -f "$out/$tr-B-1/results.json" ] &&
    "$out/bin/B" report --out "$out/compare-$tr.html" "$out/$tr-A-1/results.json" "$out/$tr-B-1/results.json" | tail -n 8
done
echo "bench-compare: results in $out"
