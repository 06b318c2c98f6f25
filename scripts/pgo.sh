#!/bin/bash
# Makes cmd/roce-fwd/default.pgo, the CPU profile `go build` optimises
# roce-fwd with: the daemon itself forwarding what the benchmark forwards
# (the demo capture and an 8192-QP control mix, through net_pcap into
# net_null) in io, roce and roce + QoS modes, a few seconds each, merged.
# Profile-guided inlining then puts the classifier and the QP table's
# passes into the worker's loop.
#
#   pgo.sh BINARY OUTPUT
set -euo pipefail
bin=${1:-bin/roce-fwd}
out=${2:-cmd/roce-fwd/default.pgo}
secs=${PGO_SECONDS:-4}
work=$(mktemp -d /tmp/roce-fwd-pgo.XXXXXX)
prefix=rf-pgo-$$
trap 'rm -rf "$work" /var/run/dpdk/"$prefix"-* "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/"$prefix"-*' EXIT

"$bin" gen-pcap "$work/demo.pcap" >/dev/null
"$bin" gen-pcap --qps 8192 --mix control "$work/8k.pcap" >/dev/null
profiles=()
n=0
for pcap in demo 8k; do
	for mode in io roce roce-qos; do
		n=$((n + 1))
		qos=""
		[ "$mode" = roce-qos ] && qos=$'[qos]\npreset = "nvidia-roce"'
		cat >"$work/$n.toml" <<TOML
[eal]
args = ["--no-huge", "-m", "1024", "--no-pci", "--no-shconf", "-l", "0-1", "--file-prefix", "$prefix-$n"]
[mempool]
mbufs = 65535
[[port]]
name = "src"
vdev = "net_pcap0,rx_pcap=$work/$pcap.pcap,infinite_rx=1"
[[port]]
name = "dst"
vdev = "net_null0,no-rx=1"
[pipeline]
mode = "${mode%-qos}"
[roce]
qp_table = 16384
[[forward]]
from = "src"
to = "dst"
[[forward]]
from = "dst"
to = "src"
$qos
TOML
		"$bin" run --config "$work/$n.toml" --duration "${secs}s" --cpu-profile "$work/$n.prof" \
			--log-level warn >"$work/$n.log" 2>&1 || { cat "$work/$n.log" >&2; exit 1; }
		profiles+=("$work/$n.prof")
	done
done
go tool pprof -proto "${profiles[@]}" >"$work/merged.pgo" 2>/dev/null
mv "$work/merged.pgo" "$out"
echo "$out: merged from ${#profiles[@]} runs of ${secs}s"
