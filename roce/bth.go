package roce

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// BTHLen is the size of the InfiniBand Base Transport Header.
const BTHLen = 12

// ICRCLen is the size of the invariant CRC that ends every RoCEv2 packet.
const ICRCLen = 4

// BTH field offsets.
const (
	BTHOpcodeOffset = 0
	BTHFlagsOffset  = 1 // SE, MigReq, pad count (2 bits), TVer (4)
	BTHPKeyOffset   = 2
	// BTHDestQPOffset is the 32-bit word of FECN, BECN and 6 reserved
	// bits (its first byte), then the 24-bit destination QP.
	BTHDestQPOffset = 4
	// BTHPSNOffset is the 32-bit word of AckReq and 7 reserved bits (its
	// first byte), then the 24-bit PSN.
	BTHPSNOffset = 8
)

// Bits of the BTH.
const (
	// In the flags byte.
	bthSE       = 0x80
	bthMigReq   = 0x40
	bthPadShift = 4
	bthPadMask  = 3
	bthTVerMask = 0x0f

	// In the first byte of the destination QP word.
	bthFECN     = 0x80
	bthBECN     = 0x40
	bthResv6a   = 0x3f
	bthQPMask   = 0xffffff // of the word
	bthAckReq   = 0x80     // in the first byte of the PSN word
	bthResv7    = 0x7f
	bthPSNMask  = 0xffffff // of the word
	bthWordHigh = 24       // shift of a word's first byte
)

// Opcode is the BTH opcode: transport in the top three bits, operation in
// the low five.
type Opcode uint8

// Transport bases; combine with an operation, e.g. OpRC|OpSendFirst.
const (
	OpRC  Opcode = 0x00
	OpUC  Opcode = 0x20
	OpRD  Opcode = 0x40
	OpUD  Opcode = 0x60
	OpXRC Opcode = 0xa0
)

// Operations (the low five opcode bits).
const (
	OpSendFirst          Opcode = 0x00
	OpSendMiddle         Opcode = 0x01
	OpSendLast           Opcode = 0x02
	OpSendLastImm        Opcode = 0x03
	OpSendOnly           Opcode = 0x04
	OpSendOnlyImm        Opcode = 0x05
	OpWriteFirst         Opcode = 0x06
	OpWriteMiddle        Opcode = 0x07
	OpWriteLast          Opcode = 0x08
	OpWriteLastImm       Opcode = 0x09
	OpWriteOnly          Opcode = 0x0a
	OpWriteOnlyImm       Opcode = 0x0b
	OpReadRequest        Opcode = 0x0c
	OpReadResponseFirst  Opcode = 0x0d
	OpReadResponseMiddle Opcode = 0x0e
	OpReadResponseLast   Opcode = 0x0f
	OpReadResponseOnly   Opcode = 0x10
	OpAck                Opcode = 0x11
	OpAtomicAck          Opcode = 0x12
	OpCmpSwap            Opcode = 0x13
	OpFetchAdd           Opcode = 0x14
	OpResync             Opcode = 0x15 // RD only
	OpSendLastInv        Opcode = 0x16
	OpSendOnlyInv        Opcode = 0x17
	OpFlush              Opcode = 0x1c
	OpAtomicWrite        Opcode = 0x1d
)

// OpCNP is the RoCEv2 congestion notification packet (a full opcode).
const OpCNP Opcode = 0x81

// Transport is the service a BTH opcode belongs to (its top three bits).
type Transport uint8

const (
	TransportRC Transport = iota
	TransportUC
	TransportRD
	TransportUD
	TransportCNP
	TransportXRC
	TransportVendor6 // 0xC0-0xDF, manufacturer specific
	TransportVendor7 // 0xE0-0xFF, manufacturer specific
)

var transportNames = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "VENDOR", "VENDOR"}

func (t Transport) String() string { return transportNames[t&7] }

// ExtMask is a set of extension headers. Bit order is wire order: a packet
// carries its headers in ascending bit order right after the BTH.
type ExtMask uint16

const (
	ExtRDETH        ExtMask = 1 << iota // 4: reliable datagram EE context
	ExtDETH                             // 8: Q_Key, source QP
	ExtXRCETH                           // 4: XRC SRQ
	ExtFETH                             // 4: flush selectivity and placement
	ExtRETH                             // 16: VA, R_Key, DMA length
	ExtAtomicETH                        // 28: VA, R_Key, swap/add, compare
	ExtAETH                             // 4: syndrome, MSN
	ExtAtomicAckETH                     // 8: original remote data
	ExtImmDt                            // 4: immediate data
	ExtIETH                             // 4: R_Key to invalidate
	numExt          = iota
)

