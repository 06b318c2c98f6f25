package pipeline

import (
	"encoding/binary"
	"math/bits"

	"roce-fwd/dpdk"
	"roce-fwd/fib"
	"roce-fwd/internal/cacheline"
	"roce-fwd/roce"
	"roce-fwd/routing"
)

// The routed path (a config with addresses and routes): after the mode's
// pass and the ingress flow rules, routePass checks each IP header, looks
// the destinations up in the FIB for the whole burst at once, picks each
// packet's adjacency (an ECMP group's by the flow hash), rewrites the
// Ethernet addresses, decrements the TTL or hop limit (patching the IPv4
// checksum; the RoCEv2 ICRC masks both) and sends the packet to its
// adjacency's port. A burst that goes to several ports is split by port
// for the egress stages (egress flow rules, QoS, dispose).

// RouteSpec is the routed path's state for New: the FIBs, shared by every
// worker and updated in place, and the first Plane.
type RouteSpec struct {
	V4, V6 *fib.Table // either may be nil
	Plane  *routing.Plane
	// Kernel maps a port to its exception path's TAP port: what the
	// kernel handles is punted there, and what the TAP sends goes out
	// of the port untouched.
	Kernel map[uint16]uint16
	// KernelRings, by TAP port, are where the workers put what they punt:
	// a TAP's transmit is a system call per packet, done off the workers
	// by whoever drains the rings (dpdk.Pump). Without one, workers
	// transmit to the TAP themselves.
	KernelRings map[uint16]*dpdk.Ring
	// PuntRate is the punted packets per second allowed per reason, all
	// workers together (0: no limit).
	PuntRate int
}

// Punted is what routePass hands to the kernel, where there is an
// exception path: these reasons stop being drops.
var Punted = [...]Reason{DropARP, DropForUs, DropTTLExpired, DropIPOptions, DropNeighborUnresolved, DropLinkLocal}

// Route classes: what the FIB decided for the packets it looked up.
const (
	RoutedForward  = iota // to a single next hop
	RoutedECMP            // to an ECMP group's member
	RoutedFragment        // forwarded IPv4 fragments (hashed on addresses alone)
	NumRouteClasses
)

// RouteClassNames name the route classes for counters.
var RouteClassNames = [NumRouteClasses]string{"forward", "ecmp", "fragment"}

// routeStage is a worker's routed path.
type routeStage struct {
	v4, v6 *fib.Table
	// memo6 is this worker's memory of its recent IPv6 lookups: a burst
	// to the subnets of the last bursts skips the trie's five levels.
	memo6    fib.Memo
	scratch4 fib.Scratch4 // the IPv4 lookups' working memory
	plane    *routing.Plane
	txOf     []int16 // port id → the worker's tx index, -1: none
	// out is, per adjacency of the plane, what the worker writes and
	// where it sends a packet to it, and what it sent there: one entry
	// (80 bytes) read and written per routed packet. (The counts in a line
	// of their own, apart from what is only read, ran slower.)
	out []adjOut
	// egressTx is the tx index every resolved packet of the burst goes
	// to, egressNone before the first, egressMixed once they differ.
	egressTx int
	// tagged: some packet of the burst has its IP header past offset 14
	// (VLAN tags). Only then does rs.l3 hold each packet's offset.
	tagged bool
	class  [NumRouteClasses]uint64
	// per burst: the packets looked up, by family
	l3      []uint16 // per packet: IP header offset, when tagged
	adjOf   []int32  // per looked-up packet: its adjacency, -1: none
	a4, nh4 []uint32
	l4      []looked
	hi, lo  []uint64
	nh6     []uint32
	l6      []looked
	egress  []uint16          // per packet: tx index, in a burst to several (egressMixed)
	keys    []routing.FlowKey // the ECMP-routed packets' flows, in order,
	sums    []uint32          // and their hashes
	pad     [56]byte          // a short frame's IP header and what follows, for ecmpHashes (padded)
	sub     burst             // one egress port's share of a split burst
	subPkts []*dpdk.Mbuf
	seenTx  []uint16
	// The exception path, per rx source: the tx index of the TAP its
	// punts go to, and for a TAP's own rx, the tx index of its port
	// (-1: none).
	kernelTx, fromKernel []int16
	punt                 [NumReasons]punter
}

// looked is a packet routePass looks up: what resolvePass needs of it
// besides the FIB's answer, so that its loops read one array in the order
// they go and not the burst's arrays at the packet's index.
type looked struct {
	// hdr is the frame's first 26 bytes: its Ethernet header and, when
	// untagged, the IP header's first 12 (IPv4's TTL and checksum, IPv6's
	// hop limit). Every frame looked up is that long.
	hdr  *[26]byte
	size uint32 // the packet's length, for its adjacency's byte count
	j    uint16 // its index in the burst
}

// punter is one reason's punts on this worker: a token bucket (tokens in
// packets, refilled from the poll's clock) and the count.
type punter struct {
	on     bool
	tokens float64
	last   int64
	rate   float64 // per ns; 0: unlimited
	burst  float64
	punted uint64 // what goes over the rate is the drop punt_limit
}

