package roce

import "encoding/binary"

// UDP constants.
const (
	UDPHeaderLen = 8
	// RoCEv2Port is the IANA destination port of RoCEv2. Only the
	// destination port counts: the source port is an entropy field.
	RoCEv2Port = 4791
)

// UDP is a view of a UDP header.
type UDP []byte

// UDPFields is what UDP.Encode writes.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

func (b UDP) SrcPort() uint16  { return binary.BigEndian.Uint16(b) }
func (b UDP) DstPort() uint16  { return binary.BigEndian.Uint16(b[2:]) }
func (b UDP) Length() uint16   { return binary.BigEndian.Uint16(b[4:]) }
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[6:]) }

func (b UDP) SetSrcPort(p uint16)  { binary.BigEndian.PutUint16(b, p) }
func (b UDP) SetDstPort(p uint16)  { binary.BigEndian.PutUint16(b[2:], p) }
func (b UDP) SetLength(n uint16)   { binary.BigEndian.PutUint16(b[4:], n) }
func (b UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[6:], c) }

// Encode writes all fields of the header.
func (b UDP) Encode(f *UDPFields) {
	b.SetSrcPort(f.SrcPort)
	b.SetDstPort(f.DstPort)
	b.SetLength(f.Length)
	b.SetChecksum(f.Checksum)
}
