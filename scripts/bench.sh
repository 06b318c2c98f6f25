#!/bin/bash
# Forwarding rate and cost per packet of roce-fwd against DPDK's own
# forwarders on the same frames: a net_pcap source replaying a capture
# forever (infinite_rx) into a net_null sink, one forwarding lcore (lcore 1)
# each, burst 32. The captures come from `roce-fwd gen-pcap`; the peers are
# dpdk-testpmd (io, 5tswap) and DPDK's l3fwd example (exact match, LPM, FIB).
#
#   bench.sh BINARY SECONDS ROUNDS
#
# Row groups (BENCH_ONLY="demo 8k" runs some of them):
#   demo     the built-in demo capture: io vs testpmd io, roce vs testpmd
#            5tswap, roce + QoS (nvidia-roce preset, unshaped) vs 5tswap
#   8k       control mix of 8192 QPs, IPv4: io vs testpmd io, roce without
#            its QP table vs 5tswap, roce with 65536 QP slots (the default) vs l3fwd exact
#            match (and LPM and FIB for reference)
#   64k      control mix of 65536 QPs: roce with 131072 slots vs l3fwd exact
#            match, and with 16384 slots (more QPs than slots) vs 131072
#   8k6      control mix of 8192 QPs, IPv6: roce vs l3fwd exact match (IPv6)
#   mtu4096  data frames of 1024 QPs: roce vs 5tswap, and roce checking each
#            ICRC, in Gbit/s per core
#   mtu1024  data frames of 1024 QPs: roce vs 5tswap
#   route    control mix of 8192 QPs, IPv4, routed by 1k and by 100k
#            prefixes: io + routing vs l3fwd LPM (and FIB), roce + routing
#            + 2-way ECMP vs l3fwd LPM; both sides load the same routes
#   route6   the same over IPv6 with 1k and 10k prefixes, and io + routing
#            with 1k prefixes and a /128 to every host of the capture (each
#            lookup walks to the last level; the IPv6 memo learns hosts,
#            not one subnet)
#   impair   control mix of 8192 QPs: roce without impairment rules vs the
#            same roce-fwd built with -tags noimpair (the stage compiled
#            out), and roce with 16 impairment rules on QPs of the capture
#            vs roce without
#   punt     control mix of 8192 QPs, IPv4, routed by 1k prefixes, with an
#            exception path to the kernel on both ports: roce with one frame
#            in 50 (about 300k/s) or in 150 (about 100k/s) addressed to the
#            box (punted to its TAP, and so to the kernel; inserted into the
#            capture, the other frames left as they are) vs the same run
#            on the capture alone; the punts per second are printed
#            beside it (needs root for the TAPs). For reference, the frames
#            for the box dropped instead (no exception path) vs nothing to
#            drop, and the punts vs those drops: what taking a packet out of
#            its burst costs, punted or not, and what the punt adds
#   capture  control mix of 8192 QPs: roce capturing every packet received
#            (pcapng with verdicts, to a file in /var/tmp written with
#            direct I/O) vs roce without; and roce dropping every other
#            packet (an impairment rule) with a capture of the drops vs
#            without; the packets written per second are printed beside it;
#            and roce with nothing traced or captured vs the same roce-fwd
#            built with -tags notap (the taps' per-burst checks compiled out)
#
# Environment:
#   BENCH_ONLY       row groups to run, space-separated (default: all)
#   BENCH_MEM        huge (default): 2 MiB hugepages, reserved with
#                    `roce-fwd hugepages --reserve` and given back at exit;
#                    nohuge: ordinary memory (--no-huge), labelled as such
#   BENCH_HUGEPAGES  2 MiB pages to have free for the runs (default 1024:
#                    l3fwd's FIB lookup alone takes about 900)
#   BENCH_OUT        file the table is also written to (default bin/bench.txt)
#   BENCH_PEERS      directory holding the l3fwd build (default
#                    /var/tmp/roce-fwd-peers); without it the l3fwd rows are
#                    skipped
#   BENCH_GEN        the roce-fwd that generates the captures (default: the
#                    one measured), to measure an older build on the same ones
#   BENCH_KEEP=1     keep the captures, configs and logs (printed at exit)
#   BENCH_CAPDIR     directory of the capture rows' file (default /var/tmp)
#
# Each run is a separate process with its own --file-prefix. The runs of a
# round come one after another, each pair's sides a few seconds apart, and
# the host's drift over minutes is met by rounds: the table gives medians
# over the rounds, of each side's rate and of each round's own ratio, with
# the range of those ratios. Beside them, in the column "best", the ratio of
# each side's fastest round: a busy host only ever slows a run down, so that
# is what the two programs do when left alone, and a gap between it and the
# median says the host was busy. (It is not of a pair: the two fastest runs
# may be minutes apart; the goals are for the median.)
set -euo pipefail
# The Go and the build settings make uses.
. "$(dirname "$0")/goenv.sh"

