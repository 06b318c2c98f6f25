package flowrule

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"roce-fwd/roce"
)

// The reference matcher below works from the typed rules and its own
// header walk, field by field and rule by rule, to check Table.Match.

type refHdrs struct {
	eth        bool
	dst, src   uint64
	etype      uint16
	ntags      int // 3 stands for "more than two"
	tci, inner [2]uint16
	ip4, ip6   bool
	vtc        uint32 // IPv6 vtc_flow
	tos, ttl   uint8
	proto      uint8
	src4, dst4 uint32
	src6, dst6 [2]uint64
	udp, tcp   bool
	sport      uint16
	dport      uint16
	bth        bool
	opcode     uint8
	qp         uint32
}

func mac64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:6] {
		v = v<<8 | uint64(c)
	}
	return v
}

func refParse(f []byte) (h refHdrs) {
	if len(f) < 14 {
		return
	}
	h.eth = true
	h.dst, h.src = mac64(f[0:]), mac64(f[6:])
	h.etype = binary.BigEndian.Uint16(f[12:])
	et, off := h.etype, 14
	for roce.IsTPID(et) {
		if h.ntags == 2 {
			h.ntags = 3
			return // Classify does not look for L3 behind a third tag
		}
		if len(f) < off+4 {
			return
		}
		h.tci[h.ntags] = binary.BigEndian.Uint16(f[off:])
		h.inner[h.ntags] = binary.BigEndian.Uint16(f[off+2:])
		et = h.inner[h.ntags]
		h.ntags++
		off += 4
	}
	var l4, end int
	var nh uint8
	switch et {
	case roce.EtherTypeIPv4:
		if len(f) < off+20 || f[off]>>4 != 4 {
			return
		}
		ip := f[off:]
		h.ip4 = true
		h.tos, h.ttl, h.proto = ip[1], ip[8], ip[9]
		h.src4, h.dst4 = binary.BigEndian.Uint32(ip[12:]), binary.BigEndian.Uint32(ip[16:])
		end = off + int(binary.BigEndian.Uint16(ip[2:]))
		if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 || end > len(f) {
			return
		}
		l4, nh = off+int(ip[0]&15)*4, ip[9]
	case roce.EtherTypeIPv6:
		if len(f) < off+40 || f[off]>>4 != 6 {
			return
		}
		ip := f[off:]
		h.ip6 = true
		h.vtc = binary.BigEndian.Uint32(ip[0:])
		h.proto, h.ttl = ip[6], ip[7]
		for i := range 2 {
			h.src6[i] = binary.BigEndian.Uint64(ip[8+8*i:])
			h.dst6[i] = binary.BigEndian.Uint64(ip[24+8*i:])
		}
		end = off + 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if end > len(f) {
			return
		}
		l4, nh = off+40, ip[6]
		for nh == roce.ProtoHopByHop || nh == roce.ProtoDestOpts {
			if l4+8 > end {
				return
			}
			nh = f[l4]
			l4 += (int(f[l4+1]) + 1) * 8
		}
	default:
		return
	}
	switch {
	case nh == roce.ProtoUDP && l4+8 <= end:
		h.udp = true
	case nh == roce.ProtoTCP && l4+20 <= end && (h.ip4 || l4 == off+40):
		h.tcp = true
	default:
		return
	}
	h.sport, h.dport = binary.BigEndian.Uint16(f[l4:]), binary.BigEndian.Uint16(f[l4+2:])
	if h.udp && h.dport == roce.RoCEv2Port && l4+8+12 <= end {
		b := f[l4+8:]
		h.bth, h.opcode, h.qp = true, b[0], binary.BigEndian.Uint32(b[4:])&0xffffff
	}
	return
}

// refField applies rte_flow's spec/mask/last rule to one field value.
func refField(v, spec, mask uint64, last *uint64) bool {
	s := spec & mask
	if last != nil {
		if l := *last & mask; l > s {
			return v&mask >= s && v&mask <= l
		}
	}
	return v&mask == s
}

func refField128(v, spec, mask [2]uint64, last *[2]uint64) bool {
	and := func(a [2]uint64) [2]uint64 { return [2]uint64{a[0] & mask[0], a[1] & mask[1]} }
	less := func(a, b [2]uint64) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }
	vv, s := and(v), and(spec)
	if last != nil {
		if l := and(*last); less(s, l) {
			return !less(vv, s) && !less(l, vv)
		}
	}
	return vv == s
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func lastOf[H any](m *Match[H], f func(*H) uint64) *uint64 {
	if m.Last == nil {
		return nil
	}
	v := f(m.Last)
	return &v
}

// fieldOK checks one field of a Match through an accessor.
func fieldOK[H any](m *Match[H], v uint64, f func(*H) uint64) bool {
	return refField(v, f(&m.Spec), f(&m.Mask), lastOf(m, f))
}

