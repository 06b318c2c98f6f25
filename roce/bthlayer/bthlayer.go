// Package bthlayer decodes RoCEv2 for gopacket: one layer holding the
// InfiniBand Base Transport Header and every extension header its opcode
// carries, registered for UDP destination port 4791.
//
// It shares no code with the fast classifier in package roce on purpose:
// its opcode rules are derived from the operation and transport service
// instead of a table, and its ICRC check copies and masks the packet the
// way the spec describes it, so the two can check each other.
//
// Importing the package also makes gopacket decode TPID 0x9100 tags as
// 802.1Q, as the classifier does.
package bthlayer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Port is the RoCEv2 UDP destination port.
const Port = 4791

// LayerTypeBTH is the gopacket layer type of BTH.
var LayerTypeBTH = gopacket.RegisterLayerType(1791, gopacket.LayerTypeMetadata{
	Name:    "RoCEv2-BTH",
	Decoder: gopacket.DecodeFunc(decodeBTH),
})

func init() {
	layers.RegisterUDPPortLayerType(Port, LayerTypeBTH)
	if layers.EthernetTypeMetadata[0x9100].DecodeWith == nil {
		layers.EthernetTypeMetadata[0x9100] = layers.EnumMetadata{
			DecodeWith: layers.LayerTypeDot1Q, Name: "Dot1Q", LayerType: layers.LayerTypeDot1Q,
		}
	}
}

// Decoding errors; the layer keeps every field it could read before one.
var (
	ErrTruncatedBTH   = errors.New("bthlayer: fewer than 12 bytes for the BTH")
	ErrNoICRC         = errors.New("bthlayer: no room for the ICRC")
	ErrTVer           = errors.New("bthlayer: transport header version is not 0")
	ErrReservedOpcode = errors.New("bthlayer: reserved opcode")
	ErrShortHeaders   = errors.New("bthlayer: extension headers run into the ICRC")
	ErrPad            = errors.New("bthlayer: pad count does not fit the payload")
)

// Extension header contents.
type (
	RDETH  struct{ EEContext uint32 }
	DETH   struct{ QKey, SrcQP uint32 }
	XRCETH struct{ SRQ uint32 }
	FETH   struct{ SelectivityLevel, PlacementType uint8 }
	RETH   struct {
		VA        uint64
		RKey      uint32
		DMALength uint32
	}
	AtomicETH struct {
		VA      uint64
		RKey    uint32
		SwapAdd uint64
		Compare uint64
	}
	AETH struct {
		Syndrome uint8
		MSN      uint32
	}
	AtomicAckETH struct{ OrigRemoteData uint64 }
	IETH         struct{ RKey uint32 }
)

// BTH is the RoCEv2 transport layer: Contents is the BTH and its extension
// headers, Payload the data before the pad, then Pad and ICRC.
type BTH struct {
	layers.BaseLayer

	Opcode         uint8
	SolicitedEvent bool
	MigReq         bool
	PadCount       uint8
	TVer           uint8
	PKey           uint16
	FECN, BECN     bool
	Resv6          uint8
	DestQP         uint32
	AckReq         bool
	Resv7          uint8
	PSN            uint32

	Service   string // RC, UC, RD, UD, CNP, XRC or Reserved
	Operation string

	HasRDETH, HasDETH, HasXRCETH, HasFETH, HasRETH, HasAtomicETH bool
	HasAETH, HasAtomicAckETH, HasImmDt, HasIETH                  bool

	RDETH        RDETH
	DETH         DETH
	XRCETH       XRCETH
	FETH         FETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        uint32
	IETH         IETH

	Pad  []byte
	ICRC uint32
}

