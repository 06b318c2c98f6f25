package roce

import (
	"encoding/binary"
	"encoding/hex"
)

// Ethernet sizes and EtherTypes.
const (
	EthernetHeaderLen = 14
	VLANTagLen        = 4
	// MinFrameLen is the shortest Ethernet frame without its FCS; shorter
	// payloads are padded on the wire, so the ICRC is not at the frame end.
	MinFrameLen = 60

	EtherTypeIPv4       = 0x0800
	EtherTypeARP        = 0x0806
	EtherTypeVLAN       = 0x8100
	EtherTypeIPv6       = 0x86dd
	EtherTypeMACControl = 0x8808
	EtherTypeQinQ       = 0x88a8
	EtherTypeQinQ9100   = 0x9100 // pre-802.1ad service tag still seen in the field
)

// Ethernet header field offsets.
const (
	EthernetDstOffset  = 0
	EthernetSrcOffset  = 6
	EthernetTypeOffset = 12 // the EtherType, or the TPID of the first tag
	MACLen             = 6
)

// VLAN tag field offsets, counted from the tag control information, the
// first byte after the TPID.
const (
	VLANTCIOffset  = 0 // PCP (3 bits), DEI (1), VID (12)
	VLANTypeOffset = 2 // the EtherType (or TPID) of what the tag encloses
)

// Bits of the tag control information.
const (
	vlanPCPShift = 5    // in the first byte
	vlanDEI      = 0x10 // in the first byte
	vlanVIDMask  = 0x0fff
)

// MaxTags is how many VLAN tags the classifier walks (QinQ).
const MaxTags = 2

// IsTPID reports whether t is a tag protocol identifier the classifier
// accepts in either tag position.
func IsTPID(t uint16) bool {
	return t == EtherTypeVLAN || t == EtherTypeQinQ || t == EtherTypeQinQ9100
}

// MAC is an Ethernet address.
type MAC [6]byte

func (m MAC) String() string {
	var b [17]byte
	for i := 0; i < 6; i++ {
		hex.Encode(b[i*3:i*3+2], m[i:i+1])
		if i < 5 {
			b[i*3+2] = ':'
		}
	}
	return string(b[:])
}

// Ethernet is a view of an Ethernet II header (at least 14 bytes).
type Ethernet []byte

// EthernetFields is what Ethernet.Encode writes.
type EthernetFields struct {
	Dst, Src  MAC
	EtherType uint16
}

func (b Ethernet) Dst() MAC { return MAC(b[EthernetDstOffset : EthernetDstOffset+MACLen]) }
func (b Ethernet) Src() MAC { return MAC(b[EthernetSrcOffset : EthernetSrcOffset+MACLen]) }
func (b Ethernet) EtherType() uint16 {
	return binary.BigEndian.Uint16(b[EthernetTypeOffset:])
}

func (b Ethernet) SetDst(m MAC) { copy(b[EthernetDstOffset:EthernetDstOffset+MACLen], m[:]) }
func (b Ethernet) SetSrc(m MAC) { copy(b[EthernetSrcOffset:EthernetSrcOffset+MACLen], m[:]) }
func (b Ethernet) SetEtherType(t uint16) {
	binary.BigEndian.PutUint16(b[EthernetTypeOffset:], t)
}

// Encode writes all fields of the header.
func (b Ethernet) Encode(f *EthernetFields) {
	b.SetDst(f.Dst)
	b.SetSrc(f.Src)
	b.SetEtherType(f.EtherType)
}

// VLAN is a view of the 4 bytes that follow a TPID: the tag control
// information and the EtherType of what the tag encloses.
type VLAN []byte

// VLANFields is what VLAN.Encode writes.
type VLANFields struct {
	PCP       uint8
	DEI       bool
	VID       uint16
	EtherType uint16
}

func (b VLAN) PCP() uint8        { return b[VLANTCIOffset] >> vlanPCPShift }
func (b VLAN) DEI() bool         { return b[VLANTCIOffset]&vlanDEI != 0 }
func (b VLAN) VID() uint16       { return binary.BigEndian.Uint16(b[VLANTCIOffset:]) & vlanVIDMask }
func (b VLAN) EtherType() uint16 { return binary.BigEndian.Uint16(b[VLANTypeOffset:]) }

func (b VLAN) SetPCP(p uint8) {
	b[VLANTCIOffset] = b[VLANTCIOffset]&^(7<<vlanPCPShift) | p<<vlanPCPShift
}
func (b VLAN) SetEtherType(t uint16) { binary.BigEndian.PutUint16(b[VLANTypeOffset:], t) }
func (b VLAN) SetVID(v uint16) {
	tci := binary.BigEndian.Uint16(b[VLANTCIOffset:])
	binary.BigEndian.PutUint16(b[VLANTCIOffset:], tci&^vlanVIDMask|v&vlanVIDMask)
}

// Encode writes all fields of the tag.
func (b VLAN) Encode(f *VLANFields) {
	tci := uint16(f.PCP&7)<<(8+vlanPCPShift) | f.VID&vlanVIDMask
	if f.DEI {
		tci |= vlanDEI << 8
	}
	binary.BigEndian.PutUint16(b[VLANTCIOffset:], tci)
	b.SetEtherType(f.EtherType)
}
