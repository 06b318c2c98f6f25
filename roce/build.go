package roce

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// VLANTag is one tag of a FrameSpec; TPID 0 means 0x8100.
type VLANTag struct {
	TPID uint16
	PCP  uint8
	DEI  bool
	VID  uint16
}

// IPv6ExtSpec is one IPv6 extension header of a FrameSpec. Data follows the
// next-header and length bytes: 6+8k bytes, exactly 6 for a fragment header.
type IPv6ExtSpec struct {
	Proto uint8
	Data  []byte
}

// ExtFields holds the values of every extension header; a frame carries
// only those its opcode calls for.
type ExtFields struct {
	EEContext      uint32 // RDETH
	QKey, SrcQP    uint32 // DETH
	SRQ            uint32 // XRCETH
	FlushSel       uint8  // FETH selectivity level
	FlushPlacement uint8  // FETH placement type
	VA             uint64 // RETH
	RKey           uint32
	DMALength      uint32
	AtomicVA       uint64 // AtomicETH
	AtomicRKey     uint32
	SwapAdd        uint64
	Compare        uint64
	Syndrome       AETHSyndrome // AETH
	MSN            uint32
	OrigRemoteData uint64 // AtomicAckETH
	Imm            uint32 // ImmDt
	InvRKey        uint32 // IETH
}

// ExtFields decodes every extension header present in the view and
// reports which ones were there.
func (b BTH) ExtFields() (f ExtFields, has ExtMask) {
	if v := RDETH(b.Ext(ExtRDETH)); v != nil {
		f.EEContext, has = v.EEContext(), has|ExtRDETH
	}
	if v := DETH(b.Ext(ExtDETH)); v != nil {
		f.QKey, f.SrcQP, has = v.QKey(), v.SrcQP(), has|ExtDETH
	}
	if v := XRCETH(b.Ext(ExtXRCETH)); v != nil {
		f.SRQ, has = v.SRQ(), has|ExtXRCETH
	}
	if v := FETH(b.Ext(ExtFETH)); v != nil {
		f.FlushSel, f.FlushPlacement, has = v.SelectivityLevel(), v.PlacementType(), has|ExtFETH
	}
	if v := RETH(b.Ext(ExtRETH)); v != nil {
		f.VA, f.RKey, f.DMALength, has = v.VA(), v.RKey(), v.DMALength(), has|ExtRETH
	}
	if v := AtomicETH(b.Ext(ExtAtomicETH)); v != nil {
		f.AtomicVA, f.AtomicRKey, f.SwapAdd, f.Compare = v.VA(), v.RKey(), v.SwapAdd(), v.Compare()
		has |= ExtAtomicETH
	}
	if v := AETH(b.Ext(ExtAETH)); v != nil {
		f.Syndrome, f.MSN, has = v.Syndrome(), v.MSN(), has|ExtAETH
	}
	if v := AtomicAckETH(b.Ext(ExtAtomicAckETH)); v != nil {
		f.OrigRemoteData, has = v.OrigRemoteData(), has|ExtAtomicAckETH
	}
	if v := ImmDt(b.Ext(ExtImmDt)); v != nil {
		f.Imm, has = v.Value(), has|ExtImmDt
	}
	if v := IETH(b.Ext(ExtIETH)); v != nil {
		f.InvRKey, has = v.RKey(), has|ExtIETH
	}
	return f, has
}