func refItem(it *Item, h *refHdrs, vlan int) bool {
	switch it.Type {
	case ItemEth:
		if !h.eth {
			return false
		}
		if m := it.Eth; m != nil {
			return fieldOK(m, h.dst, func(e *EthHeader) uint64 { return mac64(e.Dst[:]) }) &&
				fieldOK(m, h.src, func(e *EthHeader) uint64 { return mac64(e.Src[:]) }) &&
				fieldOK(m, uint64(h.etype), func(e *EthHeader) uint64 { return uint64(e.Type) }) &&
				fieldOK(m, b2u(h.ntags > 0), func(e *EthHeader) uint64 { return b2u(e.HasVLAN) })
		}
	case ItemVLAN:
		if h.ntags <= vlan {
			return false
		}
		if m := it.VLAN; m != nil {
			return fieldOK(m, uint64(h.tci[vlan]), func(e *VLANHeader) uint64 { return uint64(e.TCI) }) &&
				fieldOK(m, uint64(h.inner[vlan]), func(e *VLANHeader) uint64 { return uint64(e.InnerType) }) &&
				fieldOK(m, b2u(h.ntags > vlan+1), func(e *VLANHeader) uint64 { return b2u(e.HasMoreVLAN) })
		}
	case ItemIPv4:
		if !h.ip4 {
			return false
		}
		if m := it.IPv4; m != nil {
			return fieldOK(m, uint64(h.tos), func(e *IPv4Header) uint64 { return uint64(e.TOS) }) &&
				fieldOK(m, uint64(h.ttl), func(e *IPv4Header) uint64 { return uint64(e.TTL) }) &&
				fieldOK(m, uint64(h.proto), func(e *IPv4Header) uint64 { return uint64(e.Proto) }) &&
				fieldOK(m, uint64(h.src4), func(e *IPv4Header) uint64 { return uint64(binary.BigEndian.Uint32(e.Src[:])) }) &&
				fieldOK(m, uint64(h.dst4), func(e *IPv4Header) uint64 { return uint64(binary.BigEndian.Uint32(e.Dst[:])) })
		}
	case ItemIPv6:
		if !h.ip6 {
			return false
		}
		if m := it.IPv6; m != nil {
			a := func(b [16]byte) [2]uint64 {
				return [2]uint64{binary.BigEndian.Uint64(b[:]), binary.BigEndian.Uint64(b[8:])}
			}
			var ls, ld *[2]uint64
			if m.Last != nil {
				s, d := a(m.Last.Src), a(m.Last.Dst)
				ls, ld = &s, &d
			}
			return fieldOK(m, uint64(h.vtc), func(e *IPv6Header) uint64 { return uint64(e.VTCFlow) }) &&
				fieldOK(m, uint64(h.proto), func(e *IPv6Header) uint64 { return uint64(e.Proto) }) &&
				fieldOK(m, uint64(h.ttl), func(e *IPv6Header) uint64 { return uint64(e.HopLimit) }) &&
				refField128(h.src6, a(m.Spec.Src), a(m.Mask.Src), ls) &&
				refField128(h.dst6, a(m.Spec.Dst), a(m.Mask.Dst), ld)
		}
	case ItemUDP:
		if !h.udp {
			return false
		}
		if m := it.UDP; m != nil {
			return fieldOK(m, uint64(h.sport), func(e *UDPHeader) uint64 { return uint64(e.SrcPort) }) &&
				fieldOK(m, uint64(h.dport), func(e *UDPHeader) uint64 { return uint64(e.DstPort) })
		}
	case ItemTCP:
		if !h.tcp {
			return false
		}
		if m := it.TCP; m != nil {
			return fieldOK(m, uint64(h.sport), func(e *TCPHeader) uint64 { return uint64(e.SrcPort) }) &&
				fieldOK(m, uint64(h.dport), func(e *TCPHeader) uint64 { return uint64(e.DstPort) })
		}
	case ItemIBBTH:
		if !h.bth {
			return false
		}
		if m := it.BTH; m != nil {
			return fieldOK(m, uint64(h.opcode), func(e *BTHHeader) uint64 { return uint64(e.Opcode) }) &&
				fieldOK(m, uint64(h.qp), func(e *BTHHeader) uint64 { return uint64(e.DestQP) })
		}
	}
	return true
}

func refRule(r *Rule, h *refHdrs) bool {
	vlan := 0
	for i := range r.Items {
		if !refItem(&r.Items[i], h, vlan) {
			return false
		}
		if r.Items[i].Type == ItemVLAN {
			vlan++
		}
	}
	return true
}

// refMatch returns the final rule and the path to it, by scanning every
// rule of the current group.
func refMatch(rules []Rule, f []byte) (int, []int32) {
	h := refParse(f)
	group := uint32(0)
	var path []int32
	for range MaxPath {
		best := -1
		for i := range rules {
			r := &rules[i]
			if r.Group != group || !refRule(r, &h) {
				continue
			}
			if best < 0 || r.Priority < rules[best].Priority ||
				r.Priority == rules[best].Priority && r.ID < rules[best].ID {
				best = i
			}
		}
		if best < 0 {
			return -1, path
		}
		path = append(path, int32(best))
		jumped := false
		for _, a := range rules[best].Actions {
			if a.Type == ActJump {
				group, jumped = a.Group, true
			}
		}
		if !jumped {
			return best, path
		}
	}
	return -1, path
}

