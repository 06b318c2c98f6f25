// Package demotraffic makes the RoCEv2 capture that the built-in default
// config replays and that `make bench` feeds to both roce-fwd and
// dpdk-testpmd: small frames in the mix an RDMA fabric carries (RC SEND,
// WRITE, READ, ACK, CNP) plus some ordinary traffic.
//
// It also makes benchmark workloads (Workload): thousands of QPs between
// the hosts of a fabric, in a control-size or an MTU-size mix, interleaved
// as a busy port sees them, with the list of their 5-tuples for rules.
package demotraffic

import (
	"encoding/binary"
	"net/netip"

	"roce-fwd/pcapio"
	"roce-fwd/roce"
)

type flow struct {
	srcMAC, dstMAC roce.MAC
	srcIP, dstIP   [4]byte
	srcPort        uint16
	destQP         uint32
	dscp, ecn      uint8
}

// Frames returns the demo mix: every frame a valid Ethernet frame without
// FCS, RoCEv2 frames with a correct ICRC.
func Frames() [][]byte {
	a := flow{srcMAC: roce.MAC{0x02, 0, 0, 0, 0, 0x0a}, dstMAC: roce.MAC{0x02, 0, 0, 0, 0, 0x0b},
		srcIP: [4]byte{192, 168, 1, 10}, dstIP: [4]byte{192, 168, 1, 11}, srcPort: 49152, destQP: 0x000123, dscp: 26, ecn: 2}
	b := flow{srcMAC: a.dstMAC, dstMAC: a.srcMAC, srcIP: a.dstIP, dstIP: a.srcIP, srcPort: 49153, destQP: 0x000456, dscp: 26, ecn: 2}
	cnp := flow{srcMAC: a.dstMAC, dstMAC: a.srcMAC, srcIP: a.dstIP, dstIP: a.srcIP, srcPort: 0, destQP: 0x000123, dscp: 48, ecn: 2}

	psn := uint32(100)
	next := func() uint32 { psn++; return psn }
	reth := func(va uint64, n uint32) roce.ExtFields { return roce.ExtFields{VA: va, RKey: 0x1234, DMALength: n} }
	aeth := func(syndrome uint8, msn uint32) roce.ExtFields {
		return roce.ExtFields{Syndrome: roce.AETHSyndrome(syndrome), MSN: msn}
	}
	// opcode, PSN, AckReq, extension headers, payload bytes
	return [][]byte{
		a.roce(0x04, next(), true, roce.ExtFields{}, 16),  // RC SEND Only
		a.roce(0x06, next(), false, reth(0x1000, 64), 32), // RC WRITE First
		a.roce(0x07, next(), false, roce.ExtFields{}, 32), // RC WRITE Middle
		a.roce(0x08, next(), true, roce.ExtFields{}, 16),  // RC WRITE Last
		a.roce(0x0c, next(), true, reth(0x2000, 32), 0),   // RC READ Request
		b.roce(0x10, 104, false, aeth(0x1f, 104), 32),     // RC READ Response Only
		b.roce(0x11, 105, false, aeth(0x1f, 105), 0),      // RC ACK
		cnp.roce(0x81, 0, false, roce.ExtFields{}, 16),    // CNP: 16 reserved bytes
		a.roce(0x0a, next(), true, reth(0x3000, 8), 8),    // RC WRITE Only
		arp(a),
	}
}

// roce builds an Ethernet/IPv4 (DF)/UDP/BTH frame of the flow, with the
// default P_Key, BECN on a CNP and payload bytes counting up.
func (f flow) roce(opcode uint8, psn uint32, ackReq bool, ext roce.ExtFields, payload int) []byte {
	s := roce.FrameSpec{Dst: f.dstMAC, Src: f.srcMAC,
		SrcIP: netip.AddrFrom4(f.srcIP), DstIP: netip.AddrFrom4(f.dstIP), DSCP: f.dscp, ECN: f.ecn,
		SrcPort: f.srcPort, Ext: ext, Payload: make([]byte, payload),
		BTH: roce.BTHFields{Opcode: roce.Opcode(opcode), PKey: 0xffff, BECN: opcode == 0x81,
			DestQP: f.destQP, AckReq: ackReq, PSN: psn}}
	for i := range s.Payload {
		if opcode != 0x81 {
			s.Payload[i] = byte(i)
		}
	}
	fr, err := s.Append(nil)
	if err != nil {
		panic(err) // the specs above are fixed and valid
	}
	return fr
}

func arp(f flow) []byte {
	fr := make([]byte, 60) // padded to the Ethernet minimum (no FCS)
	for i := 0; i < 6; i++ {
		fr[i] = 0xff
	}
	copy(fr[6:12], f.srcMAC[:])
	binary.BigEndian.PutUint16(fr[12:], 0x0806)
	a := fr[14:]
	binary.BigEndian.PutUint16(a[0:], 1)
	binary.BigEndian.PutUint16(a[2:], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], 1)
	copy(a[8:14], f.srcMAC[:])
	copy(a[14:18], f.srcIP[:])
	copy(a[24:28], f.dstIP[:])
	return fr
}

// WriteFile writes the demo capture to path.
func WriteFile(path string) error { return pcapio.WriteFile(path, Frames()) }