// adjOut is one adjacency as a worker uses it: the Ethernet addresses to
// write, the tx index (or adjUnresolved / adjNoTx: one load answers both
// checks), and the worker's counts of what it sent there.
type adjOut struct {
	hdr [12]byte
	tx  int16
	// The counts, in adjLanes lanes that packets take in turn: a burst's
	// packets mostly go to one adjacency, and with one count each packet's
	// increment waited for the one before it through memory.
	packets, bytes [adjLanes]uint64
}

// adjLanes is how many lanes an adjacency's counts are kept in.
const adjLanes = 4

// counts is what the adjacency sent, its lanes added up.
func (o *adjOut) counts() (packets, bytes uint64) {
	for l := range adjLanes {
		packets += o.packets[l]
		bytes += o.bytes[l]
	}
	return packets, bytes
}

func newRouteStage(spec *RouteSpec, n int, txOf []int16, rx []rxSource, workers int) *routeStage {
	rs := cacheline.New[routeStage]()
	*rs = routeStage{v4: spec.V4, v6: spec.V6, txOf: txOf,
		l3: cacheline.Alone[uint16](n), adjOf: cacheline.Alone[int32](n), a4: cacheline.Alone[uint32](maxPoll), nh4: cacheline.Alone[uint32](n), l4: cacheline.Alone[looked](maxPoll),
		hi: cacheline.Alone[uint64](maxPoll), lo: cacheline.Alone[uint64](maxPoll), nh6: cacheline.Alone[uint32](n), l6: cacheline.Alone[looked](maxPoll),
		egress: cacheline.Alone[uint16](n), keys: cacheline.Alone[routing.FlowKey](n), sums: cacheline.Alone[uint32](n), sub: newBurst(n), subPkts: cacheline.Alone[*dpdk.Mbuf](n), seenTx: cacheline.Alone[uint16](len(txOf))[:0]}
	rs.sub.pkts = nil
	tx := func(port uint16) int16 {
		if int(port) < len(txOf) {
			return txOf[port]
		}
		return -1
	}
	for _, r := range rx {
		k, f := int16(-1), int16(-1)
		if tap, ok := spec.Kernel[r.port]; ok {
			k = tx(tap)
		}
		for port, tap := range spec.Kernel {
			if tap == r.port {
				f = tx(port)
			}
		}
		rs.kernelTx, rs.fromKernel = append(rs.kernelTx, k), append(rs.fromKernel, f)
	}
	for _, r := range Punted {
		p := &rs.punt[r]
		p.on = true
		if spec.PuntRate > 0 {
			// Each worker takes its share; a burst of a tenth of a second.
			per := float64(spec.PuntRate) / float64(max(workers, 1))
			p.rate, p.burst = per/1e9, max(per/10, 64)
			p.tokens = p.burst
		}
	}
	rs.setPlane(spec.Plane)
	return rs
}

// drop drops packet j for reason, or punts it to the kernel when the
// burst's port has an exception path and reason is one the kernel
// handles, within the reason's rate. A punted packet goes to the TAP's
// queue at once and is taken out of the burst: the rest of the burst
// keeps its one egress port (the exception path has no egress stages).
func (w *Worker) punt(b *burst, j int, reason Reason) {
	rs := w.rt
	k := rs.kernelTx[b.src]
	p := &rs.punt[reason]
	if k < 0 || !p.on {
		b.drop(j, reason)
		return
	}
	if p.rate > 0 {
		if now := w.now; now > p.last {
			p.tokens = min(p.burst, p.tokens+float64(now-p.last)*p.rate)
			p.last = now
		}
		if p.tokens < 1 {
			b.drop(j, DropPuntLimit)
			return
		}
		p.tokens--
	}
	txq := &w.step.Txq[k]
	if txq.Room() == 0 {
		b.drop(j, DropPuntLimit)
		return
	}
	p.punted++
	txq.Push(b.pkts[j])
	b.take(j)
}

// setPlane installs a new Plane (between polls), keeping the adjacency
// counters of the ids that remain (and of those past the new plane's
// end: an id given up may come back).
func (rs *routeStage) setPlane(pl *routing.Plane) {
	rs.plane = pl
	out := cacheline.Alone[adjOut](max(len(pl.Adjs), len(rs.out)))
	for i := range rs.out {
		out[i].packets, out[i].bytes = rs.out[i].packets, rs.out[i].bytes
	}
	for i := len(pl.Adjs); i < len(out); i++ {
		out[i].tx = adjNoTx // not the plane's: no path leads there
	}
	for i, a := range pl.Adjs {
		o := &out[i]
		o.hdr = a.Hdr
		switch {
		case !a.Resolved:
			o.tx = adjUnresolved
		case int(a.Port) >= len(rs.txOf) || rs.txOf[a.Port] < 0:
			o.tx = adjNoTx
		default:
			o.tx = rs.txOf[a.Port]
		}
	}
	rs.out = out
}

const (
	adjUnresolved = -1 // the neighbour's MAC is not known
	adjNoTx       = -2 // the worker has no tx queue on the port
)