// Random rules and frames over small value sets, so that rules overlap
// and frames hit them often.

var (
	rMACs   = []roce.MAC{{2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, {2, 0, 0, 0, 0, 3}}
	rTypes  = []uint16{0x0800, 0x86dd, 0x8100, 0x88a8}
	rVIDs   = []uint16{1, 100, 4095}
	rIP4    = []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("192.168.0.1")}
	rIP6    = []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("2001:db8:1::1"), netip.MustParseAddr("fd00::1")}
	rDSCP   = []uint8{0, 26, 46}
	rTTL    = []uint8{1, 64, 255}
	rPorts  = []uint16{4791, 1000, 1001, 50000}
	rOps    = []roce.Opcode{0x04, 0x81, 0x11}
	rQPs    = []uint32{1, 2, 0x123456}
	rFlows  = []uint32{0, 1, 0x12345}
	rPrefix = []int{32, 24, 16, 8}
)

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// numField picks spec, mask and last for a numeric field of width bits
// from candidate values: unset, exact, partial mask, or a range.
func numField(rng *rand.Rand, width int, vals func() uint64) (spec, mask uint64, last uint64) {
	full := uint64(1)<<width - 1
	switch rng.IntN(10) {
	case 0, 1, 2, 3, 4:
		return 0, 0, 0
	case 5, 6, 7:
		return vals(), full, 0
	case 8:
		m := rng.Uint64() & full
		return vals(), m, 0
	default:
		a, b := vals(), vals()
		if a > b {
			a, b = b, a
		}
		return a, full, b
	}
}

func prefixMask(bits, n int) []byte {
	m := make([]byte, bits/8)
	for i := range m {
		switch {
		case n >= 8:
			m[i], n = 0xff, n-8
		case n > 0:
			m[i], n = byte(0xff<<(8-n)), 0
		}
	}
	return m
}

