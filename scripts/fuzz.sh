#!/bin/sh
# Runs every fuzz target of the module for FUZZTIME each (default 10s) and
# prints a summary line per target: executions, new corpus entries, result.
# A failing input is written by the fuzz engine to the package's
# testdata/fuzz/<target>/ and becomes a regression seed of `go test`.
#
# A run that ends in the fuzz engine's own "context deadline exceeded" (its
# workers answered late on a loaded machine) with no failing input written
# found nothing: it runs once more; any other failure stops.
#
#   FUZZTIME=10m FUZZ_PARALLEL=1 sh scripts/fuzz.sh
set -u
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
par=""
[ -n "${FUZZ_PARALLEL:-}" ] && par="-parallel ${FUZZ_PARALLEL}"
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
run() { # pkg target
	$GO test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" $par "$1" 2>&1
}
for pkg in $($GO list ./...); do
	for f in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz'); do
		echo "fuzz $pkg $f ($FUZZTIME)"
		out=$(run "$pkg" "$f"); rc=$?
		echo "$out"
		if [ $rc -ne 0 ] && echo "$out" | grep -q 'context deadline exceeded' &&
			! echo "$out" | grep -q 'Failing input'; then
			echo "fuzz $pkg $f: the fuzz engine timed out, not a finding: once more"
			out=$(run "$pkg" "$f"); rc=$?
			echo "$out"
		fi
		execs=$(echo "$out" | grep -o 'execs: [0-9]*' | tail -1 | cut -d' ' -f2)
		corpus=$(echo "$out" | grep -o 'total: [0-9]*' | tail -1 | cut -d' ' -f2)
		res=ok; [ $rc -ne 0 ] && res=FAIL
		printf '%-28s %-14s %12s execs %6s corpus  %s\n' "${pkg#roce-fwd/}" "$f" "${execs:-?}" "${corpus:-?}" "$res" >>"$summary"
		if [ $rc -ne 0 ]; then cat "$summary"; exit 1; fi
	done
done
echo
echo "fuzz summary ($FUZZTIME per target)"
cat "$summary"