// The burst's egress before and after its tx queues differ: values no
// adjacency's tx is (a queue, adjUnresolved, adjNoTx), so that oneTx's
// common case is one compare.
const (
	egressNone  = -3 // no packet resolved yet
	egressMixed = -4 // the burst's packets go to several tx queues
)

const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	etherARP  = 0x0806
	etherVLAN = 0x8100
	etherQinQ = 0x88a8
)

// maxPoll is the most packets a poll may take from a queue (the config's
// largest burst, 512, times its largest max_bursts, 16): the length of
// routePass's lookup arrays.
const maxPoll = 512 * 16

// routePass routes the forwarded packets of b: parse, look up, resolve
// and rewrite, then the egress stages per tx port.
func (w *Worker) routePass(b *burst) {
	rs := w.rt
	rs.egressTx, rs.tagged = egressNone, false
	// 1. Check each IP header and collect the destinations. The common
	// frames (untagged IPv4 without options or fragmentation, untagged
	// IPv6) are checked inline; the rest take routeParse. The burst's
	// arrays are in locals, so that stores through them do not make the
	// compiler load b's and rs's fields again; the lookup arrays as
	// arrays of maxPoll, indexed masked (n4 and n6 stay below the burst's
	// length), so that neither their lengths nor bounds checks take
	// registers in a loop that has too few.
	pkts := b.pkts
	fates := b.fate[:len(pkts)]
	a4, l4 := (*[maxPoll]uint32)(rs.a4), (*[maxPoll]looked)(rs.l4)
	hi, lo, l6 := (*[maxPoll]uint64)(rs.hi), (*[maxPoll]uint64)(rs.lo), (*[maxPoll]looked)(rs.l6)
	n4, n6, j := 0, 0, 0
	if b.odd == 0 {
		// The common bursts first: untagged IPv4 without options, or
		// untagged IPv6, every packet still on its way, in a loop of
		// their own with few enough live values for the registers (the
		// general loop's spill). It stops at the first packet that is not
		// so; the general loop goes on from there.
		if j = ipv4Run(pkts, a4, l4); j == 0 {
			j = ipv6Run(pkts, hi, lo, l6)
			n6 = j
		}
		n4 = j - n6
	}
	for ; j < len(pkts); j++ {
		m := pkts[j]
		if fates[j] != fateForward {
			continue
		}
		// b.frame and b.size are left as the mode's passes had them: what
		// this stage needs of a packet it keeps in its looked entry.
		f, size := m.Data(), uint32(m.PktLen())
		if x0, x1, x2, ok := ipv4Words(f); ok && ipv4Forwardable(x0, x1, x2, len(f)-14) && (m.IPv4HeaderVerified() || ipv4WordsSumOK(x0, x1, x2)) {
			a4[n4&(maxPoll-1)], l4[n4&(maxPoll-1)] = bits.ReverseBytes32(x2), looked{(*[26]byte)(f), size, uint16(j)}
			n4++
			continue
		}
		if fastIPv6(f) {
			k := n6 & (maxPoll - 1)
			hi[k], lo[k], l6[k] = binary.BigEndian.Uint64(f[38:]), binary.BigEndian.Uint64(f[46:]), looked{(*[26]byte)(f), size, uint16(j)}
			n6++
			continue
		}
		switch w.routeParse(b, j, f) {
		case 4:
			a4[n4&(maxPoll-1)], l4[n4&(maxPoll-1)] = binary.BigEndian.Uint32(f[int(rs.l3[j])+16:]), looked{(*[26]byte)(f), size, uint16(j)}
			n4++
		case 6:
			l3 := int(rs.l3[j])
			k := n6 & (maxPoll - 1)
			hi[k], lo[k], l6[k] = binary.BigEndian.Uint64(f[l3+24:]), binary.BigEndian.Uint64(f[l3+32:]), looked{(*[26]byte)(f), size, uint16(j)}
			n6++
		}
	}
	// 2. The lookups, a family at a time, staged inside the FIB.
	if n4 > 0 {
		if rs.v4 == nil {
			clear(rs.nh4[:n4])
		} else {
			rs.v4.LookupBatch4(rs.a4[:n4], rs.nh4[:n4], &rs.scratch4)
		}
		w.resolvePass(b, rs.l4[:n4], rs.nh4[:n4], true)
	}
	if n6 > 0 {
		if rs.v6 == nil {
			clear(rs.nh6[:n6])
		} else {
			rs.v6.LookupBatch6(rs.hi[:n6], rs.lo[:n6], rs.nh6[:n6], &rs.memo6)
		}
		w.resolvePass(b, rs.l6[:n6], rs.nh6[:n6], false)
	}
	// 3. The egress stages, per port.
	w.egressByPort(b)
}