func randRule(rng *rand.Rand, group uint32, groups int) Rule {
	r := Rule{Group: group, Priority: uint32(rng.IntN(4)), ID: uint32(rng.IntN(3)), Ingress: true}
	if rng.IntN(2) == 0 {
		m := &Match[EthHeader]{}
		d, dm, ld := numField(rng, 48, func() uint64 { m := pick(rng, rMACs); return mac64(m[:]) })
		s, sm, ls := numField(rng, 48, func() uint64 { m := pick(rng, rMACs); return mac64(m[:]) })
		ty, tm, lt := numField(rng, 16, func() uint64 { return uint64(pick(rng, rTypes)) })
		put := func(v uint64) (a roce.MAC) {
			for i := 5; i >= 0; i-- {
				a[i], v = byte(v), v>>8
			}
			return
		}
		m.Spec = EthHeader{Dst: put(d), Src: put(s), Type: uint16(ty)}
		m.Mask = EthHeader{Dst: put(dm), Src: put(sm), Type: uint16(tm)}
		if rng.IntN(6) == 0 {
			m.Spec.HasVLAN, m.Mask.HasVLAN = rng.IntN(2) == 0, true
		}
		if ld|ls|lt != 0 {
			m.Last = &EthHeader{Dst: put(ld), Src: put(ls), Type: uint16(lt)}
		}
		r.Items = append(r.Items, Item{Type: ItemEth, Eth: m})
	}
	for range rng.IntN(3) {
		if rng.IntN(2) == 0 {
			r.Items = append(r.Items, Item{Type: ItemVLAN})
			continue
		}
		m := &Match[VLANHeader]{}
		t, tm, tl := numField(rng, 16, func() uint64 { return uint64(rng.IntN(8))<<13 | uint64(pick(rng, rVIDs)) })
		if rng.IntN(2) == 0 && tm == 0xffff {
			tm = 0x0fff // vid only
		}
		in, im, il := numField(rng, 16, func() uint64 { return uint64(pick(rng, rTypes)) })
		m.Spec, m.Mask = VLANHeader{TCI: uint16(t), InnerType: uint16(in)}, VLANHeader{TCI: uint16(tm), InnerType: uint16(im)}
		if rng.IntN(6) == 0 {
			m.Spec.HasMoreVLAN, m.Mask.HasMoreVLAN = rng.IntN(2) == 0, true
		}
		if tl|il != 0 {
			m.Last = &VLANHeader{TCI: uint16(tl), InnerType: uint16(il)}
		}
		r.Items = append(r.Items, Item{Type: ItemVLAN, VLAN: m})
	}
	ipv := rng.IntN(3) // 0 none, 1 v4, 2 v6
	switch ipv {
	case 1:
		m := &Match[IPv4Header]{}
		tos, tosm, tosl := numField(rng, 8, func() uint64 { return uint64(pick(rng, rDSCP))<<2 | uint64(rng.IntN(4)) })
		if tosm == 0xff && rng.IntN(2) == 0 {
			tosm = 0xfc // dscp only
		}
		ttl, ttlm, ttll := numField(rng, 8, func() uint64 { return uint64(pick(rng, rTTL)) })
		pr, prm, _ := numField(rng, 8, func() uint64 { return uint64(pick(rng, []uint8{6, 17})) })
		m.Spec = IPv4Header{TOS: uint8(tos), TTL: uint8(ttl), Proto: uint8(pr)}
		m.Mask = IPv4Header{TOS: uint8(tosm), TTL: uint8(ttlm), Proto: uint8(prm)}
		if rng.IntN(2) == 0 {
			m.Spec.Src, m.Mask.Src = pick(rng, rIP4).As4(), [4]byte(prefixMask(32, pick(rng, rPrefix)))
		}
		if rng.IntN(2) == 0 {
			m.Spec.Dst, m.Mask.Dst = pick(rng, rIP4).As4(), [4]byte(prefixMask(32, pick(rng, rPrefix)))
		}
		if tosl|ttll != 0 || rng.IntN(8) == 0 {
			m.Last = &IPv4Header{TOS: uint8(tosl), TTL: uint8(ttll)}
			if rng.IntN(2) == 0 {
				m.Spec.Src, m.Mask.Src, m.Last.Src = rIP4[0].As4(), [4]byte{255, 255, 255, 255}, rIP4[2].As4()
			}
		}
		r.Items = append(r.Items, Item{Type: ItemIPv4, IPv4: m})
	case 2:
		m := &Match[IPv6Header]{}
		vtc, vtcm, vtcl := numField(rng, 28, func() uint64 {
			return uint64(pick(rng, rDSCP))<<22 | uint64(rng.IntN(4))<<20 | uint64(pick(rng, rFlows))
		})
		switch rng.IntN(3) {
		case 0:
			vtcm &= 0x0fc00000 // dscp
		case 1:
			vtcm &= 0x000fffff // flow label
		}
		hop, hopm, _ := numField(rng, 8, func() uint64 { return uint64(pick(rng, rTTL)) })
		pr, prm, _ := numField(rng, 8, func() uint64 { return uint64(pick(rng, []uint8{0, 6, 17})) })
		m.Spec = IPv6Header{VTCFlow: uint32(vtc), HopLimit: uint8(hop), Proto: uint8(pr)}
		m.Mask = IPv6Header{VTCFlow: uint32(vtcm), HopLimit: uint8(hopm), Proto: uint8(prm)}
		if rng.IntN(2) == 0 {
			m.Spec.Src, m.Mask.Src = pick(rng, rIP6).As16(), [16]byte(prefixMask(128, pick(rng, []int{128, 64, 32, 16})))
		}
		if rng.IntN(2) == 0 {
			m.Spec.Dst, m.Mask.Dst = pick(rng, rIP6).As16(), [16]byte(prefixMask(128, pick(rng, []int{128, 64, 32, 16})))
		}
		if vtcl != 0 || rng.IntN(8) == 0 {
			m.Last = &IPv6Header{VTCFlow: uint32(vtcl)}
			if rng.IntN(2) == 0 {
				m.Spec.Dst, m.Mask.Dst, m.Last.Dst = rIP6[0].As16(), ones16(), rIP6[2].As16()
			}
		}
		r.Items = append(r.Items, Item{Type: ItemIPv6, IPv6: m})
	}
	l4 := rng.IntN(3) // 0 none, 1 udp, 2 tcp
	ports := func() (s, sm, sl, d, dm, dl uint64) {
		s, sm, sl = numField(rng, 16, func() uint64 { return uint64(pick(rng, rPorts)) })
		d, dm, dl = numField(rng, 16, func() uint64 { return uint64(pick(rng, rPorts)) })
		return
	}
	switch l4 {
	case 1:
		s, sm, sl, d, dm, dl := ports()
		m := &Match[UDPHeader]{Spec: UDPHeader{uint16(s), uint16(d)}, Mask: UDPHeader{uint16(sm), uint16(dm)}}
		if sl|dl != 0 {
			m.Last = &UDPHeader{uint16(sl), uint16(dl)}
		}
		r.Items = append(r.Items, Item{Type: ItemUDP, UDP: m})
	case 2:
		s, sm, sl, d, dm, dl := ports()
		m := &Match[TCPHeader]{Spec: TCPHeader{uint16(s), uint16(d)}, Mask: TCPHeader{uint16(sm), uint16(dm)}}
		if sl|dl != 0 {
			m.Last = &TCPHeader{uint16(sl), uint16(dl)}
		}
		r.Items = append(r.Items, Item{Type: ItemTCP, TCP: m})
	}
	if l4 != 2 && rng.IntN(3) == 0 {
		op, opm, opl := numField(rng, 8, func() uint64 { return uint64(pick(rng, rOps)) })
		qp, qpm, qpl := numField(rng, 24, func() uint64 { return uint64(pick(rng, rQPs)) })
		m := &Match[BTHHeader]{Spec: BTHHeader{uint8(op), uint32(qp)}, Mask: BTHHeader{uint8(opm), uint32(qpm)}}
		if opl|qpl != 0 {
			m.Last = &BTHHeader{uint8(opl), uint32(qpl)}
		}
		r.Items = append(r.Items, Item{Type: ItemIBBTH, BTH: m})
	}
	switch rng.IntN(3) {
	case 0:
		r.Actions = append(r.Actions, Action{Type: ActDrop})
	case 1:
		r.Actions = append(r.Actions, Action{Type: ActMark, ID: uint32(rng.IntN(100))})
	default:
		r.Actions = append(r.Actions, Action{Type: ActCount})
	}
	if int(group)+1 < groups && rng.IntN(3) == 0 && r.Actions[0].Type != ActDrop {
		r.Actions = append(r.Actions, Action{Type: ActJump, Group: group + 1 + uint32(rng.IntN(groups-int(group)))})
	}
	return r
}

