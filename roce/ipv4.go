package roce

import "encoding/binary"

// IP constants.
const (
	IPv4MinHeaderLen = 20
	IPv4MaxHeaderLen = 60
	IPv6HeaderLen    = 40

	ProtoHopByHop = 0
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoDestOpts = 60
)

// IPVersionOffset is the byte whose high nibble is the IP version, in
// IPv4 and IPv6 alike.
const IPVersionOffset = 0

// IPv4 header field offsets.
const (
	IPv4VersionIHLOffset = 0 // version (4 bits), header length in words (4)
	IPv4TOSOffset        = 1 // DSCP (6 bits), ECN (2)
	IPv4TotalLenOffset   = 2
	IPv4IDOffset         = 4
	IPv4FragOffset       = 6 // flags (3 bits), fragment offset (13)
	IPv4TTLOffset        = 8
	IPv4ProtoOffset      = 9
	IPv4ChecksumOffset   = 10
	IPv4SrcOffset        = 12
	IPv4DstOffset        = 16
	IPv4AddrLen          = 4
)

// Bits of the IPv4 header.
const (
	ipv4IHLMask = 0x0f // in the version/IHL byte

	// Of the 16-bit flags and fragment offset word.
	ipv4DF          = 0x4000
	ipv4MF          = 0x2000
	ipv4FragOffMask = 0x1fff
	ipv4FragMask    = ipv4MF | ipv4FragOffMask // any fragment: MF or an offset

	dscpShift = 2 // of the DSCP in the TOS / traffic class byte
	ecnMask   = 3
)

// ECN codepoints (RFC 3168).
const (
	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
)

// IPv4 is a view of an IPv4 header (at least 20 bytes, options included
// when the slice is long enough).
type IPv4 []byte

// IPv4Fields is what IPv4.Encode writes. The header length follows
// len(Options), which must be a multiple of 4 and at most 40.
type IPv4Fields struct {
	TOS            uint8
	TotalLength    uint16
	ID             uint16
	DF, MF         bool
	FragmentOffset uint16 // in 8-byte units
	TTL            uint8
	Protocol       uint8
	Src, Dst       [4]byte
	Options        []byte
}

func (b IPv4) Version() uint8      { return b[IPVersionOffset] >> 4 }
func (b IPv4) HeaderLen() int      { return int(b[IPv4VersionIHLOffset]&ipv4IHLMask) << 2 }
func (b IPv4) TOS() uint8          { return b[IPv4TOSOffset] }
func (b IPv4) DSCP() uint8         { return b[IPv4TOSOffset] >> dscpShift }
func (b IPv4) ECN() uint8          { return b[IPv4TOSOffset] & ecnMask }
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[IPv4TotalLenOffset:]) }
func (b IPv4) ID() uint16          { return binary.BigEndian.Uint16(b[IPv4IDOffset:]) }
func (b IPv4) DF() bool            { return b[IPv4FragOffset]&(ipv4DF>>8) != 0 }
func (b IPv4) MF() bool            { return b[IPv4FragOffset]&(ipv4MF>>8) != 0 }
func (b IPv4) FragmentOffset() uint16 {
	return b.fragWord() & ipv4FragOffMask
}
func (b IPv4) TTL() uint8       { return b[IPv4TTLOffset] }
func (b IPv4) Protocol() uint8  { return b[IPv4ProtoOffset] }
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[IPv4ChecksumOffset:]) }
func (b IPv4) Src() [4]byte     { return [4]byte(b[IPv4SrcOffset : IPv4SrcOffset+IPv4AddrLen]) }
func (b IPv4) Dst() [4]byte     { return [4]byte(b[IPv4DstOffset : IPv4DstOffset+IPv4AddrLen]) }

// fragWord is the flags and fragment offset word.
func (b IPv4) fragWord() uint16 { return binary.BigEndian.Uint16(b[IPv4FragOffset:]) }

// Options returns the option bytes, or nil when the view is shorter than
// the header length claims.
func (b IPv4) Options() []byte {
	hl := b.HeaderLen()
	if hl <= IPv4MinHeaderLen || len(b) < hl {
		return nil
	}
	return b[IPv4MinHeaderLen:hl]
}

// IsFirstFragment reports whether the packet carries the start of its
// datagram, i.e. the transport header.
func (b IPv4) IsFirstFragment() bool { return b.FragmentOffset() == 0 }