// ipv4Run collects the destinations of the packets at the start of pkts
// that routePass's inline IPv4 check takes (untagged, no options, no
// fragment, TTL above 1, a destination below 224, a right checksum) into
// a4 and l4, at their own indices, and returns how many there are: the
// first packet it does not take is the general loop's. (The check is the
// general loop's, written out: through ipv4Words its flag costs five
// instructions a packet more, and as one function it is too large to
// inline.)
func ipv4Run(pkts []*dpdk.Mbuf, a4 *[maxPoll]uint32, l4 *[maxPoll]looked) int {
	for j, m := range pkts {
		f := m.Data()
		if len(f) < 54 || binary.BigEndian.Uint16(f[12:]) != etherIPv4 || f[14] != 0x45 {
			return j
		}
		h := (*[20]byte)(f[14:])
		x0, x1, x2 := binary.LittleEndian.Uint64(h[0:]), binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint32(h[16:])
		if !ipv4Forwardable(x0, x1, x2, len(f)-14) || !m.IPv4HeaderVerified() && !ipv4WordsSumOK(x0, x1, x2) {
			return j
		}
		a4[j&(maxPoll-1)], l4[j&(maxPoll-1)] = bits.ReverseBytes32(x2), looked{(*[26]byte)(f), uint32(m.PktLen()), uint16(j)}
	}
	return len(pkts)
}

// ipv6Run is ipv4Run for the packets fastIPv6 takes.
func ipv6Run(pkts []*dpdk.Mbuf, hi, lo *[maxPoll]uint64, l6 *[maxPoll]looked) int {
	for j, m := range pkts {
		f := m.Data()
		if !fastIPv6(f) {
			return j
		}
		k := j & (maxPoll - 1)
		hi[k], lo[k], l6[k] = binary.BigEndian.Uint64(f[38:]), binary.BigEndian.Uint64(f[46:]), looked{(*[26]byte)(f), uint32(m.PktLen()), uint16(j)}
	}
	return len(pkts)
}

// ipv4Words reads the header of an untagged IPv4 frame f without options,
// long enough for routePass's inline checks, as three little-endian
// words (bytes 0-7, 8-15, 16-19); ok is false for any other frame.
func ipv4Words(f []byte) (x0, x1 uint64, x2 uint32, ok bool) {
	if len(f) < 54 || binary.BigEndian.Uint16(f[12:]) != etherIPv4 || f[14] != 0x45 {
		return 0, 0, 0, false
	}
	h := (*[20]byte)(f[14:])
	return binary.LittleEndian.Uint64(h[0:]), binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint32(h[16:]), true
}

// fastIPv6 is routePass's inline check of the common IPv6 frame f:
// untagged, a hop limit above 1 and a destination that is neither
// link-local nor multicast.
func fastIPv6(f []byte) bool {
	return len(f) >= 54 && binary.BigEndian.Uint16(f[12:]) == etherIPv6 && f[14]>>4 == 6 && f[21] > 1 && f[38] < 0xfe
}

// routeParse is the header check of the frames routePass does not check
// inline: tagged, short or odd ones. It returns the IP version of a frame
// to look up (its header offset in rs.l3), or 0 when it dropped it.
func (w *Worker) routeParse(b *burst, j int, f []byte) int {
	rs := w.rt
	if len(f) < 14 {
		b.drop(j, DropRunt)
		return 0
	}
	et, l3 := binary.BigEndian.Uint16(f[12:]), 14
	for (et == etherVLAN || et == etherQinQ) && len(f) >= l3+4 {
		et, l3 = binary.BigEndian.Uint16(f[l3+2:]), l3+4
	}
	if l3 != 14 && !rs.tagged {
		// The burst's first tagged frame: from here every packet's
		// offset is read from rs.l3, and those checked inline are at 14.
		rs.tagged = true
		for i := range b.pkts {
			rs.l3[i] = 14
		}
	}
	rs.l3[j] = uint16(l3)
	switch et {
	case etherIPv4:
		if r := checkIPv4(f, l3, b.pkts[j].IPv4HeaderVerified()); r != reasonNone {
			w.punt(b, j, r)
			return 0
		}
		if f[l3+16] >= 224 { // multicast, or the broadcast address
			w.punt(b, j, DropLinkLocal)
			return 0
		}
		if binary.BigEndian.Uint16(f[l3+6:])&0x3fff != 0 {
			rs.class[RoutedFragment]++
		}
		return 4
	case etherIPv6:
		if len(f) < l3+40 || f[l3]>>4 != 6 {
			b.drop(j, DropIPHeader)
			return 0
		}
		if d := f[l3+24]; d == 0xff || d == 0xfe && f[l3+25]&0xc0 == 0x80 { // multicast, link-local
			w.punt(b, j, DropLinkLocal)
			return 0
		}
		if f[l3+7] <= 1 {
			w.punt(b, j, DropTTLExpired)
			return 0
		}
		return 6
	case etherARP:
		w.punt(b, j, DropARP)
	case roce.EtherTypeMACControl:
		if l3 == 14 {
			w.consumeMAC(b, j, f) // PFC and PAUSE are the port's
		} else {
			b.drop(j, DropNotIP)
		}
	default:
		b.drop(j, DropNotIP)
	}
	return 0
}

// reasonNone is no drop, for checks that return a Reason.
const reasonNone = NumReasons