bin=${1:-bin/roce-fwd}
# The roce-fwd that makes the captures and reserves the pages: the measured
# one unless BENCH_GEN names another (to measure an older build on the
# same captures).
gen=${BENCH_GEN:-$bin}
secs=${2:-5}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
py=(python3 "$here/bench.py")
mem=${BENCH_MEM:-huge}
out=${BENCH_OUT:-bin/bench.txt}
peers=${BENCH_PEERS:-/var/tmp/roce-fwd-peers}
l3fwd=$peers/l3fwd
pages=${BENCH_HUGEPAGES:-1024}
all_groups=(demo 8k 64k 8k6 mtu4096 mtu1024 route route6 impair punt capture)
read -r -a groups <<<"${BENCH_ONLY:-${all_groups[*]}}"
for g in "${groups[@]}"; do
	case " ${all_groups[*]} " in
	*" $g "*) ;;
	*) echo "bench.sh: BENCH_ONLY: unknown row group $g (groups: ${all_groups[*]})" >&2; exit 2 ;;
	esac
done
case $mem in
huge | nohuge) ;;
*) echo "bench.sh: BENCH_MEM must be huge or nohuge, not $mem" >&2; exit 2 ;;
esac
command -v dpdk-testpmd >/dev/null || { echo "bench.sh: dpdk-testpmd not found (Debian package dpdk-dev)" >&2; exit 1; }

# Every DPDK process of this script has a file prefix starting with $tag, so
# that what they leave behind (runtime directories, hugepage files) can be
# told from other programs' and removed.
tag=rfb$$
runs=0
if [ "$(id -u)" = 0 ]; then rundir=/var/run/dpdk; else rundir=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
work=$(mktemp -d /tmp/roce-fwd-bench.XXXXXX)
keep_logs=${BENCH_KEEP:-0}
hp_sys=/sys/kernel/mm/hugepages/hugepages-2048kB
hugedir=""
declare -A hp_orig=() hp_set=()
mounted=""
made_dir=""