func randFrame(rng *rand.Rand) []byte {
	s := roce.FrameSpec{
		Dst: pick(rng, rMACs), Src: pick(rng, rMACs),
		DSCP: pick(rng, rDSCP), ECN: uint8(rng.IntN(4)), TTL: pick(rng, rTTL),
		SrcPort: pick(rng, rPorts), DstPort: pick(rng, rPorts),
		BTH:     roce.BTHFields{Opcode: pick(rng, rOps), DestQP: pick(rng, rQPs), PKey: 0xffff},
		Payload: make([]byte, rng.IntN(3)*8),
	}
	for range rng.IntN(4) { // up to three tags
		s.Tags = append(s.Tags, roce.VLANTag{TPID: pick(rng, []uint16{0, 0x88a8}), PCP: uint8(rng.IntN(8)), VID: pick(rng, rVIDs)})
	}
	if rng.IntN(2) == 0 {
		s.IPv6 = true
		s.SrcIP, s.DstIP, s.FlowLabel = pick(rng, rIP6), pick(rng, rIP6), pick(rng, rFlows)
		if rng.IntN(6) == 0 {
			s.IPv6Ext = []roce.IPv6ExtSpec{{Proto: roce.ProtoHopByHop, Data: make([]byte, 6)}}
		}
	} else {
		s.SrcIP, s.DstIP = pick(rng, rIP4), pick(rng, rIP4)
	}
	f, err := s.Append(nil)
	if err != nil {
		panic(err)
	}
	if rng.IntN(4) == 0 && len(s.Tags) < 3 && len(s.IPv6Ext) == 0 {
		// Same bytes behind a TCP protocol number.
		l3 := 14 + 4*len(s.Tags)
		if s.IPv6 {
			f[l3+6] = roce.ProtoTCP
		} else {
			f[l3+9] = roce.ProtoTCP
			roce.IPv4(f[l3:]).SetChecksum()
		}
	}
	return f
}

func TestMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var res roce.Result
	var path Path
	hits, jumps, frames := 0, 0, 0
	for table := 0; table < 300; table++ {
		groups := 1 + rng.IntN(3)
		n := 1 + rng.IntN(40)
		rules := make([]Rule, 0, n)
		for len(rules) < n {
			r := randRule(rng, uint32(rng.IntN(groups)), groups)
			if r.Validate() == nil {
				rules = append(rules, r)
			}
		}
		tab, err := Compile(rules)
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			f := randFrame(rng)
			roce.Classify(f, nil, false, &res)
			want, wantPath := refMatch(rules, f)
			got := tab.MatchPath(f, &res, &path)
			frames++
			if got != want || path.N != len(wantPath) {
				t.Fatalf("table %d: frame %x: Match %d (path %v), reference %d (path %v)\nrules:\n%s",
					table, f, got, path.Rules[:path.N], want, wantPath, dumpRules(rules))
			}
			for i, p := range wantPath {
				if path.Rules[i] != p {
					t.Fatalf("path %v, reference %v", path.Rules[:path.N], wantPath)
				}
			}
			if tab.Match(f, &res) != got {
				t.Fatal("Match and MatchPath disagree")
			}
			if got >= 0 {
				hits++
			}
			if path.N > 1 {
				jumps++
			}
		}
	}
	// The comparison means little if frames rarely hit.
	if hits < frames/5 || jumps < frames/200 {
		t.Errorf("only %d of %d frames hit a rule, %d through a jump", hits, frames, jumps)
	}
	t.Logf("%d of %d frames hit, %d through jumps", hits, frames, jumps)
}

func dumpRules(rules []Rule) string {
	var b strings.Builder
	for i, r := range rules {
		b.WriteString(itoa(uint64(i)) + " id " + itoa(uint64(r.ID)) + ": " + Command{Kind: CmdCreate, Port: "0", Rule: r}.String() + "\n")
	}
	return b.String()
}