// IsFragment reports whether the packet is any fragment of a larger datagram.
func (b IPv4) IsFragment() bool { return b.fragWord()&ipv4FragMask != 0 }

// headerSum is the one's-complement sum of the header words, folded.
func (b IPv4) headerSum() uint16 {
	hl := b.HeaderLen()
	if hl > len(b) {
		hl = len(b)
	}
	var s uint32
	for i := 0; i+1 < hl; i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// ChecksumValid reports whether the header checksum is correct.
func (b IPv4) ChecksumValid() bool { return b.headerSum() == 0xffff }

// SetChecksum recomputes the header checksum from scratch.
func (b IPv4) SetChecksum() {
	b[IPv4ChecksumOffset], b[IPv4ChecksumOffset+1] = 0, 0
	binary.BigEndian.PutUint16(b[IPv4ChecksumOffset:], ^b.headerSum())
}

// update16 patches the checksum after the 16-bit word at off changed from
// old to new (RFC 1624 eqn. 3, which never produces -0).
func (b IPv4) update16(old, new uint16) {
	s := uint32(^b.Checksum()) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	binary.BigEndian.PutUint16(b[IPv4ChecksumOffset:], ^uint16(s))
}

// SetTOS rewrites the TOS byte and fixes the checksum incrementally.
func (b IPv4) SetTOS(tos uint8) {
	// The checksum sums 16-bit words: the TOS is the low byte of the first.
	const hi, lo = IPv4VersionIHLOffset, IPv4TOSOffset
	old := uint16(b[hi])<<8 | uint16(b[lo])
	b[lo] = tos
	b.update16(old, uint16(b[hi])<<8|uint16(tos))
}

// SetDSCP rewrites the DSCP, keeping ECN, checksum fixed incrementally.
func (b IPv4) SetDSCP(dscp uint8) { b.SetTOS(dscp<<dscpShift | b[IPv4TOSOffset]&ecnMask) }

// SetECN rewrites the ECN field, keeping DSCP, checksum fixed incrementally.
func (b IPv4) SetECN(ecn uint8) { b.SetTOS(b[IPv4TOSOffset]&^ecnMask | ecn&ecnMask) }

// MarkCE sets CE on an ECN-capable packet and reports whether the packet
// now carries CE. Not-ECT packets are left alone (RFC 3168).
func (b IPv4) MarkCE() bool {
	switch b[IPv4TOSOffset] & ecnMask {
	case ECNNotECT:
		return false
	case ECNCE:
		return true
	}
	b.SetTOS(b[IPv4TOSOffset] | ECNCE)
	return true
}

// SetTTL rewrites the TTL, checksum fixed incrementally.
func (b IPv4) SetTTL(ttl uint8) {
	// The TTL is the high byte of the word it shares with the protocol.
	const hi, lo = IPv4TTLOffset, IPv4ProtoOffset
	old := uint16(b[hi])<<8 | uint16(b[lo])
	b[hi] = ttl
	b.update16(old, uint16(ttl)<<8|uint16(b[lo]))
}

// Encode writes the header, including options and a fresh checksum.
func (b IPv4) Encode(f *IPv4Fields) {
	hl := IPv4MinHeaderLen + len(f.Options)
	b[IPv4VersionIHLOffset] = 4<<4 | uint8(hl>>2)
	b[IPv4TOSOffset] = f.TOS
	binary.BigEndian.PutUint16(b[IPv4TotalLenOffset:], f.TotalLength)
	binary.BigEndian.PutUint16(b[IPv4IDOffset:], f.ID)
	fo := f.FragmentOffset & ipv4FragOffMask
	if f.DF {
		fo |= ipv4DF
	}
	if f.MF {
		fo |= ipv4MF
	}
	binary.BigEndian.PutUint16(b[IPv4FragOffset:], fo)
	b[IPv4TTLOffset] = f.TTL
	b[IPv4ProtoOffset] = f.Protocol
	copy(b[IPv4SrcOffset:IPv4SrcOffset+IPv4AddrLen], f.Src[:])
	copy(b[IPv4DstOffset:IPv4DstOffset+IPv4AddrLen], f.Dst[:])
	copy(b[IPv4MinHeaderLen:hl], f.Options)
	b.SetChecksum()
}
