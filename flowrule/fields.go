package flowrule

import (
	"encoding/binary"
	"math/bits"
)

// Items are handled internally as byte images laid out like the headers
// (big-endian), one image each for spec, mask and last. Grammar fields are
// byte ranges of an image, optionally narrowed to some bits, which is how
// testpmd describes them (ARGS_ENTRY_HTON, ARGS_ENTRY_MASK_HTON); parsing,
// printing and compiling then share one description.

const imgMax = 38 // largest image: ipv6

type img [imgMax]byte

type fieldKind uint8

const (
	kUint fieldKind = iota
	kMAC
	kIPv4
	kIPv6
)

type field struct {
	name      string
	off, size int
	bits      uint64 // the field's bits within the big-endian value; 0: all of it
	kind      fieldKind
	hex       bool // print values in hex
}

// width is the number of value bits.
func (f *field) width() int {
	if f.bits != 0 {
		return bits.OnesCount64(f.bits)
	}
	return f.size * 8
}

func (f *field) shift() int {
	if f.bits != 0 {
		return bits.TrailingZeros64(f.bits)
	}
	return 0
}

// ones is the all-ones value of the field (not shifted).
func (f *field) ones() uint64 {
	w := f.width()
	if w >= 64 {
		return ^uint64(0)
	}
	return 1<<w - 1
}

func (f *field) whole() uint64 {
	if f.bits != 0 {
		return f.bits
	}
	if f.size >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*f.size) - 1
}

func getUint(b *img, off, size int) uint64 {
	var v uint64
	for i := 0; i < size; i++ {
		v = v<<8 | uint64(b[off+i])
	}
	return v
}

func putUint(b *img, off, size int, v uint64) {
	for i := size - 1; i >= 0; i-- {
		b[off+i] = byte(v)
		v >>= 8
	}
}

// get returns a numeric field's value.
func (f *field) get(b *img) uint64 {
	return getUint(b, f.off, f.size) & f.whole() >> f.shift()
}

// set replaces a numeric field's bits.
func (f *field) set(b *img, v uint64) {
	w := f.whole()
	old := getUint(b, f.off, f.size)
	putUint(b, f.off, f.size, old&^w|v<<f.shift()&w)
}

func (f *field) bytes(b *img) []byte { return b[f.off : f.off+f.size] }

func (f *field) isZero(b *img) bool {
	if f.kind == kUint {
		return f.get(b) == 0
	}
	for _, c := range f.bytes(b) {
		if c != 0 {
			return false
		}
	}
	return true
}

func (f *field) isFull(b *img) bool {
	if f.kind == kUint {
		return f.get(b) == f.ones()
	}
	for _, c := range f.bytes(b) {
		if c != 0xff {
			return false
		}
	}
	return true
}

// setPrefix writes a mask of n leading ones into the field.
func (f *field) setPrefix(b *img, n int) {
	if f.kind == kUint {
		w := f.width()
		var v uint64
		if n > 0 {
			v = f.ones() >> (w - n) << (w - n)
		}
		f.set(b, v)
		return
	}
	p := f.bytes(b)
	for i := range p {
		switch {
		case n >= 8:
			p[i] = 0xff
			n -= 8
		case n > 0:
			p[i] = byte(0xff << (8 - n))
			n = 0
		default:
			p[i] = 0
		}
	}
}

// prefixLen returns the prefix length of an address mask, or -1 when the
// mask is not a prefix.
func (f *field) prefixLen(b *img) int {
	n := 0
	p := f.bytes(b)
	i := 0
	for ; i < len(p) && p[i] == 0xff; i++ {
		n += 8
	}
	if i < len(p) {
		c := p[i]
		l := bits.LeadingZeros8(^c)
		if c != byte(0xff<<(8-l)) {
			return -1
		}
		n += l
		for i++; i < len(p); i++ {
			if p[i] != 0 {
				return -1
			}
		}
	}
	return n
}

type itemDesc struct {
	name    string
	size    int
	fields  []field
	print   []string // fields printed, in order; together they cover every matchable bit
	defMask img      // rte_flow_item_*_mask
}

func (d *itemDesc) field(name string) *field {
	for i := range d.fields {
		if d.fields[i].name == name {
			return &d.fields[i]
		}
	}
	return nil
}

func (d *itemDesc) fieldNames() []string {
	s := make([]string, len(d.fields))
	for i := range d.fields {
		s[i] = d.fields[i].name
	}
	return s
}

var itemDescs [numItemTypes]*itemDesc

