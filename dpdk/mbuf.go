package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Mbuf is a struct rte_mbuf seen from Go. Its accessors read fields at
// fixed offsets (checked against the C layout when EAL starts), so the
// data path reads mbufs without any cgo call.
type Mbuf struct {
	_ [mbufSize]byte
}

// Offsets of struct rte_mbuf fields in DPDK 22.11 on 64-bit targets.
const (
	mbufSize      = 128
	offBufAddr    = 0
	offDataOff    = 16
	offRefcnt     = 18
	offNbSegs     = 20
	offPort       = 22
	offOlFlags    = 24
	offPacketType = 32
	offPktLen     = 36
	offDataLen    = 40
	offVlanTCI    = 42
	offHash       = 44
	offFdirHi     = 48 // hash.fdir.hi: the flow director mark
	offBufLen     = 54
	offPool       = 56
	offNext       = 64
	mbufHeadroom  = C.RTE_PKTMBUF_HEADROOM
)

// ol_flags bits a PMD sets for a packet that hit a MARK or FLAG rule.
const (
	rxFDIR   uint64 = C.RTE_MBUF_F_RX_FDIR    // a flow rule matched (FLAG, or MARK)
	rxFDIRID uint64 = C.RTE_MBUF_F_RX_FDIR_ID // hash.fdir.hi holds the MARK id
)

// ol_flags bits of a port's verdict on a received IPv4 header checksum
// (RTE_MBUF_F_RX_IP_CKSUM_*): unknown (0), bad, good, or none (the field
// is not right but the header's integrity was verified).
const (
	rxIPCksumMask = uint64(C.RTE_MBUF_F_RX_IP_CKSUM_MASK)
	rxIPCksumBad  = uint64(C.RTE_MBUF_F_RX_IP_CKSUM_BAD)
	rxIPCksumGood = uint64(C.RTE_MBUF_F_RX_IP_CKSUM_GOOD)
)

// IPv4HeaderVerified reports whether the port checked the packet's IPv4
// header checksum on receive and found the header sound (GOOD, or NONE).
// Unknown or bad leave the check to software.
func (m *Mbuf) IPv4HeaderVerified() bool {
	return *(*uint64)(m.at(offOlFlags))&rxIPCksumGood != 0
}

// SetIPv4Checksum records a verdict on the IPv4 header checksum, good or
// bad, as a port with the IPV4_CKSUM rx offload does on receive: how tests
// on vdevs (which give none) stand in for a NIC.
func (m *Mbuf) SetIPv4Checksum(good bool) {
	f := (*uint64)(m.at(offOlFlags))
	*f &^= rxIPCksumMask
	if good {
		*f |= rxIPCksumGood
	} else {
		*f |= rxIPCksumBad
	}
}

func checkMbufLayout() error {
	var l C.struct_rf_mbuf_layout
	C.rf_mbuf_layout(&l)
	want := []struct {
		name     string
		got, exp uintptr
	}{
		{"sizeof(struct rte_mbuf)", uintptr(l.size), mbufSize},
		{"buf_addr", uintptr(l.buf_addr), offBufAddr},
		{"data_off", uintptr(l.data_off), offDataOff},
		{"refcnt", uintptr(l.refcnt), offRefcnt},
		{"nb_segs", uintptr(l.nb_segs), offNbSegs},
		{"port", uintptr(l.port), offPort},
		{"ol_flags", uintptr(l.ol_flags), offOlFlags},
		{"packet_type", uintptr(l.packet_type), offPacketType},
		{"pkt_len", uintptr(l.pkt_len), offPktLen},
		{"data_len", uintptr(l.data_len), offDataLen},
		{"vlan_tci", uintptr(l.vlan_tci), offVlanTCI},
		{"hash", uintptr(l.hash), offHash},
		{"hash.fdir.hi", uintptr(l.fdir_hi), offFdirHi},
		{"buf_len", uintptr(l.buf_len), offBufLen},
		{"pool", uintptr(l.pool), offPool},
		{"next", uintptr(l.next), offNext},
	}
	for _, w := range want {
		if w.got != w.exp {
			return fmt.Errorf("struct rte_mbuf layout differs from this build: %s is %d, expected %d; rebuild roce-fwd against the installed DPDK", w.name, w.got, w.exp)
		}
	}
	return nil
}

