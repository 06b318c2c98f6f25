#!/usr/bin/python3
"""Captures for the flow offload end-to-end tests, and an independent
reading of captures with scapy.

  offload_frames.py rewrite OUT.pcap [N]  RoCEv2 mixed with other traffic,
                                          for the DSCP rewrite rule
  offload_frames.py presets OUT.pcap [N]  several sources, DSCPs and
                                          protocols, for the preset rules
  offload_frames.py describe PCAP...      one line per file: a JSON array
                                          with an object per frame

rewrite and presets print the description of the file they wrote, read
back from it. A description gives, per frame: its bytes (hex), the IP version, addresses,
protocol, ports, DSCP and ECN, whether the IPv4 header checksum is right
(scapy recomputes it), and for RoCEv2 (UDP 4791 with a BTH) the opcode and
the ICRC as stored and as recomputed: by scapy.contrib.roce over IPv4, and
from the RoCEv2 annex here over IPv6 (scapy has no IPv6 ICRC).
"""

import json
import struct
import sys
import zlib

from scapy.all import ARP, Ether, IP, IPv6, Raw, TCP, UDP, rdpcap, wrpcap
from scapy.contrib.roce import BTH, CNPPadding

MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def icrc_ipv6(ip6):
    """ICRC over the bytes from the IPv6 header up to the ICRC."""
    b = bytearray(b"\xff" * 8 + ip6)
    ip = 8
    b[ip] |= 0x0F                      # traffic class, high nibble
    b[ip + 1:ip + 4] = b"\xff\xff\xff"  # traffic class, low nibble; flow label
    b[ip + 7] = 0xFF                   # hop limit
    udp = ip + 40
    b[udp + 6:udp + 8] = b"\xff\xff"    # UDP checksum
    b[udp + 8 + 4] = 0xFF              # FECN, BECN, resv6a
    return zlib.crc32(bytes(b)) & 0xFFFFFFFF


def payload(n, seed):
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(n))


def roce(seq, src="10.0.0.1", dst="10.0.1.1", dscp=26, ecn=2, opcode=0x04, plen=64, v6=False):
    """A RoCEv2 frame; seq goes in the PSN and the IPv4 identification so
    that every frame is distinct."""
    tos = dscp << 2 | ecn
    if opcode == 0x81:
        bth = BTH(opcode=0x81, becn=1, dqpn=0x100 + seq % 7, pkey=0xFFFF, psn=0)
        body = CNPPadding()
        sport = 0
    else:
        pad = -plen % 4
        bth = BTH(opcode=opcode, padcount=pad, dqpn=0x10 + seq % 5, psn=seq & 0xFFFFFF,
                  ackreq=seq & 1)
        body = Raw(payload(plen, seq) + b"\x00" * pad)
        sport = 49152 + seq % 16
    udp = UDP(sport=sport, dport=4791, chksum=0)
    if not v6:
        return Ether(**MAC) / IP(src=src, dst=dst, tos=tos, ttl=64, flags="DF", id=seq & 0xFFFF) / udp / bth / body
    bth.icrc = 0
    raw = bytearray(bytes(Ether(**MAC) / IPv6(src=src, dst=dst, tc=tos, fl=seq & 0xFFFFF, hlim=64) / udp / bth / body))
    raw[-4:] = struct.pack("<I", icrc_ipv6(bytes(raw[14:-4])))
    return Ether(bytes(raw))


def udp(seq, src="10.0.0.1", dst="10.0.1.1", dscp=26, ecn=2, sport=5000, dport=53, plen=80):
    return Ether(**MAC) / IP(src=src, dst=dst, tos=dscp << 2 | ecn, id=seq & 0xFFFF) / UDP(sport=sport, dport=dport) / Raw(payload(plen, seq))


def tcp(seq, src="10.0.0.1", dst="10.0.1.1", dscp=26, dport=4791):
    return Ether(**MAC) / IP(src=src, dst=dst, tos=dscp << 2 | 2, id=seq & 0xFFFF) / TCP(sport=40000, dport=dport, seq=seq) / Raw(payload(40, seq))


