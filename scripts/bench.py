#!/usr/bin/env python3
"""The measuring half of scripts/bench.sh: runs one forwarder and prints its
rate, and turns the rounds' figures into the table. Standard library only.

  bench.py pcap-info FILE                  frames, largest and mean frame bytes
  bench.py hugepage-mbufs PAGES            mbufs for a config whose hugepage
                                           plan is PAGES pages of 2 MiB
  bench.py l3fwd-rules FLOWS DIR           l3fwd rule files from a flows file
  bench.py routes FLOWS N DIR              N routes covering the flows' destinations,
                                           for l3fwd (LPM/FIB) and roce-fwd
  bench.py punt-pcap IN N ADDR OUT         IN with a frame to ADDR (the box: punted
                                           to its kernel) after every N-1 IPv4 frames
  bench.py tsc-hz LOG                      the TSC rate DPDK's EAL measured
  bench.py testpmd SECS LOG -- CMD...      median Rx-pps of port 0, Mpps
  bench.py exec LOG -- CMD...              runs CMD, output to LOG
  bench.py rocefwd SECS LOG JSON           median Rx-pps of port 0, Mpps, the
                                           lcore's cycles per packet, the
                                           packets punted to the kernel and written
                                           by a capture per second, the worker's
                                           gaps between polls over 1 ms and its
                                           longest gap (us)
  bench.py l3fwd SECS LOG SOCKET -- CMD... median Tx-pps of port 1, Mpps, and
                                           the share of port 0's Rx sent there
  bench.py ratios RESULTS ROWS ROUND GROUP one round's ratios, for progress
  bench.py table RESULTS ROWS TSC_HZ       the final table

A rate is printed as 0 when the forwarder gave none; the shell script then
stops and names the log.
"""

import ipaddress
import json
import os
import random
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

# Seconds a forwarder may take from exec to its first forwarded second:
# EAL init on 2 MiB pages, an infinite_rx capture loaded into mbufs, and
# l3fwd filling a 4M-entry hash or a 1M-route LPM.
SETUP_TIMEOUT = 90


def pcap_frames(path):
    """Yields (captured length, frame bytes) of each record of a pcap file."""
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            raise SystemExit("%s: not a pcap file" % path)
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            endian = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            endian = ">"
        else:
            raise SystemExit("%s: not a pcap file (pcapng is not read here)" % path)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack(endian + "IIII", rec)[2]
            yield incl, f.read(incl)


def cmd_pcap_info(path):
    n = total = largest = 0
    for incl, _ in pcap_frames(path):
        n += 1
        total += incl
        largest = max(largest, incl)
    if n == 0:
        raise SystemExit("%s: no frames" % path)
    print(n, largest, "%.1f" % (total / n))


