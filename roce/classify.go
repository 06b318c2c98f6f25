package roce

import (
	"encoding/binary"
	"strconv"
)

// Reason says why a frame could not be classified completely. Reasons are
// small integers so per-reason drop counters can be a plain array.
type Reason uint8

const (
	ReasonNone           Reason = iota
	ErrTruncatedEth             // shorter than an Ethernet header
	ErrTruncatedVLAN            // tag cut short
	ErrTooManyTags              // a third tag: L3 not looked for
	ErrTruncatedIPv4            // IPv4 header (with options) past the frame
	ErrBadIPVersion             // version nibble disagrees with the EtherType
	ErrBadIHL                   // IHL below 5
	ErrIPv4TotalLength          // total length below the header or past the frame
	ErrTruncatedIPv6            // IPv6 header past the frame
	ErrIPv6PayloadLength        // payload length past the frame
	ErrTruncatedIPv6Ext         // extension header past the IP payload
	ErrIPv6ExtChain             // more extension headers than MaxIPv6Ext
	ErrIPFragment               // first fragment of a fragmented RoCEv2 datagram
	ErrTruncatedUDP             // UDP header past the IP payload
	ErrUDPLength                // UDP length below 8+12+4 or past the IP payload
	ErrTruncatedBTH             // IP payload too short for a BTH
	ErrBadTVer                  // BTH transport version not 0
	ErrReservedOpcode           // opcode reserved or manufacturer specific
	ErrTruncatedExt             // extension headers run into the ICRC
	ErrBadPad                   // pad count beyond the payload, or payload+pad not 4-aligned
	ErrBadICRC                  // ICRC mismatch (only when verification is on)
	NumReasons
)

var reasonNames = [NumReasons]string{
	"none", "truncated_eth", "truncated_vlan", "too_many_tags", "truncated_ipv4",
	"bad_ip_version", "bad_ihl", "ipv4_total_length", "truncated_ipv6",
	"ipv6_payload_length", "truncated_ipv6_ext", "ipv6_ext_chain", "ip_fragment",
	"truncated_udp", "udp_length", "truncated_bth", "bad_tver", "reserved_opcode",
	"truncated_ext_header", "bad_pad", "bad_icrc",
}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason_" + strconv.Itoa(int(r))
}

// MaxIPv6Ext bounds the extension headers walked per packet so a crafted
// chain cannot make classification cost grow with frame size.
const MaxIPv6Ext = 6

// Trust selects which marking assigns the traffic class.
type Trust uint8

const (
	TrustDSCP Trust = iota
	TrustPCP
	TrustNone
)

var trustNames = [...]string{"dscp", "pcp", "none"}

func (t Trust) String() string {
	if int(t) < len(trustNames) {
		return trustNames[t]
	}
	return "trust-" + strconv.Itoa(int(t))
}

// TCMap maps markings to traffic classes.
type TCMap struct {
	Trust Trust
	DSCP  [64]uint8
	PCP   [8]uint8
}

// DefaultTCMap is the mlx5 firmware default: trust DSCP, TC = DSCP>>3,
// PCP n -> TC n.
func DefaultTCMap() TCMap {
	var m TCMap
	for i := range m.DSCP {
		m.DSCP[i] = uint8(i >> 3)
	}
	for i := range m.PCP {
		m.PCP[i] = uint8(i)
	}
	return m
}

var defaultTCMap = DefaultTCMap()

// TC is the traffic class of a classified frame: IP packets under trust
// DSCP use the DSCP; tagged frames otherwise use the PCP of the tag
// nearest the payload; everything else is TC0. A stage that rewrites
// r.DSCP calls it again.
func (m *TCMap) TC(r *Result) uint8 {
	switch m.Trust {
	case TrustDSCP:
		if r.IPVersion != 0 {
			return m.DSCP[r.DSCP&63]
		}
		if r.Tagged {
			return m.PCP[r.PCP&7]
		}
	case TrustPCP:
		if r.Tagged {
			return m.PCP[r.PCP&7]
		}
	}
	return 0
}