def arp(seq):
    return Ether(src=MAC["src"], dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.0.0.1", pdst="10.0.%d.%d" % (seq >> 8 & 0xFF, seq & 0xFF))


def gen_rewrite(n):
    opcodes = [0x04, 0x00, 0x01, 0x02, 0x0A, 0x06, 0x11]
    out = []
    for i in range(n):
        k = i % 10
        if k <= 4:
            out.append(roce(i, opcode=opcodes[i % len(opcodes)], plen=16 + (i * 37) % 1000))
        elif k == 5:
            out.append(roce(i, ecn=[0, 1, 3][i // 10 % 3], plen=100 + i % 50))
        elif k == 6:
            out.append(roce(i, opcode=0x81, dscp=48))
        elif k == 7:
            sport, dport = [(5000, 53), (5001, 4789), (4791, 1234)][i // 10 % 3]
            out.append(udp(i, sport=sport, dport=dport, plen=30 + i % 300))
        elif k == 8:
            out.append(roce(i, src="2001:db8::1", dst="2001:db8::2", plen=64 + i % 64, v6=True))
        else:
            out.append(tcp(i) if i // 10 % 2 else arp(i))
    return out


def gen_presets(n):
    kinds = [
        lambda i: roce(i, src="10.0.0.1"),
        lambda i: roce(i, src="10.0.0.2"),
        lambda i: roce(i, src="10.0.0.3", plen=512),
        lambda i: roce(i, src="10.0.0.2", ecn=3),
        lambda i: roce(i, src="10.0.0.2", opcode=0x81, dscp=48),
        lambda i: roce(i, src="10.0.0.1", opcode=0x81, dscp=48),
        lambda i: udp(i, src="10.0.0.2", dport=53),
        lambda i: tcp(i, src="10.0.0.2", dport=4791),
        lambda i: roce(i, src="2001:db8::2", dst="2001:db8::9", v6=True),
        lambda i: roce(i, src="10.0.0.1", dscp=10, plen=200),
        lambda i: udp(i, src="10.0.0.2", dscp=0, sport=4791, dport=1234),
        arp,
        lambda i: roce(i, src="2001:db8::2", dst="2001:db8::9", opcode=0x81, dscp=48, v6=True),
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def describe(p):
    raw = bytes(p)
    d = {"hex": raw.hex(), "len": len(raw), "ipver": 0, "roce": False}
    if IP in p:
        ip = p[IP]
        d.update(ipver=4, src=ip.src, dst=ip.dst, proto=ip.proto, dscp=ip.tos >> 2, ecn=ip.tos & 3)
        c = ip.copy()
        del c.chksum
        d["ip_chksum_ok"] = IP(bytes(c)).chksum == ip.chksum
    elif IPv6 in p:
        ip = p[IPv6]
        d.update(ipver=6, src=ip.src, dst=ip.dst, proto=ip.nh, dscp=ip.tc >> 2, ecn=ip.tc & 3)
    for l4 in (UDP, TCP):
        if l4 in p:
            d.update(sport=p[l4].sport, dport=p[l4].dport)
    if UDP in p and p[UDP].dport == 4791 and BTH in p:
        d.update(roce=True, opcode=p[BTH].opcode, icrc=raw[-4:].hex())
        if d["ipver"] == 4:
            d["icrc_computed"] = p[BTH].compute_icrc(b"").hex()
        else:
            d["icrc_computed"] = struct.pack("<I", icrc_ipv6(raw[14:-4])).hex()
    return d


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    gens = {"rewrite": (gen_rewrite, 400), "presets": (gen_presets, 520)}
    if cmd in gens:
        gen, n = gens[cmd]
        wrpcap(args[0], gen(int(args[1]) if len(args) > 1 else n))
        args = args[:1]
    elif cmd != "describe":
        sys.exit("unknown command " + cmd)
    for path in args:
        print(json.dumps([describe(p) for p in rdpcap(path)]))


if __name__ == "__main__":
    main()
