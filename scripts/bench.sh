#!/bin/bash
# Forwarding rate of roce-fwd against dpdk-testpmd: the same net_pcap
# source (a small-frame RoCEv2 mix replayed forever) into the same net_null
# sink, one worker lcore each, burst 32, io mode; then the ratio.
#   bench.sh BINARY SECONDS
set -euo pipefail
bin=${1:-bin/roce-fwd}
secs=${2:-10}
work=$(mktemp -d /tmp/roce-fwd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$bin" gen-pcap "$work/roce.pcap" >/dev/null
eal=(--no-huge -m 1024 --no-pci --no-shconf -l 0-1)
src="net_pcap0,rx_pcap=$work/roce.pcap,infinite_rx=1"
dst="net_null0,no-rx=1"

# testpmd: per-second Rx-pps of port 0, start-up excluded (testpmd needs a
# few seconds to set up --no-huge memory before it forwards). It quits at
# the end of its input, so its stdin stays open until it is stopped.
echo "dpdk-testpmd io, ${secs}s ..."
timeout -s INT "$((secs + 8))" dpdk-testpmd "${eal[@]}" --file-prefix "rf-bench-tp-$$" \
	--vdev "$src" --vdev "$dst" -- --forward-mode=io --port-topology=chained --nb-cores=1 \
	--burst=32 --total-num-mbufs=16383 --stats-period 1 \
	< <(sleep $((secs + 30))) >"$work/testpmd.log" 2>&1 || true
tp=$(awk '/Rx-pps:/ { port++; if (port % 2 == 1 && $2 > 0) { n++; v[n] = $2 } }
	END { s = 0; c = 0; for (i = 2; i < n; i++) { s += v[i]; c++ }   # drop the first and last (partial) seconds
	      if (c) printf "%.3f", s / c / 1e6; else print "0" }' "$work/testpmd.log")

cat >"$work/bench.toml" <<TOML
[eal]
args = ["--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "-l", "0-1", "--file-prefix", "rf-bench-rf-$$"]
[mempool]
mbufs = 16383
[[port]]
name = "src"
vdev = "$src"
[[port]]
name = "dst"
vdev = "$dst"
[pipeline]
mode = "io"
burst = 32
# The same two streams testpmd's chained topology polls: src -> dst, and
# the empty dst -> src.
[[forward]]
from = "src"
to = "dst"
[[forward]]
from = "dst"
to = "src"
TOML
echo "roce-fwd io, ${secs}s ..."
"$bin" run --config "$work/bench.toml" --duration "${secs}s" --stats-json "$work/rf.json" --log-level warn >"$work/roce-fwd.log" 2>&1
rf=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.3f" % sum(l["mpps"] for l in r["lcores"]))' "$work/rf.json")
cpp=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1f" % r["lcores"][0]["cycles_per_packet"])' "$work/rf.json")

if [ "$tp" = "0" ] || [ "$tp" = "0.000" ]; then
	echo "testpmd printed no rate; its log:" >&2
	tail -20 "$work/testpmd.log" >&2
	exit 1
fi
ratio=$(python3 -c "print('%.3f' % ($rf / $tp))")
printf '\n%-28s %10s\n' "forwarder (io, 1 lcore)" "Mpps"
printf '%-28s %10s\n' "dpdk-testpmd" "$tp"
printf '%-28s %10s   (%s cycles/packet)\n' "roce-fwd" "$rf" "$cpp"
printf '%-28s %10s   (goal >= 0.95)\n' "ratio roce-fwd/testpmd" "$ratio"