# The machine is left as it was found: the pages this script reserved are
# given back (unless someone changed nr_hugepages meanwhile: then those
# pages are theirs), hugetlbfs is unmounted if this script mounted it, and
# no runtime directory or hugepage file of its prefixes is left.
restore_hugepages() {
	local f cur
	for f in "${!hp_orig[@]}"; do
		cur=$(cat "$f")
		if [ "$cur" = "${hp_set[$f]:-}" ]; then
			echo "${hp_orig[$f]}" >"$f" || echo "bench.sh: could not write ${hp_orig[$f]} back to $f" >&2
		elif [ "$cur" != "${hp_orig[$f]}" ]; then
			echo "bench.sh: $f is $cur, changed since this script set it to ${hp_set[$f]:-?}: left as it is" >&2
		fi
	done
	hp_orig=() hp_set=()
	if [ -n "$mounted" ]; then
		umount "$mounted" || echo "bench.sh: could not unmount $mounted" >&2
		if [ -n "$made_dir" ]; then rmdir "$made_dir" 2>/dev/null || true; fi
		mounted="" made_dir=""
	fi
}
# The capture rows' file: on a disk, where captures go, and written with
# direct I/O (roce-fwd switches to it on a disk's file system). On tmpfs
# the kernel's copy into fresh pages bounds the rate, and on a VM that
# varies several times over with the host (BENCH_CAPDIR=/dev/shm to see).
capfile=${BENCH_CAPDIR:-/var/tmp}/roce-fwd-bench-$$.pcapng
cleanup() {
	rm -f "$capfile"
	rm -rf "${rundir:?}/$tag"-*
	if [ -n "$hugedir" ]; then rm -f "$hugedir/$tag"-*; fi
	restore_hugepages
	if [ "$keep_logs" = 1 ]; then
		echo "bench.sh: logs kept in $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
# bash acts on a ^C only once the command it waits for has died of it: the
# runs go through bench.py, which does (see its main).
trap 'echo "bench.sh: interrupted" >&2; exit 130' INT TERM

die() {
	echo "bench.sh: $*" >&2
	keep_logs=1
	exit 1
}

loud() {
	{
		echo "################################################################################"
		printf '# %s\n' "$@"
		echo "################################################################################"
	} >&2
}

# hugedir_2m: the mount point of a hugetlbfs with 2 MiB pages (one without
# a pagesize option has the kernel's default size).
hugedir_2m() {
	awk -v def="$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)" \
		'$3 == "hugetlbfs" && ($4 ~ /pagesize=2M/ || ($4 !~ /pagesize=/ && def == 2048)) { print $2; exit }' /proc/mounts
}

# reserve_hugepages: makes $pages 2 MiB pages free with roce-fwd's own
# reservation (the way an operator sets up a host for it). It reserves
# what a config's hugepage plan needs, so the config asks for a mempool of
# that size; nothing runs it. On failure $why says why.
reserve_hugepages() {
	local f mbufs free
	if [ "$(id -u)" != 0 ]; then why="reserving hugepages needs root"; return 1; fi
	if [ ! -d "$hp_sys" ]; then why="the kernel has no 2 MiB hugepage pool ($hp_sys)"; return 1; fi
	# The kernel keeps the count per NUMA node where there are nodes; the
	# global file is their sum, so only one of the two kinds is put back.
	for f in /sys/devices/system/node/node*/hugepages/hugepages-2048kB/nr_hugepages; do
		if [ -f "$f" ]; then hp_orig[$f]=$(cat "$f"); fi
	done
	if [ "${#hp_orig[@]}" = 0 ]; then hp_orig[$hp_sys/nr_hugepages]=$(cat "$hp_sys/nr_hugepages"); fi
	local before_mount d absent=()
	before_mount=$(hugedir_2m)
	for d in /dev/hugepages /dev/hugepages-2MB; do
		if [ ! -e "$d" ]; then absent+=("$d"); fi
	done
	mbufs=$("${py[@]}" hugepage-mbufs "$pages")
	cat >"$work/hugepages.toml" <<-TOML
		[eal]
		args = ["-l", "0-1", "--no-pci"]
		[mempool]
		mbufs = $mbufs
		[[port]]
		name = "sizing"
		vdev = "net_null0"
		[[forward]]
		from = "sizing"
		to = "sizing"
	TOML
	local rc=0
	"$gen" hugepages --config "$work/hugepages.toml" --page-size 2M --reserve >"$work/hugepages.log" 2>&1 || rc=$?
	for f in "${!hp_orig[@]}"; do hp_set[$f]=$(cat "$f"); done
	hugedir=$(hugedir_2m)
	if [ -z "$before_mount" ] && [ -n "$hugedir" ]; then
		mounted=$hugedir
		for d in "${absent[@]}"; do
			if [ "$d" = "$hugedir" ]; then made_dir=$d; fi
		done
	fi
	if [ "$rc" != 0 ]; then
		why="roce-fwd hugepages --reserve failed: $(grep -v '^ *$' "$work/hugepages.log" | tail -n 1)"
		return 1
	fi
	if [ -z "$hugedir" ]; then why="no hugetlbfs with 2 MiB pages is mounted after reserving"; return 1; fi
	free=$(cat "$hp_sys/free_hugepages")
	if [ "$free" -lt $((pages * 95 / 100)) ]; then
		why="only $free of the $pages 2 MiB pages asked for are free after reserving"
		return 1
	fi
}

# Both sides get the same memory. On hugepages, -m preallocates (more is
# taken as needed) and also keeps roce-fwd from substituting its own plan;
# --huge-unlink removes each page's file once mapped, so the pages go back
# to the kernel when a run ends, however it ends. Telemetry does not need
# the files (it is a socket in the runtime directory), nor does anything
# else here: there are no secondary processes.
if [ "$mem" = huge ]; then
	why=""
	if reserve_hugepages; then
		memargs=(-m 512 --huge-dir "$hugedir" --huge-unlink)
		mem_label="2 MiB hugepages in $hugedir ($(cat "$hp_sys/free_hugepages") free, reserved with roce-fwd hugepages --reserve), -m 512 --huge-unlink"
	else
		loud "WARNING: no hugepages: $why" \
			"WARNING: falling back to --no-huge: ordinary 4 KiB pages, more TLB misses on both sides;" \
			"WARNING: the figures are not those of a deployment (BENCH_MEM=nohuge runs this on purpose)"
		# Pages the kernel granted short of the number asked for are given
		# back now: the --no-huge runs need that memory.
		restore_hugepages
		hugedir=""
		mem=nohuge
		mem_label="FALLBACK --no-huge -m 2048 (hugepages failed: $why)"
	fi
else
	mem_label="--no-huge -m 2048 (BENCH_MEM=nohuge)"
fi
if [ "$mem" = nohuge ]; then
	# l3fwd's FIB lookup allocates about 1.8 GiB.
	memargs=(--no-huge -m 2048)
fi
eal=(--no-pci --no-shconf "${memargs[@]}")

next_prefix() {
	runs=$((runs + 1))
	prefix=$tag-$runs
}

# end_run: what a run leaves behind, removed at once, so that a run that
# fails does not leave its runtime directory to the next.
end_run() {
	rm -rf "${rundir:?}/$prefix"
	if [ -n "$hugedir" ]; then rm -f "$hugedir/$prefix"map_*; fi
}

# The TSC rate, as DPDK's EAL measures it for rte_get_tsc_hz(): a peer's
# cycles per packet are TSC Hz / its packet rate.
next_prefix
dpdk-testpmd --no-huge -m 64 --no-pci --no-shconf --file-prefix "$prefix" --log-level=lib.eal:debug -- --help \
	>"$work/tsc.log" 2>&1 || true
end_run
tsc_hz=$("${py[@]}" tsc-hz "$work/tsc.log")
tsc_label="TSC $((tsc_hz / 1000000)) MHz (DPDK EAL's calibration)"
if [ "$tsc_hz" = 0 ]; then
	tsc_hz=$(awk '/^cpu MHz/ { printf "%d", $4 * 1e6; exit }' /proc/cpuinfo)
	tsc_label="TSC $((tsc_hz / 1000000)) MHz (cpu MHz of /proc/cpuinfo: EAL printed no TSC rate)"
fi

# l3fwd is built from Debian's DPDK source by the shared peers script
# (root and apt needed); a build that fails leaves the l3fwd rows out.
build_peers=${BENCH_PEERS_BUILD:-$here/../../shared/peers/build.sh}
if [ ! -x "$l3fwd" ] && [ -f "$build_peers" ] && [ "$(id -u)" = 0 ]; then
	echo "building DPDK's l3fwd with $build_peers ..." >&2
	PEERS=$peers sh "$build_peers" >/dev/null || echo "bench.sh: $build_peers failed" >&2
fi
have_l3fwd=1
if [ ! -x "$l3fwd" ]; then
	have_l3fwd=0
	loud "NOTE: DPDK's l3fwd is not built ($l3fwd missing): the l3fwd rows are skipped." \
		"NOTE: build it with the peers build script (root, apt), or set BENCH_PEERS to its directory."
fi

# Workloads, one capture per row group. net_pcap infinite_rx holds the whole
# capture in mbufs and copies each frame into a fresh one, so the pool is
# twice the capture plus what rings and caches hold, and the data room
# (with 128 bytes of headroom) takes the largest frame. testpmd gets the
# same pool; l3fwd's is fixed at 131072 mbufs of 2176 bytes, hence no
# l3fwd on jumbo frames (infinite_rx refuses chained mbufs).
declare -A wl_pcap=() wl_mbufs=() wl_room=() wl_avg=() wl_desc=() wl_family=()
gen_args() {
	case $1 in
	demo) echo "" ;;
	8k) echo "--qps 8192 --mix control" ;;
	64k) echo "--qps 65536 --mix control" ;;
	8k6) echo "--qps 8192 --mix control --ipv6" ;;
	mtu4096) echo "--qps 1024 --mix mtu4096" ;;
	mtu1024) echo "--qps 1024 --mix mtu1024" ;;
	route) echo "--qps 8192 --mix control" ;;
	route6) echo "--qps 8192 --mix control --ipv6" ;;
	impair) echo "--qps 8192 --mix control" ;;
	punt) echo "--qps 8192 --mix control" ;;
	capture) echo "--qps 8192 --mix control" ;;
	esac
}

