package roce_test

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

func TestOpcodeTable(t *testing.T) {
	perTransport := map[roce.Transport]int{}
	for op := 0; op < 256; op++ {
		o := roce.Opcode(op)
		if o.Transport() != roce.Transport(op>>5) || o.Info().Transport != o.Transport() {
			t.Errorf("%#x: transport %v", op, o.Transport())
		}
		if o.Name() == "" {
			t.Errorf("%#x: no name", op)
		}
		if o.Defined() {
			perTransport[o.Transport()]++
			n := 0
			for h := roce.ExtMask(1); h < 1<<10; h <<= 1 {
				if o.Ext()&h != 0 {
					if o.ExtOffset(h) != n {
						t.Errorf("%v: %v at %d, want %d", o, h, o.ExtOffset(h), n)
					}
					n += h.Len()
				} else if o.ExtOffset(h) != -1 {
					t.Errorf("%v: absent %v at %d", o, h, o.ExtOffset(h))
				}
			}
			if int(o.Info().ExtLen) != n {
				t.Errorf("%v: ext len %d, want %d", o, o.Info().ExtLen, n)
			}
		}
	}
	want := map[roce.Transport]int{
		roce.TransportRC: 25, roce.TransportUC: 12, roce.TransportRD: 22,
		roce.TransportUD: 2, roce.TransportCNP: 1, roce.TransportXRC: 25,
	}
	if len(perTransport) != len(want) {
		t.Errorf("transports %v", perTransport)
	}
	for k, v := range want {
		if perTransport[k] != v {
			t.Errorf("%v: %d defined opcodes, want %d", k, perTransport[k], v)
		}
	}
	// Spot checks against the IBTA opcode table.
	for _, c := range []struct {
		op   roce.Opcode
		name string
		ext  roce.ExtMask
	}{
		{0x00, "RC SEND First", 0},
		{0x0b, "RC RDMA WRITE Only with Immediate", roce.ExtRETH | roce.ExtImmDt},
		{0x11, "RC Acknowledge", roce.ExtAETH},
		{0x12, "RC ATOMIC Acknowledge", roce.ExtAETH | roce.ExtAtomicAckETH},
		{0x13, "RC CmpSwap", roce.ExtAtomicETH},
		{0x17, "RC SEND Only with Invalidate", roce.ExtIETH},
		{0x1c, "RC FLUSH", roce.ExtFETH | roce.ExtRETH},
		{0x1d, "RC ATOMIC WRITE", roce.ExtRETH},
		{0x4c, "RD RDMA READ Request", roce.ExtRDETH | roce.ExtDETH | roce.ExtRETH},
		{0x52, "RD ATOMIC Acknowledge", roce.ExtRDETH | roce.ExtAETH | roce.ExtAtomicAckETH},
		{0x55, "RD RESYNC", roce.ExtRDETH | roce.ExtDETH},
		{0x64, "UD SEND Only", roce.ExtDETH},
		{0x65, "UD SEND Only with Immediate", roce.ExtDETH | roce.ExtImmDt},
		{0x81, "CNP", 0},
		{0xab, "XRC RDMA WRITE Only with Immediate", roce.ExtXRCETH | roce.ExtRETH | roce.ExtImmDt},
		{0xb2, "XRC ATOMIC Acknowledge", roce.ExtAETH | roce.ExtAtomicAckETH},
		{0xbc, "XRC FLUSH", roce.ExtXRCETH | roce.ExtFETH | roce.ExtRETH},
	} {
		if !c.op.Defined() || c.op.Name() != c.name || c.op.Ext() != c.ext {
			t.Errorf("%#x: %q %v", uint8(c.op), c.op.Name(), c.op.Ext())
		}
	}
	for _, op := range []roce.Opcode{0x15, 0x18, 0x1e, 0x2c, 0x56, 0x60, 0x63, 0x66, 0x80, 0x82, 0xb5, 0xbe, 0xc0, 0xff} {
		if op.Defined() {
			t.Errorf("%#x should be reserved", uint8(op))
		}
	}
	if roce.OpCNP.Transport().String() != "CNP" || roce.Opcode(0xa0).Transport().String() != "XRC" {
		t.Error("transport names")
	}
	if s := (roce.ExtRETH | roce.ExtImmDt).String(); s != "RETH+ImmDt" {
		t.Errorf("ext string %q", s)
	}
}