// encodeExt writes the headers of mask into b (which starts after the BTH).
func encodeExt(b []byte, mask ExtMask, f *ExtFields) {
	off := 0
	for i := 0; i < numExt; i++ {
		h := ExtMask(1) << i
		if mask&h == 0 {
			continue
		}
		v := b[off : off+int(extLens[i])]
		switch h {
		case ExtRDETH:
			RDETH(v).SetEEContext(f.EEContext)
		case ExtDETH:
			DETH(v).SetQKey(f.QKey)
			DETH(v).SetSrcQP(f.SrcQP)
		case ExtXRCETH:
			XRCETH(v).SetSRQ(f.SRQ)
		case ExtFETH:
			FETH(v).Set(f.FlushSel, f.FlushPlacement)
		case ExtRETH:
			RETH(v).SetVA(f.VA)
			RETH(v).SetRKey(f.RKey)
			RETH(v).SetDMALength(f.DMALength)
		case ExtAtomicETH:
			AtomicETH(v).SetVA(f.AtomicVA)
			AtomicETH(v).SetRKey(f.AtomicRKey)
			AtomicETH(v).SetSwapAdd(f.SwapAdd)
			AtomicETH(v).SetCompare(f.Compare)
		case ExtAETH:
			AETH(v).SetSyndrome(f.Syndrome)
			AETH(v).SetMSN(f.MSN)
		case ExtAtomicAckETH:
			AtomicAckETH(v).SetOrigRemoteData(f.OrigRemoteData)
		case ExtImmDt:
			ImmDt(v).SetValue(f.Imm)
		case ExtIETH:
			IETH(v).SetRKey(f.InvRKey)
		}
		off += len(v)
	}
}

// FrameSpec describes a RoCEv2 frame for Encode: tests build every opcode
// with it, and it is the reference for rewriting code.
type FrameSpec struct {
	Dst, Src       MAC
	Tags           []VLANTag // outermost first
	IPv6           bool
	SrcIP, DstIP   netip.Addr // zero: 192.0.2.1/.2 or 2001:db8::1/::2
	DSCP, ECN      uint8
	TTL            uint8 // TTL or hop limit; 0 means 64
	FlowLabel      uint32
	IPID           uint16
	MF             bool   // IPv4 more-fragments; DF is set otherwise
	FragmentOffset uint16 // IPv4, in 8-byte units
	IPv4Options    []byte // multiple of 4, at most 40 bytes
	IPv6Ext        []IPv6ExtSpec
	SrcPort        uint16
	DstPort        uint16 // 0 means 4791
	UDPChecksum    uint16 // written as is; the ICRC masks it
	BTH            BTHFields
	Ext            ExtFields
	Payload        []byte
	// NoEthPad leaves frames shorter than 60 bytes unpadded.
	NoEthPad bool
}

var (
	defSrc4 = netip.AddrFrom4([4]byte{192, 0, 2, 1})
	defDst4 = netip.AddrFrom4([4]byte{192, 0, 2, 2})
	defSrc6 = netip.MustParseAddr("2001:db8::1")
	defDst6 = netip.MustParseAddr("2001:db8::2")
)

// PadFor is the BTH pad count that aligns a payload of n bytes.
func PadFor(n int) uint8 { return uint8(-n & 3) }

func (s *FrameSpec) sizes() (l3, ipHdr, l4, udpLen, total int, err error) {
	l3 = EthernetHeaderLen + VLANTagLen*len(s.Tags)
	if s.IPv6 {
		ipHdr = IPv6HeaderLen
		for _, e := range s.IPv6Ext {
			n := len(e.Data) + 2
			if n%8 != 0 || n > 2048 || (e.Proto == ProtoFragment && n != 8) {
				return 0, 0, 0, 0, 0, errors.New("roce: bad IPv6 extension header length")
			}
			ipHdr += n
		}
	} else {
		if len(s.IPv4Options)%4 != 0 || len(s.IPv4Options) > 40 {
			return 0, 0, 0, 0, 0, errors.New("roce: bad IPv4 options length")
		}
		ipHdr = IPv4MinHeaderLen + len(s.IPv4Options)
	}
	l4 = l3 + ipHdr
	udpLen = UDPHeaderLen + BTHLen + int(opTable[s.BTH.Opcode].ExtLen) +
		len(s.Payload) + int(PadFor(len(s.Payload))) + ICRCLen
	total = l4 + udpLen
	if total-l3 > 0xffff {
		return 0, 0, 0, 0, 0, errors.New("roce: packet too large")
	}
	if total < MinFrameLen && !s.NoEthPad {
		total = MinFrameLen
	}
	return l3, ipHdr, l4, udpLen, total, nil
}

// Len is the frame length Encode will write.
func (s *FrameSpec) Len() int {
	_, _, _, _, n, _ := s.sizes()
	return n
}

