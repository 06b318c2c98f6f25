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

func (b IPv4) Version() uint8         { return b[0] >> 4 }
func (b IPv4) HeaderLen() int         { return int(b[0]&0x0f) << 2 }
func (b IPv4) TOS() uint8             { return b[1] }
func (b IPv4) DSCP() uint8            { return b[1] >> 2 }
func (b IPv4) ECN() uint8             { return b[1] & 3 }
func (b IPv4) TotalLength() uint16    { return binary.BigEndian.Uint16(b[2:]) }
func (b IPv4) ID() uint16             { return binary.BigEndian.Uint16(b[4:]) }
func (b IPv4) DF() bool               { return b[6]&0x40 != 0 }
func (b IPv4) MF() bool               { return b[6]&0x20 != 0 }
func (b IPv4) FragmentOffset() uint16 { return binary.BigEndian.Uint16(b[6:]) & 0x1fff }
func (b IPv4) TTL() uint8             { return b[8] }
func (b IPv4) Protocol() uint8        { return b[9] }
func (b IPv4) Checksum() uint16       { return binary.BigEndian.Uint16(b[10:]) }
func (b IPv4) Src() [4]byte           { return [4]byte(b[12:16]) }
func (b IPv4) Dst() [4]byte           { return [4]byte(b[16:20]) }

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
func (b IPv4) IsFragment() bool { return binary.BigEndian.Uint16(b[6:])&0x3fff != 0 }

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
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint16(b[10:], ^b.headerSum())
}

// update16 patches the checksum after the 16-bit word at off changed from
// old to new (RFC 1624 eqn. 3, which never produces -0).
func (b IPv4) update16(old, new uint16) {
	s := uint32(^binary.BigEndian.Uint16(b[10:])) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	binary.BigEndian.PutUint16(b[10:], ^uint16(s))
}

// SetTOS rewrites the TOS byte and fixes the checksum incrementally.
func (b IPv4) SetTOS(tos uint8) {
	old := uint16(b[0])<<8 | uint16(b[1])
	b[1] = tos
	b.update16(old, uint16(b[0])<<8|uint16(tos))
}

// SetDSCP rewrites the DSCP, keeping ECN, checksum fixed incrementally.
func (b IPv4) SetDSCP(dscp uint8) { b.SetTOS(dscp<<2 | b[1]&3) }

// SetECN rewrites the ECN field, keeping DSCP, checksum fixed incrementally.
func (b IPv4) SetECN(ecn uint8) { b.SetTOS(b[1]&0xfc | ecn&3) }

// MarkCE sets CE on an ECN-capable packet and reports whether the packet
// now carries CE. Not-ECT packets are left alone (RFC 3168).
func (b IPv4) MarkCE() bool {
	switch b[1] & 3 {
	case ECNNotECT:
		return false
	case ECNCE:
		return true
	}
	b.SetTOS(b[1] | ECNCE)
	return true
}

// SetTTL rewrites the TTL, checksum fixed incrementally.
func (b IPv4) SetTTL(ttl uint8) {
	old := uint16(b[8])<<8 | uint16(b[9])
	b[8] = ttl
	b.update16(old, uint16(ttl)<<8|uint16(b[9]))
}

// Encode writes the header, including options and a fresh checksum.
func (b IPv4) Encode(f *IPv4Fields) {
	hl := IPv4MinHeaderLen + len(f.Options)
	b[0] = 0x40 | uint8(hl>>2)
	b[1] = f.TOS
	binary.BigEndian.PutUint16(b[2:], f.TotalLength)
	binary.BigEndian.PutUint16(b[4:], f.ID)
	fo := f.FragmentOffset & 0x1fff
	if f.DF {
		fo |= 0x4000
	}
	if f.MF {
		fo |= 0x2000
	}
	binary.BigEndian.PutUint16(b[6:], fo)
	b[8] = f.TTL
	b[9] = f.Protocol
	copy(b[12:16], f.Src[:])
	copy(b[16:20], f.Dst[:])
	copy(b[IPv4MinHeaderLen:hl], f.Options)
	b.SetChecksum()
}