// TestCorpusRoundTrip builds every opcode of every transport over IPv4 and
// IPv6, untagged/VLAN/QinQ, with every ECN codepoint, and checks that the
// classifier and the views read back what the builder wrote.
func TestCorpusRoundTrip(t *testing.T) {
	m := roce.DefaultTCMap()
	corpus := rocetest.Corpus()
	seen := map[roce.Opcode]int{}
	for _, c := range corpus {
		s := &c.Spec
		f := c.Frame
		var r roce.Result
		roce.Classify(f, &m, true, &r)
		fail := func(what string, got, want any) {
			t.Helper()
			t.Errorf("%s: %s = %v, want %v", c.Name, what, got, want)
		}
		if !r.RoCE || r.Err != roce.ReasonNone || r.ICRC != roce.ICRCOK {
			fail("roce/err/icrc", []any{r.RoCE, r.Err, r.ICRC}, "true none ok")
			continue
		}
		seen[s.BTH.Opcode]++
		ipv := uint8(4)
		if s.IPv6 {
			ipv = 6
		}
		check := []struct {
			what      string
			got, want any
		}{
			{"ip version", r.IPVersion, ipv},
			{"opcode", r.Opcode, s.BTH.Opcode},
			{"transport", r.Transport, s.BTH.Opcode.Transport()},
			{"dest qp", r.DestQP, s.BTH.DestQP},
			{"psn", r.PSN, s.BTH.PSN},
			{"ackreq", r.AckReq, s.BTH.AckReq},
			{"se", r.SE, s.BTH.SE},
			{"migreq", r.MigReq, s.BTH.MigReq},
			{"fecn", r.FECN, s.BTH.FECN},
			{"becn", r.BECN, s.BTH.BECN},
			{"pkey", r.PKey, s.BTH.PKey},
			{"pad", r.PadCount, roce.PadFor(len(s.Payload))},
			{"cnp", r.CNP, s.BTH.Opcode == roce.OpCNP},
			{"dscp", r.DSCP, s.DSCP},
			{"ecn", r.ECN, s.ECN},
			{"tc", r.TC, s.DSCP >> 3},
			{"tags", int(r.Tags), len(s.Tags)},
			{"tagged", r.Tagged, len(s.Tags) > 0},
			{"payload len", int(r.PayloadLen), len(s.Payload)},
			{"has aeth", r.HasAETH, s.BTH.Opcode.Ext()&roce.ExtAETH != 0},
			{"fragment", r.Fragment, false},
		}
		if len(s.Tags) > 0 {
			in := s.Tags[len(s.Tags)-1]
			check = append(check, struct {
				what      string
				got, want any
			}{"pcp/vid", [2]int{int(r.PCP), int(r.VID)}, [2]int{int(in.PCP), int(in.VID)}})
		}
		if r.HasAETH {
			check = append(check, struct {
				what      string
				got, want any
			}{"aeth", r.AETH, s.Ext.Syndrome})
		}
		for _, k := range check {
			if k.got != k.want {
				fail(k.what, k.got, k.want)
			}
		}
		if !bytes.Equal(f[r.PayloadOff:int(r.PayloadOff)+int(r.PayloadLen)], s.Payload) {
			fail("payload", f[r.PayloadOff:], s.Payload)
		}

		// The BTH view over the UDP payload agrees with the classifier.
		udp := roce.UDP(f[r.L4:])
		b := roce.BTH(f[r.BTH : int(r.L4)+int(udp.Length())])
		if b.Opcode() != r.Opcode || b.DestQP() != r.DestQP || b.PSN() != r.PSN ||
			b.PadCount() != r.PadCount || b.TVer() != 0 || b.Resv7() != 0 ||
			!bytes.Equal(b.Payload(), s.Payload) {
			fail("bth view", b[:12], s.BTH)
		}
		ext, has := b.ExtFields()
		if has != s.BTH.Opcode.Ext() {
			fail("ext mask", has, s.BTH.Opcode.Ext())
		}
		if want := maskExt(s.Ext, has); ext != want {
			fail("ext fields", ext, want)
		}
		crc, ok := roce.ICRC(f, int(r.L3), int(r.L4), int(r.ICRCOff))
		if !ok || crc != b.ICRC() {
			fail("ICRC()", crc, b.ICRC())
		}
	}
	for _, op := range rocetest.DefinedOpcodes() {
		if seen[op] < 32 {
			t.Errorf("opcode %v built %d times", op, seen[op])
		}
	}
}

// maskExt keeps the fields of the headers in has, with each truncated to
// its wire width.
func maskExt(f roce.ExtFields, has roce.ExtMask) roce.ExtFields {
	var o roce.ExtFields
	if has&roce.ExtRDETH != 0 {
		o.EEContext = f.EEContext & 0xffffff
	}
	if has&roce.ExtDETH != 0 {
		o.QKey, o.SrcQP = f.QKey, f.SrcQP&0xffffff
	}
	if has&roce.ExtXRCETH != 0 {
		o.SRQ = f.SRQ & 0xffffff
	}
	if has&roce.ExtFETH != 0 {
		o.FlushSel, o.FlushPlacement = f.FlushSel&3, f.FlushPlacement&15
	}
	if has&roce.ExtRETH != 0 {
		o.VA, o.RKey, o.DMALength = f.VA, f.RKey, f.DMALength
	}
	if has&roce.ExtAtomicETH != 0 {
		o.AtomicVA, o.AtomicRKey, o.SwapAdd, o.Compare = f.AtomicVA, f.AtomicRKey, f.SwapAdd, f.Compare
	}
	if has&roce.ExtAETH != 0 {
		o.Syndrome, o.MSN = f.Syndrome, f.MSN&0xffffff
	}
	if has&roce.ExtAtomicAckETH != 0 {
		o.OrigRemoteData = f.OrigRemoteData
	}
	if has&roce.ExtImmDt != 0 {
		o.Imm = f.Imm
	}
	if has&roce.ExtIETH != 0 {
		o.InvRKey = f.InvRKey
	}
	return o
}

func build(t testing.TB, s roce.FrameSpec) []byte {
	t.Helper()
	f := make([]byte, s.Len())
	if _, err := s.Encode(f); err != nil {
		t.Fatal(err)
	}
	return f
}