// Result is what Classify learns about one frame. Offsets count from the
// frame start and are 0 when the header is absent. Later stages read it
// instead of parsing the headers again.
//
// L4 is the UDP header or, when TCPMinHeaderLen bytes of it lie in the IP
// payload, the TCP header, of a whole datagram or a first fragment;
// L4Proto says which. L4Proto is what the IP header carries, UDP or not:
// the IPv4 protocol, set with IPVersion, or for IPv6 the next header that
// ends the walk through the extension headers (that of a fragment's
// payload included), set when the walk gets there. MACCtl sorts an
// untagged MAC control frame (EtherType 0x8808), whose request is then
// one ParseMACControl away.
//
// L3 to EtherType, and PayloadOff to Tags, are adjacent for Classify's
// fast path: their stores combine into one 8-byte store each; so do
// L4Proto and RoCE, into one 2-byte store. Result is copied and zeroed per
// packet: it stays 52 bytes, MACCtl taking a byte of what was padding.
type Result struct {
	L3, L4, BTH uint16
	EtherType   uint16 // after any tags
	PayloadOff  uint16 // first byte after the extension headers
	Opcode      Opcode
	Transport   Transport
	CNP         bool
	HasAETH     bool
	IPVersion   uint8 // 0 when there is no usable IP header
	Tags        uint8
	PayloadLen  uint16 // excluding pad and ICRC
	ICRCOff     uint16 // UDP start + UDP length - 4
	VID         uint16 // of the tag nearest the IP header
	PKey        uint16
	DestQP      uint32
	PSN         uint32
	PCP         uint8
	DSCP        uint8
	ECN         uint8
	TC          uint8
	PadCount    uint8
	TVer        uint8
	AETH        AETHSyndrome // valid when HasAETH
	ICRC        ICRCState
	Err         Reason
	L4Proto     uint8 // IP protocol or IPv6 next header after the extension headers
	RoCE        bool  // UDP destination port 4791 with a BTH
	Tagged      bool
	FECN        bool
	BECN        bool
	AckReq      bool
	SE          bool
	MigReq      bool
	Fragment    bool   // any IP fragment; a non-first one is never RoCE
	MACCtl      MACCtl // of an untagged 0x8808 frame
}

// opRow is what Classify's fast path copies into a Result for an opcode:
// the fields from PayloadOff to Tags, in Result's order, so the copy is
// one 8-byte load and store (measured: cheaper than computing them).
type opRow struct {
	payloadOff      uint16
	opcode          Opcode
	transport       Transport
	cnp, hasAETH    bool
	ipVersion, tags uint8
}

// opRows is filled in by init, from opTable.
var opRows [256]opRow

// fastLen is the untagged IPv4 (no options)/UDP/BTH prefix.
const fastLen = EthernetHeaderLen + IPv4MinHeaderLen + UDPHeaderLen + BTHLen

