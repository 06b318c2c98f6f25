#!/bin/bash
# Instructions per packet of a worker's poll, counted under callgrind:
# exact and repeatable where this VM's rates drift by 20% and more, so a
# cost of a few instructions a burst shows. Each count is the difference
# between BenchmarkPoll runs of 20000 and 40000 polls (32 packets each, a
# net_ring port looped to itself), over roce-fwd's functions, the C shim
# and DPDK's libraries (the Go runtime and the benchmark's setup cancel
# out).
#
# Rows: the worker with packet taps built in and nothing armed, against
# the same code built with -tags notap (the taps' checks compiled out), on
# the demo frames (3 QPs) and on 512 QPs; both builds with the shipped
# PGO profile.
#
#   instructions.sh [CASE...]   (default: roce roce-512qp)
set -euo pipefail
# The Go and the build settings make uses.
. "$(dirname "$0")/goenv.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
if ! command -v valgrind >/dev/null 2>&1; then
	echo "instructions.sh: valgrind is not installed (apt-get install valgrind): no instruction counts" >&2
	exit 0
fi
cases=("$@")
if [ ${#cases[@]} = 0 ]; then cases=(roce roce-512qp); fi
work=$(mktemp -d /tmp/roce-fwd-instructions.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$root"
go test -c -pgo=cmd/roce-fwd/default.pgo -o "$work/taps.test" ./pipeline
go test -c -pgo=cmd/roce-fwd/default.pgo -tags notap -o "$work/notap.test" ./pipeline

# count BIN CASE: data-path instructions per packet.
count() {
	for n in 20000 40000; do
		(cd pipeline && GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
			--callgrind-out-file="$work/cg.$n" "$1" -test.run '^$' \
			-test.bench "Poll/$2\$" -test.benchtime "${n}x" >/dev/null 2>&1)
	done
	python3 - "$work/cg.20000" "$work/cg.40000" <<'PY'
import re, subprocess, sys
def data_path(f):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", f],
                         capture_output=True, text=True, check=True).stdout
    total = 0
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in m.group(2):
            continue
        name = m.group(2)
        fn = name.split(":", 1)[1] if ":" in name else name
        if fn.startswith("roce-fwd/") or "rf_step" in fn or "librte_" in name:
            total += int(m.group(1).replace(",", ""))
    return total
print("%.1f" % ((data_path(sys.argv[2]) - data_path(sys.argv[1])) / (20000 * 32)))
PY
}

echo "instructions per packet of a worker's poll (callgrind; BenchmarkPoll, 32 packets a poll)"
printf '%-12s %14s %14s %8s\n' case "taps built in" "compiled out" ratio
for c in "${cases[@]}"; do
	a=$(count "$work/taps.test" "$c")
	b=$(count "$work/notap.test" "$c")
	printf '%-12s %14s %14s %8s\n' "$c" "$a" "$b" "$(python3 -c "print('%.4f' % ($a / $b))")"
done