func classify(f []byte) roce.Result {
	var r roce.Result
	roce.Classify(f, nil, true, &r)
	return r
}

// Offsets of an untagged IPv4 frame without options.
const (
	l3 = 14
	l4 = 34
	bt = 42
)

func TestNotRoCE(t *testing.T) {
	arp := make([]byte, 60)
	roce.Ethernet(arp).SetEtherType(roce.EtherTypeARP)
	r := classify(arp)
	if r.RoCE || r.Err != roce.ReasonNone || r.TC != 0 || r.EtherType != roce.EtherTypeARP {
		t.Errorf("ARP: %+v", r)
	}

	f := build(t, rocetest.Spec(roce.OpRC|roce.OpAck, 1))
	roce.IPv4(f[l3:]).SetTOS(46 << 2)
	f[l3+9] = roce.ProtoTCP
	roce.IPv4(f[l3:]).SetChecksum()
	r = classify(f)
	if r.RoCE || r.Err != roce.ReasonNone || r.DSCP != 46 || r.TC != 5 || r.IPVersion != 4 {
		t.Errorf("TCP: %+v", r)
	}

	// Source port 4791 alone is not RoCEv2.
	f = build(t, rocetest.Spec(roce.OpRC|roce.OpAck, 1))
	roce.UDP(f[l4:]).SetSrcPort(roce.RoCEv2Port)
	roce.UDP(f[l4:]).SetDstPort(53)
	if r = classify(f); r.RoCE || r.Err != roce.ReasonNone || r.L4 != l4 {
		t.Errorf("other UDP: %+v", r)
	}

	// Non-first fragments never are RoCE, whatever follows.
	s := rocetest.Spec(roce.OpRC|roce.OpAck, 1)
	s.FragmentOffset = 100
	if r = classify(build(t, s)); r.RoCE || !r.Fragment || r.Err != roce.ReasonNone {
		t.Errorf("IPv4 later fragment: %+v", r)
	}
	s = rocetest.Spec(roce.OpRC|roce.OpAck, 1)
	s.IPv6 = true
	s.IPv6Ext = []roce.IPv6ExtSpec{{Proto: roce.ProtoFragment, Data: []byte{0x05, 0x39, 0, 0, 0, 1}}}
	if r = classify(build(t, s)); r.RoCE || !r.Fragment || r.Err != roce.ReasonNone {
		t.Errorf("IPv6 later fragment: %+v", r)
	}

	// Ethernet padding after the IP packet is fine.
	s = rocetest.Spec(roce.OpRC|roce.OpAck, 1)
	f = append(build(t, s), make([]byte, 100)...)
	if r = classify(f); !r.RoCE || r.Err != roce.ReasonNone || r.ICRC != roce.ICRCOK {
		t.Errorf("trailer: %+v", r)
	}
}

func TestTCMap(t *testing.T) {
	def := roce.DefaultTCMap()
	pcp := def
	pcp.Trust = roce.TrustPCP
	none := def
	none.Trust = roce.TrustNone
	onyx := def
	for i := range onyx.DSCP {
		onyx.DSCP[i] = 0
	}
	onyx.DSCP[26], onyx.DSCP[48] = 3, 6

	tagged := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 1)
	tagged.Tags = rocetest.TagModes[2].Tags // inner PCP 5
	tagged.DSCP = 26
	untagged := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 1)
	untagged.DSCP = 48
	taggedARP := build(t, tagged)
	roce.VLAN(taggedARP[18:]).SetEtherType(roce.EtherTypeARP)
	untaggedARP := make([]byte, 60)
	roce.Ethernet(untaggedARP).SetEtherType(roce.EtherTypeARP)

	for _, c := range []struct {
		name  string
		m     *roce.TCMap
		frame []byte
		tc    uint8
	}{
		{"default dscp 26", &def, build(t, tagged), 3},
		{"default dscp 48", &def, build(t, untagged), 6},
		{"nil map", nil, build(t, untagged), 6},
		{"default tagged non-IP uses PCP", &def, taggedARP, 5},
		{"default untagged non-IP", &def, untaggedARP, 0},
		{"trust pcp", &pcp, build(t, tagged), 5},
		{"trust pcp untagged", &pcp, build(t, untagged), 0},
		{"trust none", &none, build(t, tagged), 0},
		{"onyx 26", &onyx, build(t, tagged), 3},
		{"onyx 48", &onyx, build(t, untagged), 6},
	} {
		var r roce.Result
		roce.Classify(c.frame, c.m, false, &r)
		if r.TC != c.tc {
			t.Errorf("%s: TC %d, want %d", c.name, r.TC, c.tc)
		}
	}
}