# route_sizes: the route set sizes of a routed group (names: 1k, 100k;
# hosts: 1k with a host route to every destination).
route_sizes() {
	case $1 in
	route) echo "1k 100k" ;;
	route6) echo "1k 10k hosts" ;;
	punt) echo "1k" ;;
	esac
}
make_workload() {
	local g=$1 args frames maxlen avg room flows=()
	read -r -a args <<<"$(gen_args "$g")"
	if [ "$g" != demo ]; then flows=(--flows "$work/$g.flows" --seed 1); fi
	if ! "$gen" gen-pcap "${args[@]}" "${flows[@]}" "$work/$g.pcap" >"$work/gen-$g.log" 2>&1; then
		loud "NOTE: roce-fwd gen-pcap ${args[*]} ${flows[*]} failed: the $g rows are skipped." \
			"NOTE: $(grep -v '^ *$' "$work/gen-$g.log" | head -n 1)"
		return 1
	fi
	read -r frames maxlen avg <<<"$("${py[@]}" pcap-info "$work/$g.pcap")"
	room=$(((maxlen + 128 + 63) / 64 * 64))
	if [ "$room" -lt 2176 ]; then room=2176; fi
	wl_pcap[$g]=$work/$g.pcap
	wl_mbufs[$g]=$((2 * frames + 8192 > 16383 ? 2 * frames + 8192 : 16383))
	wl_room[$g]=$room
	wl_avg[$g]=$avg
	wl_desc[$g]="$frames frames, $avg B mean, $maxlen B max"
	if [ "$g" != demo ]; then
		mkdir -p "$work/$g.rules"
		local family nflows
		read -r family nflows <<<"$("${py[@]}" l3fwd-rules "$work/$g.flows" "$work/$g.rules")"
		wl_family[$g]=$family
		wl_desc[$g]+=", $nflows flows, $family"
		local size n
		for size in $(route_sizes "$g"); do
			mkdir -p "$work/$g.rules-$size"
			local hosts=""
			n=${size%k}000
			if [ "$size" = hosts ]; then n=1000 hosts=hosts; fi
			read -r family n <<<"$("${py[@]}" routes "$work/$g.flows" "$n" "$work/$g.rules-$size" $hosts)"
			wl_desc[$g]+=", $size: $n routes"
		done
	fi
}