// checkIPv4 is what a router checks of an IPv4 header before forwarding
// it (RFC 1812 5.2.2): length, version, no options (those go the slow
// way), total length within the frame, the header checksum (unless the
// port verified it on receive), and a TTL that survives the hop.
func checkIPv4(f []byte, l3 int, verified bool) Reason {
	if len(f) < l3+20 {
		return DropIPHeader
	}
	h := f[l3 : l3+20]
	if h[0] != 0x45 {
		if h[0]>>4 != 4 || h[0]&15 < 5 {
			return DropIPHeader
		}
		return DropIPOptions
	}
	if tl := int(binary.BigEndian.Uint16(h[2:])); tl < 20 || tl > len(f)-l3 {
		return DropIPHeader
	}
	if !verified && !ipv4SumOK(h) {
		return DropIPChecksum
	}
	if h[8] <= 1 {
		return DropTTLExpired
	}
	return reasonNone
}

// ipv4Forwardable is routePass's fast check of an IPv4 header (version 4,
// IHL 5) read as three little-endian words, bytes 0-7, 8-15 and 16-19,
// with room bytes from it to the frame's end: total length within the
// frame, a destination that is not multicast or broadcast, no fragment,
// a TTL above 1. Every field comes from the words: the header takes three
// loads. A header that fails goes to routeParse, which says why.
func ipv4Forwardable(x0, x1 uint64, x2 uint32, room int) bool {
	tl := int(bits.ReverseBytes16(uint16(x0 >> 16)))   // bytes 2-3
	return tl >= 20 && tl <= room && byte(x2) < 224 && // byte 16: the destination's first
		x0>>48&0xff3f == 0 && byte(x1) > 1 // bytes 6-7: no MF, no offset; byte 8: the TTL
}

// ipv4SumOK reports whether a 20-byte header's checksum is right: the
// ones' complement sum of its words is 0xffff (RFC 1071). That sum is
// 0xffff exactly when the plain sum S of the words is a non-zero multiple
// of 0xffff (2^16 = 1 modulo 0xffff, which is what the end-around carry
// adds). The same holds for the sum of the header's five little-endian
// 32-bit words: each 32-bit word is 2^16 = 1 times one 16-bit word plus
// the other, and each byte-swapped 16-bit word is 256 times the word
// (modulo 0xffff, and 256 is prime to it). The words are added as three
// 64-bit ones (bytes 0-7, 8-15, 16-19) with each carry out added back in:
// 2^64 = 1 modulo 0xffff as well, so the residue is the same. So: three
// loads, an add and two adds with carry, and a divisibility test the
// compiler makes one multiply and a compare.
func ipv4SumOK(h []byte) bool {
	_ = h[19]
	return ipv4WordsSumOK(binary.LittleEndian.Uint64(h), binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint32(h[16:]))
}

// ipv4WordsSumOK is ipv4SumOK of the header whose bytes 0-7, 8-15 and
// 16-19 read as little-endian words are x0, x1 and x2.
func ipv4WordsSumOK(x0, x1 uint64, x2 uint32) bool {
	s, c := bits.Add64(x0, x1, 0)
	s, c = bits.Add64(s, uint64(x2), c) // a carry here leaves s below 2^32,
	s, _ = bits.Add64(s, 0, c)          // so this add cannot carry
	// s is 0 only for a header of zeros: after a carry it is at least 1.
	return s%0xffff == 0 && s != 0
}