// TestMalformed produces every error reason at least once.
func TestMalformed(t *testing.T) {
	base := func() []byte { return build(t, rocetest.Spec(roce.OpRC|roce.OpSendOnly, 4)) } // 5-byte payload
	v6 := func(ext ...roce.IPv6ExtSpec) []byte {
		s := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 4)
		s.IPv6 = true
		s.IPv6Ext = ext
		return build(t, s)
	}
	setUDPLen := func(f []byte, n int) []byte { roce.UDP(f[l4:]).SetLength(uint16(n)); return f }
	setTotal := func(f []byte, n int) []byte {
		roce.IPv4(f[l3:]).Encode(&roce.IPv4Fields{TotalLength: uint16(n), Protocol: roce.ProtoUDP, DF: true, TTL: 64})
		return f
	}
	mut := func(f []byte, do func(f []byte)) []byte { do(f); return f }
	tags := func(n int) []byte {
		f := make([]byte, 80)
		roce.Ethernet(f).SetEtherType(roce.EtherTypeVLAN)
		for i := 0; i < n; i++ {
			roce.VLAN(f[14+4*i:]).SetEtherType(roce.EtherTypeQinQ)
		}
		return f
	}
	destOpts := roce.IPv6ExtSpec{Proto: roce.ProtoDestOpts, Data: make([]byte, 6)}

	cases := []struct {
		name  string
		frame []byte
		want  roce.Reason
		roce  bool
	}{
		{"empty", nil, roce.ErrTruncatedEth, false},
		{"13 bytes", make([]byte, 13), roce.ErrTruncatedEth, false},
		{"tag cut", tags(1)[:16], roce.ErrTruncatedVLAN, false},
		{"inner tag cut", tags(2)[:20], roce.ErrTruncatedVLAN, false},
		{"three tags", tags(3), roce.ErrTooManyTags, false},
		{"ipv4 cut", base()[:30], roce.ErrTruncatedIPv4, false},
		{"ipv4 version 6", mut(base(), func(f []byte) { f[l3] = 0x65 }), roce.ErrBadIPVersion, false},
		{"ipv6 version 4", mut(v6(), func(f []byte) { f[l3] = 0x45 }), roce.ErrBadIPVersion, false},
		{"ihl 4", mut(base(), func(f []byte) { f[l3] = 0x44 }), roce.ErrBadIHL, false},
		{"ihl 15 past frame", mut(base()[:60], func(f []byte) { f[l3] = 0x4f }), roce.ErrTruncatedIPv4, false},
		{"total length past frame", setTotal(base(), 200), roce.ErrIPv4TotalLength, false},
		{"total length below header", setTotal(base(), 16), roce.ErrIPv4TotalLength, false},
		{"ipv6 cut", v6()[:50], roce.ErrTruncatedIPv6, false},
		{"ipv6 payload length", mut(v6(), func(f []byte) { roce.IPv6(f[l3:]).SetPayloadLength(500) }), roce.ErrIPv6PayloadLength, false},
		{"ipv6 ext past payload", mut(v6(destOpts), func(f []byte) { f[l3+41] = 40 }), roce.ErrTruncatedIPv6Ext, false},
		{"ipv6 ext chain", v6(destOpts, destOpts, destOpts, destOpts, destOpts, destOpts, destOpts), roce.ErrIPv6ExtChain, false},
		{"ipv4 first fragment", mut(base(), func(f []byte) { f[l3+6] = 0x20 }), roce.ErrIPFragment, true},
		{"ipv6 first fragment", v6(roce.IPv6ExtSpec{Proto: roce.ProtoFragment, Data: []byte{0, 1, 0, 0, 0, 1}}), roce.ErrIPFragment, true},
		{"udp cut", setTotal(base(), 24), roce.ErrTruncatedUDP, false},
		{"bth cut", setTotal(base(), 20+8+10), roce.ErrTruncatedBTH, true},
		{"udp length 20", setUDPLen(base(), 20), roce.ErrUDPLength, true},
		{"udp length past ip", setUDPLen(base(), 100), roce.ErrUDPLength, true},
		{"tver 1", mut(base(), func(f []byte) { f[bt+1] |= 1 }), roce.ErrBadTVer, true},
		{"reserved rc 0x15", mut(base(), func(f []byte) { f[bt] = 0x15 }), roce.ErrReservedOpcode, true},
		{"ib cnp 0x80", mut(base(), func(f []byte) { f[bt] = 0x80 }), roce.ErrReservedOpcode, true},
		{"vendor 0xc0", mut(base(), func(f []byte) { f[bt] = 0xc0 }), roce.ErrReservedOpcode, true},
		{"reth past icrc", mut(base(), func(f []byte) { f[bt] = byte(roce.OpRC | roce.OpReadRequest) }), roce.ErrTruncatedExt, true},
		{"pad beyond payload", mut(build(t, rocetest.Spec(roce.OpRC|roce.OpAck, 1)), func(f []byte) { f[bt+1] |= 0x30 }), roce.ErrBadPad, true},
		{"unaligned payload", setUDPLen(base(), int(roce.UDP(base()[l4:]).Length())-1), roce.ErrBadPad, true},
		{"icrc", mut(base(), func(f []byte) { f[bt+13] ^= 1 }), roce.ErrBadICRC, true},
	}
	seen := map[roce.Reason]bool{}
	for _, c := range cases {
		var r roce.Result
		roce.Classify(c.frame, nil, true, &r)
		if r.Err != c.want || r.RoCE != c.roce {
			t.Errorf("%s: err %v roce %v, want %v %v", c.name, r.Err, r.RoCE, c.want, c.roce)
		}
		seen[r.Err] = true
	}
	for x := roce.Reason(1); x < roce.NumReasons; x++ {
		if !seen[x] {
			t.Errorf("reason %v never produced", x)
		}
		if x.String() == "" || x.String() == roce.ReasonNone.String() {
			t.Errorf("reason %d has no name", x)
		}
	}
	if roce.ErrBadICRC.String() != "bad_icrc" || roce.NumReasons.String() == "" {
		t.Error("reason names")
	}
}

