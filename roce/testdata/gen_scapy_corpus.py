#!/usr/bin/python3
"""Generate scapy_corpus.pcap and scapy_corpus.tsv for the roce tests.

scapy.contrib.roce computes the ICRC for RoCEv2 over IPv4; for IPv6 (which
scapy does not support) this script computes it itself from the spec, so
the Go code is checked against two independent implementations.

Run from this directory: /usr/bin/python3 gen_scapy_corpus.py
"""

import struct
import zlib

from scapy.all import ARP, Dot1AD, Dot1Q, Ether, IP, IPOption_Router_Alert, IPv6, Raw, TCP, UDP, wrpcap
from scapy.contrib.roce import AETH, BTH, CNPPadding

OUT = "scapy_corpus"
COLUMNS = ["index", "roce", "ipver", "opcode", "dqpn", "psn", "ackreq", "se", "migreq",
           "pad", "pkey", "fecn", "becn", "dscp", "ecn", "tags", "pcp", "vid",
           "payload_len", "syndrome", "msn", "icrc", "icrc_ok"]

# Extension headers, packed by hand from the IBTA layouts.
def rdeth(ee): return struct.pack("!I", ee & 0xFFFFFF)
def deth(qkey, srcqp): return struct.pack("!II", qkey, srcqp & 0xFFFFFF)
def xrceth(srq): return struct.pack("!I", srq & 0xFFFFFF)
def feth(sel, plt): return struct.pack("!I", (sel & 3) << 4 | (plt & 15))
def reth(va, rkey, ln): return struct.pack("!QII", va, rkey, ln)
def atomiceth(va, rkey, swap, cmp): return struct.pack("!QIQQ", va, rkey, swap, cmp)
def aeth(syn, msn): return struct.pack("!I", syn << 24 | (msn & 0xFFFFFF))
def atomicacketh(orig): return struct.pack("!Q", orig)
def immdt(v): return struct.pack("!I", v)
def ieth(rkey): return struct.pack("!I", rkey)


def icrc_ipv6(ip6_bytes):
    """ICRC of an IPv6/UDP/BTH packet (bytes from the IPv6 header to the
    ICRC, exclusive), read straight from the RoCEv2 annex."""
    b = bytearray(b"\xff" * 8 + ip6_bytes)
    ip = 8
    b[ip] |= 0x0F                      # traffic class (high nibble)
    b[ip + 1:ip + 4] = b"\xff\xff\xff"  # traffic class (low nibble), flow label
    b[ip + 7] = 0xFF                   # hop limit
    udp = ip + 40
    b[udp + 6:udp + 8] = b"\xff\xff"    # UDP checksum
    b[udp + 8 + 4] = 0xFF              # FECN, BECN, resv6a
    return zlib.crc32(bytes(b)) & 0xFFFFFFFF


frames = []
rows = []


def add(pkt, exp, pad_to=0):
    raw = bytes(pkt)
    if len(raw) < pad_to:
        raw += b"\x00" * (pad_to - len(raw))
    row = {c: "" for c in COLUMNS}
    row.update(exp)
    row["index"] = len(frames)
    frames.append(Ether(raw))
    rows.append(row)