# The runs of a group within a round, in order: each pair's sides next to
# each other. tp: testpmd, rf: roce-fwd, l3: l3fwd.
group_runs() {
	case $1 in
	demo) echo "tp:io rf:io tp:5tswap rf:roce rf:roce:qos" ;;
	8k) echo "tp:io rf:io tp:5tswap rf:roce:qp=0 rf:roce:qp=65536 l3:em l3:lpm l3:fib" ;;
	64k) echo "rf:roce:qp=131072 l3:em rf:roce:qp=16384" ;;
	8k6) echo "rf:roce:qp=65536 l3:em" ;;
	mtu4096) echo "tp:5tswap rf:roce rf:roce:icrc" ;;
	mtu1024) echo "tp:5tswap rf:roce" ;;
	route) echo "l3:lpm@1k l3:fib@1k rf:io:route=1k rf:roce:route=1k:ecmp l3:lpm@100k l3:fib@100k rf:io:route=100k rf:roce:route=100k:ecmp" ;;
	route6) echo "l3:lpm@1k l3:fib@1k rf:io:route=1k rf:roce:route=1k:ecmp l3:lpm@10k l3:fib@10k rf:io:route=10k l3:lpm@hosts l3:fib@hosts rf:io:route=hosts" ;;
	impair) echo "rf:roce rf-noimpair:roce rf:roce:impair16" ;;
	punt) echo "rf:roce:route=1k:kernel rf:roce:route=1k:kernel:punt rf:roce:route=1k:kernel:punt150 rf:roce:route=1k rf:roce:route=1k:punt" ;;
	capture) echo "rf:roce rf-notap:roce rf:roce:capture rf:roce:drop2 rf:roce:drop2-capture" ;;
	esac
}

# Rows: group | workload | mode | run | peer | peer's run | goal (">= R": a
# ratio to reach; "gbps": report Gbit/s per core; other text as is).
cat >"$work/rows" <<'ROWS'
demo|demo capture|io|rf:io|testpmd io|tp:io|>= 0.95
demo|demo capture|roce|rf:roce|testpmd 5tswap|tp:5tswap|>= 0.90
demo|demo capture|roce + QoS nvidia-roce|rf:roce:qos|testpmd 5tswap|tp:5tswap|>= 0.80
8k|control 8k QPs v4|io|rf:io|testpmd io|tp:io|>= 0.95
8k|control 8k QPs v4|roce qp_table=0|rf:roce:qp=0|testpmd 5tswap|tp:5tswap|-
8k|control 8k QPs v4|roce qp_table=65536|rf:roce:qp=65536|l3fwd EM|l3:em|>= 1.25
8k|control 8k QPs v4|roce qp_table=65536|rf:roce:qp=65536|l3fwd LPM|l3:lpm|reference
8k|control 8k QPs v4|roce qp_table=65536|rf:roce:qp=65536|l3fwd FIB|l3:fib|reference
64k|control 64k QPs v4|roce qp_table=131072|rf:roce:qp=131072|l3fwd EM|l3:em|>= 1.25
64k|control 64k QPs v4|roce qp_table=16384|rf:roce:qp=16384|roce qp_table=131072|rf:roce:qp=131072|>= 0.70
8k6|control 8k QPs v6|roce qp_table=65536|rf:roce:qp=65536|l3fwd EM v6|l3:em|-
mtu4096|mtu4096 data 1k QPs|roce|rf:roce|testpmd 5tswap|tp:5tswap|>= 0.95
mtu4096|mtu4096 data 1k QPs|roce verify_icrc|rf:roce:icrc|testpmd 5tswap|tp:5tswap|gbps
mtu1024|mtu1024 data 1k QPs|roce|rf:roce|testpmd 5tswap|tp:5tswap|-
route|control 8k QPs v4, 1k routes|io routed|rf:io:route=1k|l3fwd LPM|l3:lpm@1k|>= 1.00
route|control 8k QPs v4, 1k routes|io routed|rf:io:route=1k|l3fwd FIB|l3:fib@1k|reference
route|control 8k QPs v4, 1k routes|roce routed, 2-way ECMP|rf:roce:route=1k:ecmp|l3fwd LPM|l3:lpm@1k|>= 0.90
route|control 8k QPs v4, 100k routes|io routed|rf:io:route=100k|l3fwd LPM|l3:lpm@100k|>= 1.00
route|control 8k QPs v4, 100k routes|io routed|rf:io:route=100k|l3fwd FIB|l3:fib@100k|reference
route|control 8k QPs v4, 100k routes|roce routed, 2-way ECMP|rf:roce:route=100k:ecmp|l3fwd LPM|l3:lpm@100k|>= 0.90
route6|control 8k QPs v6, 1k routes|io routed|rf:io:route=1k|l3fwd LPM v6|l3:lpm@1k|>= 1.00
route6|control 8k QPs v6, 1k routes|io routed|rf:io:route=1k|l3fwd FIB v6|l3:fib@1k|reference
route6|control 8k QPs v6, 1k routes|roce routed, 2-way ECMP|rf:roce:route=1k:ecmp|l3fwd LPM v6|l3:lpm@1k|>= 0.90
route6|control 8k QPs v6, 10k routes|io routed|rf:io:route=10k|l3fwd LPM v6|l3:lpm@10k|>= 1.00
route6|control 8k QPs v6, 10k routes|io routed|rf:io:route=10k|l3fwd FIB v6|l3:fib@10k|reference
route6|control 8k QPs v6, 1k routes + a /128 per host|io routed|rf:io:route=hosts|l3fwd LPM v6|l3:lpm@hosts|>= 1.00
route6|control 8k QPs v6, 1k routes + a /128 per host|io routed|rf:io:route=hosts|l3fwd FIB v6|l3:fib@hosts|reference
impair|control 8k QPs v4|roce, no impairment rule|rf:roce|same, impair stage compiled out|rf-noimpair:roce|>= 0.99
impair|control 8k QPs v4|roce + 16 impairment rules|rf:roce:impair16|roce, no impairment rule|rf:roce|>= 0.80
capture|control 8k QPs v4|roce, capturing all rx to pcapng|rf:roce:capture|roce, no capture|rf:roce|>= 0.90
capture|control 8k QPs v4|roce, no trace or capture|rf:roce|same, taps compiled out|rf-notap:roce|>= 0.99
capture|control 8k QPs v4, every 2nd dropped|roce, capturing the drops|rf:roce:drop2-capture|roce, no capture|rf:roce:drop2|>= 1.00
punt|control 8k QPs v4, 1k routes, 1 in 50 to the box|roce routed, punting to the kernel|rf:roce:route=1k:kernel:punt|same, nothing to punt|rf:roce:route=1k:kernel|>= 0.95
punt|control 8k QPs v4, 1k routes, 1 in 150 to the box|roce routed, punting to the kernel|rf:roce:route=1k:kernel:punt150|same, nothing to punt|rf:roce:route=1k:kernel|>= 0.95
punt|control 8k QPs v4, 1k routes, 1 in 50 to the box|roce routed, no exception path: dropping them|rf:roce:route=1k:punt|same, nothing to drop|rf:roce:route=1k|reference
punt|control 8k QPs v4, 1k routes, 1 in 50 to the box|roce routed, punting to the kernel|rf:roce:route=1k:kernel:punt|same, dropping them|rf:roce:route=1k:punt|reference
ROWS