func (m *Mbuf) at(off uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(m), off) }

// Data is the first segment's packet bytes, a view into the mbuf (no copy).
func (m *Mbuf) Data() []byte {
	base := *(*unsafe.Pointer)(m.at(offBufAddr))
	off := *(*uint16)(m.at(offDataOff))
	n := *(*uint16)(m.at(offDataLen))
	// A view through an array type as long as any segment can be: the
	// slice expression needs no check (n is at most 65535), where
	// unsafe.Slice would test the pointer for wrapping at every call.
	return (*[1 << 16]byte)(unsafe.Add(base, off))[:n:n]
}

// DataWithTail is Data with the rest of the segment's buffer (its
// tailroom) as the slice's capacity: for a copier that moves a fixed
// width, past the packet's end but within its buffer, instead of the
// packet's exact length.
func (m *Mbuf) DataWithTail() []byte {
	base := *(*unsafe.Pointer)(m.at(offBufAddr))
	off := *(*uint16)(m.at(offDataOff))
	n := *(*uint16)(m.at(offDataLen))
	c := n
	if end := *(*uint16)(m.at(offBufLen)); uint32(end) >= uint32(off)+uint32(n) { // as in any mbuf DPDK hands out
		c = end - off
	}
	return (*[1 << 16]byte)(unsafe.Add(base, off))[:n:c]
}

// DataLen is the first segment's length.
func (m *Mbuf) DataLen() int { return int(*(*uint16)(m.at(offDataLen))) }

// PktLen is the whole packet's length over all segments.
func (m *Mbuf) PktLen() int { return int(*(*uint32)(m.at(offPktLen))) }

// NbSegs is the number of segments.
func (m *Mbuf) NbSegs() int { return int(*(*uint16)(m.at(offNbSegs))) }

// Port is the input port the PMD recorded.
func (m *Mbuf) Port() uint16 { return *(*uint16)(m.at(offPort)) }

// IsMACControl reports whether the frame is an 802.3x PAUSE or 802.1Qbb
// PFC frame (EtherType 0x8808 right after the addresses; such frames are
// never tagged). It reads the two bytes directly: the io mode checks every
// packet, and building a slice for it costs more than the check.
func (m *Mbuf) IsMACControl() bool {
	if *(*uint16)(m.at(offDataLen)) < 14 {
		return false
	}
	base := *(*unsafe.Pointer)(m.at(offBufAddr))
	off := uintptr(*(*uint16)(m.at(offDataOff)))
	p := (*[2]byte)(unsafe.Add(base, off+12))
	return p[0] == 0x88 && p[1] == 0x08
}

// SetMark records a MARK action's id as mlx5 does on receive: hash.fdir.hi
// holds the id and ol_flags says so (RTE_MBUF_F_RX_FDIR | _FDIR_ID). The
// software flow stage uses it so that what follows sees the mark where a
// NIC would have put it.
func (m *Mbuf) SetMark(id uint32) {
	*(*uint32)(m.at(offFdirHi)) = id
	*(*uint64)(m.at(offOlFlags)) |= rxFDIR | rxFDIRID
}

// SetFlag records a FLAG action: RTE_MBUF_F_RX_FDIR without an id.
func (m *Mbuf) SetFlag() { *(*uint64)(m.at(offOlFlags)) |= rxFDIR }

// Mark is the MARK id of the packet, when a rule marked it.
func (m *Mbuf) Mark() (id uint32, ok bool) {
	if *(*uint64)(m.at(offOlFlags))&rxFDIRID == 0 {
		return 0, false
	}
	return *(*uint32)(m.at(offFdirHi)), true
}

// Flagged reports whether a rule flagged or marked the packet.
func (m *Mbuf) Flagged() bool { return *(*uint64)(m.at(offOlFlags))&rxFDIR != 0 }
