package roce

import (
	"encoding/binary"
	"strconv"
)

func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }
func put24(b []byte, v uint32) {
	b[0], b[1], b[2] = uint8(v>>16), uint8(v>>8), uint8(v)
}

// Extension header field offsets, each counted from its header's start.
// 24-bit fields follow a reserved byte.
const (
	rdethEEContextOffset = 1 // 24 bits
	dethQKeyOffset       = 0
	dethSrcQPOffset      = 5 // 24 bits
	xrcethSRQOffset      = 1 // 24 bits
	fethFlagsOffset      = 3 // selectivity level (bits 5-4), placement type (3-0)
	rethVAOffset         = 0
	rethRKeyOffset       = 8
	rethDMALenOffset     = 12
	atomicVAOffset       = 0
	atomicRKeyOffset     = 8
	atomicSwapAddOffset  = 12
	atomicCompareOffset  = 20
	aethSyndromeOffset   = 0
	aethMSNOffset        = 1 // 24 bits
	atomicAckDataOffset  = 0
	immDtOffset          = 0
	iethRKeyOffset       = 0
)

// RDETH is a view of the Reliable Datagram Extended Transport Header.
type RDETH []byte

func (b RDETH) EEContext() uint32 { return get24(b[rdethEEContextOffset:]) }
func (b RDETH) SetEEContext(c uint32) {
	b[rdethEEContextOffset-1] = 0
	put24(b[rdethEEContextOffset:], c)
}

// DETH is a view of the Datagram Extended Transport Header.
type DETH []byte

func (b DETH) QKey() uint32     { return binary.BigEndian.Uint32(b[dethQKeyOffset:]) }
func (b DETH) SrcQP() uint32    { return get24(b[dethSrcQPOffset:]) }
func (b DETH) SetQKey(k uint32) { binary.BigEndian.PutUint32(b[dethQKeyOffset:], k) }
func (b DETH) SetSrcQP(qp uint32) {
	b[dethSrcQPOffset-1] = 0
	put24(b[dethSrcQPOffset:], qp)
}

// XRCETH is a view of the XRC Extended Transport Header.
type XRCETH []byte

func (b XRCETH) SRQ() uint32 { return get24(b[xrcethSRQOffset:]) }
func (b XRCETH) SetSRQ(srq uint32) {
	b[xrcethSRQOffset-1] = 0
	put24(b[xrcethSRQOffset:], srq)
}

// FETH is a view of the FLUSH Extended Transport Header.
type FETH []byte

func (b FETH) SelectivityLevel() uint8 { return b[fethFlagsOffset] >> 4 & 3 }
func (b FETH) PlacementType() uint8    { return b[fethFlagsOffset] & 0x0f }
func (b FETH) Set(sel, plt uint8) {
	clear(b[:fethFlagsOffset])
	b[fethFlagsOffset] = (sel&3)<<4 | plt&0x0f
}

// RETH is a view of the RDMA Extended Transport Header.
type RETH []byte

func (b RETH) VA() uint64            { return binary.BigEndian.Uint64(b[rethVAOffset:]) }
func (b RETH) RKey() uint32          { return binary.BigEndian.Uint32(b[rethRKeyOffset:]) }
func (b RETH) DMALength() uint32     { return binary.BigEndian.Uint32(b[rethDMALenOffset:]) }
func (b RETH) SetVA(v uint64)        { binary.BigEndian.PutUint64(b[rethVAOffset:], v) }
func (b RETH) SetRKey(k uint32)      { binary.BigEndian.PutUint32(b[rethRKeyOffset:], k) }
func (b RETH) SetDMALength(n uint32) { binary.BigEndian.PutUint32(b[rethDMALenOffset:], n) }

// AtomicETH is a view of the Atomic Extended Transport Header.
type AtomicETH []byte

func (b AtomicETH) VA() uint64      { return binary.BigEndian.Uint64(b[atomicVAOffset:]) }
func (b AtomicETH) RKey() uint32    { return binary.BigEndian.Uint32(b[atomicRKeyOffset:]) }
func (b AtomicETH) SwapAdd() uint64 { return binary.BigEndian.Uint64(b[atomicSwapAddOffset:]) }
func (b AtomicETH) Compare() uint64 { return binary.BigEndian.Uint64(b[atomicCompareOffset:]) }
func (b AtomicETH) SetVA(v uint64)  { binary.BigEndian.PutUint64(b[atomicVAOffset:], v) }
func (b AtomicETH) SetRKey(k uint32) {
	binary.BigEndian.PutUint32(b[atomicRKeyOffset:], k)
}
func (b AtomicETH) SetSwapAdd(v uint64) {
	binary.BigEndian.PutUint64(b[atomicSwapAddOffset:], v)
}
func (b AtomicETH) SetCompare(v uint64) {
	binary.BigEndian.PutUint64(b[atomicCompareOffset:], v)
}