src_vdev() { echo "net_pcap0,rx_pcap=${wl_pcap[$1]},infinite_rx=1"; }
dst_vdev="net_null0,no-rx=1"

# run_testpmd GROUP MODE LOG: testpmd polls both ports (chained topology:
# src -> dst and the empty dst -> src), as roce-fwd and l3fwd do.
run_testpmd() {
	local g=$1 mode=$2 log=$3
	next_prefix
	rate=$("${py[@]}" testpmd "$secs" "$log" -- dpdk-testpmd -l 0-1 "${eal[@]}" --file-prefix "$prefix" \
		--vdev "$(src_vdev "$g")" --vdev "$dst_vdev" -- --forward-mode="$mode" --port-topology=chained \
		--nb-cores=1 --burst=32 --total-num-mbufs="${wl_mbufs[$g]}" --mbuf-size="${wl_room[$g]}" --stats-period 1) ||
		rate=0
	end_run
	cpp=0 share=1
}

# run_rocefwd GROUP MODE[:OPTION] LOG: OPTION is qp=N ([roce] qp_table),
# qos ([qos] preset = "nvidia-roce") or icrc ([roce] verify_icrc). It runs
# one second longer than SECONDS: its first report has no rate.
run_rocefwd() {
	local g=$1 spec=$2 log=$3 extra="" pcap=${wl_pcap[$1]}
	local mode=${spec%%:*} opt=""
	if [ "$spec" != "$mode" ]; then opt=${spec#*:}; fi
	local routed=0
	case $opt in
	route=*)
		# Routed: both ports have addresses, the routes and neighbours come
		# from the route set; no [[forward]].
		# :kernel gives both ports an exception path (a TAP each, unlimited
		# punts); :punt replays the capture with a frame in 50 for the box,
		# :punt150 with one in 150.
		local size=${opt#route=} file=routes.toml kernel=""
		if [ "${size%:punt}" != "$size" ]; then size=${size%:punt} pcap=${wl_pcap[$g]%.pcap}-punt.pcap; fi
		if [ "${size%:punt150}" != "$size" ]; then size=${size%:punt150} pcap=${wl_pcap[$g]%.pcap}-punt150.pcap; fi
		if [ "${size%:kernel}" != "$size" ]; then
			size=${size%:kernel}
			kernel=$(printf '[kernel]\nexception_path = "on"\npunt_rate = 10000000\n')
		fi
		if [ "${size%:ecmp}" != "$size" ]; then size=${size%:ecmp} file=routes-ecmp.toml; fi
		routed=1
		extra=$(printf '%s\n[routing]\nipv6_groups = 131072\n' "$kernel"; cat "$work/$g.rules-$size/$file")
		;;
	qp=*) extra=$(printf '[roce]\nqp_table = %s' "${opt#qp=}") ;;
	qos) extra=$(printf '[qos]\npreset = "nvidia-roce"') ;;
	icrc) extra=$(printf '[roce]\nverify_icrc = true') ;;
	impair16) extra=$(cat "$work/$g.impair.toml") ;;
	capture) extra=$(printf '[capture]\nstart = "port src rx file %s"' "$capfile") ;;
	drop2) extra=$(printf '[impair]\nrules = ["every 2 action drop"]') ;;
	drop2-capture)
		extra=$(printf '[impair]\nrules = ["every 2 action drop"]\n[capture]\nstart = "port src drop file %s"' "$capfile")
		;;
	"") ;;
	*) die "unknown roce-fwd run option $opt" ;;
	esac
	next_prefix
	local args=(-l 0-1 "${eal[@]}" --file-prefix "$prefix") a quoted=""
	for a in "${args[@]}"; do quoted+="${quoted:+, }\"$a\""; done
	local src_addr="" dst_addr="" forward
	forward=$(printf '[[forward]]\nfrom = "src"\nto = "dst"\n[[forward]]\nfrom = "dst"\nto = "src"')
	if [ "$routed" = 1 ]; then
		src_addr='addresses = ["172.16.0.1/24", "fd00:fe::1/64"]'
		dst_addr='addresses = ["192.168.0.1/24", "fd00:ff::1/64"]'
		forward=""
	fi
	cat >"$log.toml" <<-TOML
		[eal]
		args = [$quoted]
		[mempool]
		mbufs = ${wl_mbufs[$g]}
		data_room = ${wl_room[$g]}
		[[port]]
		name = "src"
		vdev = "net_pcap0,rx_pcap=$pcap,infinite_rx=1"
		$src_addr
		[[port]]
		name = "dst"
		vdev = "$dst_vdev"
		$dst_addr
		[pipeline]
		mode = "$mode"
		burst = 32
		$forward
		$extra
	TOML
	local rc=0
	"${py[@]}" exec "$log" -- "$bin" run --config "$log.toml" --duration "$((secs + 1))s" --stats-period 1s \
		--stats-json "$log.json" --log-level warn || rc=$?
	end_run
	if [ "$rc" != 0 ]; then die "roce-fwd exited with status $rc; see $log"; fi
	local res punts captured stalls gap
	res=$("${py[@]}" rocefwd "$secs" "$log" "$log.json") || res=0
	read -r rate cpp punts captured stalls gap <<<"$res"
	echo "$g $spec ${stalls:-0} ${gap:-0}" >>"$work/stalls"
	if [ "$pcap" != "${wl_pcap[$g]}" ] && [ -n "${kernel:-}" ]; then echo "$g $spec $punts" >>"$work/punts"; fi
	if [ "${opt%capture}" != "$opt" ]; then
		echo "$g $spec $captured $(stat -c %s "$capfile" 2>/dev/null || echo 0)" >>"$work/captured"
		rm -f "$capfile"
	fi
	share=1
}