func (b *BTH) LayerType() gopacket.LayerType  { return LayerTypeBTH }
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }
func (b *BTH) NextLayerType() gopacket.LayerType {
	if len(b.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	return gopacket.LayerTypePayload
}

// IsCNP reports a RoCEv2 congestion notification packet.
func (b *BTH) IsCNP() bool { return b.Opcode == 0x81 }

// AETH syndrome kinds (bits 6-5).
const (
	SyndromeACK      = 0
	SyndromeRNRNAK   = 1
	SyndromeReserved = 2
	SyndromeNAK      = 3
)

// SyndromeKind, CreditCount, RNRTimer and NAKCode split the AETH syndrome.
func (a AETH) SyndromeKind() int  { return int(a.Syndrome>>5) & 3 }
func (a AETH) CreditCount() uint8 { return a.Syndrome & 31 }
func (a AETH) RNRTimer() uint8    { return a.Syndrome & 31 }
func (a AETH) NAKCode() uint8     { return a.Syndrome & 31 }

func (a AETH) String() string {
	v := a.Syndrome & 31
	switch a.SyndromeKind() {
	case SyndromeACK:
		return fmt.Sprintf("ACK credit %d", v)
	case SyndromeRNRNAK:
		return fmt.Sprintf("RNR NAK timer %d", v)
	case SyndromeNAK:
		names := []string{"PSN sequence error", "invalid request", "remote access error",
			"remote operational error", "invalid RD request"}
		if int(v) < len(names) {
			return "NAK " + names[v]
		}
		return fmt.Sprintf("NAK code %d", v)
	}
	return fmt.Sprintf("reserved syndrome %#x", a.Syndrome)
}

// Operation classes of the low five opcode bits.
func isSend(fn uint8) bool      { return fn <= 0x05 || fn == 0x16 || fn == 0x17 }
func isWrite(fn uint8) bool     { return fn >= 0x06 && fn <= 0x0b }
func isReadResp(fn uint8) bool  { return fn >= 0x0d && fn <= 0x10 }
func isAtomicReq(fn uint8) bool { return fn == 0x13 || fn == 0x14 }
func isImmediate(fn uint8) bool { return fn == 0x03 || fn == 0x05 || fn == 0x09 || fn == 0x0b }
func carriesAETH(fn uint8) bool { return isReadResp(fn) && fn != 0x0e || fn == 0x11 || fn == 0x12 }
func carriesRETH(fn uint8) bool {
	return fn == 0x06 || fn == 0x0a || fn == 0x0b || fn == 0x0c || fn == 0x1c || fn == 0x1d
}
func isRequest(fn uint8) bool {
	return isSend(fn) || isWrite(fn) || fn == 0x0c || isAtomicReq(fn) || fn == 0x15 || fn == 0x1c || fn == 0x1d
}

var services = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "Reserved", "Reserved"}

var operations = map[uint8]string{
	0x00: "SEND First", 0x01: "SEND Middle", 0x02: "SEND Last", 0x03: "SEND Last with Immediate",
	0x04: "SEND Only", 0x05: "SEND Only with Immediate", 0x06: "RDMA WRITE First",
	0x07: "RDMA WRITE Middle", 0x08: "RDMA WRITE Last", 0x09: "RDMA WRITE Last with Immediate",
	0x0a: "RDMA WRITE Only", 0x0b: "RDMA WRITE Only with Immediate", 0x0c: "RDMA READ Request",
	0x0d: "RDMA READ Response First", 0x0e: "RDMA READ Response Middle",
	0x0f: "RDMA READ Response Last", 0x10: "RDMA READ Response Only", 0x11: "Acknowledge",
	0x12: "ATOMIC Acknowledge", 0x13: "CmpSwap", 0x14: "FetchAdd", 0x15: "RESYNC",
	0x16: "SEND Last with Invalidate", 0x17: "SEND Only with Invalidate", 0x1c: "FLUSH",
	0x1d: "ATOMIC WRITE",
}

// defined reports whether the IBTA spec assigns opcode op.
func defined(op uint8) bool {
	fn := op & 0x1f
	switch op >> 5 {
	case 0, 5: // RC and XRC share the operation set
		return fn <= 0x14 || fn == 0x16 || fn == 0x17 || fn == 0x1c || fn == 0x1d
	case 1:
		return fn <= 0x0b
	case 2:
		return fn <= 0x15
	case 3:
		return fn == 0x04 || fn == 0x05
	case 4:
		return fn == 0x01
	}
	return false
}

