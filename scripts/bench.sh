#!/bin/bash
# Forwarding rate of roce-fwd against dpdk-testpmd on the same vdevs: a
# net_pcap source replaying a small-frame RoCEv2 mix forever into a
# net_null sink, one worker lcore each, burst 32. Three pairs:
#   testpmd io      vs roce-fwd io    (goal: ratio >= 0.95)
#   testpmd 5tswap  vs roce-fwd roce  (goal: ratio >= 0.90; both parse L2-L4)
#   testpmd 5tswap  vs roce-fwd roce + QoS, nvidia-roce preset, unshaped
#                                     (goal: ratio >= 0.80)
#   bench.sh BINARY SECONDS ROUNDS
set -euo pipefail
bin=${1:-bin/roce-fwd}
secs=${2:-5}
rounds=${3:-5}
work=$(mktemp -d /tmp/roce-fwd-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$bin" gen-pcap "$work/roce.pcap" >/dev/null
eal=(--no-huge -m 1024 --no-pci --no-shconf -l 0-1)
src="net_pcap0,rx_pcap=$work/roce.pcap,infinite_rx=1"
dst="net_null0,no-rx=1"

# rxpps LOG TRIM: the median of port 0's per-second Rx-pps in a log of
# testpmd's or roce-fwd's periodic statistics (the same line in both),
# leaving out TRIM values at each end. Both sides are measured alike, and
# a median second is not moved by a second the host stalled the VM.
rxpps() {
	awk -v trim="$2" '{ for (i = 1; i < NF; i++) if ($i == "Rx-pps:") { port++; if (port % 2 == 1 && $(i+1) > 0) v[++n] = $(i+1) } }
		END { for (i = 1 + trim; i <= n - trim; i++) print v[i] }' "$1" | sort -n |
		awk '{ v[NR] = $1 } END { if (!NR) { print "0"; exit }
		      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f", m / 1e6 }'
}

# testpmd MODE: per-second Rx-pps of port 0, without the first and last
# (partial) seconds. testpmd needs a few seconds to set up --no-huge memory
# before it forwards, and quits at the end of its input, so its stdin stays
# open until it is stopped.
testpmd() {
	local log="$work/testpmd-$1.log"
	timeout -s INT "$((secs + 8))" dpdk-testpmd "${eal[@]}" --file-prefix "rf-bench-tp-$$" \
		--vdev "$src" --vdev "$dst" -- --forward-mode="$1" --port-topology=chained --nb-cores=1 \
		--burst=32 --total-num-mbufs=16383 --stats-period 1 \
		< <(sleep $((secs + 30))) >"$log" 2>&1 || true
	rxpps "$log" 1
}

# rocefwd MODE [EXTRA-TOML]: per-second Rx-pps of port 0 (each a whole
# second: the first report has no rate), and the lcore's cycles per
# packet. It polls the same two streams testpmd's chained topology does:
# src -> dst, and the empty dst -> src.
rocefwd() {
	cat >"$work/bench-$1.toml" <<TOML
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
mode = "$1"
burst = 32
[[forward]]
from = "src"
to = "dst"
[[forward]]
from = "dst"
to = "src"
${2:-}
TOML
	local tag="$1${2:+-qos}"
	"$bin" run --config "$work/bench-$1.toml" --duration "${secs}s" --stats-period 1s \
		--stats-json "$work/rf-$tag.json" --log-level warn >"$work/roce-fwd-$tag.log" 2>&1
	echo "$(rxpps "$work/roce-fwd-$tag.log" 0)" \
		"$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["lcores"][0]["cycles_per_packet"])' "$work/rf-$tag.json")"
}

row() { printf '%-24s %9s   %s\n' "$@"; }
median() { python3 -c 'import statistics,sys; print(sys.argv[1] % statistics.median(float(v) for v in sys.argv[2:]))' "$@"; }
ratio() { python3 -c "print('%.3f' % ($1 / $2) if $2 > 0 else '0')"; }

# The host's speed drifts over minutes on a shared machine, so the pairs
# run in rounds, each side of a pair a few seconds apart, and what is
# reported is the median over the rounds: of the rates, and of each
# round's own ratio.
echo "forwarding for ${secs}s per run on the same net_pcap -> net_null vdevs, lcore 1, burst 32, $rounds rounds ..."
declare -A all
for r in $(seq "$rounds"); do
	tp_io=$(testpmd io)
	read -r rf_io rf_io_cpp <<<"$(rocefwd io)"
	tp_5t=$(testpmd 5tswap)
	read -r rf_roce rf_roce_cpp <<<"$(rocefwd roce)"
	read -r rf_qos rf_qos_cpp <<<"$(rocefwd roce "$(printf '[qos]\npreset = "nvidia-roce"')")"
	for v in "testpmd io:$tp_io" "roce-fwd io:$rf_io" "testpmd 5tswap:$tp_5t" \
		"roce-fwd roce:$rf_roce" "roce-fwd roce + QoS:$rf_qos"; do
		if [ "${v##*:}" = "0" ]; then
			echo "${v%%:*} printed no rate; the logs are in $work" >&2
			trap - EXIT
			exit 1
		fi
	done
	r_io=$(ratio "$rf_io" "$tp_io") r_roce=$(ratio "$rf_roce" "$tp_5t") r_qos=$(ratio "$rf_qos" "$tp_5t")
	all[tp_io]+=" $tp_io"; all[rf_io]+=" $rf_io"; all[tp_5t]+=" $tp_5t"
	all[rf_roce]+=" $rf_roce"; all[rf_qos]+=" $rf_qos"
	all[io_cpp]+=" $rf_io_cpp"; all[roce_cpp]+=" $rf_roce_cpp"; all[qos_cpp]+=" $rf_qos_cpp"
	all[r_io]+=" $r_io"; all[r_roce]+=" $r_roce"; all[r_qos]+=" $r_qos"
	echo "round $r: io $r_io, roce $r_roce, roce + QoS $r_qos"
done

m() { median %.3f ${all[$1]}; }
m1() { median %.1f ${all[$1]}; }
# best RF TP: the ratio of each side's fastest round. A busy host only ever
# slows a run down, so the fastest rounds show what each program does when
# left alone; a wide gap to the median says the host was busy.
best() { python3 -c 'import sys; r, t = (max(map(float, a.split())) for a in sys.argv[1:]); print("%.3f" % (r / t))' "${all[$1]}" "${all[$2]}"; }
echo
row "forwarder (median)" "Mpps" ""
row "dpdk-testpmd io" "$(m tp_io)" ""
row "roce-fwd io" "$(m rf_io)" "$(m1 io_cpp) cycles/packet"
row "  ratio" "$(m r_io)" "goal >= 0.95  (rounds:${all[r_io]})"
row "  ratio of best rounds" "$(best rf_io tp_io)" ""
row "dpdk-testpmd 5tswap" "$(m tp_5t)" ""
row "roce-fwd roce" "$(m rf_roce)" "$(m1 roce_cpp) cycles/packet (classify, count, per-QP table)"
row "  ratio" "$(m r_roce)" "goal >= 0.90  (rounds:${all[r_roce]})"
row "  ratio of best rounds" "$(best rf_roce tp_5t)" ""
row "roce-fwd roce + QoS" "$(m rf_qos)" "$(m1 qos_cpp) cycles/packet (nvidia-roce preset, unshaped)"
row "  ratio" "$(m r_qos)" "goal >= 0.80  (rounds:${all[r_qos]})"
row "  ratio of best rounds" "$(best rf_qos tp_5t)" ""
