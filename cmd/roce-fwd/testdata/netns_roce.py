#!/usr/bin/python3
"""RoCEv2 frames between two network namespaces, with scapy.

  netns_roce.py send IFACE DST_MAC SRC_IP DST_IP N [PAYLOAD]
                                                     sends N RoCEv2 frames
                                                     (DSCP 26, ECT(0), real
                                                     ICRCs) out of IFACE
  netns_roce.py recv IFACE OUT.pcap N SECONDS        writes the RoCEv2 frames
                                                     seen on IFACE until a
                                                     second after the Nth (for
                                                     duplicates), SECONDS at
                                                     most (prints "ready" once
                                                     capturing)
  netns_roce.py macctl IFACE OUT.pcap SECONDS [PRIO] writes the MAC control
                                                     frames (PAUSE, PFC) seen
                                                     on IFACE for SECONDS, or
                                                     until a PFC XOFF for PRIO
  netns_roce.py pfc IFACE PRIO QUANTA N              sends N 802.1Qbb PFC
                                                     frames pausing PRIO,
                                                     10 ms apart
"""

import struct
import sys
import threading
import time

from scapy.all import AsyncSniffer, Ether, get_if_hwaddr, sendp, sniff, wrpcap

from offload_frames import roce


def send(iface, dst_mac, src, dst, n, plen=64):
    frames = []
    for i in range(n):
        op = [0x04, 0x0A, 0x11, 0x81][i % 4] if plen == 64 else 0x04
        f = roce(i, src=src, dst=dst, opcode=op, plen=plen)
        f[Ether].src, f[Ether].dst = get_if_hwaddr(iface), dst_mac
        frames.append(f)
    sendp(frames, iface=iface, verbose=False)


def ready():
    """Tells the test the sniffer is capturing: scapy takes seconds to load."""
    print("ready", flush=True)


def recv(iface, out, n, secs):
    # Not a fixed window from now: the sender's scapy takes seconds to
    # load, longer on a busy host. A frame past the Nth is a duplicate,
    # so the capture goes on for a second after it.
    nth = threading.Event()
    seen = [0]

    def count(_):
        seen[0] += 1
        if seen[0] >= n:
            nth.set()

    s = AsyncSniffer(iface=iface, started_callback=ready, prn=count,
                     lfilter=lambda p: p.haslayer("UDP") and p["UDP"].dport == 4791)
    s.start()
    if nth.wait(secs):
        time.sleep(1)
    wrpcap(out, s.stop())


def pfc(iface, prio, quanta, n):
    quantas = [0] * 8
    quantas[prio] = quanta
    body = struct.pack("!HH8H", 0x0101, 1 << prio, *quantas)
    f = Ether(dst="01:80:c2:00:00:01", src=get_if_hwaddr(iface), type=0x8808) / body
    sendp([f] * n, iface=iface, inter=0.01, verbose=False)


def macctl(iface, out, secs, prio=None):
    def xoff(p):
        """An 802.1Qbb frame pausing prio: opcode 0x0101, prio's bit in the
        class-enable vector, a quanta above 0."""
        b = bytes(p)
        q = 18 + 2 * prio
        return len(b) >= 34 and b[14:16] == b"\x01\x01" and b[17] & (1 << prio) != 0 and b[q:q + 2] != b"\x00\x00"

    # With a priority, the first XOFF ends the capture: SECONDS only
    # bounds the wait, however long the sender takes to start.
    got = sniff(iface=iface, timeout=secs, started_callback=ready,
                lfilter=lambda p: p.haslayer(Ether) and p[Ether].type == 0x8808,
                stop_filter=xoff if prio is not None else None)
    wrpcap(out, got)


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "send":
        send(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]) if len(a) > 5 else 64)
    elif cmd == "recv":
        recv(a[0], a[1], int(a[2]), float(a[3]))
    elif cmd == "macctl":
        macctl(a[0], a[1], float(a[2]), int(a[3]) if len(a) > 3 else None)
    elif cmd == "pfc":
        pfc(a[0], int(a[1]), int(a[2]), int(a[3]))
    else:
        raise SystemExit(__doc__)