// Classify parses frame (Ethernet, up to two VLAN tags, IPv4/IPv6, UDP,
// BTH and extension headers) into out, assigns a traffic class under m
// (nil means DefaultTCMap) and, if verifyICRC, checks the ICRC. It never
// allocates and never panics; problems land in out.Err. Frames longer than
// 65535 bytes are looked at up to that length. It reports whether the
// frame is well-formed RoCEv2 (out.RoCE, no out.Err): the data path's first
// question, answered without reading out back.
//
// The common frame, a well-formed untagged IPv4 RoCEv2 packet without
// options or fragmentation, takes a fast path. Any other frame goes to
// classifyGeneral, which would give the same result for the frames the
// fast path takes (TestFastPathAgrees).
func Classify(frame []byte, m *TCMap, verifyICRC bool, out *Result) (ok bool) {
	n := len(frame)
	if n < fastLen || n > 0xffff {
		return classifyGeneral(frame, m, verifyICRC, out)
	}
	h := frame[:fastLen]
	const (
		l3  = EthernetHeaderLen
		l4  = l3 + IPv4MinHeaderLen
		bth = l4 + UDPHeaderLen
	)
	// EtherType IPv4 and, in the byte after it, version 4 with IHL 5; UDP,
	// no fragment bits, port 4791. Compared as little-endian words: no
	// byte swaps.
	if binary.LittleEndian.Uint32(h[EthernetTypeOffset:])&0xffffff != 0x45<<16|uint32(bswap16(EtherTypeIPv4)) ||
		h[l3+IPv4ProtoOffset] != ProtoUDP ||
		binary.LittleEndian.Uint16(h[l3+IPv4FragOffset:])&bswap16(ipv4FragMask) != 0 ||
		binary.LittleEndian.Uint16(h[l4+UDPDstPortOffset:]) != bswap16(RoCEv2Port) {
		return classifyGeneral(frame, m, verifyICRC, out)
	}
	tl := int(binary.BigEndian.Uint16(h[l3+IPv4TotalLenOffset:]))
	ulen := int(binary.BigEndian.Uint16(h[l4+UDPLengthOffset:]))
	if l3+tl > n || l4+ulen > l3+tl {
		return classifyGeneral(frame, m, verifyICRC, out)
	}
	// Fields are stored as soon as they are known, which keeps few values
	// live (measured: fewer spills). A check failing after that is
	// harmless: classifyGeneral starts from a zero Result too. Zeroing and
	// then storing the fields that are not zero measured faster than
	// storing every field.
	*out = Result{}
	out.ICRCOff = uint16(l4 + ulen - ICRCLen)
	op := Opcode(h[bth+BTHOpcodeOffset])
	extLen := int(opFast.extLen[op])
	b1 := h[bth+BTHFlagsOffset]
	pad := int(b1 >> bthPadShift & bthPadMask)
	rest := ulen - (UDPHeaderLen + BTHLen + ICRCLen) - extLen // payload and pad
	// rest >= pad also rejects a UDP length below 8+12+4 (and with it a
	// total length below fastLen-l3) and reserved opcodes (reservedExtLen).
	if b1&bthTVerMask != 0 || rest < pad || rest&3 != 0 {
		return classifyGeneral(frame, m, verifyICRC, out)
	}
	row := &opRows[op]
	out.PayloadOff, out.Opcode, out.Transport, out.CNP, out.HasAETH, out.IPVersion, out.Tags =
		row.payloadOff, row.opcode, row.transport, row.cnp, row.hasAETH, row.ipVersion, row.tags
	out.PayloadLen = uint16(rest - pad)
	out.PadCount = uint8(pad)
	out.SE = b1&bthSE != 0
	out.MigReq = b1&bthMigReq != 0
	// Packets of a mix of opcodes in no learnable order: no branch on
	// whether this one has an AETH (the AETH's bytes precede the ICRC,
	// inside the frame, when it does).
	out.AETH = AETHSyndrome(frame[opFast.fastAETHAt[op]] & opFast.aethMask[op])
	if m == nil {
		m = &defaultTCMap
	}
	tos := h[l3+IPv4TOSOffset]
	if m.Trust == TrustDSCP {
		out.TC = m.DSCP[tos>>dscpShift]
	}
	out.DSCP = tos >> dscpShift
	out.ECN = tos & ecnMask
	out.PKey = binary.BigEndian.Uint16(h[bth+BTHPKeyOffset:])
	w := binary.BigEndian.Uint32(h[bth+BTHDestQPOffset:])
	out.DestQP = w & bthQPMask
	out.FECN = w&(bthFECN<<bthWordHigh) != 0
	out.BECN = w&(bthBECN<<bthWordHigh) != 0
	w = binary.BigEndian.Uint32(h[bth+BTHPSNOffset:])
	out.PSN = w & bthPSNMask
	out.AckReq = w&(bthAckReq<<bthWordHigh) != 0
	out.L3, out.L4, out.BTH, out.EtherType = l3, l4, bth, EtherTypeIPv4
	out.L4Proto, out.RoCE = ProtoUDP, true
	if verifyICRC {
		verifyFast(frame, out)
		return out.Err == ReasonNone
	}
	return true
}

// verifyFast checks the ICRC of a frame Classify's fast path took. A
// function of its own so that no value of the fast path lives across the
// call to icrcSum (measured: that made Classify spill on every packet).
func verifyFast(frame []byte, r *Result) {
	end := int(r.ICRCOff)
	if icrcSum(frame, EthernetHeaderLen, EthernetHeaderLen+IPv4MinHeaderLen, end, false) == binary.LittleEndian.Uint32(frame[end:]) {
		r.ICRC = ICRCOK
	} else {
		r.ICRC, r.Err = ICRCBad, ErrBadICRC
	}
}

// bswap16 swaps the bytes of a constant.
func bswap16(v uint16) uint16 { return v<<8 | v>>8 }