// resolvePass applies the FIB's values nh to the packets ls of one
// family: each goes to its path's adjacency, its header rewritten, or is
// dropped under the path's reason.
func (w *Worker) resolvePass(b *burst, ls []looked, nh []uint32, v4 bool) {
	rs := w.rt
	pl := rs.plane
	paths, buckets := pl.Paths, pl.Buckets
	var sums []uint32
	if len(buckets) != 0 { // the plane has ECMP groups
		sums = w.ecmpHashes(b, ls, nh, v4)
	}
	out := rs.out
	all := rs.egressTx
	adjOf, nh := rs.adjOf[:len(ls)], nh[:len(ls)]
	fast := !rs.tagged && all != egressMixed
	// The common burst: untagged frames to one port. Its packets need no
	// egress entry (the burst goes out whole) and their IP headers are at
	// 14, so a loop keeps its few values in registers. It stops at the
	// first packet that is not so. Without ECMP groups in the plane that
	// loop reads each packet's path itself and stops too at one that is
	// not to a single next hop. The packets after it (all of them, with
	// ECMP groups) have their adjacencies picked first (an ECMP group's
	// member by the flow's hash), each loop with few enough live values
	// to stay in registers; then the same fast loop on adjacencies, then
	// the general one.
	k := 0
	if fast && sums == nil {
		for ; k < len(ls); k++ {
			v := nh[k]
			if int(v) >= len(paths) || paths[v].Kind != routing.PathForward {
				break
			}
			o := &out[paths[v].Adj]
			var one bool
			if all, one = oneTx(all, int(o.tx)); !one {
				break
			}
			l := &ls[k]
			o.rewrite(l, (*[12]byte)(l.hdr[14:]), k, v4)
		}
	}
	single, ecmp := uint64(k), uint64(0)
	for i := k; i < len(ls); i++ {
		v := nh[i]
		adjOf[i] = -1
		if int(v) >= len(paths) {
			b.drop(int(ls[i].j), DropNoRoute) // 0, or a path this worker has not been given
			continue
		}
		switch p := &paths[v]; p.Kind {
		case routing.PathForward:
			adjOf[i] = int32(p.Adj)
			single++
		case routing.PathECMP:
			adjOf[i] = int32(buckets[p.First+sums[ecmp]&p.Mask])
			ecmp++
		default:
			w.punt(b, int(ls[i].j), pathDrop[p.Kind&7])
		}
	}
	rs.class[RoutedForward] += single
	rs.class[RoutedECMP] += ecmp

	if fast && sums != nil {
		for ; k < len(adjOf); k++ {
			a := adjOf[k]
			if a < 0 {
				continue
			}
			o := &out[a]
			var one bool
			if all, one = oneTx(all, int(o.tx)); !one {
				break
			}
			l := &ls[k]
			o.rewrite(l, (*[12]byte)(l.hdr[14:]), k, v4)
		}
	}
	egress := rs.egress
	var l3s []uint16 // header offsets, when not all 14
	if rs.tagged {
		l3s = rs.l3
	}
	for ; k < len(adjOf); k++ {
		a := adjOf[k]
		if a < 0 {
			continue
		}
		l, o := &ls[k], &out[a]
		j := int(l.j)
		tx := int(o.tx)
		if tx < 0 {
			if tx == adjUnresolved {
				w.punt(b, j, DropNeighborUnresolved)
			} else {
				b.drop(j, DropNoRoute)
			}
			continue
		}
		if tx != all {
			if all >= 0 {
				// Mixed from here: what was resolved so far went to all
				// and has no entry of its own.
				for i := range b.pkts {
					egress[i] = uint16(all)
				}
			}
			all = egressOf(all, tx)
		}
		ip := (*[12]byte)(l.hdr[14:])
		if l3s != nil {
			ip = (*[12]byte)(b.pkts[j].Data()[l3s[j]:])
		}
		o.rewrite(l, ip, k, v4)
		egress[j] = uint16(tx)
	}
	rs.egressTx = all
}

// oneTx is the fast loops' test of a packet to tx queue tx in a burst
// whose packets so far all go to all (egressNone before the first): it
// reports whether the burst still goes to one queue, and that queue. A
// negative tx (an unresolved neighbour or no tx queue) is for the general
// loop. The common case, a packet to the queue of the packets before it,
// takes one compare: no tx equals egressNone.
func oneTx(all, tx int) (int, bool) {
	if tx == all {
		return all, true
	}
	if all == egressNone && tx >= 0 {
		return tx, true
	}
	return all, false
}

// rewrite sends the k-th looked-up packet l to adjacency o: its Ethernet
// addresses, the TTL (and checksum) or hop limit of its IP header ip
// (what follows the Ethernet header, or the VLAN tags), and o's counts.
func (o *adjOut) rewrite(l *looked, ip *[12]byte, k int, v4 bool) {
	*(*[12]byte)(l.hdr[:12]) = o.hdr
	if v4 {
		hopIPv4(ip)
	} else {
		ip[7]--
	}
	o.packets[uint(k)%adjLanes]++
	o.bytes[uint(k)%adjLanes] += uint64(l.size)
}

// hopIPv4 decrements the TTL of the IPv4 header h, whose TTL is above 1
// and whose checksum is right, and updates the checksum (RFC 1624): the
// 16-bit word of TTL and protocol drops by 0x100, so the checksum rises by
// as much, end-around. Bytes 8-11 (TTL, protocol, checksum high and low
// byte) read as one little-endian word take both in one add: the TTL's
// byte loses 1 without a borrow, and a carry out of the checksum's high
// byte lands in its low byte, which is the end-around carry. The low byte
// could carry out of the word only from a checksum of 0xffff, which no
// right checksum is (the ones' complement sum of words that are not all
// zero is never zero).
func hopIPv4(h *[12]byte) {
	binary.LittleEndian.PutUint32(h[8:], binary.LittleEndian.Uint32(h[8:])+0x10000-1)
}

// egressOf is the burst's egressTx after a packet to tx, when it was all
// and differs from tx.
func egressOf(all, tx int) int {
	if all == egressNone {
		return tx
	}
	return egressMixed
}

// pathDrop is the reason a path that does not forward drops for.
var pathDrop = [8]Reason{routing.PathNone: DropNoRoute, routing.PathForward: DropNoRoute, routing.PathECMP: DropNoRoute, routing.PathDrop: DropRouteDrop, routing.PathLocal: DropForUs,
	routing.PathGlean: DropNeighborUnresolved, 6: DropNoRoute, 7: DropNoRoute}