func TestFirstFragmentFields(t *testing.T) {
	s := rocetest.Spec(roce.OpRC|roce.OpWriteFirst, 3)
	s.MF = true
	r := classify(build(t, s))
	if r.Err != roce.ErrIPFragment || !r.RoCE || !r.Fragment || r.Opcode != s.BTH.Opcode || r.DestQP != s.BTH.DestQP || r.ICRC != roce.ICRCUnchecked {
		t.Errorf("%+v", r)
	}
}

func TestSetECNChecksum(t *testing.T) {
	f := build(t, rocetest.Spec(roce.OpRC|roce.OpAck, 1))
	ip := roce.IPv4(f[l3:])
	for tos := 0; tos < 256; tos++ {
		for _, ttl := range []uint8{0, 1, 64, 255} {
			for _, id := range []uint16{0, 0x1234, 0xffff, 0xfeff} {
				binary.BigEndian.PutUint16(ip[4:], id)
				ip[8] = ttl
				ip[1] = uint8(tos)
				ip.SetChecksum()
				for ecn := uint8(0); ecn < 4; ecn++ {
					ip.SetECN(ecn)
					if !ip.ChecksumValid() || ip.ECN() != ecn || ip.DSCP() != uint8(tos>>2) {
						t.Fatalf("tos %#x ecn %d: checksum %#x", tos, ecn, ip.Checksum())
					}
					sum := ip.Checksum()
					ip.SetChecksum()
					if ip.Checksum() != sum && !(sum == 0xffff || ip.Checksum() == 0xffff) {
						t.Fatalf("tos %#x: incremental %#x, full %#x", tos, sum, ip.Checksum())
					}
				}
				ip.SetDSCP(uint8(tos) & 63)
				if !ip.ChecksumValid() || ip.DSCP() != uint8(tos)&63 {
					t.Fatal("SetDSCP")
				}
				ip.SetTTL(uint8(tos))
				if !ip.ChecksumValid() || ip.TTL() != uint8(tos) {
					t.Fatal("SetTTL")
				}
			}
		}
	}
}

func TestMarkCE(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for ecn := uint8(0); ecn < 4; ecn++ {
			s := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 1)
			s.IPv6, s.ECN, s.DSCP = v6, ecn, 26
			f := build(t, s)
			var marked bool
			if v6 {
				marked = roce.IPv6(f[l3:]).MarkCE()
			} else {
				marked = roce.IPv4(f[l3:]).MarkCE()
			}
			r := classify(f)
			want := ecn
			if ecn != roce.ECNNotECT {
				want = roce.ECNCE
			}
			if marked != (ecn != roce.ECNNotECT) || r.ECN != want || r.DSCP != 26 || r.ICRC != roce.ICRCOK {
				t.Errorf("v6=%v ecn %d: marked %v, now %d dscp %d icrc %v", v6, ecn, marked, r.ECN, r.DSCP, r.ICRC)
			}
			if !v6 && !roce.IPv4(f[l3:]).ChecksumValid() {
				t.Error("checksum")
			}
		}
	}
	// IPv6 traffic class and flow label accessors stay independent.
	ip := roce.IPv6(make([]byte, 40))
	ip.Encode(&roce.IPv6Fields{TrafficClass: 0xff, FlowLabel: 0xfffff})
	ip.SetDSCP(0)
	ip.SetECN(1)
	if ip.TrafficClass() != 1 || ip.FlowLabel() != 0xfffff || ip.Version() != 6 {
		t.Errorf("tc %#x flow %#x", ip.TrafficClass(), ip.FlowLabel())
	}
}

func TestAETHSyndrome(t *testing.T) {
	for _, c := range []struct {
		s    roce.AETHSyndrome
		str  string
		kind roce.AckKind
	}{
		{roce.SyndromeACK(5), "ACK credits=5", roce.AckKindACK},
		{31, "ACK credits=invalid", roce.AckKindACK},
		{roce.SyndromeRNRNAK(14), "RNR NAK timer=14", roce.AckKindRNRNAK},
		{roce.SyndromeNAK(roce.NAKPSNSequenceError), "NAK PSN sequence error", roce.AckKindNAK},
		{roce.SyndromeNAK(roce.NAKInvalidRequest), "NAK invalid request", roce.AckKindNAK},
		{roce.SyndromeNAK(roce.NAKRemoteAccessError), "NAK remote access error", roce.AckKindNAK},
		{roce.SyndromeNAK(roce.NAKRemoteOperationalError), "NAK remote operational error", roce.AckKindNAK},
		{roce.SyndromeNAK(roce.NAKInvalidRDRequest), "NAK invalid RD request", roce.AckKindNAK},
		{0x65 + 4, "NAK reserved NAK code 9", roce.AckKindNAK},
		{0x40, "reserved syndrome 0x40", roce.AckKindReserved},
	} {
		if c.s.String() != c.str || c.s.Kind() != c.kind {
			t.Errorf("%#x: %q %v", uint8(c.s), c.s.String(), c.s.Kind())
		}
	}
}