var extLens = [numExt]uint8{4, 8, 4, 4, 16, 28, 4, 8, 4, 4}
var extNames = [numExt]string{"RDETH", "DETH", "XRCETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH"}

// Len is the wire size of a single extension header.
func (e ExtMask) Len() int {
	if bits.OnesCount16(uint16(e)) != 1 || e >= 1<<numExt {
		return 0
	}
	return int(extLens[bits.TrailingZeros16(uint16(e))])
}

func (e ExtMask) String() string {
	s := ""
	for i := 0; i < numExt; i++ {
		if e&(1<<i) != 0 {
			if s != "" {
				s += "+"
			}
			s += extNames[i]
		}
	}
	return s
}

// OpInfo is one row of the opcode table.
type OpInfo struct {
	Ext       ExtMask // extension headers, in wire order
	ExtLen    uint8   // their total size
	Defined   bool    // false for reserved and manufacturer-specific opcodes
	Transport Transport
	aeth      uint8 // offset of the AETH after the BTH, when Ext has it
	Name      string
	off       [numExt]uint8
}

// opTable is indexed by opcode so the classifier needs no per-packet switch.
var opTable [256]OpInfo

// opFast is the part of opTable the classifier reads per packet, 1.25 KiB
// in all (OpInfo rows, with their names, are 40 bytes). An array per field
// rather than a row per opcode: amd64 has no byte load with a scaled
// index, so each field read from a row cost an extra address computation
// (measured).
var opFast struct {
	extLen  [256]uint16 // reservedExtLen when reserved
	aeth    [256]uint8  // offset of the AETH after the BTH, when hasAETH
	defined [256]bool   // false: reserved
	hasAETH [256]bool
	// The AETH syndrome is read without a branch on the opcode: masked
	// with 0xff, or 0 for an opcode without an AETH. fastAETHAt is where
	// the fast path's frame (untagged IPv4, no options) has it; for an
	// opcode without an AETH, the opcode's own byte.
	aethMask   [256]uint8
	fastAETHAt [256]uint8
}

// reservedExtLen is longer than any UDP datagram, so the length check of
// Classify's fast path rejects reserved opcodes without a test of its own.
const reservedExtLen = 0xffff

// Info returns the table row for op.
func (op Opcode) Info() *OpInfo { return &opTable[op] }

func (op Opcode) Name() string         { return opTable[op].Name }
func (op Opcode) String() string       { return opTable[op].Name }
func (op Opcode) Transport() Transport { return Transport(op >> 5) }
func (op Opcode) Defined() bool        { return opTable[op].Defined }
func (op Opcode) Ext() ExtMask         { return opTable[op].Ext }

// ExtOffset is where header h starts, counted from the end of the BTH, or
// -1 when op does not carry it.
func (op Opcode) ExtOffset(h ExtMask) int {
	e := &opTable[op]
	if e.Ext&h == 0 || h.Len() == 0 {
		return -1
	}
	return int(e.off[bits.TrailingZeros16(uint16(h))])
}