func mustParseRules(t testing.TB, lines ...string) []Rule {
	t.Helper()
	var rules []Rule
	for _, l := range lines {
		c, err := Parse(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		rules = append(rules, c.Rule)
	}
	return rules
}

func classify(f []byte) *roce.Result {
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	return &r
}

func roceFrame(t testing.TB, s roce.FrameSpec) []byte {
	t.Helper()
	if s.BTH.PKey == 0 {
		s.BTH.PKey = 0xffff
	}
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPriorityOrder(t *testing.T) {
	f := roceFrame(t, roce.FrameSpec{SrcIP: rIP4[0], DstIP: rIP4[1], SrcPort: 1000, BTH: roce.BTHFields{Opcode: 0x04, DestQP: 7}})
	r := classify(f)
	rules := mustParseRules(t,
		"flow create 0 priority 2 ingress pattern ipv4 / end actions mark id 1 / end",
		"flow create 0 priority 1 ingress pattern ipv4 src is 10.0.0.1 / udp / end actions mark id 2 / end",
		"flow create 0 priority 1 ingress pattern ib_bth dst_qp is 7 / end actions mark id 3 / end",
		"flow create 0 priority 3 ingress pattern end actions drop / end",
	)
	tab, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	// Priority 1 twice: the earlier rule wins while IDs are equal.
	if got := tab.Match(f, r); got != 1 {
		t.Errorf("got rule %d, want 1", got)
	}
	// A lower ID wins within a priority level.
	rules[1].ID, rules[2].ID = 5, 4
	tab, _ = Compile(rules)
	if got := tab.Match(f, r); got != 2 {
		t.Errorf("got rule %d, want 2 (lower ID)", got)
	}
	// A lower priority value wins over anything else.
	rules[3].Priority = 0
	tab, _ = Compile(rules)
	if got := tab.Match(f, r); got != 3 {
		t.Errorf("got rule %d, want 3", got)
	}
	// A frame only the catch-all matches.
	g := roceFrame(t, roce.FrameSpec{IPv6: true, BTH: roce.BTHFields{Opcode: 0x04, DestQP: 8}})
	rules[3].Priority = 3
	tab, _ = Compile(rules)
	if got := tab.Match(g, classify(g)); got != 3 {
		t.Errorf("got rule %d, want the catch-all 3", got)
	}
}

func TestJumps(t *testing.T) {
	f := roceFrame(t, roce.FrameSpec{SrcIP: rIP4[0], BTH: roce.BTHFields{Opcode: 0x81, DestQP: 9}})
	r := classify(f)
	rules := mustParseRules(t,
		"flow create 0 ingress pattern eth / ipv4 / end actions count / jump group 5 / end",
		"flow create 0 group 5 ingress pattern ib_bth opcode is 0x81 / end actions mark id 81 / jump group 6 / end",
		"flow create 0 group 5 priority 1 ingress pattern end actions drop / end",
		"flow create 0 group 6 ingress pattern udp dst is 4791 / end actions flag / end",
		"flow create 0 ingress priority 1 pattern end actions drop / end",
	)
	tab, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var p Path
	if got := tab.MatchPath(f, r, &p); got != 3 || p.N != 3 || p.Rules[0] != 0 || p.Rules[1] != 1 || p.Rules[2] != 3 {
		t.Fatalf("got %d path %v, want 3 through 0, 1, 3", got, p.Rules[:p.N])
	}
	st := NewState(tab)
	v := tab.ApplyPath(&p, f, r, st, 0, len(f))
	if !v.HasMark || v.Mark != 81 || !v.Flag || v.Drop {
		t.Errorf("verdict %+v: want mark 81 and flag", v)
	}
	for _, i := range []int{0, 1, 3} {
		if pk, by := st.Counters(i); pk != 1 || by != uint64(len(f)) {
			t.Errorf("rule %d counted %d packets %d bytes", i, pk, by)
		}
	}
	// Not opcode 0x81: group 5's catch-all drops.
	g := roceFrame(t, roce.FrameSpec{SrcIP: rIP4[0], BTH: roce.BTHFields{Opcode: 0x04}})
	if got := tab.Match(g, classify(g)); got != 2 {
		t.Errorf("got %d, want 2", got)
	}
	// A jump into a group where nothing matches is a miss.
	rules[2].Items = []Item{{Type: ItemTCP}}
	tab, _ = Compile(rules)
	if got := tab.Match(g, classify(g)); got != -1 {
		t.Errorf("got %d, want a miss", got)
	}
	// So is a jump to a group without rules.
	rules[0].Actions[1].Group = 77
	tab, _ = Compile(rules)
	if got := tab.MatchPath(f, r, &p); got != -1 || p.N != 1 {
		t.Errorf("got %d path %v, want a miss after rule 0", got, p.Rules[:p.N])
	}
	// Rules of other groups are not entry points.
	only := mustParseRules(t, "flow create 0 group 1 ingress pattern end actions drop / end")
	tab, _ = Compile(only)
	if got := tab.Match(f, r); got != -1 {
		t.Errorf("group 1 rule matched from the root: %d", got)
	}
}

func TestCompileJumpErrors(t *testing.T) {
	loop := mustParseRules(t,
		"flow create 0 ingress pattern end actions jump group 1 / end",
		"flow create 0 group 1 ingress pattern end actions jump group 2 / end",
		"flow create 0 group 2 ingress pattern end actions jump group 1 / end",
	)
	if _, err := Compile(loop); err == nil || !strings.Contains(err.Error(), "jump loop") {
		t.Errorf("got %v, want a jump loop error", err)
	}
	var chain []Rule
	for g := range MaxPath + 1 {
		chain = append(chain, Rule{Group: uint32(g), Actions: []Action{{Type: ActJump, Group: uint32(g + 1)}}})
	}
	if _, err := Compile(chain[:MaxPath]); err != nil {
		t.Errorf("a chain of %d rules: %v", MaxPath, err)
	}
	if _, err := Compile(chain); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("got %v, want a chain length error", err)
	}
	if _, err := Compile([]Rule{{Actions: []Action{{Type: ActDrop}, {Type: ActDrop}}}}); err == nil {
		t.Error("an invalid rule compiled")
	}
}

func TestSpecialFrames(t *testing.T) {
	rules := mustParseRules(t,
		"flow create 0 ingress pattern eth has_vlan spec 0 has_vlan mask 1 / end actions mark id 1 / end",
		"flow create 0 ingress pattern eth / vlan / vlan has_more_vlan is 1 / end actions mark id 2 / end",
		"flow create 0 ingress pattern eth / vlan vid is 100 / ipv4 / end actions mark id 3 / end",
		"flow create 0 ingress pattern eth has_vlan is 0 / vlan / end actions mark id 4 / end", // contradiction
		"flow create 0 ingress pattern ipv6 proto is 0 / udp / ib_bth / end actions mark id 5 / end",
	)
	tab, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		spec roce.FrameSpec
		want int
	}{
		{roce.FrameSpec{}, 0},
		{roce.FrameSpec{Tags: []roce.VLANTag{{VID: 100}}}, 2},
		{roce.FrameSpec{Tags: []roce.VLANTag{{VID: 101}}}, -1},
		{roce.FrameSpec{Tags: []roce.VLANTag{{TPID: 0x88a8, VID: 100}, {VID: 5}}}, 2},
		{roce.FrameSpec{Tags: []roce.VLANTag{{VID: 1}, {VID: 2}, {VID: 3}}}, 1},
		{roce.FrameSpec{IPv6: true, Tags: []roce.VLANTag{{VID: 1}}, IPv6Ext: []roce.IPv6ExtSpec{{Proto: roce.ProtoHopByHop, Data: make([]byte, 6)}}}, 4},
	}
	for i, c := range cases {
		f := roceFrame(t, c.spec)
		if got := tab.Match(f, classify(f)); got != c.want {
			t.Errorf("case %d: got %d, want %d", i, got, c.want)
		}
	}
	// Runts match only rules without items.
	short := []byte{1, 2, 3}
	if got := tab.Match(short, classify(short)); got != -1 {
		t.Errorf("runt matched %d", got)
	}
	any, _ := Compile(mustParseRules(t, "flow create 0 ingress pattern end actions count / end"))
	if got := any.Match(short, classify(short)); got != 0 {
		t.Errorf("runt did not match the empty pattern: %d", got)
	}
}

