package routing

import "math/bits"

// Field is one packet field an ECMP hash may cover.
type Field uint8

const (
	SrcIP Field = 1 << iota
	DstIP
	IPProto
	SrcPort // UDP/TCP source port: RoCEv2's entropy, derived from the QP by rdma-core
	DstPort
	FlowLabel // IPv6
	DestQP    // the BTH destination QP of a RoCEv2 packet
)

// FieldNames are the config's names of the fields, in bit order.
var FieldNames = []string{"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "flow_label", "dest_qp"}

// ParseFields maps config names to a field set.
func ParseFields(names []string) (Field, bool) {
	var f Field
	for _, n := range names {
		ok := false
		for i, v := range FieldNames {
			if v == n {
				f |= 1 << i
				ok = true
			}
		}
		if !ok {
			return 0, false
		}
	}
	return f, true
}

// FlowKey is what the hash reads of a packet. Addresses are big-endian
// words; an IPv4 address is s1/d1 alone. The other fields hold no more
// than their wire widths (8, 16, 16, 20 and 24 bits): the hash packs
// them into one word.
type FlowKey struct {
	S0, S1, D0, D1 uint64
	Proto          uint32
	SPort, DPort   uint32
	FlowLabel      uint32
	QP             uint32
}

// Hasher is an ECMP group's flow hash: a field set, a per-box seed (two
// tiers with the same hash would send a flow's whole share of one tier's
// link to one link of the next: polarisation) and optionally symmetric,
// so both directions of a flow take the same member. Fields are masked in
// rather than branched on.
type Hasher struct {
	src, dst, proto, sport, dport, label, qp uint64 // all ones or zero
	seed                                     uint64
	sym                                      bool
	// word is the mask of the word protocol, ports and flow label are
	// packed into (proto | sport<<8 | dport<<24 | label<<40), which
	// SumAll applies at once.
	word uint64
}

// NewHasher makes the hash over fields.
func NewHasher(fields Field, seed uint32, symmetric bool) Hasher {
	m := func(f Field) uint64 {
		if fields&f != 0 {
			return ^uint64(0)
		}
		return 0
	}
	h := Hasher{src: m(SrcIP), dst: m(DstIP), proto: m(IPProto), sport: m(SrcPort), dport: m(DstPort),
		label: m(FlowLabel), qp: m(DestQP), seed: uint64(seed)*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d, sym: symmetric}
	h.word = h.proto&0xff | h.sport&0xffff<<8 | h.dport&0xffff<<24 | h.label&0xfffff<<40
	return h
}

// Sum hashes a flow to 32 bits: the fields folded into one word, each
// rotated to its own place (so that swapping source and destination
// changes the word), then murmur3's finaliser, which carries every input
// bit into the high half. Two multiplies per packet.
func (h *Hasher) Sum(k *FlowKey) uint32 {
	var out [1]uint32
	h.sumFields([]FlowKey{*k}, out[:])
	return out[0]
}

// sumFields is Sum of each key into out, every field masked on its own.
func (h *Hasher) sumFields(keys []FlowKey, out []uint32) {
	src, dst, sport, dport := h.src, h.dst, h.sport, h.dport
	proto, label, qp, seed, sym := h.proto, h.label, h.qp, h.seed, h.sym
	out = out[:len(keys)]
	for i := range keys {
		k := &keys[i]
		s0, s1, d0, d1 := k.S0&src, k.S1&src, k.D0&dst, k.D1&dst
		sp, dp := uint64(k.SPort)&sport, uint64(k.DPort)&dport
		if sym {
			// Order-free: the same value whichever end is the source.
			s0, s1, d0, d1 = s0^d0, s1^d1, s0&d0, s1&d1
			sp, dp = sp^dp, sp&dp
		}
		out[i] = finish(seed ^ s0 ^ bits.RotateLeft64(s1, 11) ^ bits.RotateLeft64(d0, 23) ^ bits.RotateLeft64(d1, 43) ^
			(uint64(k.Proto)&proto | sp<<8 | dp<<24 | (uint64(k.FlowLabel)&label)<<40) ^
			bits.RotateLeft64(uint64(k.QP)&qp, 31))
	}
}

// finish is murmur3's 64-bit finaliser, its high half.
func finish(x uint64) uint32 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return uint32(x >> 32)
}

// SumV4 is Sum of an IPv4 flow from its fields, for a hasher that is
// not Symmetric: addresses src and dst, l4 the protocol, source and
// destination ports packed by L4Word, and qp the BTH destination QP (0
// where the packet has none). Small enough to be
// inlined into the data path's loop, which then neither stores a
// FlowKey nor loads it back. The formula is Sum's written out, as in
// SumAll: through one shared helper, whose arguments are all computed
// before the first XOR, both loops spilled registers to the stack.
// TestSumV4 and TestSumAll hold the three to one value.
func (h *Hasher) SumV4(src, dst uint32, l4 uint64, qp uint32) uint32 {
	return finish(h.seed ^ bits.RotateLeft64(uint64(src)&h.src, 11) ^ bits.RotateLeft64(uint64(dst)&h.dst, 43) ^
		l4&h.word ^ bits.RotateLeft64(uint64(qp)&h.qp, 31))
}

// L4Word packs an IP protocol and the ports of its UDP/TCP header, as the
// header carries them (source<<16 | destination; 0 without them), into
// the word SumV4 takes: proto | sport<<8 | dport<<24, the layout of
// Hasher.word. (A parameter of SumV4's own would put it over the
// inlining budget.)
func L4Word(proto uint8, ports uint32) uint64 {
	return uint64(proto) | uint64(ports>>16)<<8 | uint64(ports&0xffff)<<24
}

// Symmetric reports whether the hash is the same both ways of a flow.
func (h *Hasher) Symmetric() bool { return h.sym }

// SumAll is Sum of each key into out, for the data path's burst: one
// loop with the hasher's masks in registers, and no call per packet
// (Sum is too large for the compiler to inline). Without symmetry the
// protocol, ports and flow label are packed and masked as one word (the
// same bits as Sum's), which leaves few enough live values for the loop
// to run without spills.
func (h *Hasher) SumAll(keys []FlowKey, out []uint32) {
	if h.sym {
		h.sumFields(keys, out)
		return
	}
	out = out[:len(keys)]
	src, dst, word, qp, seed := h.src, h.dst, h.word, h.qp, h.seed
	for i := range keys {
		k := &keys[i]
		w := uint64(k.Proto) | uint64(k.SPort)<<8 | uint64(k.DPort)<<24 | uint64(k.FlowLabel)<<40
		out[i] = finish(seed ^ k.S0&src ^ bits.RotateLeft64(k.S1&src, 11) ^ bits.RotateLeft64(k.D0&dst, 23) ^
			bits.RotateLeft64(k.D1&dst, 43) ^ w&word ^ bits.RotateLeft64(uint64(k.QP)&qp, 31))
	}
}