def roce(opcode, ext=b"", payload=b"", v6=False, tags=(), dscp=26, ecn=2, dqpn=0x12,
         psn=0x1000, ackreq=0, se=0, migreq=0, pkey=0xFFFF, fecn=0, becn=0, sport=49152,
         syndrome=-1, msn=0, ipopts=None, pad_to=0, icrc=None, tpid=None):
    pad = -len(payload) % 4
    bth = BTH(opcode=opcode, solicited=se, migreq=migreq, padcount=pad, pkey=pkey,
              fecn=fecn, becn=becn, dqpn=dqpn, ackreq=ackreq, psn=psn)
    if icrc is not None and not v6:
        bth.icrc = icrc
    l2 = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    if tpid is not None:
        l2.type = tpid
    for i, (kind, pcp, vid) in enumerate(tags):
        l2 = l2 / (Dot1AD if kind == "ad" else Dot1Q)(prio=pcp, vlan=vid)
    tos = dscp << 2 | ecn
    if v6:
        l3 = IPv6(src="2001:db8::1", dst="2001:db8::2", tc=tos, fl=0x12345, hlim=64)
    else:
        l3 = IP(src="192.0.2.1", dst="192.0.2.2", tos=tos, ttl=64, flags="DF", id=7,
                options=ipopts or [])
    body = bytes(ext) + payload + b"\x00" * pad
    udp = UDP(sport=sport, dport=4791, chksum=0)
    if v6:
        # Let scapy build with a placeholder, then fill in our own ICRC.
        bth.icrc = 0
        pkt = l2 / l3 / udp / bth / Raw(body)
        raw = bytearray(bytes(pkt))
        ipstart = 14 + 4 * len(tags)
        crc = icrc_ipv6(bytes(raw[ipstart:-4])) if icrc is None else icrc
        raw[-4:] = struct.pack("<I", crc)
        pkt = Ether(bytes(raw))
    else:
        pkt = l2 / l3 / udp / bth / Raw(body)
        raw = bytes(pkt)
        crc = struct.unpack("<I", raw[-4:])[0]
    inner = tags[-1] if tags else None
    add(pkt, {
        "roce": 1, "ipver": 6 if v6 else 4, "opcode": opcode, "dqpn": dqpn, "psn": psn,
        "ackreq": ackreq, "se": se, "migreq": migreq, "pad": pad, "pkey": pkey,
        "fecn": fecn, "becn": becn, "dscp": dscp, "ecn": ecn, "tags": len(tags),
        "pcp": inner[1] if inner else "", "vid": inner[2] if inner else "",
        "payload_len": len(payload), "syndrome": syndrome, "msn": msn if syndrome >= 0 else "",
        "icrc": "%08x" % crc, "icrc_ok": 0 if icrc is not None else 1,
    }, pad_to)


P = bytes(range(1, 40))

# RC, every header kind.
roce(0x04, payload=P[:5])
roce(0x00, payload=P[:32], se=1)
roce(0x01, payload=b"", pad_to=60)  # 58 bytes: Ethernet padding after the ICRC
roce(0x03, ext=immdt(0xDEADBEEF), payload=P[:7], ackreq=1)
roce(0x0A, ext=reth(0x7FEE260FB000, 0x2B8, 12), payload=P[:12])
roce(0x0B, ext=reth(0x1000, 0x55, 3) + immdt(1), payload=P[:3])
roce(0x0C, ext=reth(0x7FEE260FB000, 0x2B8, 65536))
roce(0x0D, ext=aeth(0x1F, 7), payload=P[:16], syndrome=0x1F, msn=7)
roce(0x10, ext=aeth(0x05, 0xABCDEF), payload=P[:1], syndrome=0x05, msn=0xABCDEF)
roce(0x12, ext=aeth(0x00, 9) + atomicacketh(0x0102030405060708), syndrome=0, msn=9)
roce(0x13, ext=atomiceth(0x1122334455667788, 0x99, 5, 6))
roce(0x14, ext=atomiceth(0x10, 0x20, 1, 0))
roce(0x16, ext=ieth(0xCAFE), payload=P[:2])
roce(0x1C, ext=feth(1, 2) + reth(0x4000, 0x77, 0))
roce(0x1D, ext=reth(0x8000, 0x78, 8), payload=P[:8])
# ACK through scapy's own AETH layer, and NAK/RNR NAK syndromes.
for syn in (0x06, 0x1F, 0x2E, 0x60, 0x61, 0x62, 0x63, 0x64):
    pkt_psn = 0x200 + syn
    roce(0x11, ext=bytes(AETH(syndrome=syn, msn=0x42)), psn=pkt_psn, syndrome=syn, msn=0x42)