// ecmpHashes hashes the flows of the packets ls that the FIB's values nh
// send to an ECMP group, in their order. A flow is its addresses,
// protocol, ports (not of an IPv4 fragment: only the first carries them),
// IPv6 flow label and, for RoCEv2, the BTH destination QP. An IPv4 flow
// is hashed as its fields are read (Hasher.SumV4, inlined), unless the
// hash is symmetric; the others are written as keys and hashed in one
// loop (Hasher.SumAll), not a call per packet.
func (w *Worker) ecmpHashes(b *burst, ls []looked, nh []uint32, v4 bool) []uint32 {
	rs := w.rt
	paths, h := rs.plane.Paths, &rs.plane.Hash
	keys, sums, pkts := rs.keys, rs.sums, b.pkts
	var l3s []uint16 // header offsets, when not all 14
	if rs.tagged {
		l3s = rs.l3
	}
	direct := v4 && !h.Symmetric()
	n := 0
	if direct && l3s == nil {
		// The common case, untagged IPv4 with an asymmetric hash, in a
		// loop of its own: a frame's fields at fixed offsets from its
		// start, hashed as they are read.
		for k, v := range nh[:len(ls)] {
			if int(v) >= len(paths) || paths[v].Kind != routing.PathECMP {
				continue
			}
			f := pkts[ls[k].j].Data()
			if len(f) < 50 {
				sums[n] = rs.sum4(f[14:])
				n++
				continue
			}
			e := (*[50]byte)(f) // Ethernet, IPv4 (IHL 5), UDP, the BTH to its destination QP
			proto := e[23]
			ports, qp := l4Fields(proto, binary.BigEndian.Uint16(e[20:]), (*[16]byte)(e[34:]))
			sums[n] = h.SumV4(binary.BigEndian.Uint32(e[26:]), binary.BigEndian.Uint32(e[30:]), routing.L4Word(proto, ports), qp)
			n++
		}
		return sums[:n]
	}
	for k, v := range nh[:len(ls)] {
		if int(v) >= len(paths) || paths[v].Kind != routing.PathECMP {
			continue
		}
		j := int(ls[k].j)
		f, l3 := pkts[j].Data(), 14
		if l3s != nil {
			l3 = int(l3s[j])
		}
		// The fields are read here and not in a call (which would spill
		// the loop's values): one view of the IP header, the UDP header and
		// the BTH up to its destination QP, fixed offsets, one bounds
		// check. A key is written field by field; a composite literal is
		// built on the stack and copied in wide loads that wait for its
		// narrow stores.
		ip := f[l3:]
		if direct { // a tagged frame: rare enough for a call
			sums[n] = rs.sum4(ip)
			n++
			continue
		}
		if v4 {
			if len(ip) < 36 {
				ip = rs.padded(ip, true)
			}
			h4 := (*[36]byte)(ip) // IHL 5: the routed path takes no options
			proto := h4[9]
			ports, qp := l4Fields(proto, binary.BigEndian.Uint16(h4[6:]), (*[16]byte)(h4[20:]))
			src, dst := binary.BigEndian.Uint32(h4[12:]), binary.BigEndian.Uint32(h4[16:])
			key := &keys[n]
			key.S0, key.S1, key.D0, key.D1 = 0, uint64(src), 0, uint64(dst)
			key.Proto, key.FlowLabel = uint32(proto), 0
			key.SPort, key.DPort, key.QP = ports>>16, ports&0xffff, qp
		} else {
			if len(ip) < 56 {
				ip = rs.padded(ip, false)
			}
			h6 := (*[56]byte)(ip)
			proto := h6[6]
			ports, qp := l4Fields(proto, 0, (*[16]byte)(h6[40:]))
			key := &keys[n]
			key.S0, key.S1 = binary.BigEndian.Uint64(h6[8:]), binary.BigEndian.Uint64(h6[16:])
			key.D0, key.D1 = binary.BigEndian.Uint64(h6[24:]), binary.BigEndian.Uint64(h6[32:])
			key.Proto, key.FlowLabel = uint32(proto), binary.BigEndian.Uint32(h6[0:])&0xfffff
			key.SPort, key.DPort, key.QP = ports>>16, ports&0xffff, qp
		}
		n++
	}
	if !direct {
		h.SumAll(keys[:n], sums[:n])
	}
	return sums[:n]
}

// sum4 is the flow hash of the IPv4 packet whose header (IHL 5) begins
// ip, for a hasher that is not symmetric (routing.Hasher.SumV4), for the
// frames ecmpHashes's common loop does not read: tagged, or too short for
// its view (read through a padded copy).
func (rs *routeStage) sum4(ip []byte) uint32 {
	if len(ip) < 36 {
		ip = rs.padded(ip, true)
	}
	h4 := (*[36]byte)(ip)
	proto := h4[9]
	ports, qp := l4Fields(proto, binary.BigEndian.Uint16(h4[6:]), (*[16]byte)(h4[20:]))
	return rs.plane.Hash.SumV4(binary.BigEndian.Uint32(h4[12:]), binary.BigEndian.Uint32(h4[16:]), routing.L4Word(proto, ports), qp)
}