// TCP is located by Classify (roce.Result.L4 with L4Proto): behind IPv4
// options and in a first fragment it matches; behind IPv6 extension
// headers it does not (doc.go), and a header cut short by the IP length
// never does.
func TestTCPLocation(t *testing.T) {
	tab, err := Compile(mustParseRules(t,
		"flow create 0 ingress pattern tcp src is 4660 / end actions mark id 1 / end",
		"flow create 0 ingress priority 1 pattern udp / end actions mark id 2 / end",
	))
	if err != nil {
		t.Fatal(err)
	}
	hbh := []roce.IPv6ExtSpec{{Proto: roce.ProtoHopByHop, Data: make([]byte, 6)}}
	for _, c := range []struct {
		name string
		spec roce.FrameSpec
		cut  bool // IP length 19 bytes into the TCP header
		want int
	}{
		{"IPv4", roce.FrameSpec{}, false, 0},
		{"IPv4 options", roce.FrameSpec{IPv4Options: []byte{1, 1, 1, 0}}, false, 0},
		{"IPv4 first fragment", roce.FrameSpec{MF: true}, false, 0},
		{"IPv4 cut", roce.FrameSpec{}, true, -1},
		{"IPv6", roce.FrameSpec{IPv6: true}, false, 0},
		{"IPv6 hop-by-hop", roce.FrameSpec{IPv6: true, IPv6Ext: hbh}, false, -1},
		{"IPv6 cut", roce.FrameSpec{IPv6: true}, true, -1},
	} {
		c.spec.SrcPort = 0x1234
		c.spec.Payload = make([]byte, 16)
		f := roceFrame(t, c.spec)
		r := classify(f)
		l3, l4 := int(r.L3), int(r.L4)
		switch {
		case !c.spec.IPv6:
			f[l3+9] = roce.ProtoTCP
		case len(c.spec.IPv6Ext) == 0:
			f[l3+6] = roce.ProtoTCP
		default:
			f[l4-8] = roce.ProtoTCP
		}
		if c.cut {
			if c.spec.IPv6 {
				binary.BigEndian.PutUint16(f[l3+4:], uint16(l4-l3-40+19))
			} else {
				binary.BigEndian.PutUint16(f[l3+2:], uint16(l4-l3+19))
			}
		}
		r = classify(f)
		if got := tab.Match(f, r); got != c.want {
			t.Errorf("%s: got %d, want %d (%+v)", c.name, got, c.want, r)
		}
	}
}