func TestPFCAndPause(t *testing.T) {
	buf := make([]byte, 64)
	q := [8]uint16{0, 1, 2, 0xffff, 4, 5, 6, 7}
	n, err := roce.BuildPFC(buf, roce.MAC{2, 0, 0, 0, 0, 9}, 0x08, q)
	if err != nil || n != 60 {
		t.Fatal(n, err)
	}
	f := buf[:n]
	if roce.Ethernet(f).Dst() != roce.MACControlDst || roce.Ethernet(f).Src().String() != "02:00:00:00:00:09" {
		t.Error("addresses")
	}
	ce, gq, ok := roce.ParsePFC(f)
	if !ok || ce != 0x08 || gq != q {
		t.Errorf("PFC %v %#x %v", ok, ce, gq)
	}
	if _, ok := roce.ParsePause(f); ok {
		t.Error("PFC parsed as PAUSE")
	}
	r := classify(f)
	if r.RoCE || r.Err != roce.ReasonNone || r.EtherType != roce.EtherTypeMACControl || r.TC != 0 {
		t.Errorf("%+v", r)
	}
	if !bytes.Equal(f[:22], []byte{1, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x88, 0x08, 1, 1, 0, 8, 0, 0, 0, 1}) {
		t.Errorf("PFC bytes % x", f[:22])
	}

	n, err = roce.BuildPause(buf, roce.MAC{}, 0xffff)
	if err != nil || n != 60 {
		t.Fatal(err)
	}
	if pq, ok := roce.ParsePause(buf[:n]); !ok || pq != 0xffff {
		t.Errorf("PAUSE %v %d", ok, pq)
	}
	if _, _, ok := roce.ParsePFC(buf[:n]); ok {
		t.Error("PAUSE parsed as PFC")
	}
	if _, err := roce.BuildPFC(make([]byte, 59), roce.MAC{}, 0, q); err == nil {
		t.Error("short buffer accepted")
	}
	if _, _, ok := roce.ParsePFC(buf[:20]); ok {
		t.Error("short PFC accepted")
	}
}

func TestSetICRC(t *testing.T) {
	f := build(t, rocetest.Spec(roce.OpRC|roce.OpWriteOnly, 2))
	good := slices.Clone(f)
	binary.LittleEndian.PutUint32(f[len(f)-4:], 0)
	if classify(f).ICRC != roce.ICRCBad {
		t.Fatal("zeroed ICRC verified")
	}
	if err := roce.SetICRC(f); err != nil || !bytes.Equal(f, good) {
		t.Fatal(err)
	}
	if err := roce.SetICRC(make([]byte, 60)); err == nil {
		t.Error("SetICRC on a non-RoCE frame")
	}
	if err := roce.SetICRC(setUDPLenCopy(good, 4)); err == nil {
		t.Error("SetICRC with a lying UDP length")
	}
	if _, ok := roce.ICRC(good, l3, l3, 50); ok {
		t.Error("ICRC accepted bad offsets")
	}
}

func setUDPLenCopy(f []byte, n uint16) []byte {
	f = slices.Clone(f)
	roce.UDP(f[l4:]).SetLength(n)
	return f
}

func TestZeroAllocs(t *testing.T) {
	mix := smallMix()
	m := roce.DefaultTCMap()
	var r roce.Result
	for _, verify := range []bool{false, true} {
		if a := testing.AllocsPerRun(1000, func() {
			for _, f := range mix {
				roce.Classify(f, &m, verify, &r)
			}
		}); a != 0 {
			t.Errorf("Classify(verify=%v): %v allocs", verify, a)
		}
	}
	big := build(t, rocetest.Specials()[len(rocetest.Specials())-1].Spec)
	if a := testing.AllocsPerRun(100, func() { roce.Classify(big, &m, true, &r) }); a != 0 {
		t.Errorf("Classify 4K: %v allocs", a)
	}
	f4 := mix[0]
	s6 := rocetest.Spec(roce.OpRC|roce.OpAck, 1)
	s6.IPv6 = true
	f6 := build(t, s6)
	if a := testing.AllocsPerRun(1000, func() {
		roce.IPv4(f4[l3:]).SetECN(roce.ECNCE)
		roce.IPv4(f4[l3:]).SetDSCP(26)
		roce.IPv4(f4[l3:]).MarkCE()
		roce.IPv6(f6[l3:]).SetECN(roce.ECNCE)
		roce.IPv6(f6[l3:]).SetDSCP(26)
		roce.IPv6(f6[l3:]).MarkCE()
	}); a != 0 {
		t.Errorf("SetECN: %v allocs", a)
	}
	var q [8]uint16
	buf := make([]byte, 60)
	pfc := roce.Result{MACCtl: roce.MACCtlPFC}
	if a := testing.AllocsPerRun(1000, func() {
		roce.ParsePFC(buf)
		roce.ParseMACControl(buf, &pfc)
		roce.BuildPFC(buf, roce.MAC{}, 1, q)
		roce.ICRC(f4, l3, l4, 60)
	}); a != 0 {
		t.Errorf("PFC/ICRC: %v allocs", a)
	}
}

// withProto builds a RoCEv2 frame and relabels its transport as proto, in
// the IPv4 header or in the last IPv6 next-header field before it.
func withProto(t *testing.T, s roce.FrameSpec, proto uint8) []byte {
	t.Helper()
	f := build(t, s)
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	switch {
	case !s.IPv6:
		f[r.L3+9] = proto
	case len(s.IPv6Ext) == 0:
		f[r.L3+6] = proto
	default:
		f[r.L4-8] = proto // the last extension header is 8 bytes long here
	}
	return f
}

