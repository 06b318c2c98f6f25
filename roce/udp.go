package roce

import "encoding/binary"

// UDP constants.
const (
	UDPHeaderLen = 8
	// RoCEv2Port is the IANA destination port of RoCEv2. Only the
	// destination port counts: the source port is an entropy field.
	RoCEv2Port = 4791
)

// UDP header field offsets.
const (
	UDPSrcPortOffset  = 0
	UDPDstPortOffset  = 2
	UDPLengthOffset   = 4
	UDPChecksumOffset = 6
)

// TCP header field offsets: the ports, where they are in UDP too.
const (
	TCPSrcPortOffset = 0
	TCPDstPortOffset = 2
	// TCPMinHeaderLen is a TCP header without options: Classify locates
	// a TCP header only when this much of it lies in the IP payload.
	TCPMinHeaderLen = 20
)

// UDP is a view of a UDP header.
type UDP []byte

// UDPFields is what UDP.Encode writes.
type UDPFields struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

func (b UDP) SrcPort() uint16  { return binary.BigEndian.Uint16(b[UDPSrcPortOffset:]) }
func (b UDP) DstPort() uint16  { return binary.BigEndian.Uint16(b[UDPDstPortOffset:]) }
func (b UDP) Length() uint16   { return binary.BigEndian.Uint16(b[UDPLengthOffset:]) }
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[UDPChecksumOffset:]) }

func (b UDP) SetSrcPort(p uint16)  { binary.BigEndian.PutUint16(b[UDPSrcPortOffset:], p) }
func (b UDP) SetDstPort(p uint16)  { binary.BigEndian.PutUint16(b[UDPDstPortOffset:], p) }
func (b UDP) SetLength(n uint16)   { binary.BigEndian.PutUint16(b[UDPLengthOffset:], n) }
func (b UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[UDPChecksumOffset:], c) }

// Encode writes all fields of the header.
func (b UDP) Encode(f *UDPFields) {
	b.SetSrcPort(f.SrcPort)
	b.SetDstPort(f.DstPort)
	b.SetLength(f.Length)
	b.SetChecksum(f.Checksum)
}
