#!/bin/sh
# Installs what roce-fwd needs from Debian packages, only when missing.
#   deps.sh        build and run: DPDK 22.11 (libdpdk-dev, dpdk-dev), pkg-config
#   deps.sh deb    plus dpkg-dev (dpkg-shlibdeps, for make deb)
#   deps.sh bench  plus valgrind (instruction counts under callgrind)
#   deps.sh test   plus the test tools: tshark, python3-scapy, chromium (the
#                  HTML report loaded headless), prometheus (promtool and the
#                  server, for deploy/), dpkg-dev and systemd (systemd-analyze)
#                  for the package and unit tests, and for the network
#                  namespace tests iproute2, ping and FRR
# As root it runs apt-get; otherwise it prints the exact command to run.
set -eu

pkgs=""
add() { pkgs="$pkgs $*"; }

pkg-config --exists libdpdk 2>/dev/null || add pkg-config libdpdk-dev
command -v dpdk-testpmd >/dev/null 2>&1 || add dpdk-dev
command -v gcc >/dev/null 2>&1 || add gcc
case "${1:-}" in test | deb)
	command -v dpkg-shlibdeps >/dev/null 2>&1 || add dpkg-dev
	;;
esac
if [ "${1:-}" = bench ]; then
	command -v valgrind >/dev/null 2>&1 || add valgrind
fi
if [ "${1:-}" = test ]; then
	command -v systemd-analyze >/dev/null 2>&1 || add systemd
	command -v tshark >/dev/null 2>&1 || add tshark
	/usr/bin/python3 -c 'import scapy.contrib.roce' >/dev/null 2>&1 || add python3-scapy
	command -v chromium >/dev/null 2>&1 || add chromium
	{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || add prometheus
	command -v ip >/dev/null 2>&1 || add iproute2
	command -v ping >/dev/null 2>&1 || add iputils-ping
	[ -x /usr/lib/frr/bgpd ] || add frr
fi

if [ -n "$pkgs" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "installing:$pkgs"
		apt-get update -q
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs
	else
		echo "roce-fwd needs these Debian packages:$pkgs" >&2
		echo "run: sudo apt-get install -y$pkgs" >&2
		exit 1
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	echo "roce-fwd needs Go 1.25 or newer (https://go.dev/dl/); Debian 12's golang-go (1.19) is too old" >&2
	exit 1
fi
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -n "$go_minor" ] && [ "$go_minor" -lt 25 ]; then
	echo "roce-fwd needs Go 1.25 or newer; found $(go env GOVERSION)" >&2
	exit 1
fi