func init() {
	mk := func(d itemDesc, def func(m *img)) *itemDesc {
		def(&d.defMask)
		return &d
	}
	ones := func(m *img, off, n int) {
		for i := off; i < off+n; i++ {
			m[i] = 0xff
		}
	}
	itemDescs[ItemEth] = mk(itemDesc{
		name: "eth", size: 15,
		fields: []field{
			{name: "dst", off: 0, size: 6, kind: kMAC},
			{name: "src", off: 6, size: 6, kind: kMAC},
			{name: "type", off: 12, size: 2, hex: true},
			{name: "has_vlan", off: 14, size: 1, bits: 1},
		},
		print: []string{"dst", "src", "type", "has_vlan"},
	}, func(m *img) { ones(m, 0, 12) })
	itemDescs[ItemVLAN] = mk(itemDesc{
		name: "vlan", size: 5,
		fields: []field{
			{name: "tci", off: 0, size: 2, hex: true},
			{name: "pcp", off: 0, size: 2, bits: 0xe000},
			{name: "dei", off: 0, size: 2, bits: 0x1000},
			{name: "vid", off: 0, size: 2, bits: 0x0fff},
			{name: "inner_type", off: 2, size: 2, hex: true},
			{name: "has_more_vlan", off: 4, size: 1, bits: 1},
		},
		print: []string{"pcp", "dei", "vid", "inner_type", "has_more_vlan"},
	}, func(m *img) { m[0], m[1] = 0x0f, 0xff })
	itemDescs[ItemIPv4] = mk(itemDesc{
		name: "ipv4", size: 11,
		fields: []field{
			{name: "src", off: 3, size: 4, kind: kIPv4},
			{name: "dst", off: 7, size: 4, kind: kIPv4},
			{name: "tos", off: 0, size: 1, hex: true},
			{name: "dscp", off: 0, size: 1, bits: 0xfc},
			{name: "ecn", off: 0, size: 1, bits: 0x03},
			{name: "proto", off: 2, size: 1},
			{name: "ttl", off: 1, size: 1},
		},
		print: []string{"src", "dst", "tos", "proto", "ttl"},
	}, func(m *img) { ones(m, 3, 8) })
	itemDescs[ItemIPv6] = mk(itemDesc{
		name: "ipv6", size: 38,
		fields: []field{
			{name: "src", off: 6, size: 16, kind: kIPv6},
			{name: "dst", off: 22, size: 16, kind: kIPv6},
			{name: "tc", off: 0, size: 4, bits: 0x0ff00000, hex: true},
			{name: "dscp", off: 0, size: 4, bits: 0x0fc00000},
			{name: "ecn", off: 0, size: 4, bits: 0x00300000},
			{name: "flow", off: 0, size: 4, bits: 0x000fffff},
			{name: "proto", off: 4, size: 1},
			{name: "hop", off: 5, size: 1},
		},
		print: []string{"src", "dst", "tc", "flow", "proto", "hop"},
	}, func(m *img) { ones(m, 6, 32) })
	l4 := func(name string) *itemDesc {
		return mk(itemDesc{
			name: name, size: 4,
			fields: []field{
				{name: "src", off: 0, size: 2},
				{name: "dst", off: 2, size: 2},
			},
			print: []string{"src", "dst"},
		}, func(m *img) { ones(m, 0, 4) })
	}
	itemDescs[ItemUDP] = l4("udp")
	itemDescs[ItemTCP] = l4("tcp")
	itemDescs[ItemIBBTH] = mk(itemDesc{
		name: "ib_bth", size: 4,
		fields: []field{
			{name: "opcode", off: 0, size: 1, hex: true},
			{name: "dst_qp", off: 1, size: 3},
		},
		print: []string{"opcode", "dst_qp"},
	}, func(m *img) { ones(m, 0, 4) })
}

func itemByName(s string) ItemType {
	for t := ItemEth; t < numItemTypes; t++ {
		if itemNames[t] == s {
			return t
		}
	}
	return 0
}

// Conversions between the typed headers and images.

func putBool(b *img, off int, v bool) {
	if v {
		b[off] = 1
	} else {
		b[off] = 0
	}
}

func ethImage(h *EthHeader) (b img) {
	copy(b[0:6], h.Dst[:])
	copy(b[6:12], h.Src[:])
	binary.BigEndian.PutUint16(b[12:], h.Type)
	putBool(&b, 14, h.HasVLAN)
	return
}

func ethFrom(b *img) (h EthHeader) {
	copy(h.Dst[:], b[0:6])
	copy(h.Src[:], b[6:12])
	h.Type = binary.BigEndian.Uint16(b[12:])
	h.HasVLAN = b[14]&1 != 0
	return
}

func vlanImage(h *VLANHeader) (b img) {
	binary.BigEndian.PutUint16(b[0:], h.TCI)
	binary.BigEndian.PutUint16(b[2:], h.InnerType)
	putBool(&b, 4, h.HasMoreVLAN)
	return
}

func vlanFrom(b *img) (h VLANHeader) {
	h.TCI = binary.BigEndian.Uint16(b[0:])
	h.InnerType = binary.BigEndian.Uint16(b[2:])
	h.HasMoreVLAN = b[4]&1 != 0
	return
}