def cmd_punt_pcap(src, n, addr, out):
    """Writes OUT: the capture SRC with a frame for ADDR inserted after
    every N-1 of its IPv4 frames, so that one IPv4 frame in N is for the
    box (a router with an exception path punts it to its kernel) and the
    others are SRC's own, in SRC's order. The inserted frame is a copy of
    the one before it with its destination set to ADDR and its header
    checksum made again. Inserting rather than readdressing keeps the rest
    of the traffic, its flows and their order, the same as in the run it
    is compared with."""
    n, dst = int(n), ipaddress.IPv4Address(addr).packed
    if n < 2:
        raise SystemExit("punt-pcap: N must be at least 2")
    with open(src, "rb") as f:
        data = f.read()
    if struct.unpack("<I", data[:4])[0] not in (0xA1B2C3D4, 0xA1B23C4D):
        raise SystemExit("%s: want a little-endian pcap file" % src)
    res = bytearray(data[:24])
    off, i, added = 24, 0, 0
    while off + 16 <= len(data):
        incl = struct.unpack("<I", data[off + 8:off + 12])[0]
        rec = data[off:off + 16 + incl]
        res += rec
        fr = bytearray(rec[16:])
        if incl >= 34 and fr[12:14] == b"\x08\x00" and fr[14] >> 4 == 4:
            i += 1
            if i % (n - 1) == 0:
                hl = (fr[14] & 15) * 4
                fr[30:34] = dst
                fr[24:26] = b"\0\0"
                s = sum(struct.unpack(">%dH" % (hl // 2), bytes(fr[14:14 + hl])))
                while s >> 16:
                    s = (s & 0xFFFF) + (s >> 16)
                fr[24:26] = struct.pack(">H", ~s & 0xFFFF)
                res += rec[:16] + fr
                added += 1
        off += 16 + incl
    with open(out, "wb") as f:
        f.write(res)
    print(added, i + added)


def cmd_impair_rules(path, out):
    """Writes an [impair] table of 16 rules, a busy drill on QPs of the
    capture: marks, drops of ACKs and CNPs, a PSN window held back, a rate
    limit. Each rule names its QP, as a drill does."""
    qps = []
    for _, frame in pcap_frames(path):
        if len(frame) < 14 + 20 + 8 + 12 or frame[12:14] != b"\x08\x00":
            continue
        l4 = 14 + (frame[14] & 15) * 4
        if frame[23] != 17 or struct.unpack(">H", frame[l4 + 2:l4 + 4])[0] != 4791:
            continue
        qp = struct.unpack(">I", frame[l4 + 8 + 4:l4 + 8 + 8])[0] & 0xFFFFFF
        if qp not in qps:
            qps.append(qp)
        if len(qps) == 16:
            break
    if len(qps) < 16:
        raise SystemExit("%s: fewer than 16 RoCEv2 QPs over IPv4" % path)
    rules = ["qp %d every 100 action set_ce" % q for q in qps[:8]]
    rules += ["qp %d class ack every 50 action drop" % q for q in qps[8:12]]
    rules += ["qp %d class cnp every 10 action drop" % q for q in qps[12:14]]
    rules.append("qp %d psn 0-1000000 every 1000 action delay 10us" % qps[14])
    rules.append("qp %d action rate_limit 100000" % qps[15])
    with open(out, "w") as f:
        f.write("[impair]\nseed = 1\nrules = [\n")
        for r in rules:
            f.write('  "%s",\n' % r)
        f.write("]\n")


def cmd_hugepage_mbufs(pages):
    # hugepages/estimate.go's model, inverted: need = ((mbufs + lcores x
    # cache) x 2368 B (64 B header + 128 B rte_mbuf + 2176 B data room)
    # + the mempool's ring + 64 MiB) x 1.25, for two lcores with a
    # 256-mbuf cache each.
    mib = 1 << 20
    variable = int(pages) * 2 * mib * 4 // 5 - 64 * mib
    cache = 2 * 256
    mbufs = variable // 2368 - cache
    while mbufs > 16383:
        n = mbufs + cache
        if n * 2368 + (1 << n.bit_length()) * 8 <= variable:
            break
        mbufs -= 1024
    print(max(mbufs, 16383))


def cmd_l3fwd_rules(flows, outdir):
    """Writes em-v4.cfg, em-v6.cfg, lpm-v4.cfg and lpm-v6.cfg for l3fwd.

    Exact match: one rule per flow line (SRC DST SPORT DPORT PROTO), in
    l3fwd's order `R<dst> <src> <dst port> <src port> <proto> <port>`, all
    to port 1. LPM and FIB: one route, the longest prefix that covers every
    destination, to port 1 (LPM takes no /0, so at least /1). l3fwd needs
    both files of a kind even when the traffic is of one family, and reads
    no empty one, so the other family gets one rule nothing matches."""
    em = {4: [], 6: []}
    dsts = {4: [], 6: []}
    with open(flows) as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) != 5:
                raise SystemExit("%s: want SRC_IP DST_IP SRC_PORT DST_PORT PROTO, got: %s" % (flows, line.strip()))
            src, dst = ipaddress.ip_address(fields[0]), ipaddress.ip_address(fields[1])
            sport, dport, proto = int(fields[2]), int(fields[3]), int(fields[4], 0)
            em[dst.version].append("R%s %s %d %d %d 1" % (dst.exploded, src.exploded, dport, sport, proto))
            dsts[dst.version].append(int(dst))
    if not em[4] and not em[6]:
        raise SystemExit("%s: no flows" % flows)
    family = 6 if len(em[6]) > len(em[4]) else 4
    placeholder_em = {4: "R198.18.0.2 198.18.0.1 9 9 17 1", 6: "R2001:db8::2 2001:db8::1 9 9 17 1"}
    placeholder_lpm = {4: "R198.18.0.0/16 1", 6: "R2001:db8::/32 1"}
    for v in (4, 6):
        bits = 32 if v == 4 else 128
        lpm = placeholder_lpm[v]
        if dsts[v]:
            lo, hi = min(dsts[v]), max(dsts[v])
            depth = max(1, bits - (lo ^ hi).bit_length())
            base = lo >> (bits - depth) << (bits - depth)
            net = (ipaddress.IPv4Network if v == 4 else ipaddress.IPv6Network)((base, depth))
            lpm = "R%s/%d 1" % (net.network_address.exploded, depth)
        with open(os.path.join(outdir, "em-v%d.cfg" % v), "w") as f:
            f.write("\n".join(em[v] or [placeholder_em[v]]) + "\n")
        with open(os.path.join(outdir, "lpm-v%d.cfg" % v), "w") as f:
            f.write(lpm + "\n")
    print("v%d" % family, len(em[family]))


def cmd_routes(flows, n, outdir, hosts=""):
    """Writes a route set of N prefixes of the flows' family that covers
    every destination, for both sides: lpm-v4.cfg and lpm-v6.cfg for l3fwd
    (every route to port 1; the other family gets one placeholder route),
    and routes.toml and routes-ecmp.toml for roce-fwd (every route via the
    gateway 192.168.0.2, or via two gateways on the same port, fd00:ff::2
    and fd00:ff::3 for IPv6). The set is each destination's /24 (/64 for
    IPv6), then random prefixes outside them, most /16 to /24 (/32 to
    /64), one in ten longer (to /32, /128), so that lookups of both sides
    walk their second level too. With "hosts", each destination also has
    a host route (/32, /128), as fabrics that route to every host do:
    every lookup then walks to the last level."""
    n = int(n)
    if hosts not in ("", "hosts"):
        raise SystemExit("routes: the 4th argument is \"hosts\" or nothing, not %r" % hosts)
    dsts = {4: set(), 6: set()}
    with open(flows) as f:
        for line in f:
            fields = line.split()
            if len(fields) == 5 and not fields[0].startswith("#"):
                d = ipaddress.ip_address(fields[1])
                dsts[d.version].add(d)
    v = 6 if len(dsts[6]) > len(dsts[4]) else 4
    net = ipaddress.IPv4Network if v == 4 else ipaddress.IPv6Network
    bits, cover = (32, 24) if v == 4 else (128, 64)
    routes = set()
    for d in dsts[v]:
        routes.add(net((int(d) >> (bits - cover) << (bits - cover), cover)))
        if hosts:
            routes.add(net((int(d), bits)))
    rng = random.Random(7)
    own = net("10.0.0.0/8") if v == 4 else net("fd00::/8")
    while len(routes) < n:
        if rng.random() < 0.1:
            depth = rng.randint(cover + 1, bits)
        else:
            depth = rng.randint(16, cover) if v == 4 else rng.randint(32, cover)
        if v == 4:
            a = rng.randrange(1 << 32)
            if a >> 24 in (0, 10, 127, 172, 192) or a >> 28 >= 14:
                continue
        else:
            a = (0x2001 << 112) | rng.randrange(1 << 112)
        p = net((a >> (bits - depth) << (bits - depth), depth))
        if not p.overlaps(own):
            routes.add(p)
    routes = sorted(routes, key=lambda p: (int(p.network_address), p.prefixlen))[:max(n, len(dsts[v]))]
    placeholder = {4: "R198.18.0.0/16 1", 6: "R2001:db8::/32 1"}
    for fam in (4, 6):
        with open(os.path.join(outdir, "lpm-v%d.cfg" % fam), "w") as f:
            if fam == v:
                f.write("".join("R%s/%d 1\n" % (p.network_address.exploded, p.prefixlen) for p in routes))
            else:
                f.write(placeholder[fam] + "\n")
    gw = ["192.168.0.2", "192.168.0.3"] if v == 4 else ["fd00:ff::2", "fd00:ff::3"]
    for name, via in (("routes.toml", gw[:1]), ("routes-ecmp.toml", gw)):
        hops = ", ".join('{ port = "dst", gateway = "%s" }' % g for g in via)
        with open(os.path.join(outdir, name), "w") as f:
            for g in gw:
                f.write('[[neighbor]]\nport = "dst"\nip = "%s"\nmac = "02:00:00:00:00:%02x"\n' % (g, gw.index(g) + 2))
            for p in routes:
                f.write('[[route]]\nprefix = "%s"\nvia = [%s]\n' % (p, hops))
    print("v%d" % v, len(routes))


def cmd_tsc_hz(log):
    with open(log, errors="replace") as f:
        m = re.search(r"TSC frequency is ~(\d+) KHz", f.read())
    print(int(m.group(1)) * 1000 if m else 0)


def port0_rx_pps(text):
    """Port 0's Rx-pps values, in order, from testpmd's or roce-fwd's
    periodic statistics: both head each port's block with "statistics for
    port N" and give the rate as "Rx-pps: V"."""
    port, out = None, []
    for line in text.splitlines():
        m = re.search(r"statistics for port (\d+)", line)
        if m:
            port = int(m.group(1))
            continue
        m = re.search(r"Rx-pps:\s+(\d+)", line)
        if m and port == 0:
            out.append(int(m.group(1)))
    return out


def mpps(samples):
    return "%.3f" % (statistics.median(samples) / 1e6) if samples else "0"


class Child:
    """A forwarder whose output goes to a log as it comes, so that the
    caller can wait for a line in it."""

    def __init__(self, cmd, log, stdin):
        self.log = open(log, "wb")
        self.text = ""
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self):
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self.log.write(chunk)
            self.log.flush()
            with self.lock:
                self.text += chunk.decode(errors="replace")

    def output(self):
        with self.lock:
            return self.text

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGINT, as a user's ^C, so each forwarder closes its ports and
        EAL cleanly; SIGKILL if it hangs."""
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        if self.proc.stdin:
            self.proc.stdin.close()
        self.log.close()


def cmd_testpmd(secs, log, cmd):
    """Runs testpmd until it has printed SECS whole seconds of port 0's
    Rx-pps after the first non-zero one (which covers the start of
    forwarding), then stops it. Its stdin stays open: at the end of its
    input it would quit."""
    secs = int(secs)
    child = Child(cmd, log, subprocess.PIPE)
    deadline = time.monotonic() + SETUP_TIMEOUT + secs
    samples = []
    try:
        while time.monotonic() < deadline and child.alive():
            samples = [v for v in port0_rx_pps(child.output()) if v > 0]
            if len(samples) >= secs + 1:
                break
            time.sleep(0.2)
    finally:
        child.stop()
    # A run cut short (testpmd died, or never forwarded) gives no rate
    # rather than the median of the seconds it had.
    print(mpps(samples[1:secs + 1]) if len(samples) > secs else "0")


def cmd_exec(log, cmd):
    """Runs a command with its output in LOG and exits with its status."""
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        try:
            proc.wait()
        finally:
            # On ^C the command has had the SIGINT too, and stops by itself.
            if proc.poll() is None:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    sys.exit(proc.returncode if proc.returncode >= 0 else 128 - proc.returncode)


def cmd_rocefwd(secs, log, js):
    """roce-fwd's first report has no rate, so every Rx-pps it prints is a
    whole second's; a run of SECS + 1 seconds gives SECS of them. One
    fewer is taken (the last report may come just after --duration), none
    fewer: a run cut short gives no rate."""
    with open(log, errors="replace") as f:
        samples = [v for v in port0_rx_pps(f.read()) if v > 0]
    if len(samples) < max(1, int(secs) - 1):
        samples = []
    cpp = punts = captured = stalls = gap = 0.0
    try:
        with open(js) as f:
            st = json.load(f)
        cpp = st["lcores"][0]["cycles_per_packet"]
        punts = sum(st.get("route", {}).get("punts", {}).values()) / st["duration_s"]
        captured = st.get("capture", {}).get("written_packets", 0) / st["duration_s"]
        # The worker's polls more than 1 ms apart, and its longest gap (us):
        # a round that was disturbed shows here.
        stalls = st["lcores"][0].get("stalls", {}).get("1ms", 0)
        gap = st["lcores"][0].get("max_poll_gap_us", 0)
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError):
        pass
    print(mpps(samples), "%.1f" % cpp, "%.0f" % punts, "%.0f" % captured, "%d" % stalls, "%.0f" % gap)


def telemetry(sock, cmd):
    sock.send(cmd.encode())
    reply = json.loads(sock.recv(1 << 20).decode())
    return reply[cmd.split(",")[0]]


def cmd_l3fwd(secs, log, path, cmd):
    """l3fwd prints no rates: its port counters are read over DPDK
    telemetry once a second (the telemetry thread runs beside the
    forwarding lcore, not on it). The rate is port 1's Tx: what l3fwd
    routed to the net_null port. A packet it could not route goes back out
    of port 0 or is dropped, and does not count; the share of port 0's Rx
    that reached port 1 is printed beside the rate so that a rule file
    that matches nothing is seen."""
    secs = int(secs)
    child = Child(cmd, log, subprocess.DEVNULL)
    deadline = time.monotonic() + SETUP_TIMEOUT
    rates, rx_total, tx_total = [], 0, 0
    sock = None
    try:
        while time.monotonic() < deadline and child.alive():
            if "entering main loop" in child.output() and os.path.exists(path):
                break
            time.sleep(0.2)
        if child.alive() and "entering main loop" in child.output():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(path)
            json.loads(sock.recv(1 << 16).decode())  # the greeting
            # The first second is dropped, as on the other sides: the
            # ports come up while forwarding starts.
            time.sleep(1)

            def sample():
                t0 = time.monotonic()
                rx = telemetry(sock, "/ethdev/stats,0")["ipackets"]
                tx = telemetry(sock, "/ethdev/stats,1")["opackets"]
                return (t0 + time.monotonic()) / 2, rx, tx

            t, rx, tx = sample()
            start = t
            for i in range(secs):
                time.sleep(max(0.0, start + i + 1 - time.monotonic()))
                t1, rx1, tx1 = sample()
                rates.append((tx1 - tx) / (t1 - t))
                rx_total += rx1 - rx
                tx_total += tx1 - tx
                t, rx, tx = t1, rx1, tx1
    except (OSError, ValueError, KeyError) as e:
        print("bench.py: l3fwd telemetry: %s" % e, file=sys.stderr)
        rates = []
    finally:
        if sock:
            sock.close()
        child.stop()
    if rx_total == 0:
        print("0 0")
        return
    print(mpps(rates), "%.4f" % (tx_total / rx_total))


def load(results, rows):
    """results: ROUND GROUP KEY MPPS CPP SHARE per line; rows: GROUP |
    WORKLOAD | MODE | KEY | PEER | PEER KEY | GOAL | AVG FRAME BYTES."""
    res = {}
    with open(results) as f:
        for line in f:
            r, g, k, v, cpp, share = line.split()
            res.setdefault((g, k), {})[int(r)] = (float(v), float(cpp), float(share))
    table = []
    with open(rows) as f:
        for line in f:
            if line.strip():
                row = [c.strip() for c in line.rstrip("\n").split("|")]
                table.append((row + ["0"])[:8])
    return res, table


def fmt_ratio(v):
    return "%.3f" % v


def cmd_ratios(results, rows, rnd, group):
    res, table = load(results, rows)
    rnd = int(rnd)
    parts = []
    for g, _, mode, key, peer, pkey, _, _ in table:
        if g != group:
            continue
        a = res.get((g, key), {}).get(rnd)
        b = res.get((g, pkey), {}).get(rnd)
        if a and b and b[0] > 0:
            parts.append("%s/%s %s" % (mode, peer, fmt_ratio(a[0] / b[0])))
    print(", ".join(parts) if parts else "-")


def cmd_table(results, rows, tsc_hz):
    """One line per row: the medians over the rounds of each side's rate
    and cycles per packet, and the median of the rounds' own ratios with
    their range; "best" is the ratio of each side's fastest round. roce-fwd's cycles per packet are its lcore's (busy TSC
    cycles / packets, from --stats-json); a peer's are TSC Hz / its rate,
    true of a poll-mode lcore that is never idle, as each is here (the
    capture is replayed without pause)."""
    res, table = load(results, rows)
    tsc = float(tsc_hz)

    def side(g, key):
        runs = res.get((g, key), {})
        if not runs:
            return None
        v = statistics.median(x[0] for x in runs.values())
        if key.startswith("rf"):  # rf:MODE, or rf-TAG:MODE of a build with -tags TAG
            cpp = statistics.median(x[1] for x in runs.values())
        else:
            per = [tsc / (x[0] * 1e6) for x in runs.values() if x[0] > 0]
            cpp = statistics.median(per) if per and tsc > 0 else 0
        share = min(x[2] for x in runs.values())
        return v, cpp, share, runs

    head = ["workload", "mode", "Mpps", "cycles/pkt", "peer", "peer Mpps", "peer cyc/pkt",
            "ratio median [min-max]", "best", "goal"]
    out = [head]
    notes = []
    for g, wl, mode, key, peer, pkey, goal, avg in table:
        a, b = side(g, key), side(g, pkey)
        line = [wl, mode]
        line += ["%.3f" % a[0], "%.0f" % a[1]] if a else ["-", "-"]
        line += [peer]
        line += ["%.3f" % b[0], "%.0f" % b[1]] if b else ["-", "-"]
        verdict = goal
        if not a or not b:
            line += ["-", "-"]
            verdict = "skipped: %s not run" % (peer if not b else mode)
        elif pkey.startswith("l3:") and b[2] < 0.99:
            line += ["n/a", "n/a"]
            verdict = "%s routed only %.1f%% of its Rx to port 1" % (peer, 100 * b[2])
            notes.append("%s, %s: %s" % (wl, peer, verdict))
        else:
            ratios = [a[3][r][0] / b[3][r][0] for r in sorted(a[3]) if r in b[3] and b[3][r][0] > 0]
            med = statistics.median(ratios)
            line.append("%s [%s-%s]" % (fmt_ratio(med), fmt_ratio(min(ratios)), fmt_ratio(max(ratios))))
            line.append(fmt_ratio(max(x[0] for x in a[3].values()) / max(x[0] for x in b[3].values())))
            m = re.fullmatch(r">=\s*([0-9.]+)", goal)
            if m:
                verdict = ">= %s %s" % (m.group(1), "ok" if med >= float(m.group(1)) else "MISSED")
            elif goal == "gbps":
                verdict = "%.2f Gbit/s per core" % (a[0] * float(avg) * 8 / 1e3)
        line.append(verdict)
        out.append(line)
    widths = [max(len(r[i]) for r in out) for i in range(len(head))]
    right = {2, 3, 5, 6, 8}
    for r in out:
        print("  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    for n in notes:
        print("note:", n)
    drift = peer_drift(res)
    if drift:
        print("peers' rates across rounds (the host's drift: their code does not change): the fastest "
              "round up to %.0f%% above the slowest (%s %s), the median %.0f%% over %d peer runs" % drift)


def peer_drift(res):
    """How far apart the rounds of each peer run (testpmd, l3fwd: any key
    not roce-fwd's) are: the widest spread, fastest over slowest round, as
    a percentage with its group and key, and the median spread and the
    number of peer runs. None without a peer run in two rounds."""
    spreads = []
    for (g, k), runs in res.items():
        rates = [x[0] for x in runs.values() if x[0] > 0]
        if not k.startswith("rf") and len(rates) >= 2:
            spreads.append((max(rates) / min(rates) - 1, g, k))
    if not spreads:
        return None
    spreads.sort()
    worst = spreads[-1]
    return (100 * worst[0], worst[1], worst[2], 100 * statistics.median(x[0] for x in spreads), len(spreads))


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd, args = argv[1], argv[2:]
    if "--" in args:
        i = args.index("--")
        args, rest = args[:i], args[i + 1:]
        args.append(rest)
    fns = {
        "pcap-info": cmd_pcap_info, "punt-pcap": cmd_punt_pcap, "hugepage-mbufs": cmd_hugepage_mbufs,
        "l3fwd-rules": cmd_l3fwd_rules, "routes": cmd_routes, "tsc-hz": cmd_tsc_hz,
        "testpmd": cmd_testpmd, "rocefwd": cmd_rocefwd, "l3fwd": cmd_l3fwd,
        "ratios": cmd_ratios, "impair-rules": cmd_impair_rules, "table": cmd_table, "exec": cmd_exec,
    }
    if cmd not in fns:
        raise SystemExit(__doc__)
    try:
        fns[cmd](*args)
    except KeyboardInterrupt:
        # The forwarders catch SIGINT and exit 0 after a clean stop, and so
        # would this; bash then carries on, taking the ^C as handled by
        # them. Dying of SIGINT once they are stopped lets bench.sh stop too.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    main(sys.argv)