func TestMatchAllocs(t *testing.T) {
	tab, frames := bench1k(t)
	var r roce.Result
	roce.Classify(frames[0], nil, false, &r)
	var p Path
	if n := testing.AllocsPerRun(1000, func() {
		tab.Match(frames[0], &r)
		tab.MatchPath(frames[1], &r, &p)
	}); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}

// bench1k builds 1000 exact IPv4/UDP 5-tuple rules, a few wildcard rules
// and frames hitting the exact rules.
func bench1k(t testing.TB) (*Table, [][]byte) {
	var rules []Rule
	var frames [][]byte
	for i := range 1000 {
		src := [4]byte{10, 1, byte(i >> 8), byte(i)}
		dst := [4]byte{10, 2, byte(i >> 8), byte(i)}
		sport := uint16(49152 + i)
		rules = append(rules, Rule{Priority: 1, Ingress: true, Items: []Item{
			{Type: ItemEth},
			{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
				Spec: IPv4Header{Proto: 17, Src: src, Dst: dst},
				Mask: IPv4Header{Proto: 0xff, Src: [4]byte{255, 255, 255, 255}, Dst: [4]byte{255, 255, 255, 255}}}},
			{Type: ItemUDP, UDP: &Match[UDPHeader]{Spec: UDPHeader{sport, 4791}, Mask: UDPHeader{0xffff, 0xffff}}},
		}, Actions: []Action{{Type: ActMark, ID: uint32(i)}, {Type: ActCount}}})
		if i%97 == 0 {
			frames = append(frames, roceFrame(t, roce.FrameSpec{
				SrcIP: netip.AddrFrom4(src), DstIP: netip.AddrFrom4(dst), SrcPort: sport,
				BTH: roce.BTHFields{Opcode: 0x04, DestQP: uint32(i)}, Payload: make([]byte, 64)}))
		}
	}
	rules = append(rules, mustParseRules(t,
		"flow create 0 priority 0 ingress pattern ib_bth opcode is 0x81 / end actions mark id 0x81 / end",
		"flow create 0 priority 2 ingress pattern eth / ipv4 dst spec 10.0.0.0 dst prefix 8 / udp / end actions count / end",
		"flow create 0 priority 3 ingress pattern eth / ipv6 / end actions drop / end",
		"flow create 0 priority 4 ingress pattern eth / vlan vid is 100 / end actions queue index 1 / end",
		"flow create 0 priority 5 ingress pattern udp dst spec 4000 dst last 5000 / end actions count / end",
		"flow create 0 priority 6 ingress pattern end actions count / end",
	)...)
	tab, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return tab, frames
}

func BenchmarkMatch1k(b *testing.B) {
	tab, frames := bench1k(b)
	res := make([]roce.Result, len(frames))
	for i, f := range frames {
		roce.Classify(f, nil, false, &res[i])
		if got := tab.Match(f, &res[i]); got < 0 || got >= 1000 {
			b.Fatalf("frame %d hit rule %d", i, got)
		}
	}
	miss := roceFrame(b, roce.FrameSpec{SrcIP: netip.MustParseAddr("172.16.0.1"), DstIP: netip.MustParseAddr("172.16.0.2"),
		BTH: roce.BTHFields{Opcode: 0x04}})
	var missRes roce.Result
	roce.Classify(miss, nil, false, &missRes)
	b.Run("hit", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			j := i % len(frames)
			tab.Match(frames[j], &res[j])
		}
	})
	b.Run("no-exact-hit", func(b *testing.B) {
		for b.Loop() {
			tab.Match(miss, &missRes)
		}
	})
	// For scale: the same table searched rule by rule in priority order.
	b.Run("linear-scan", func(b *testing.B) {
		order := make([]int, len(tab.cr))
		for i := range order {
			order[tab.cr[i].rank] = i
		}
		for i := 0; b.Loop(); i++ {
			j := i % len(frames)
			var k key
			extract(frames[j], &res[j], &k)
			for _, ri := range order {
				c := &tab.cr[ri]
				ok := true
				for w := range k {
					if k[w]&c.mask[w] != c.val[w] {
						ok = false
						break
					}
				}
				if ok && c.inRange(&k) {
					break
				}
			}
		}
	})
}

func BenchmarkCompile1k(b *testing.B) {
	tab, _ := bench1k(b)
	rules := tab.Rules()
	for b.Loop() {
		if _, err := Compile(rules); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rules))*float64(b.N)/b.Elapsed().Seconds(), "rules/s")
}
