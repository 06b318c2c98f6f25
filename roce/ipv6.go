package roce

import "encoding/binary"

// IPv6 header field offsets.
const (
	// IPv6VTCFlowOffset is the first 32-bit word: version (4 bits),
	// traffic class (8), flow label (20).
	IPv6VTCFlowOffset    = 0
	IPv6PayloadLenOffset = 4
	IPv6NextHeaderOffset = 6
	IPv6HopLimitOffset   = 7
	IPv6SrcOffset        = 8
	IPv6DstOffset        = 24
	IPv6AddrLen          = 16
)

// The traffic class straddles bytes 0 and 1 of the IPv6 header.
const (
	ipv6TCShift  = 20 // of the traffic class in the first word
	ipv6FlowMask = 0x000fffff

	ipv6TCHiOffset = 0 // its high nibble is this byte's low nibble
	ipv6TCLoOffset = 1 // its low nibble, ECN included, is this byte's high nibble
	ipv6TCLoShift  = 4
	ipv6ECNOffset  = ipv6TCLoOffset
	ipv6ECNShift   = ipv6TCLoShift
)

// IPv6 extension header field offsets (RFC 8200). The fragment header has a
// reserved byte where the others have their length, and is always 8 bytes.
const (
	IPv6ExtNextHeaderOffset = 0
	IPv6ExtLenOffset        = 1 // in 8-byte units, not counting the first 8
	IPv6ExtMinLen           = 8 // also the fragment header's length

	IPv6FragOffsetOffset = 2 // fragment offset (13 bits), reserved (2), M (1)
	IPv6FragIDOffset     = 4
)

// Bits of the fragment header's offset word.
const (
	ipv6FragOffMask = 0xfff8
	ipv6FragM       = 0x0001
)

// IPv6 is a view of the fixed 40-byte IPv6 header.
type IPv6 []byte

// IPv6Fields is what IPv6.Encode writes.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      [16]byte
}

func (b IPv6) Version() uint8 { return b[IPVersionOffset] >> 4 }
func (b IPv6) TrafficClass() uint8 {
	return b[ipv6TCHiOffset]<<4 | b[ipv6TCLoOffset]>>ipv6TCLoShift
}
func (b IPv6) DSCP() uint8 { return b.TrafficClass() >> dscpShift }
func (b IPv6) ECN() uint8  { return b[ipv6ECNOffset] >> ipv6ECNShift & ecnMask }
func (b IPv6) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(b[IPv6VTCFlowOffset:]) & ipv6FlowMask
}
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[IPv6PayloadLenOffset:]) }
func (b IPv6) NextHeader() uint8     { return b[IPv6NextHeaderOffset] }
func (b IPv6) HopLimit() uint8       { return b[IPv6HopLimitOffset] }
func (b IPv6) Src() [16]byte         { return [16]byte(b[IPv6SrcOffset : IPv6SrcOffset+IPv6AddrLen]) }
func (b IPv6) Dst() [16]byte         { return [16]byte(b[IPv6DstOffset : IPv6DstOffset+IPv6AddrLen]) }

// SetTrafficClass rewrites the traffic class; IPv6 has no header checksum
// and the UDP pseudo-header does not cover it.
func (b IPv6) SetTrafficClass(tc uint8) {
	b[ipv6TCHiOffset] = b[ipv6TCHiOffset]&0xf0 | tc>>4
	b[ipv6TCLoOffset] = b[ipv6TCLoOffset]&0x0f | tc<<ipv6TCLoShift
}

// SetDSCP rewrites the DSCP, keeping ECN.
func (b IPv6) SetDSCP(dscp uint8) { b.SetTrafficClass(dscp<<dscpShift | b.ECN()) }

// SetECN rewrites the ECN field, keeping DSCP.
func (b IPv6) SetECN(ecn uint8) {
	b[ipv6ECNOffset] = b[ipv6ECNOffset]&^(ecnMask<<ipv6ECNShift) | (ecn&ecnMask)<<ipv6ECNShift
}

// MarkCE sets CE on an ECN-capable packet and reports whether the packet
// now carries CE. Not-ECT packets are left alone (RFC 3168).
func (b IPv6) MarkCE() bool {
	if b[ipv6ECNOffset]&(ecnMask<<ipv6ECNShift) == 0 {
		return false
	}
	b[ipv6ECNOffset] |= ECNCE << ipv6ECNShift
	return true
}

func (b IPv6) SetFlowLabel(l uint32) {
	w := binary.BigEndian.Uint32(b[IPv6VTCFlowOffset:])
	binary.BigEndian.PutUint32(b[IPv6VTCFlowOffset:], w&^ipv6FlowMask|l&ipv6FlowMask)
}
func (b IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(b[IPv6PayloadLenOffset:], n) }
func (b IPv6) SetNextHeader(p uint8)     { b[IPv6NextHeaderOffset] = p }
func (b IPv6) SetHopLimit(h uint8)       { b[IPv6HopLimitOffset] = h }

// Encode writes the fixed header.
func (b IPv6) Encode(f *IPv6Fields) {
	binary.BigEndian.PutUint32(b[IPv6VTCFlowOffset:],
		6<<28|uint32(f.TrafficClass)<<ipv6TCShift|f.FlowLabel&ipv6FlowMask)
	b.SetPayloadLength(f.PayloadLength)
	b.SetNextHeader(f.NextHeader)
	b.SetHopLimit(f.HopLimit)
	copy(b[IPv6SrcOffset:IPv6SrcOffset+IPv6AddrLen], f.Src[:])
	copy(b[IPv6DstOffset:IPv6DstOffset+IPv6AddrLen], f.Dst[:])
}

// IsIPv6ExtHeader reports whether p is an extension header the classifier
// skips on its way to UDP.
func IsIPv6ExtHeader(p uint8) bool {
	return p == ProtoHopByHop || p == ProtoRouting || p == ProtoDestOpts || p == ProtoFragment
}

// IPv6Fragment is a view of the 8-byte fragment extension header.
type IPv6Fragment []byte

func (b IPv6Fragment) NextHeader() uint8 { return b[IPv6ExtNextHeaderOffset] }
func (b IPv6Fragment) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(b[IPv6FragOffsetOffset:]) >> 3
}
func (b IPv6Fragment) More() bool { return b[IPv6FragOffsetOffset+1]&ipv6FragM != 0 }
func (b IPv6Fragment) ID() uint32 { return binary.BigEndian.Uint32(b[IPv6FragIDOffset:]) }
