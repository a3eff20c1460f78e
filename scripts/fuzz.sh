#!/usr/bin/env bash
# Gives every fuzz target in the module a short run: FUZZEXECS calls each (default 100000x).
#
# The run is bounded by a count, not a duration, on purpose. With a duration (-fuzztime 10s)
# the deadline can fall while a worker is minimizing a newly found interesting input (the
# fuzzer stops counting execs while it does, often for seconds), and Go then fails the run
# with a bare "context deadline exceeded" and no failing input. A count has no such deadline,
# and FUZZMINIMIZE (default 2s) keeps each minimization short. Any failure is a real one.
set -u
GO=${GO:-go}
FUZZEXECS=${FUZZEXECS:-100000x}
FUZZMINIMIZE=${FUZZMINIMIZE:-2s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
for pkg in $($GO list ./...); do
	for f in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz'); do
		start=$SECONDS
		if $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZEXECS" -fuzzminimizetime "$FUZZMINIMIZE" \
			-timeout 5m "$pkg" >"$log" 2>&1; then
			echo "fuzz $pkg $f: ok, $FUZZEXECS in $((SECONDS - start))s"
		else
			echo "fuzz $pkg $f: FAILED"
			cat "$log"
			status=1
		fi
	done
done
exit $status
