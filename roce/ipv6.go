package roce

import "encoding/binary"

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

func (b IPv6) Version() uint8        { return b[0] >> 4 }
func (b IPv6) TrafficClass() uint8   { return b[0]<<4 | b[1]>>4 }
func (b IPv6) DSCP() uint8           { return b.TrafficClass() >> 2 }
func (b IPv6) ECN() uint8            { return b[1] >> 4 & 3 }
func (b IPv6) FlowLabel() uint32     { return binary.BigEndian.Uint32(b) & 0x000fffff }
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[4:]) }
func (b IPv6) NextHeader() uint8     { return b[6] }
func (b IPv6) HopLimit() uint8       { return b[7] }
func (b IPv6) Src() [16]byte         { return [16]byte(b[8:24]) }
func (b IPv6) Dst() [16]byte         { return [16]byte(b[24:40]) }

// SetTrafficClass rewrites the traffic class; IPv6 has no header checksum
// and the UDP pseudo-header does not cover it.
func (b IPv6) SetTrafficClass(tc uint8) {
	b[0] = b[0]&0xf0 | tc>>4
	b[1] = b[1]&0x0f | tc<<4
}

// SetDSCP rewrites the DSCP, keeping ECN.
func (b IPv6) SetDSCP(dscp uint8) { b.SetTrafficClass(dscp<<2 | b.ECN()) }

// SetECN rewrites the ECN field, keeping DSCP.
func (b IPv6) SetECN(ecn uint8) { b[1] = b[1]&0xcf | (ecn&3)<<4 }

// MarkCE sets CE on an ECN-capable packet and reports whether the packet
// now carries CE. Not-ECT packets are left alone (RFC 3168).
func (b IPv6) MarkCE() bool {
	if b[1]&0x30 == 0 {
		return false
	}
	b[1] |= 0x30
	return true
}

func (b IPv6) SetFlowLabel(l uint32) {
	binary.BigEndian.PutUint32(b, binary.BigEndian.Uint32(b)&0xfff00000|l&0x000fffff)
}
func (b IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(b[4:], n) }
func (b IPv6) SetNextHeader(p uint8)     { b[6] = p }
func (b IPv6) SetHopLimit(h uint8)       { b[7] = h }

// Encode writes the fixed header.
func (b IPv6) Encode(f *IPv6Fields) {
	binary.BigEndian.PutUint32(b, 6<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&0x000fffff)
	b.SetPayloadLength(f.PayloadLength)
	b[6] = f.NextHeader
	b[7] = f.HopLimit
	copy(b[8:24], f.Src[:])
	copy(b[24:40], f.Dst[:])
}

// IsIPv6ExtHeader reports whether p is an extension header the classifier
// skips on its way to UDP.
func IsIPv6ExtHeader(p uint8) bool {
	return p == ProtoHopByHop || p == ProtoRouting || p == ProtoDestOpts || p == ProtoFragment
}

// IPv6Fragment is a view of the 8-byte fragment extension header.
type IPv6Fragment []byte

func (b IPv6Fragment) NextHeader() uint8      { return b[0] }
func (b IPv6Fragment) FragmentOffset() uint16 { return binary.BigEndian.Uint16(b[2:]) >> 3 }
func (b IPv6Fragment) More() bool             { return b[3]&1 != 0 }
func (b IPv6Fragment) ID() uint32             { return binary.BigEndian.Uint32(b[4:]) }