# run_l3fwd GROUP LOOKUP LOG: l3fwd on lcore 1 alone (it makes a tx queue
# per lcore on each port, and net_pcap has one), polling both ports as the
# others do; rules from the workload's flows, every flow to port 1.
run_l3fwd() {
	local g=$1 lookup=$2 log=$3 kind=em v6=() rules=$work/$g.rules
	if [ "${lookup#*@}" != "$lookup" ]; then
		rules=$work/$g.rules-${lookup#*@} lookup=${lookup%@*}
	fi
	case $lookup in
	em) lookup_args=(-E) ;;
	lpm) lookup_args=(-L) kind=lpm ;;
	fib) lookup_args=(--lookup=fib) kind=lpm ;;
	esac
	if [ "${wl_family[$g]}" = v6 ]; then v6=(--ipv6); fi
	next_prefix
	local cmd=("$l3fwd" -l 1 "${eal[@]}" --file-prefix "$prefix" --vdev "$(src_vdev "$g")" --vdev "$dst_vdev" --
		-p 0x3 -P "${lookup_args[@]}" --parse-ptype --config="(0,0,1),(1,0,1)"
		--rule_ipv4="$rules/$kind-v4.cfg" --rule_ipv6="$rules/$kind-v6.cfg" "${v6[@]}")
	echo "${cmd[*]}" >"$log.cmd"
	local res
	res=$("${py[@]}" l3fwd "$secs" "$log" "$rundir/$prefix/dpdk_telemetry.v2" -- "${cmd[@]}") || res=0
	read -r rate share <<<"$res"
	end_run
	cpp=0
}

# measure ROUND GROUP RUN: one run, its figures appended to the results.
measure() {
	local r=$1 g=$2 k=$3 log
	log=$work/$g-${k//[:=@]/-}-$r.log
	case $k in
	tp:*) run_testpmd "$g" "${k#tp:}" "$log" ;;
	rf:*) run_rocefwd "$g" "${k#rf:}" "$log" ;;
	rf-*:*)
		# rf-TAG:MODE: the same roce-fwd built with -tags TAG (a stage
		# compiled out; build_tagged made it).
		local measured=$bin tag=${k%%:*}
		bin=$work/roce-fwd-${tag#rf-}
		run_rocefwd "$g" "${k#*:}" "$log"
		bin=$measured
		;;
	l3:*) run_l3fwd "$g" "${k#l3:}" "$log" ;;
	esac
	if [ -z "$rate" ] || [ "$rate" = 0 ]; then die "$g $k printed no rate; see $log"; fi
	echo "$r $g $k $rate $cpp $share" >>"$work/results"
	local extra=""
	if [ "$cpp" != 0 ]; then extra=", $cpp cycles/packet"; fi
	if [ "${k%%:*}" = l3 ]; then extra=", $(awk -v s="$share" 'BEGIN { printf "%.1f", 100 * s }')% of Rx routed to port 1"; fi
	echo "  round $r/$rounds $g $k: $rate Mpps$extra" >&2
}