// classifyGeneral is Classify for any frame.
func classifyGeneral(frame []byte, m *TCMap, verify bool, out *Result) bool {
	*out = Result{}
	if len(frame) > 0xffff {
		frame = frame[:0xffff]
	}
	classify(frame, verify, out)
	if m == nil {
		m = &defaultTCMap
	}
	out.TC = m.TC(out)
	return out.RoCE && out.Err == ReasonNone
}

func classify(f []byte, verify bool, r *Result) {
	n := len(f)
	if n < EthernetHeaderLen {
		r.Err = ErrTruncatedEth
		return
	}
	et := binary.BigEndian.Uint16(f[EthernetTypeOffset:])
	off := EthernetHeaderLen
	for IsTPID(et) {
		if r.Tags == MaxTags {
			r.EtherType = et
			r.Err = ErrTooManyTags
			return
		}
		if n < off+VLANTagLen {
			r.Err = ErrTruncatedVLAN
			return
		}
		t := f[off : off+VLANTagLen]
		r.Tagged = true
		r.Tags++
		r.PCP = t[VLANTCIOffset] >> vlanPCPShift
		r.VID = binary.BigEndian.Uint16(t[VLANTCIOffset:]) & vlanVIDMask
		et = binary.BigEndian.Uint16(t[VLANTypeOffset:])
		off += VLANTagLen
	}
	r.EtherType = et

	var l4, ipEnd int
	var frag bool
	var proto uint8
	switch et {
	case EtherTypeIPv4:
		if n < off+IPv4MinHeaderLen {
			r.Err = ErrTruncatedIPv4
			return
		}
		ip := f[off : off+IPv4MinHeaderLen]
		if ip[IPVersionOffset]>>4 != 4 {
			r.Err = ErrBadIPVersion
			return
		}
		r.IPVersion = 4
		r.L3 = uint16(off)
		tos := ip[IPv4TOSOffset]
		r.DSCP = tos >> dscpShift
		r.ECN = tos & ecnMask
		proto = ip[IPv4ProtoOffset]
		r.L4Proto = proto
		hl := int(ip[IPv4VersionIHLOffset]&ipv4IHLMask) << 2
		if hl < IPv4MinHeaderLen {
			r.Err = ErrBadIHL
			return
		}
		if off+hl > n {
			r.Err = ErrTruncatedIPv4
			return
		}
		tl := int(binary.BigEndian.Uint16(ip[IPv4TotalLenOffset:]))
		ipEnd = off + tl
		if tl < hl || ipEnd > n {
			r.Err = ErrIPv4TotalLength
			return
		}
		fo := binary.BigEndian.Uint16(ip[IPv4FragOffset:])
		if fo&ipv4FragMask != 0 {
			r.Fragment = true
			if fo&ipv4FragOffMask != 0 {
				return // a later fragment has no transport header
			}
			frag = true
		}
		l4 = off + hl
	case EtherTypeIPv6:
		if n < off+IPv6HeaderLen {
			r.Err = ErrTruncatedIPv6
			return
		}
		ip := f[off : off+IPv6HeaderLen]
		if ip[IPVersionOffset]>>4 != 6 {
			r.Err = ErrBadIPVersion
			return
		}
		r.IPVersion = 6
		r.L3 = uint16(off)
		tc := IPv6(ip).TrafficClass()
		r.DSCP = tc >> dscpShift
		r.ECN = tc & ecnMask
		ipEnd = off + IPv6HeaderLen + int(binary.BigEndian.Uint16(ip[IPv6PayloadLenOffset:]))
		if ipEnd > n {
			r.Err = ErrIPv6PayloadLength
			return
		}
		nh := ip[IPv6NextHeaderOffset]
		l4 = off + IPv6HeaderLen
		for i := 0; IsIPv6ExtHeader(nh); i++ {
			if i == MaxIPv6Ext {
				r.Err = ErrIPv6ExtChain
				return
			}
			if l4+IPv6ExtMinLen > ipEnd {
				r.Err = ErrTruncatedIPv6Ext
				return
			}
			h := f[l4 : l4+IPv6ExtMinLen]
			next := h[IPv6ExtNextHeaderOffset]
			if nh == ProtoFragment {
				// Offset 0 without M is an atomic fragment: a whole datagram.
				fo := binary.BigEndian.Uint16(h[IPv6FragOffsetOffset:])
				if fo&(ipv6FragOffMask|ipv6FragM) != 0 {
					r.Fragment = true
					if fo&ipv6FragOffMask != 0 {
						r.L4Proto = next
						return
					}
					frag = true
				}
				l4 += IPv6ExtMinLen
			} else {
				l4 += (int(h[IPv6ExtLenOffset]) + 1) * IPv6ExtMinLen
			}
			nh = next
		}
		proto = nh
		r.L4Proto = proto
		if proto == ProtoUDP && l4 > ipEnd {
			r.Err = ErrTruncatedIPv6Ext
			return
		}
	case EtherTypeMACControl:
		if r.Tags == 0 {
			r.MACCtl = macCtlKind(f[EthernetHeaderLen:])
		}
		return
	default:
		return
	}

	if proto != ProtoUDP {
		// Flow rules match TCP ports: locate the header for them.
		if proto == ProtoTCP && l4+TCPMinHeaderLen <= ipEnd {
			r.L4 = uint16(l4)
		}
		return
	}
	if l4+UDPHeaderLen > ipEnd {
		r.Err = ErrTruncatedUDP
		return
	}
	u := f[l4 : l4+UDPHeaderLen]
	r.L4 = uint16(l4)
	if binary.BigEndian.Uint16(u[UDPDstPortOffset:]) != RoCEv2Port {
		return
	}
	r.RoCE = true
	bth := l4 + UDPHeaderLen
	if bth+BTHLen > ipEnd {
		if frag {
			r.Err = ErrIPFragment
		} else {
			r.Err = ErrTruncatedBTH
		}
		return
	}
	b := f[bth : bth+BTHLen]
	op := Opcode(b[BTHOpcodeOffset])
	r.BTH = uint16(bth)
	r.Opcode = op
	r.Transport = Transport(op >> 5)
	r.CNP = op == OpCNP
	flags := b[BTHFlagsOffset]
	r.SE = flags&bthSE != 0
	r.MigReq = flags&bthMigReq != 0
	pad := int(flags >> bthPadShift & bthPadMask)
	r.PadCount = uint8(pad)
	r.TVer = flags & bthTVerMask
	r.PKey = binary.BigEndian.Uint16(b[BTHPKeyOffset:])
	r.FECN = b[BTHDestQPOffset]&bthFECN != 0
	r.BECN = b[BTHDestQPOffset]&bthBECN != 0
	r.DestQP = binary.BigEndian.Uint32(b[BTHDestQPOffset:]) & bthQPMask
	r.AckReq = b[BTHPSNOffset]&bthAckReq != 0
	r.PSN = binary.BigEndian.Uint32(b[BTHPSNOffset:]) & bthPSNMask
	if frag {
		// The ICRC is in the last fragment; nothing more to check here.
		r.Err = ErrIPFragment
		return
	}

	ulen := int(binary.BigEndian.Uint16(u[UDPLengthOffset:]))
	if ulen < UDPHeaderLen+BTHLen+ICRCLen || l4+ulen > ipEnd {
		r.Err = ErrUDPLength
		return
	}
	icrcOff := l4 + ulen - ICRCLen
	r.ICRCOff = uint16(icrcOff)

	switch {
	case r.TVer != 0:
		r.Err = ErrBadTVer
	case !opFast.defined[op]:
		r.Err = ErrReservedOpcode
	default:
		ext := bth + BTHLen
		extEnd := ext + int(opFast.extLen[op])
		if extEnd > icrcOff {
			r.Err = ErrTruncatedExt
			break
		}
		// No branch on the opcode (see Classify): without an AETH, the
		// byte read is the first after the BTH, before the ICRC.
		r.HasAETH = opFast.hasAETH[op]
		r.AETH = AETHSyndrome(f[ext+int(opFast.aeth[op])+aethSyndromeOffset] & opFast.aethMask[op])
		rest := icrcOff - extEnd
		if pad > rest || rest&3 != 0 {
			r.Err = ErrBadPad
			break
		}
		r.PayloadOff = uint16(extEnd)
		r.PayloadLen = uint16(rest - pad)
	}

	if verify {
		crc := icrcSum(f, int(r.L3), l4, icrcOff, r.IPVersion == 6)
		if crc == binary.LittleEndian.Uint32(f[icrcOff:]) {
			r.ICRC = ICRCOK
		} else {
			r.ICRC = ICRCBad
			if r.Err == ReasonNone {
				r.Err = ErrBadICRC
			}
		}
	}
}
