#!/usr/bin/env bash
# Gives every fuzz target in the module a short run (FUZZTIME, default 10s).
#
# A real finding always makes `go test` write a reproducer under testdata/fuzz/ and prints
# "Failing input written to"; that fails the run at once, with the log. Go's fuzzer can also
# end a clean run with a bare "context deadline exceeded" when -fuzztime expires while a
# worker is mid-call on a busy machine (golang/go#75804): such a run is retried once, and a
# second failure of any kind fails the run.
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# only_deadline reports whether a failed run's log shows nothing but the deadline flake.
only_deadline() {
	grep -q 'context deadline exceeded' "$log" &&
		! grep -q -E 'Failing input written to|panic:|_test\.go:[0-9]+:' "$log"
}

status=0
for pkg in $($GO list ./...); do
	for f in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz'); do
		echo "fuzz $pkg $f ($FUZZTIME)"
		for attempt in 1 2; do
			if $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
				break
			fi
			cat "$log"
			if [ "$attempt" = 1 ] && only_deadline; then
				echo "fuzz $f: deadline flake with no failing input, running it again"
				continue
			fi
			status=1
			break
		done
	done
done
exit $status