// Encode writes the frame, ICRC included, into b and returns its length.
func (s *FrameSpec) Encode(b []byte) (int, error) {
	l3, ipHdr, l4, udpLen, total, err := s.sizes()
	if err != nil {
		return 0, err
	}
	if len(b) < total {
		return 0, errors.New("roce: buffer too small")
	}
	b = b[:total]
	clear(b)

	et := uint16(EtherTypeIPv4)
	if s.IPv6 {
		et = EtherTypeIPv6
	}
	tpid := func(i int) uint16 {
		if i == len(s.Tags) {
			return et
		}
		if s.Tags[i].TPID == 0 {
			return EtherTypeVLAN
		}
		return s.Tags[i].TPID
	}
	Ethernet(b).Encode(&EthernetFields{Dst: s.Dst, Src: s.Src, EtherType: tpid(0)})
	for i, t := range s.Tags {
		VLAN(b[EthernetHeaderLen+VLANTagLen*i:]).Encode(&VLANFields{
			PCP: t.PCP, DEI: t.DEI, VID: t.VID, EtherType: tpid(i + 1),
		})
	}

	ttl := s.TTL
	if ttl == 0 {
		ttl = 64
	}
	tos := s.DSCP<<2 | s.ECN&3
	if s.IPv6 {
		src, dst := s.SrcIP, s.DstIP
		if !src.Is6() {
			src = defSrc6
		}
		if !dst.Is6() {
			dst = defDst6
		}
		nh := uint8(ProtoUDP)
		if len(s.IPv6Ext) > 0 {
			nh = s.IPv6Ext[0].Proto
		}
		IPv6(b[l3:]).Encode(&IPv6Fields{
			TrafficClass: tos, FlowLabel: s.FlowLabel,
			PayloadLength: uint16(ipHdr - IPv6HeaderLen + udpLen),
			NextHeader:    nh, HopLimit: ttl, Src: src.As16(), Dst: dst.As16(),
		})
		off := l3 + IPv6HeaderLen
		for i, e := range s.IPv6Ext {
			next := uint8(ProtoUDP)
			if i+1 < len(s.IPv6Ext) {
				next = s.IPv6Ext[i+1].Proto
			}
			b[off+IPv6ExtNextHeaderOffset] = next
			if e.Proto != ProtoFragment {
				b[off+IPv6ExtLenOffset] = uint8((len(e.Data)+2)/IPv6ExtMinLen - 1)
			}
			// Data is what follows the next-header and length bytes.
			copy(b[off+IPv6ExtLenOffset+1:], e.Data)
			off += len(e.Data) + 2
		}
	} else {
		src, dst := s.SrcIP, s.DstIP
		if !src.Is4() {
			src = defSrc4
		}
		if !dst.Is4() {
			dst = defDst4
		}
		IPv4(b[l3:]).Encode(&IPv4Fields{
			TOS: tos, TotalLength: uint16(ipHdr + udpLen), ID: s.IPID,
			DF: !s.MF && s.FragmentOffset == 0, MF: s.MF, FragmentOffset: s.FragmentOffset,
			TTL: ttl, Protocol: ProtoUDP, Src: src.As4(), Dst: dst.As4(), Options: s.IPv4Options,
		})
	}

	dport := s.DstPort
	if dport == 0 {
		dport = RoCEv2Port
	}
	UDP(b[l4:]).Encode(&UDPFields{SrcPort: s.SrcPort, DstPort: dport, Length: uint16(udpLen), Checksum: s.UDPChecksum})

	bth := l4 + UDPHeaderLen
	f := s.BTH
	f.PadCount = PadFor(len(s.Payload))
	BTH(b[bth:]).Encode(&f)
	info := &opTable[f.Opcode]
	encodeExt(b[bth+BTHLen:], info.Ext, &s.Ext)
	copy(b[bth+BTHLen+int(info.ExtLen):], s.Payload)

	icrcOff := l4 + udpLen - ICRCLen
	crc, _ := ICRC(b, l3, l4, icrcOff)
	binary.LittleEndian.PutUint32(b[icrcOff:], crc)
	return total, nil
}

// Append encodes the frame into a new slice appended to dst.
func (s *FrameSpec) Append(dst []byte) ([]byte, error) {
	n := s.Len()
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	if _, err := s.Encode(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}