// AETH is a view of the ACK Extended Transport Header.
type AETH []byte

func (b AETH) Syndrome() AETHSyndrome     { return AETHSyndrome(b[aethSyndromeOffset]) }
func (b AETH) MSN() uint32                { return get24(b[aethMSNOffset:]) }
func (b AETH) SetSyndrome(s AETHSyndrome) { b[aethSyndromeOffset] = uint8(s) }
func (b AETH) SetMSN(m uint32)            { put24(b[aethMSNOffset:], m) }

// AtomicAckETH is a view of the Atomic Acknowledge Extended Transport Header.
type AtomicAckETH []byte

func (b AtomicAckETH) OrigRemoteData() uint64 {
	return binary.BigEndian.Uint64(b[atomicAckDataOffset:])
}
func (b AtomicAckETH) SetOrigRemoteData(v uint64) {
	binary.BigEndian.PutUint64(b[atomicAckDataOffset:], v)
}

// ImmDt is a view of the Immediate Data header.
type ImmDt []byte

func (b ImmDt) Value() uint32     { return binary.BigEndian.Uint32(b[immDtOffset:]) }
func (b ImmDt) SetValue(v uint32) { binary.BigEndian.PutUint32(b[immDtOffset:], v) }

// IETH is a view of the Invalidate Extended Transport Header.
type IETH []byte

func (b IETH) RKey() uint32     { return binary.BigEndian.Uint32(b[iethRKeyOffset:]) }
func (b IETH) SetRKey(k uint32) { binary.BigEndian.PutUint32(b[iethRKeyOffset:], k) }

// AETHSyndrome is the AETH syndrome byte: bit 7 reserved, bits 6-5 the
// kind, bits 4-0 a credit count, RNR timer or NAK code.
type AETHSyndrome uint8

// AckKind is bits 6-5 of the syndrome.
type AckKind uint8

const (
	AckKindACK      AckKind = 0
	AckKindRNRNAK   AckKind = 1
	AckKindReserved AckKind = 2
	AckKindNAK      AckKind = 3
)

// NAKCode is the low five bits of a NAK syndrome.
type NAKCode uint8

const (
	NAKPSNSequenceError       NAKCode = 0
	NAKInvalidRequest         NAKCode = 1
	NAKRemoteAccessError      NAKCode = 2
	NAKRemoteOperationalError NAKCode = 3
	NAKInvalidRDRequest       NAKCode = 4
)

var nakNames = [...]string{
	"PSN sequence error", "invalid request", "remote access error",
	"remote operational error", "invalid RD request",
}

func (c NAKCode) String() string {
	if int(c) < len(nakNames) {
		return nakNames[c]
	}
	return "reserved NAK code " + strconv.Itoa(int(c))
}

// CreditInvalid is the ACK credit count meaning "no credit information".
const CreditInvalid = 31

// SyndromeACK, SyndromeRNRNAK and SyndromeNAK build syndromes.
func SyndromeACK(credits uint8) AETHSyndrome  { return AETHSyndrome(credits & 0x1f) }
func SyndromeRNRNAK(timer uint8) AETHSyndrome { return AETHSyndrome(0x20 | timer&0x1f) }
func SyndromeNAK(c NAKCode) AETHSyndrome      { return AETHSyndrome(0x60 | uint8(c)&0x1f) }

func (s AETHSyndrome) Kind() AckKind      { return AckKind(s >> 5 & 3) }
func (s AETHSyndrome) IsACK() bool        { return s.Kind() == AckKindACK }
func (s AETHSyndrome) IsNAK() bool        { return s.Kind() == AckKindNAK }
func (s AETHSyndrome) IsRNRNAK() bool     { return s.Kind() == AckKindRNRNAK }
func (s AETHSyndrome) CreditCount() uint8 { return uint8(s) & 0x1f }
func (s AETHSyndrome) RNRTimer() uint8    { return uint8(s) & 0x1f }
func (s AETHSyndrome) NAKCode() NAKCode   { return NAKCode(s & 0x1f) }

func (s AETHSyndrome) String() string {
	v := strconv.Itoa(int(s & 0x1f))
	switch s.Kind() {
	case AckKindACK:
		if s.CreditCount() == CreditInvalid {
			return "ACK credits=invalid"
		}
		return "ACK credits=" + v
	case AckKindRNRNAK:
		return "RNR NAK timer=" + v
	case AckKindNAK:
		return "NAK " + s.NAKCode().String()
	}
	return "reserved syndrome 0x" + strconv.FormatUint(uint64(s), 16)
}