// DecodeFromBytes implements gopacket.DecodingLayer. data is the UDP
// payload: BTH through ICRC.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*b = BTH{}
	if len(data) < 12 {
		df.SetTruncated()
		b.BaseLayer = layers.BaseLayer{Contents: data}
		return ErrTruncatedBTH
	}
	b.Opcode = data[0]
	b.SolicitedEvent = data[1]&0x80 != 0
	b.MigReq = data[1]&0x40 != 0
	b.PadCount = data[1] >> 4 & 3
	b.TVer = data[1] & 15
	b.PKey = binary.BigEndian.Uint16(data[2:4])
	b.FECN = data[4]&0x80 != 0
	b.BECN = data[4]&0x40 != 0
	b.Resv6 = data[4] & 0x3f
	b.DestQP = uint32(data[5])<<16 | uint32(data[6])<<8 | uint32(data[7])
	b.AckReq = data[8]&0x80 != 0
	b.Resv7 = data[8] & 0x7f
	b.PSN = uint32(data[9])<<16 | uint32(data[10])<<8 | uint32(data[11])
	b.Service = services[b.Opcode>>5]
	b.Operation = "Reserved"
	if b.Opcode == 0x81 {
		b.Operation = "CNP"
	} else if defined(b.Opcode) {
		b.Operation = operations[b.Opcode&0x1f]
	}
	b.BaseLayer = layers.BaseLayer{Contents: data[:12], Payload: data[12:]}
	if len(data) < 16 {
		return ErrNoICRC
	}
	end := len(data) - 4
	b.ICRC = binary.LittleEndian.Uint32(data[end:])
	b.Payload = data[12:end]
	if b.TVer != 0 {
		return ErrTVer
	}
	if !defined(b.Opcode) {
		return ErrReservedOpcode
	}

	svc, fn := b.Opcode>>5, b.Opcode&0x1f
	off := 12
	take := func(n int) []byte {
		if off+n > end {
			return nil
		}
		h := data[off : off+n]
		off += n
		return h
	}
	u24 := func(p []byte) uint32 { return uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2]) }
	// In wire order.
	if svc == 2 {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasRDETH, b.RDETH = true, RDETH{u24(h[1:])}
	}
	if svc == 3 || svc == 2 && isRequest(fn) {
		h := take(8)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasDETH, b.DETH = true, DETH{binary.BigEndian.Uint32(h), u24(h[5:])}
	}
	if svc == 5 && isRequest(fn) {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasXRCETH, b.XRCETH = true, XRCETH{u24(h[1:])}
	}
	if fn == 0x1c {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasFETH, b.FETH = true, FETH{h[3] >> 4 & 3, h[3] & 15}
	}
	if carriesRETH(fn) {
		h := take(16)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasRETH = true
		b.RETH = RETH{binary.BigEndian.Uint64(h), binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])}
	}
	if isAtomicReq(fn) {
		h := take(28)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasAtomicETH = true
		b.AtomicETH = AtomicETH{binary.BigEndian.Uint64(h), binary.BigEndian.Uint32(h[8:]),
			binary.BigEndian.Uint64(h[12:]), binary.BigEndian.Uint64(h[20:])}
	}
	if carriesAETH(fn) {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasAETH, b.AETH = true, AETH{h[0], u24(h[1:])}
	}
	if fn == 0x12 {
		h := take(8)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasAtomicAckETH, b.AtomicAckETH = true, AtomicAckETH{binary.BigEndian.Uint64(h)}
	}
	if isImmediate(fn) {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasImmDt, b.ImmDt = true, binary.BigEndian.Uint32(h)
	}
	if fn == 0x16 || fn == 0x17 {
		h := take(4)
		if h == nil {
			return ErrShortHeaders
		}
		b.HasIETH, b.IETH = true, IETH{binary.BigEndian.Uint32(h)}
	}
	b.Contents = data[:off]
	b.Payload = data[off:end]
	// Payload plus pad fills whole 4-byte words.
	if int(b.PadCount) > end-off || (end-off)%4 != 0 {
		return ErrPad
	}
	b.Payload = data[off : end-int(b.PadCount)]
	b.Pad = data[end-int(b.PadCount) : end]
	return nil
}

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	err := b.DecodeFromBytes(data, p)
	if len(data) >= 12 {
		p.AddLayer(b)
	}
	if err != nil {
		return err
	}
	if len(b.Payload) == 0 {
		return nil
	}
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// ICRCResult is what VerifyICRC found.
type ICRCResult struct {
	Computed, Carried uint32
}

func (r ICRCResult) OK() bool { return r.Computed == r.Carried }

// VerifyICRC recomputes the ICRC of a decoded RoCEv2 packet: the bytes from
// the IP header to the ICRC, copied, with the variant fields set to ones,
// after 8 bytes of 0xFF. Offsets come from the decoded layers.
func VerifyICRC(pkt gopacket.Packet) (ICRCResult, error) {
	data := pkt.Data()
	udpL, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if udpL == nil || pkt.Layer(LayerTypeBTH) == nil {
		return ICRCResult{}, errors.New("bthlayer: no UDP/BTH layer")
	}
	// Layer contents are subslices of data; their distance from its end
	// gives their offset.
	at := func(l []byte) int { return cap(data) - cap(l) }
	var ipOff int
	var v6 bool
	switch ip := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		ipOff = at(ip.Contents)
	case *layers.IPv6:
		ipOff, v6 = at(ip.Contents), true
	default:
		return ICRCResult{}, errors.New("bthlayer: no IP layer")
	}
	udpOff := at(udpL.Contents)
	end := udpOff + int(udpL.Length) - 4
	if udpL.Length < 24 || end+4 > len(data) || ipOff >= udpOff {
		return ICRCResult{}, errors.New("bthlayer: UDP length does not fit")
	}
	buf := make([]byte, 0, 8+end-ipOff)
	buf = append(buf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	buf = append(buf, data[ipOff:end]...)
	ip := buf[8:]
	if v6 {
		ip[0] |= 0x0f                          // traffic class, high half
		ip[1], ip[2], ip[3] = 0xff, 0xff, 0xff // traffic class, flow label
		ip[7] = 0xff                           // hop limit
	} else {
		ip[1] = 0xff                // TOS
		ip[8] = 0xff                // TTL
		ip[10], ip[11] = 0xff, 0xff // checksum
	}
	u := ip[udpOff-ipOff:]
	u[6], u[7] = 0xff, 0xff // UDP checksum
	u[12] = 0xff            // BTH FECN/BECN/resv6a
	return ICRCResult{
		Computed: crc32.ChecksumIEEE(buf),
		Carried:  binary.LittleEndian.Uint32(data[end:]),
	}, nil
}
