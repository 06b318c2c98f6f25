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
// words; an IPv4 address is s1/d1 alone.
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
}

// NewHasher makes the hash over fields.
func NewHasher(fields Field, seed uint32, symmetric bool) Hasher {
	m := func(f Field) uint64 {
		if fields&f != 0 {
			return ^uint64(0)
		}
		return 0
	}
	return Hasher{src: m(SrcIP), dst: m(DstIP), proto: m(IPProto), sport: m(SrcPort), dport: m(DstPort),
		label: m(FlowLabel), qp: m(DestQP), seed: uint64(seed)*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d, sym: symmetric}
}

// Sum hashes a flow to 32 bits: the fields folded into one word, each
// rotated to its own place (so that swapping source and destination
// changes the word), then murmur3's finaliser, which carries every input
// bit into the high half. Two multiplies per packet.
func (h *Hasher) Sum(k *FlowKey) uint32 {
	return h.sum(k.S0, k.S1, k.D0, k.D1, uint64(k.Proto), uint64(k.SPort), uint64(k.DPort), uint64(k.FlowLabel), uint64(k.QP))
}

// Sum4 is Sum of an IPv4 flow, the routed path's common case, with the
// fields in registers rather than a FlowKey in memory: the same value as
// Sum of the FlowKey with S1, D1, Proto, SPort, DPort and QP set.
func (h *Hasher) Sum4(src, dst uint32, proto uint8, sport, dport uint16, qp uint32) uint32 {
	return h.sum(0, uint64(src), 0, uint64(dst), uint64(proto), uint64(sport), uint64(dport), 0, uint64(qp))
}

func (h *Hasher) sum(s0, s1, d0, d1, proto, sp, dp, label, qp uint64) uint32 {
	s0, s1, d0, d1 = s0&h.src, s1&h.src, d0&h.dst, d1&h.dst
	sp, dp = sp&h.sport, dp&h.dport
	if h.sym {
		// Order-free: the same value whichever end is the source.
		s0, s1, d0, d1 = s0^d0, s1^d1, s0&d0, s1&d1
		sp, dp = sp^dp, sp&dp
	}
	x := h.seed ^ s0 ^ bits.RotateLeft64(s1, 11) ^ bits.RotateLeft64(d0, 23) ^ bits.RotateLeft64(d1, 43) ^
		(proto&h.proto | sp<<8 | dp<<24 | (label&h.label)<<40) ^
		bits.RotateLeft64(qp&h.qp, 31)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return uint32(x >> 32)
}