// l4Fields reads the ports of a UDP or TCP header l4, as source<<16 |
// destination (0 for another protocol, and for an IPv4 fragment, whose
// flags and offset word is frag: only the first fragment carries them;
// IPv6 passes 0), and the BTH destination QP of a RoCEv2 packet (0 for
// any other).
//
// Both words are read whatever l4 holds and zeroed by selects: through
// branches, ecmpHashes' common loop moved them through the stack.
func l4Fields(proto uint8, frag uint16, l4 *[16]byte) (ports, qp uint32) {
	ports, qp = binary.BigEndian.Uint32(l4[0:]), binary.BigEndian.Uint32(l4[12:])&0xffffff
	if frag&0x3fff != 0 || proto != 17 && proto != 6 {
		ports = 0
	}
	if proto != 17 || ports&0xffff != 4791 {
		qp = 0
	}
	return ports, qp
}

// padded is ip, the IP header and what follows of a frame shorter than
// ecmpHashes's view, copied into rs.pad and zero-padded: the ports read
// as zero unless the frame holds all four of their bytes, the QP unless
// it holds the BTH's up to it.
func (rs *routeStage) padded(ip []byte, v4 bool) []byte {
	p := &rs.pad
	clear(p[copy(p[:], ip):])
	l4 := 40
	if v4 {
		l4 = 20
	}
	if len(ip) < l4+4 {
		clear(p[l4 : l4+4])
	}
	if len(ip) < l4+16 {
		clear(p[l4+12 : l4+16])
	}
	return p[:]
}

// egressByPort runs the egress stages on b: whole when every forwarded
// packet goes to one port, else once per port on that port's packets
// (kept in order), after the burst's drops are counted.
func (w *Worker) egressByPort(b *burst) {
	rs := w.rt
	if rs.egressTx != egressMixed {
		if rs.egressTx >= 0 {
			b.tx = rs.egressTx
		}
		w.egress(b)
		return
	}
	// Drops are counted (and taken packets left) here; the forwarded go
	// out per port below.
	if tapBuilt && len(w.taps) != 0 {
		w.tapOut(b, false, true)
	}
	seen := rs.seenTx[:0]
	for j, m := range b.pkts {
		switch f := b.fate[j]; {
		case f >= fateDrop:
			w.drop(m, Reason(f-fateDrop))
		case f == fateForward:
			tx := rs.egress[j]
			known := false
			for _, t := range seen {
				known = known || t == tx
			}
			if !known {
				seen = append(seen, tx)
			}
		}
	}
	rs.seenTx = seen
	s := &rs.sub
	for _, tx := range seen {
		n := 0
		for j := range b.pkts {
			if b.fate[j] == fateForward && rs.egress[j] == tx {
				s.frame[n], s.size[n], s.res[n], s.qslot[n], s.flowHit[n] = b.frame[j], b.size[j], b.res[j], b.qslot[j], b.flowHit[j]
				n++
			}
		}
		pkts := rs.subPkts[:0]
		for j, m := range b.pkts {
			if b.fate[j] == fateForward && rs.egress[j] == tx {
				pkts = append(pkts, m)
			}
		}
		s.reset(b.src, int(tx), pkts)
		s.classified, s.flowed = b.classified, b.flowed
		w.egress(s)
	}
}

// SetPlane hands every worker a new routing Plane: when it returns, no
// worker uses the previous one (routing.Router's publish).
func (p *Pipeline) SetPlane(pl *routing.Plane) error {
	var first error
	for _, w := range p.Workers {
		if w.rt == nil {
			continue
		}
		if err := w.do("routing update", func() bool { w.rt.setPlane(pl); return true }); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// RouteStats is what the workers routed, summed: per route class and per
// adjacency (ECMP members and single next hops alike).
type RouteStats struct {
	Classes [NumRouteClasses]uint64
	Adj     []AdjStats // by adjacency id
	// Punts are the packets handed to the kernel per reason (those over
	// the reason's rate are counted as the drop punt_limit).
	Punts map[string]uint64
	// IPv6Memo and IPv6Walked are the IPv6 lookups the workers' memos
	// answered and those that walked the trie (fib.Memo).
	IPv6Memo, IPv6Walked uint64
}

// AdjStats counts what went to one adjacency.
type AdjStats struct{ Packets, Bytes uint64 }

// RouteStats snapshots every worker's routing counters.
func (p *Pipeline) RouteStats() RouteStats {
	st := RouteStats{Punts: map[string]uint64{}}
	for _, w := range p.Workers {
		if w.rt == nil {
			continue
		}
		_ = w.do("routing counters", func() bool {
			rs := w.rt
			for _, r := range Punted {
				st.Punts[r.String()] += rs.punt[r].punted
			}
			for i := range rs.class {
				st.Classes[i] += rs.class[i]
			}
			memo, walked := rs.memo6.Counts()
			st.IPv6Memo += memo
			st.IPv6Walked += walked
			if len(st.Adj) < len(rs.out) {
				st.Adj = append(st.Adj, make([]AdjStats, len(rs.out)-len(st.Adj))...)
			}
			for i := range rs.out {
				p, n := rs.out[i].counts()
				st.Adj[i].Packets += p
				st.Adj[i].Bytes += n
			}
			return true
		})
	}
	return st
}