func TestL4Proto(t *testing.T) {
	hbh := []roce.IPv6ExtSpec{{Proto: roce.ProtoHopByHop, Data: make([]byte, 6)}}
	spec := func(v6 bool, ext []roce.IPv6ExtSpec) roce.FrameSpec {
		s := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 1)
		s.IPv6, s.IPv6Ext, s.Payload = v6, ext, make([]byte, 16)
		return s
	}
	for _, c := range []struct {
		name  string
		s     roce.FrameSpec
		proto uint8
		l4    uint16 // 0: no transport header located
	}{
		{"IPv4 TCP", spec(false, nil), roce.ProtoTCP, 34},
		{"IPv4 ICMP", spec(false, nil), 1, 0},
		{"IPv6 TCP", spec(true, nil), roce.ProtoTCP, 54},
		{"IPv6 HBH TCP", spec(true, hbh), roce.ProtoTCP, 62},
		{"IPv6 HBH ICMPv6", spec(true, hbh), 58, 0},
	} {
		f := withProto(t, c.s, c.proto)
		r := classify(f)
		if r.L4Proto != c.proto || r.L4 != c.l4 || r.RoCE || r.Err != roce.ReasonNone || r.BTH != 0 {
			t.Errorf("%s: %+v", c.name, r)
		}
	}

	// A TCP header must fit in the IP payload, not merely in the frame.
	f := withProto(t, spec(false, nil), roce.ProtoTCP)
	binary.BigEndian.PutUint16(f[l3+2:], 20+19)
	if r := classify(f); r.L4Proto != roce.ProtoTCP || r.L4 != 0 || r.Err != roce.ReasonNone {
		t.Errorf("short TCP: %+v", r)
	}

	// Fragments: the protocol is known, the transport header only in the first.
	s := spec(false, nil)
	s.FragmentOffset = 100
	if r := classify(withProto(t, s, roce.ProtoTCP)); r.L4Proto != roce.ProtoTCP || r.L4 != 0 || !r.Fragment {
		t.Errorf("IPv4 later fragment: %+v", r)
	}
	s = spec(false, nil)
	s.MF = true
	if r := classify(withProto(t, s, roce.ProtoTCP)); r.L4Proto != roce.ProtoTCP || r.L4 != 34 || !r.Fragment {
		t.Errorf("IPv4 first fragment: %+v", r)
	}
	s = spec(true, []roce.IPv6ExtSpec{{Proto: roce.ProtoFragment, Data: []byte{0x05, 0x39, 0, 0, 0, 1}}})
	if r := classify(build(t, s)); r.L4Proto != roce.ProtoUDP || r.L4 != 0 || r.RoCE || !r.Fragment {
		t.Errorf("IPv6 later fragment: %+v", r)
	}

	// RoCEv2, on both paths.
	for _, v6 := range []bool{false, true} {
		if r := classify(build(t, spec(v6, nil))); r.L4Proto != roce.ProtoUDP || !r.RoCE {
			t.Errorf("RoCEv2 v6=%v: %+v", v6, r)
		}
	}
	if r := classify(build(t, spec(true, []roce.IPv6ExtSpec{{Proto: roce.ProtoDestOpts, Data: make([]byte, 14)}}))); r.L4Proto != roce.ProtoUDP || !r.RoCE {
		t.Errorf("RoCEv2 behind destination options: %+v", r)
	}
	arp := make([]byte, 60)
	roce.Ethernet(arp).SetEtherType(roce.EtherTypeARP)
	if r := classify(arp); r.L4Proto != 0 || r.L4 != 0 {
		t.Errorf("ARP: %+v", r)
	}
}

func TestMACCtl(t *testing.T) {
	q := [8]uint16{9, 0, 0, 0xffff, 0, 0, 0, 1}
	pfc := make([]byte, 60)
	roce.BuildPFC(pfc, roce.MAC{2}, 0x89, q)
	pause := make([]byte, 60)
	roce.BuildPause(pause, roce.MAC{2}, 300)
	other := slices.Clone(pause)
	other[15] = 0x03 // GATE, an EPON opcode
	tagged := slices.Concat(pfc[:12], []byte{0x81, 0, 0, 5}, pfc[12:])
	for _, c := range []struct {
		name  string
		f     []byte
		kind  roce.MACCtl
		req   roce.PauseRequest
		parse bool
	}{
		{"PFC", pfc, roce.MACCtlPFC, roce.PauseRequest{ClassEnable: 0x89, Quanta: q}, true},
		{"PAUSE", pause, roce.MACCtlPause, roce.PauseRequest{ClassEnable: 0xff, Quanta: [8]uint16{300, 300, 300, 300, 300, 300, 300, 300}}, true},
		{"other opcode", other, roce.MACCtlOther, roce.PauseRequest{}, false},
		{"PFC cut short", pfc[:14+19], roce.MACCtlOther, roce.PauseRequest{}, false},
		{"PAUSE cut short", pause[:14+3], roce.MACCtlOther, roce.PauseRequest{}, false},
		{"no opcode", pfc[:15], roce.MACCtlOther, roce.PauseRequest{}, false},
		{"tagged PFC", tagged, roce.MACCtlNone, roce.PauseRequest{}, false},
	} {
		r := classify(c.f)
		if r.MACCtl != c.kind || r.EtherType != roce.EtherTypeMACControl || r.Err != roce.ReasonNone {
			t.Errorf("%s: %v %+v", c.name, r.MACCtl, r)
		}
		req, ok := roce.ParseMACControl(c.f, &r)
		if ok != c.parse || req != c.req {
			t.Errorf("%s: ParseMACControl %+v %v", c.name, req, ok)
		}
	}
	// A result that does not belong to the frame never makes it panic.
	r := roce.Result{MACCtl: roce.MACCtlPFC}
	if _, ok := roce.ParseMACControl(pfc[:20], &r); ok {
		t.Error("PFC result on a short frame")
	}
	r.MACCtl = roce.MACCtlPause
	if _, ok := roce.ParseMACControl(pfc[:16], &r); ok {
		t.Error("PAUSE result on a short frame")
	}
	if roce.MACCtlPFC.String() != "pfc" || roce.MACCtl(9).String() != "macctl-9" {
		t.Error("names")
	}
}