func ipv4Image(h *IPv4Header) (b img) {
	b[0], b[1], b[2] = h.TOS, h.TTL, h.Proto
	copy(b[3:7], h.Src[:])
	copy(b[7:11], h.Dst[:])
	return
}

func ipv4From(b *img) (h IPv4Header) {
	h.TOS, h.TTL, h.Proto = b[0], b[1], b[2]
	copy(h.Src[:], b[3:7])
	copy(h.Dst[:], b[7:11])
	return
}

func ipv6Image(h *IPv6Header) (b img) {
	binary.BigEndian.PutUint32(b[0:], h.VTCFlow)
	b[4], b[5] = h.Proto, h.HopLimit
	copy(b[6:22], h.Src[:])
	copy(b[22:38], h.Dst[:])
	return
}

func ipv6From(b *img) (h IPv6Header) {
	h.VTCFlow = binary.BigEndian.Uint32(b[0:])
	h.Proto, h.HopLimit = b[4], b[5]
	copy(h.Src[:], b[6:22])
	copy(h.Dst[:], b[22:38])
	return
}

func portsImage(src, dst uint16) (b img) {
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	return
}

func bthImage(h *BTHHeader) (b img) {
	b[0] = h.Opcode
	putUint(&b, 1, 3, uint64(h.DestQP))
	return
}

func bthFrom(b *img) (h BTHHeader) {
	h.Opcode = b[0]
	h.DestQP = uint32(getUint(b, 1, 3))
	return
}

func imagesOf[H any](m *Match[H], conv func(*H) img) (spec, mask, last img, hasLast, ok bool) {
	if m == nil {
		return
	}
	spec, mask = conv(&m.Spec), conv(&m.Mask)
	if m.Last != nil {
		last, hasLast = conv(m.Last), true
	}
	return spec, mask, last, hasLast, true
}

// images returns the item's spec, mask and last images; ok is false when
// the item has no Match.
func (it *Item) images() (spec, mask, last img, hasLast, ok bool) {
	switch it.Type {
	case ItemEth:
		return imagesOf(it.Eth, ethImage)
	case ItemVLAN:
		return imagesOf(it.VLAN, vlanImage)
	case ItemIPv4:
		return imagesOf(it.IPv4, ipv4Image)
	case ItemIPv6:
		return imagesOf(it.IPv6, ipv6Image)
	case ItemUDP:
		return imagesOf(it.UDP, func(h *UDPHeader) img { return portsImage(h.SrcPort, h.DstPort) })
	case ItemTCP:
		return imagesOf(it.TCP, func(h *TCPHeader) img { return portsImage(h.SrcPort, h.DstPort) })
	case ItemIBBTH:
		return imagesOf(it.BTH, bthImage)
	}
	return
}

func matchFrom[H any](spec, mask, last *img, hasLast bool, conv func(*img) H) *Match[H] {
	m := &Match[H]{Spec: conv(spec), Mask: conv(mask)}
	if hasLast {
		l := conv(last)
		m.Last = &l
	}
	return m
}

// setImages sets the item's Match from images.
func (it *Item) setImages(spec, mask, last *img, hasLast bool) {
	switch it.Type {
	case ItemEth:
		it.Eth = matchFrom(spec, mask, last, hasLast, ethFrom)
	case ItemVLAN:
		it.VLAN = matchFrom(spec, mask, last, hasLast, vlanFrom)
	case ItemIPv4:
		it.IPv4 = matchFrom(spec, mask, last, hasLast, ipv4From)
	case ItemIPv6:
		it.IPv6 = matchFrom(spec, mask, last, hasLast, ipv6From)
	case ItemUDP:
		it.UDP = matchFrom(spec, mask, last, hasLast, func(b *img) UDPHeader {
			return UDPHeader{binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:])}
		})
	case ItemTCP:
		it.TCP = matchFrom(spec, mask, last, hasLast, func(b *img) TCPHeader {
			return TCPHeader{binary.BigEndian.Uint16(b[0:]), binary.BigEndian.Uint16(b[2:])}
		})
	case ItemIBBTH:
		it.BTH = matchFrom(spec, mask, last, hasLast, bthFrom)
	}
}

// matches counts the Match pointers set, and reports whether the one of
// Type is among them.
func (it *Item) matches() (n int, own bool) {
	set := [numItemTypes]bool{
		ItemEth: it.Eth != nil, ItemVLAN: it.VLAN != nil, ItemIPv4: it.IPv4 != nil,
		ItemIPv6: it.IPv6 != nil, ItemUDP: it.UDP != nil, ItemTCP: it.TCP != nil, ItemIBBTH: it.BTH != nil,
	}
	for t, s := range set {
		if s {
			n++
			if ItemType(t) == it.Type {
				own = true
			}
		}
	}
	return n, own
}