// definedOpcodes lists every opcode the IBTA spec (with the RoCEv2 and
// memory placement annexes) defines, with the extension headers it carries.
var definedOpcodes = [...]struct {
	op   Opcode
	name string
	ext  ExtMask
}{
	{0x00, "RC SEND First", 0},
	{0x01, "RC SEND Middle", 0},
	{0x02, "RC SEND Last", 0},
	{0x03, "RC SEND Last with Immediate", ExtImmDt},
	{0x04, "RC SEND Only", 0},
	{0x05, "RC SEND Only with Immediate", ExtImmDt},
	{0x06, "RC RDMA WRITE First", ExtRETH},
	{0x07, "RC RDMA WRITE Middle", 0},
	{0x08, "RC RDMA WRITE Last", 0},
	{0x09, "RC RDMA WRITE Last with Immediate", ExtImmDt},
	{0x0a, "RC RDMA WRITE Only", ExtRETH},
	{0x0b, "RC RDMA WRITE Only with Immediate", ExtRETH | ExtImmDt},
	{0x0c, "RC RDMA READ Request", ExtRETH},
	{0x0d, "RC RDMA READ Response First", ExtAETH},
	{0x0e, "RC RDMA READ Response Middle", 0},
	{0x0f, "RC RDMA READ Response Last", ExtAETH},
	{0x10, "RC RDMA READ Response Only", ExtAETH},
	{0x11, "RC Acknowledge", ExtAETH},
	{0x12, "RC ATOMIC Acknowledge", ExtAETH | ExtAtomicAckETH},
	{0x13, "RC CmpSwap", ExtAtomicETH},
	{0x14, "RC FetchAdd", ExtAtomicETH},
	{0x16, "RC SEND Last with Invalidate", ExtIETH},
	{0x17, "RC SEND Only with Invalidate", ExtIETH},
	{0x1c, "RC FLUSH", ExtFETH | ExtRETH},
	{0x1d, "RC ATOMIC WRITE", ExtRETH},

	{0x20, "UC SEND First", 0},
	{0x21, "UC SEND Middle", 0},
	{0x22, "UC SEND Last", 0},
	{0x23, "UC SEND Last with Immediate", ExtImmDt},
	{0x24, "UC SEND Only", 0},
	{0x25, "UC SEND Only with Immediate", ExtImmDt},
	{0x26, "UC RDMA WRITE First", ExtRETH},
	{0x27, "UC RDMA WRITE Middle", 0},
	{0x28, "UC RDMA WRITE Last", 0},
	{0x29, "UC RDMA WRITE Last with Immediate", ExtImmDt},
	{0x2a, "UC RDMA WRITE Only", ExtRETH},
	{0x2b, "UC RDMA WRITE Only with Immediate", ExtRETH | ExtImmDt},

	{0x40, "RD SEND First", ExtRDETH | ExtDETH},
	{0x41, "RD SEND Middle", ExtRDETH | ExtDETH},
	{0x42, "RD SEND Last", ExtRDETH | ExtDETH},
	{0x43, "RD SEND Last with Immediate", ExtRDETH | ExtDETH | ExtImmDt},
	{0x44, "RD SEND Only", ExtRDETH | ExtDETH},
	{0x45, "RD SEND Only with Immediate", ExtRDETH | ExtDETH | ExtImmDt},
	{0x46, "RD RDMA WRITE First", ExtRDETH | ExtDETH | ExtRETH},
	{0x47, "RD RDMA WRITE Middle", ExtRDETH | ExtDETH},
	{0x48, "RD RDMA WRITE Last", ExtRDETH | ExtDETH},
	{0x49, "RD RDMA WRITE Last with Immediate", ExtRDETH | ExtDETH | ExtImmDt},
	{0x4a, "RD RDMA WRITE Only", ExtRDETH | ExtDETH | ExtRETH},
	{0x4b, "RD RDMA WRITE Only with Immediate", ExtRDETH | ExtDETH | ExtRETH | ExtImmDt},
	{0x4c, "RD RDMA READ Request", ExtRDETH | ExtDETH | ExtRETH},
	{0x4d, "RD RDMA READ Response First", ExtRDETH | ExtAETH},
	{0x4e, "RD RDMA READ Response Middle", ExtRDETH},
	{0x4f, "RD RDMA READ Response Last", ExtRDETH | ExtAETH},
	{0x50, "RD RDMA READ Response Only", ExtRDETH | ExtAETH},
	{0x51, "RD Acknowledge", ExtRDETH | ExtAETH},
	{0x52, "RD ATOMIC Acknowledge", ExtRDETH | ExtAETH | ExtAtomicAckETH},
	{0x53, "RD CmpSwap", ExtRDETH | ExtDETH | ExtAtomicETH},
	{0x54, "RD FetchAdd", ExtRDETH | ExtDETH | ExtAtomicETH},
	{0x55, "RD RESYNC", ExtRDETH | ExtDETH},

	{0x64, "UD SEND Only", ExtDETH},
	{0x65, "UD SEND Only with Immediate", ExtDETH | ExtImmDt},

	{0x81, "CNP", 0},

	{0xa0, "XRC SEND First", ExtXRCETH},
	{0xa1, "XRC SEND Middle", ExtXRCETH},
	{0xa2, "XRC SEND Last", ExtXRCETH},
	{0xa3, "XRC SEND Last with Immediate", ExtXRCETH | ExtImmDt},
	{0xa4, "XRC SEND Only", ExtXRCETH},
	{0xa5, "XRC SEND Only with Immediate", ExtXRCETH | ExtImmDt},
	{0xa6, "XRC RDMA WRITE First", ExtXRCETH | ExtRETH},
	{0xa7, "XRC RDMA WRITE Middle", ExtXRCETH},
	{0xa8, "XRC RDMA WRITE Last", ExtXRCETH},
	{0xa9, "XRC RDMA WRITE Last with Immediate", ExtXRCETH | ExtImmDt},
	{0xaa, "XRC RDMA WRITE Only", ExtXRCETH | ExtRETH},
	{0xab, "XRC RDMA WRITE Only with Immediate", ExtXRCETH | ExtRETH | ExtImmDt},
	{0xac, "XRC RDMA READ Request", ExtXRCETH | ExtRETH},
	{0xad, "XRC RDMA READ Response First", ExtAETH},
	{0xae, "XRC RDMA READ Response Middle", 0},
	{0xaf, "XRC RDMA READ Response Last", ExtAETH},
	{0xb0, "XRC RDMA READ Response Only", ExtAETH},
	{0xb1, "XRC Acknowledge", ExtAETH},
	{0xb2, "XRC ATOMIC Acknowledge", ExtAETH | ExtAtomicAckETH},
	{0xb3, "XRC CmpSwap", ExtXRCETH | ExtAtomicETH},
	{0xb4, "XRC FetchAdd", ExtXRCETH | ExtAtomicETH},
	{0xb6, "XRC SEND Last with Invalidate", ExtXRCETH | ExtIETH},
	{0xb7, "XRC SEND Only with Invalidate", ExtXRCETH | ExtIETH},
	{0xbc, "XRC FLUSH", ExtXRCETH | ExtFETH | ExtRETH},
	{0xbd, "XRC ATOMIC WRITE", ExtXRCETH | ExtRETH},
}