# build_tagged TAG: roce-fwd built with -tags TAG into $work/roce-fwd-TAG,
# for the rf-TAG runs; on failure, its log's first lines on stdout.
build_tagged() {
	if ! (cd "$here/.." && ${GO:-go} build -tags "$1" -o "$work/roce-fwd-$1" ./cmd/roce-fwd) >"$work/build-$1.log" 2>&1; then
		head -n 3 "$work/build-$1.log"
		return 1
	fi
}

ready=()
for g in "${groups[@]}"; do
	if ! make_workload "$g"; then continue; fi
	if [ "$g" = impair ]; then
		# The impair rows need the rules' QPs and a second build.
		skip="bench.py impair-rules failed"
		if ! "${py[@]}" impair-rules "${wl_pcap[$g]}" "$work/$g.impair.toml" || ! skip=$(build_tagged noimpair); then
			loud "NOTE: the impair rows are skipped: $skip"
			continue
		fi
	fi
	if [ "$g" = capture ] && ! skip=$(build_tagged notap); then
		loud "NOTE: the capture rows are skipped: $skip"
		continue
	fi
	if [ "$g" = punt ]; then
		# Frames for the box (src's address) and TAPs, which need root.
		if [ "$(id -u)" != 0 ]; then
			loud "NOTE: the punt rows are skipped: the exception path's TAPs need root."
			continue
		fi
		"${py[@]}" punt-pcap "${wl_pcap[$g]}" 50 172.16.0.1 "${wl_pcap[$g]%.pcap}-punt.pcap" >/dev/null
		"${py[@]}" punt-pcap "${wl_pcap[$g]}" 150 172.16.0.1 "${wl_pcap[$g]%.pcap}-punt150.pcap" >/dev/null
	fi
	ready+=("$g")
done
if [ "${#ready[@]}" = 0 ]; then die "no workload could be generated"; fi
: >"$work/results"

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "forwarding ${secs}s per run, $rounds rounds, on net_pcap (infinite_rx) -> net_null, lcore 1, burst 32; memory: $mem_label" >&2
for r in $(seq "$rounds"); do
	for g in "${ready[@]}"; do
		for k in $(group_runs "$g"); do
			if [ "${k%%:*}" = l3 ] && [ "$have_l3fwd" = 0 ]; then continue; fi
			measure "$r" "$g" "$k"
		done
		echo "round $r/$rounds $g: $("${py[@]}" ratios "$work/results" "$work/rows" "$r" "$g")" >&2
	done
done

# Rows of the groups that ran, with the mean frame size for Gbit/s.
: >"$work/rows.run"
for g in "${ready[@]}"; do
	awk -F'|' -v g="$g" -v avg="${wl_avg[$g]}" '$1 == g { print $0 "|" avg }' "$work/rows" >>"$work/rows.run"
done

mkdir -p "$(dirname "$out")"
{
	echo "$("$bin" version 2>/dev/null | tr "\n" " ")vs dpdk-testpmd and DPDK l3fwd, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "net_pcap (infinite_rx) -> net_null, one forwarding lcore, burst 32; median of $rounds rounds of ${secs}s (each a median of per-second rates)"
	echo "memory: $mem_label"
	echo "cycles/pkt: roce-fwd's lcore figure (--stats-json); a peer's is TSC Hz / rate, $tsc_label"
	for g in "${ready[@]}"; do echo "workload $g: ${wl_desc[$g]}"; done
	if [ "$have_l3fwd" = 0 ]; then echo "l3fwd rows skipped: $l3fwd not built"; fi
	echo "host load average (1, 5, 15 min; the runs themselves add about 1) before the runs: $load_start, after: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	"${py[@]}" table "$work/results" "$work/rows.run" "$tsc_hz"
	if [ -s "$work/captured" ]; then
		echo "captured (capture rows), packets written per second and bytes per packet by round: $(awk '{ printf "%s%s %.2f M, %.0f B", (NR > 1 ? " / " : ""), $2, $3 / 1e6, ($3 > 0 ? $4 / ($3 * dur) : 0) }' dur="$((secs + 1))" "$work/captured")"
	fi
	if [ -s "$work/stalls" ]; then
		# Gaps of over 1 ms between the worker's polls: the VM or the
		# kernel took its CPU, and that round's rate is low for it.
		echo "roce-fwd's worker, gaps over 1 ms between polls: $(awk '{ n++; if ($3 == 0) none++; if ($3 > most) { most = $3; at = $1 " " $2 } if ($4 > gap) gap = $4 }
			END { printf "none in %d of %d runs", none, n; if (most > 0) printf ", the most %d (%s)", most, at; printf "; the longest gap %.2f ms", gap / 1e3 }' "$work/stalls")"
	fi
	if [ -s "$work/punts" ]; then
		echo "punted to the kernel (punt rows), thousands of packets per second by round: $(awk '{ printf "%s%s %.1f", (NR > 1 ? " / " : ""), ($2 ~ /punt150$/ ? "1 in 150" : "1 in 50"), $3 / 1e3 }' "$work/punts")"
	fi
} | tee "$out"
echo "(also in $out)"
