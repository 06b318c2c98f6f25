// Package demotraffic makes the RoCEv2 capture that the built-in default
// config replays and that `make bench` feeds to both roce-fwd and
// dpdk-testpmd: small frames in the mix an RDMA fabric carries (RC SEND,
// WRITE, READ, ACK, CNP) plus some ordinary traffic.
package demotraffic

import (
	"encoding/binary"
	"hash/crc32"

	"roce-fwd/pcapio"
)

// RoCEv2 UDP destination port.
const udpPort = 4791

type flow struct {
	srcMAC, dstMAC [6]byte
	srcIP, dstIP   [4]byte
	srcPort        uint16
	destQP         uint32
	dscp, ecn      uint8
}

// Frames returns the demo mix: every frame a valid Ethernet frame without
// FCS, RoCEv2 frames with a correct ICRC.
func Frames() [][]byte {
	a := flow{srcMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0a}, dstMAC: [6]byte{0x02, 0, 0, 0, 0, 0x0b},
		srcIP: [4]byte{192, 168, 1, 10}, dstIP: [4]byte{192, 168, 1, 11}, srcPort: 49152, destQP: 0x000123, dscp: 26, ecn: 2}
	b := flow{srcMAC: a.dstMAC, dstMAC: a.srcMAC, srcIP: a.dstIP, dstIP: a.srcIP, srcPort: 49153, destQP: 0x000456, dscp: 26, ecn: 2}
	cnp := flow{srcMAC: a.dstMAC, dstMAC: a.srcMAC, srcIP: a.dstIP, dstIP: a.srcIP, srcPort: 0, destQP: 0x000123, dscp: 48, ecn: 2}

	var out [][]byte
	psn := uint32(100)
	next := func() uint32 { psn++; return psn }
	// opcode, extension header bytes, payload bytes
	out = append(out,
		roce(a, 0x04, next(), true, nil, 16),               // RC SEND Only
		roce(a, 0x06, next(), false, reth(0x1000, 64), 32), // RC WRITE First
		roce(a, 0x07, next(), false, nil, 32),              // RC WRITE Middle
		roce(a, 0x08, next(), true, nil, 16),               // RC WRITE Last
		roce(a, 0x0c, next(), true, reth(0x2000, 32), 0),   // RC READ Request
		roce(b, 0x10, 104, false, aeth(0x1f, 104), 32),     // RC READ Response Only
		roce(b, 0x11, 105, false, aeth(0x1f, 105), 0),      // RC ACK
		roce(cnp, 0x81, 0, false, make([]byte, 16), 0),     // CNP
		roce(a, 0x0a, next(), true, nil, 8),                // RC WRITE Only (RETH below)
		arp(a),
	)
	return out
}

func reth(va uint64, length uint32) []byte {
	h := make([]byte, 16)
	binary.BigEndian.PutUint64(h, va)
	binary.BigEndian.PutUint32(h[8:], 0x1234)
	binary.BigEndian.PutUint32(h[12:], length)
	return h
}

func aeth(syndrome uint8, msn uint32) []byte {
	h := make([]byte, 4)
	binary.BigEndian.PutUint32(h, uint32(syndrome)<<24|msn&0xffffff)
	return h
}

// roce builds Ethernet/IPv4/UDP/BTH/ext/payload/ICRC.
func roce(f flow, opcode uint8, psn uint32, ackReq bool, ext []byte, payload int) []byte {
	if opcode == 0x0a && ext == nil { // WRITE Only carries a RETH
		ext = reth(0x3000, uint32(payload))
	}
	pad := (4 - payload%4) % 4
	bthLen := 12
	udpLen := 8 + bthLen + len(ext) + payload + pad + 4
	ipLen := 20 + udpLen
	fr := make([]byte, 14+ipLen)
	copy(fr[0:6], f.dstMAC[:])
	copy(fr[6:12], f.srcMAC[:])
	binary.BigEndian.PutUint16(fr[12:], 0x0800)
	ip := fr[14:]
	ip[0] = 0x45
	ip[1] = f.dscp<<2 | f.ecn
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], f.srcIP[:])
	copy(ip[16:20], f.dstIP[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], f.srcPort)
	binary.BigEndian.PutUint16(udp[2:], udpPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	bth := udp[8:]
	bth[0] = opcode
	bth[1] = uint8(pad) << 4
	binary.BigEndian.PutUint16(bth[2:], 0xffff) // default P_Key
	if opcode == 0x81 {
		bth[4] = 0x40 // BECN
	}
	binary.BigEndian.PutUint32(bth[4:], uint32(bth[4])<<24|f.destQP)
	binary.BigEndian.PutUint32(bth[8:], psn&0xffffff)
	if ackReq {
		bth[8] |= 0x80
	}
	copy(bth[12:], ext)
	for i := 0; i < payload; i++ {
		bth[12+len(ext)+i] = byte(i)
	}
	binary.LittleEndian.PutUint32(fr[len(fr)-4:], icrc(ip))
	return pad60(fr)
}

// icrc is the RoCEv2 invariant CRC over an IPv4 packet whose last four
// bytes are the ICRC: variant fields are masked to ones.
func icrc(ip []byte) uint32 {
	masked := make([]byte, 8+len(ip)-4)
	for i := 0; i < 8; i++ {
		masked[i] = 0xff
	}
	copy(masked[8:], ip[:len(ip)-4])
	h := masked[8:]
	h[1] = 0xff                   // TOS
	h[8] = 0xff                   // TTL
	h[10], h[11] = 0xff, 0xff     // header checksum
	h[20+6], h[20+7] = 0xff, 0xff // UDP checksum
	h[28+4] = 0xff                // BTH FECN/BECN/resv
	return crc32.ChecksumIEEE(masked)
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func arp(f flow) []byte {
	fr := make([]byte, 42)
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
	return pad60(fr)
}

// pad60 pads to the Ethernet minimum (60 bytes without FCS).
func pad60(fr []byte) []byte {
	if len(fr) < 60 {
		fr = append(fr, make([]byte, 60-len(fr))...)
	}
	return fr
}

// WriteFile writes the demo capture to path.
func WriteFile(path string) error { return pcapio.WriteFile(path, Frames()) }