// TestOffsets checks the named offsets against the wire formats' literal
// positions, and the views against them on a built frame.
func TestOffsets(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"eth dst", roce.EthernetDstOffset, 0}, {"eth src", roce.EthernetSrcOffset, 6},
		{"eth type", roce.EthernetTypeOffset, 12}, {"vlan tci", roce.VLANTCIOffset, 0},
		{"vlan type", roce.VLANTypeOffset, 2}, {"ipv4 tos", roce.IPv4TOSOffset, 1},
		{"ipv4 total length", roce.IPv4TotalLenOffset, 2}, {"ipv4 id", roce.IPv4IDOffset, 4},
		{"ipv4 frag", roce.IPv4FragOffset, 6}, {"ipv4 ttl", roce.IPv4TTLOffset, 8},
		{"ipv4 proto", roce.IPv4ProtoOffset, 9}, {"ipv4 checksum", roce.IPv4ChecksumOffset, 10},
		{"ipv4 src", roce.IPv4SrcOffset, 12}, {"ipv4 dst", roce.IPv4DstOffset, 16},
		{"ipv6 payload length", roce.IPv6PayloadLenOffset, 4}, {"ipv6 next header", roce.IPv6NextHeaderOffset, 6},
		{"ipv6 hop limit", roce.IPv6HopLimitOffset, 7}, {"ipv6 src", roce.IPv6SrcOffset, 8},
		{"ipv6 dst", roce.IPv6DstOffset, 24}, {"ipv6 frag offset", roce.IPv6FragOffsetOffset, 2},
		{"udp src", roce.UDPSrcPortOffset, 0}, {"udp dst", roce.UDPDstPortOffset, 2},
		{"udp length", roce.UDPLengthOffset, 4}, {"udp checksum", roce.UDPChecksumOffset, 6},
		{"bth flags", roce.BTHFlagsOffset, 1}, {"bth pkey", roce.BTHPKeyOffset, 2},
		{"bth dest qp", roce.BTHDestQPOffset, 4}, {"bth psn", roce.BTHPSNOffset, 8},
		{"pause quanta", roce.PauseQuantaOffset, 2}, {"pfc class enable", roce.PFCClassEnableOffset, 2},
		{"pfc quanta", roce.PFCQuantaOffset, 4},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}

	s := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 7)
	s.Tags = []roce.VLANTag{{PCP: 5, DEI: true, VID: 0xabc}}
	s.DSCP, s.ECN, s.TTL, s.SrcPort = 26, roce.ECNECT0, 9, 0x1234
	s.BTH.SE, s.BTH.MigReq, s.BTH.FECN, s.BTH.BECN, s.BTH.AckReq = true, false, true, true, true
	s.BTH.PKey, s.BTH.DestQP, s.BTH.PSN = 0xfffe, 0xabcdef, 0x123456
	f := build(t, s)
	const v, ip, u, b = 14, 18, 38, 46
	if f[12] != 0x81 || f[v] != 5<<5|0x10|0x0a || f[v+1] != 0xbc || f[v+2] != 0x08 {
		t.Errorf("tag % x", f[12:v+4])
	}
	if f[ip+1] != 26<<2|2 || f[ip+8] != 9 || f[ip+9] != 17 || binary.BigEndian.Uint16(f[u:]) != 0x1234 {
		t.Errorf("IP/UDP % x", f[ip:u+8])
	}
	if f[b+1] != 0x80 || f[b+4] != 0xc0 || f[b+5] != 0xab || f[b+7] != 0xef || f[b+8] != 0x80 || f[b+11] != 0x56 {
		t.Errorf("BTH % x", f[b:b+12])
	}
	vl, bth := roce.VLAN(f[v:]), roce.BTH(f[b:])
	if vl.PCP() != 5 || !vl.DEI() || vl.VID() != 0xabc || vl.EtherType() != roce.EtherTypeIPv4 {
		t.Errorf("VLAN view %d %v %#x", vl.PCP(), vl.DEI(), vl.VID())
	}
	if !bth.SE() || bth.MigReq() || !bth.FECN() || !bth.BECN() || bth.Resv6a() != 0 || !bth.AckReq() ||
		bth.PKey() != 0xfffe || bth.DestQP() != 0xabcdef || bth.PSN() != 0x123456 {
		t.Errorf("BTH view % x", f[b:b+12])
	}
}