# UC, RD, UD, XRC.
roce(0x26, ext=reth(0x2000, 0x10, 64), payload=P[:20])
roce(0x44, ext=rdeth(0xABCDEF) + deth(0x80010000, 0x123), payload=P[:9])
roce(0x51, ext=rdeth(0x1) + aeth(0x03, 1), syndrome=0x03, msn=1)
roce(0x55, ext=rdeth(0x2) + deth(1, 2))
roce(0x65, ext=deth(0x80010000, 1) + immdt(0x55AA55AA), payload=P[:24], dqpn=1)
roce(0xA4, ext=xrceth(0xBEEF), payload=P[:4])
roce(0xAD, ext=aeth(0x1F, 3), payload=P[:8], syndrome=0x1F, msn=3)
roce(0xBC, ext=xrceth(0x7) + feth(0, 1) + reth(0x10, 0x20, 0))
# CNP the way mlx5 sends it: DSCP 48, ECT(0), BECN, source port 0.
cnp = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(
    src="192.0.2.1", dst="192.0.2.2", tos=48 << 2 | 2, flags="DF") / UDP(sport=0, dport=4791, chksum=0) / BTH(
    opcode=0x81, becn=1, dqpn=0xD2, pkey=0xFFFF) / CNPPadding()
craw = bytes(cnp)
add(cnp, {"roce": 1, "ipver": 4, "opcode": 0x81, "dqpn": 0xD2, "psn": 0, "ackreq": 0, "se": 0,
          "migreq": 0, "pad": 0, "pkey": 0xFFFF, "fecn": 0, "becn": 1, "dscp": 48, "ecn": 2,
          "tags": 0, "pcp": "", "vid": "", "payload_len": 16, "syndrome": -1, "msn": "",
          "icrc": "%08x" % struct.unpack("<I", craw[-4:])[0], "icrc_ok": 1})
# Every ECN codepoint, DSCP variety, FECN/BECN and the other BTH bits.
for ecn in range(4):
    roce(0x04, payload=P[:6], ecn=ecn, dscp=[0, 26, 46, 63][ecn], fecn=ecn & 1, becn=ecn >> 1,
         migreq=ecn & 1, pkey=0x8001 + ecn, dqpn=0xFFFFFF - ecn, psn=0xFFFFFF - ecn)
# Tags: 802.1Q, 802.1ad QinQ, and the legacy 0x9100 service tag.
roce(0x04, payload=P[:6], tags=[("q", 3, 100)])
roce(0x11, ext=aeth(0x1F, 5), tags=[("ad", 1, 2000), ("q", 5, 42)], syndrome=0x1F, msn=5)
roce(0x0A, ext=reth(1, 2, 4), payload=P[:4], tags=[("q", 7, 4095), ("q", 2, 1)], tpid=0x9100)
# IPv4 options are covered by the ICRC too.
roce(0x04, payload=P[:6], ipopts=[IPOption_Router_Alert()])
# IPv6, ICRC computed here.
roce(0x04, payload=P[:5], v6=True)
roce(0x11, ext=aeth(0x06, 11), v6=True, syndrome=6, msn=11)
roce(0x0C, ext=reth(0x10, 0x20, 4096), v6=True, tags=[("ad", 0, 10), ("q", 6, 20)], ecn=1)
roce(0x81, payload=b"\x00" * 16, v6=True, dscp=48, becn=1, sport=0)
# Bad ICRCs must be caught.
roce(0x04, payload=P[:6], icrc=0xDEADBEEF)
roce(0x11, ext=aeth(0x1F, 0), v6=True, icrc=0x12345678, syndrome=0x1F)
# Not RoCE: ARP, TCP, UDP to another port from source port 4791.
for pkt in (Ether(src="02:00:00:00:00:01") / ARP(),
            Ether() / IP(tos=26 << 2) / TCP(dport=4791),
            Ether() / IP() / UDP(sport=4791, dport=53) / Raw(b"x" * 30)):
    add(pkt, {"roce": 0}, 60)

wrpcap(OUT + ".pcap", frames)
with open(OUT + ".tsv", "w") as f:
    f.write("\t".join(COLUMNS) + "\n")
    for r in rows:
        f.write("\t".join(str(r[c]) for c in COLUMNS) + "\n")
print(len(frames), "frames")