func init() {
	for op := 0; op < 256; op++ {
		t := Transport(op >> 5)
		e := &opTable[op]
		e.Transport = t
		switch {
		case t >= TransportVendor6:
			e.Name = "manufacturer-specific 0x" + strconv.FormatUint(uint64(op), 16)
		case op == 0x80:
			// The InfiniBand link-layer CNP; RoCEv2 uses 0x81.
			e.Name = "IB CNP (reserved on RoCEv2)"
		default:
			e.Name = t.String() + " reserved 0x" + strconv.FormatUint(uint64(op), 16)
		}
	}
	for _, d := range definedOpcodes {
		e := &opTable[d.op]
		e.Name, e.Ext, e.Defined = d.name, d.ext, true
		off := 0
		for i := 0; i < numExt; i++ {
			if d.ext&(1<<i) != 0 {
				e.off[i] = uint8(off)
				off += int(extLens[i])
			}
		}
		e.ExtLen = uint8(off)
		e.aeth = e.off[bits.TrailingZeros16(uint16(ExtAETH))]
	}
	for op := range opTable {
		e := &opTable[op]
		opFast.extLen[op], opFast.aeth[op] = uint16(e.ExtLen), e.aeth
		if !e.Defined {
			opFast.extLen[op] = reservedExtLen
		}
		opFast.defined[op], opFast.hasAETH[op] = e.Defined, e.Ext&ExtAETH != 0
		opFast.fastAETHAt[op] = fastLen - BTHLen + BTHOpcodeOffset
		if opFast.hasAETH[op] {
			opFast.fastAETHAt[op], opFast.aethMask[op] = uint8(fastLen+int(e.aeth)+aethSyndromeOffset), 0xff
		}
		opRows[op] = opRow{
			payloadOff: fastLen + uint16(e.ExtLen),
			opcode:     Opcode(op),
			transport:  Transport(op >> 5),
			cnp:        Opcode(op) == OpCNP,
			hasAETH:    e.Ext&ExtAETH != 0,
			ipVersion:  4,
		}
	}
}

// BTH is a view of a Base Transport Header. When it spans the whole UDP
// payload (BTH, extension headers, payload, pad, ICRC), Ext, Payload and
// ICRC can be used too.
type BTH []byte

// BTHFields is what BTH.Encode writes.
type BTHFields struct {
	Opcode   Opcode
	SE       bool
	MigReq   bool
	PadCount uint8
	TVer     uint8
	PKey     uint16
	FECN     bool
	BECN     bool
	DestQP   uint32
	AckReq   bool
	PSN      uint32
}

