#!/bin/sh
# Builds the Debian package of roce-fwd from a staged tree with dpkg-deb.
#   mkdeb.sh BINARY OUTDIR [VERSION]
# VERSION is what `git describe --tags --always --dirty` says (the
# Makefile's, which the binary was built with); the package version is
# derived from it: v1.2.3 -> 1.2.3, v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234,
# v2.0-rc1 -> 2.0~rc1, an untagged abc1234 -> 0~git<commit date>.abc1234,
# "-dirty" -> "+dirty".
# Depends are what dpkg-shlibdeps finds the binary links (DPDK, libpcap,
# libc) plus the DPDK drivers EAL loads as plugins and cannot run without
# (the ring mempool, the PCI and vdev buses), found with dpkg -S on this
# build host; the PMDs are Recommends. Prints the .deb's path.
# Not nfpm: as a library it brings some 60 modules (go-git, PGP, RPM)
# into go.mod for what dpkg-deb does from a directory.
set -eu

bin=${1:?usage: mkdeb.sh BINARY OUTDIR [VERSION]}
out=${2:?usage: mkdeb.sh BINARY OUTDIR [VERSION]}
src=$(cd "$(dirname "$0")/.." && pwd)
ver=${3:-$(git -C "$src" describe --tags --always --dirty 2>/dev/null || echo dev)}

for tool in dpkg-deb dpkg-shlibdeps; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "mkdeb: $tool missing: apt-get install dpkg-dev (scripts/deps.sh deb installs it)" >&2
		exit 1
	fi
done

# debversion turns a git describe string into a Debian version, which
# must start with a digit and has no "-" (that would split off a Debian
# revision).
debversion() {
	v=${1#v}
	suffix=
	case $v in *-dirty)
		v=${v%-dirty}
		suffix=+dirty
		;;
	esac
	v=$(echo "$v" | sed -E 's/-(rc|alpha|beta|pre)/~\1/') # sorts before the release
	if echo "$v" | grep -Eq '^[0-9][0-9A-Za-z.~+]*-[0-9]+-g[0-9a-f]+$'; then
		v=$(echo "$v" | sed -E 's/-([0-9]+)-g([0-9a-f]+)$/+\1.g\2/')
	elif echo "$v" | grep -Eq '^[0-9][0-9A-Za-z~+]*\.[0-9A-Za-z.~+]*$'; then
		: # a release tag
	elif echo "$v" | grep -Eq '^[0-9a-f]{4,}$'; then
		date=$(git -C "$src" log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date -u +%Y%m%d)
		v="0~git$date.$v"
	else
		v="0~$(echo "$v" | tr -c 'A-Za-z0-9.~+\n' '.')"
	fi
	echo "$v$suffix"
}

version=$(debversion "$ver")
arch=$(dpkg --print-architecture)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# dpkg-shlibdeps wants debian/control and the binary under debian/<package>.
stage=$tmp/debian/roce-fwd
mkdir -p "$stage/DEBIAN"
printf 'Source: roce-fwd\n\nPackage: roce-fwd\nArchitecture: any\n' >"$tmp/debian/control"

install -D -m 0755 "$bin" "$stage/usr/bin/roce-fwd"
install -D -m 0644 "$src/deploy/roce-fwd.toml" "$stage/etc/roce-fwd/roce-fwd.toml"
install -D -m 0644 "$src/deploy/systemd/roce-fwd.service" "$stage/lib/systemd/system/roce-fwd.service"
install -D -m 0644 "$src/README.md" "$stage/usr/share/doc/roce-fwd/README.md"
install -D -m 0644 "$src/docs/performance.md" "$stage/usr/share/doc/roce-fwd/docs/performance.md" # the README links to it
install -D -m 0644 "$src/deploy/debian/copyright" "$stage/usr/share/doc/roce-fwd/copyright"
install -D -m 0644 "$src/deploy/grafana/roce-fwd.json" "$stage/usr/share/roce-fwd/grafana/roce-fwd.json"
install -D -m 0644 "$src/deploy/prometheus/roce-fwd-rules.yml" "$stage/usr/share/roce-fwd/prometheus/roce-fwd-rules.yml"
install -D -m 0644 "$src/deploy/prometheus/roce-fwd-rules.test.yml" "$stage/usr/share/roce-fwd/prometheus/roce-fwd-rules.test.yml"
for f in postinst prerm postrm; do
	install -m 0755 "$src/deploy/debian/$f" "$stage/DEBIAN/$f"
done
echo /etc/roce-fwd/roce-fwd.toml >"$stage/DEBIAN/conffiles"

shlibs=$(cd "$tmp" && dpkg-shlibdeps -O debian/roce-fwd/usr/bin/roce-fwd | sed -n 's/^shlibs:Depends=//p')
if [ -z "$shlibs" ]; then
	echo "mkdeb: dpkg-shlibdeps found no libraries in $bin" >&2
	exit 1
fi
# The DPDK ABI the binary was linked against (librte-eal23: 23).
abi=$(echo "$shlibs" | sed -n 's/.*librte-eal\([0-9][0-9]*\).*/\1/p')
if [ -z "$abi" ]; then
	echo "mkdeb: $bin does not link librte_eal: $shlibs" >&2
	exit 1
fi

# owner LIB prints the package that holds LIB.so.$abi here, or nothing.
owner() {
	dpkg -S "*/$1.so.$abi" 2>/dev/null | sed -n '1s/:.*//p'
}
plugins=
for lib in librte_mempool_ring librte_bus_pci librte_bus_vdev; do
	p=$(owner "$lib")
	if [ -z "$p" ]; then
		echo "mkdeb: no installed package has $lib.so.$abi, which EAL loads to run at all" >&2
		exit 1
	fi
	plugins="$plugins, $p"
done
recommends=
for lib in librte_net_mlx5 librte_net_ionic librte_net_pcap librte_net_null librte_net_ring librte_net_af_packet librte_net_tap; do
	p=$(owner "$lib")
	if [ -z "$p" ]; then
		echo "mkdeb: warning: $lib.so.$abi is not installed here: its package is not recommended" >&2
		continue
	fi
	recommends="${recommends:+$recommends, }$p"
done

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
{
	echo "Package: roce-fwd"
	echo "Version: $version"
	echo "Architecture: $arch"
	echo "Maintainer: ${MAINTAINER:-roce-fwd maintainers <root@localhost>}"
	echo "Installed-Size: $size"
	echo "Depends: $shlibs$plugins"
	[ -z "$recommends" ] || echo "Recommends: $recommends"
	echo "Suggests: prometheus, dpdk"
	echo "Section: net"
	echo "Priority: optional"
	echo "Description: DPDK packet-processing appliance for RoCEv2 fabrics"
	echo " roce-fwd polls DPDK ports on pinned lcores, classifies RoCEv2 traffic"
	echo " (BTH opcodes, QPs, PSNs, ECN, traffic classes, ICRC), counts it per"
	echo " port and per QP, shapes egress like a lossless switch port (WRED-ECN,"
	echo " ETS, PFC) and forwards or routes it. Runs as the roce-fwd systemd"
	echo " service with a console, Prometheus metrics and DPDK telemetry."
} >"$stage/DEBIAN/control"

mkdir -p "$out"
deb=$out/roce-fwd_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