func (b BTH) Opcode() Opcode  { return Opcode(b[BTHOpcodeOffset]) }
func (b BTH) SE() bool        { return b[BTHFlagsOffset]&bthSE != 0 }
func (b BTH) MigReq() bool    { return b[BTHFlagsOffset]&bthMigReq != 0 }
func (b BTH) PadCount() uint8 { return b[BTHFlagsOffset] >> bthPadShift & bthPadMask }
func (b BTH) TVer() uint8     { return b[BTHFlagsOffset] & bthTVerMask }
func (b BTH) PKey() uint16    { return binary.BigEndian.Uint16(b[BTHPKeyOffset:]) }
func (b BTH) FECN() bool      { return b[BTHDestQPOffset]&bthFECN != 0 }
func (b BTH) BECN() bool      { return b[BTHDestQPOffset]&bthBECN != 0 }
func (b BTH) Resv6a() uint8   { return b[BTHDestQPOffset] & bthResv6a }
func (b BTH) DestQP() uint32 {
	return binary.BigEndian.Uint32(b[BTHDestQPOffset:]) & bthQPMask
}
func (b BTH) AckReq() bool { return b[BTHPSNOffset]&bthAckReq != 0 }
func (b BTH) Resv7() uint8 { return b[BTHPSNOffset] & bthResv7 }
func (b BTH) PSN() uint32  { return binary.BigEndian.Uint32(b[BTHPSNOffset:]) & bthPSNMask }

func (b BTH) SetOpcode(o Opcode) { b[BTHOpcodeOffset] = uint8(o) }
func (b BTH) SetPadCount(n uint8) {
	const m = bthPadMask << bthPadShift
	b[BTHFlagsOffset] = b[BTHFlagsOffset]&^m | n<<bthPadShift&m
}
func (b BTH) SetPKey(k uint16) { binary.BigEndian.PutUint16(b[BTHPKeyOffset:], k) }
func (b BTH) SetFECN(v bool)   { b[BTHDestQPOffset] = setBit(b[BTHDestQPOffset], bthFECN, v) }
func (b BTH) SetBECN(v bool)   { b[BTHDestQPOffset] = setBit(b[BTHDestQPOffset], bthBECN, v) }
func (b BTH) SetAckReq(v bool) { b[BTHPSNOffset] = setBit(b[BTHPSNOffset], bthAckReq, v) }

// SetDestQP and SetPSN write the 24 bits after the word's first byte.
func (b BTH) SetDestQP(qp uint32) {
	const o = BTHDestQPOffset
	b[o+1], b[o+2], b[o+3] = uint8(qp>>16), uint8(qp>>8), uint8(qp)
}
func (b BTH) SetPSN(psn uint32) {
	const o = BTHPSNOffset
	b[o+1], b[o+2], b[o+3] = uint8(psn>>16), uint8(psn>>8), uint8(psn)
}

func setBit(v, mask uint8, on bool) uint8 {
	if on {
		return v | mask
	}
	return v &^ mask
}

// Encode writes all 12 bytes; reserved bits become zero.
func (b BTH) Encode(f *BTHFields) {
	b.SetOpcode(f.Opcode)
	flags := (f.PadCount&bthPadMask)<<bthPadShift | f.TVer&bthTVerMask
	if f.SE {
		flags |= bthSE
	}
	if f.MigReq {
		flags |= bthMigReq
	}
	b[BTHFlagsOffset] = flags
	b.SetPKey(f.PKey)
	b[BTHDestQPOffset] = 0
	b.SetFECN(f.FECN)
	b.SetBECN(f.BECN)
	b.SetDestQP(f.DestQP)
	b[BTHPSNOffset] = 0
	b.SetAckReq(f.AckReq)
	b.SetPSN(f.PSN)
}

// Ext returns extension header h (a single bit) when the opcode carries it
// and the view is long enough, else nil.
func (b BTH) Ext(h ExtMask) []byte {
	if len(b) < BTHLen {
		return nil
	}
	e := &opTable[b[BTHOpcodeOffset]]
	n := h.Len()
	if !e.Defined || e.Ext&h == 0 || n == 0 {
		return nil
	}
	off := BTHLen + int(e.off[bits.TrailingZeros16(uint16(h))])
	if off+n > len(b) {
		return nil
	}
	return b[off : off+n]
}

// Payload returns the data between the extension headers and the pad, or
// nil when the opcode is reserved or the lengths do not add up. The view
// must end with the ICRC.
func (b BTH) Payload() []byte {
	if len(b) < BTHLen+ICRCLen || !opTable[b[BTHOpcodeOffset]].Defined {
		return nil
	}
	start := BTHLen + int(opTable[b[BTHOpcodeOffset]].ExtLen)
	end := len(b) - ICRCLen - int(b.PadCount())
	if start > end {
		return nil
	}
	return b[start:end]
}

// ICRC returns the CRC carried in the last four bytes (little-endian).
func (b BTH) ICRC() uint32 { return binary.LittleEndian.Uint32(b[len(b)-ICRCLen:]) }
