package fib

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
)

// key is an address as a 128-bit big-endian number. An IPv4 address
// occupies the top 32 bits, so both families share the trie code: bit s
// from the top means the same for both.
type key struct{ hi, lo uint64 }

// shl shifts k left by n bits; n may be 128 or more.
func (k key) shl(n uint) key {
	if n >= 64 {
		return key{k.lo << (n - 64), 0}
	}
	return key{k.hi<<n | k.lo>>(64-n), k.lo << n}
}

// bits is the w (1..32) bits of k starting s bits from the top.
func (k key) bits(s, w uint) uint32 {
	return uint32(k.shl(s).hi >> (64 - w))
}

// mask keeps the top l bits of k.
func (k key) mask(l int) key {
	if l <= 64 {
		return key{k.hi &^ (^uint64(0) >> l), 0}
	}
	return key{k.hi, k.lo &^ (^uint64(0) >> (l - 64))}
}

func keyOf(a netip.Addr) key {
	if a.Is4() {
		b := a.As4()
		return key{uint64(binary.BigEndian.Uint32(b[:])) << 32, 0}
	}
	b := a.As16()
	return key{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (t *Table) addrOf(k key) netip.Addr {
	if t.family == V4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(k.hi>>32))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	return netip.AddrFrom16(b)
}

// routeSet is the authoritative set of routes: per prefix length, a map
// from the masked address to the next hop.
type routeSet struct {
	v4   []map[uint32]uint32    // V4: 33 lengths
	v6   []map[[2]uint64]uint32 // V6: 129 lengths
	used [3]uint64              // bit l: some route has length l
	n    int
}

func (r *routeSet) init(f Family) {
	if f == V4 {
		r.v4 = make([]map[uint32]uint32, 33)
	} else {
		r.v6 = make([]map[[2]uint64]uint32, 129)
	}
}

func (r *routeSet) get(l int, k key) (uint32, bool) {
	if r.used[l/64]&(1<<(l%64)) == 0 {
		return 0, false
	}
	var nh uint32
	var ok bool
	if r.v4 != nil {
		nh, ok = r.v4[l][uint32(k.hi>>32)]
	} else {
		nh, ok = r.v6[l][[2]uint64{k.hi, k.lo}]
	}
	return nh, ok
}

// put sets the route and reports whether it is new.
func (r *routeSet) put(l int, k key, nh uint32) bool {
	var before, after int
	if r.v4 != nil {
		if r.v4[l] == nil {
			r.v4[l] = map[uint32]uint32{}
		}
		before = len(r.v4[l])
		r.v4[l][uint32(k.hi>>32)] = nh
		after = len(r.v4[l])
	} else {
		if r.v6[l] == nil {
			r.v6[l] = map[[2]uint64]uint32{}
		}
		before = len(r.v6[l])
		r.v6[l][[2]uint64{k.hi, k.lo}] = nh
		after = len(r.v6[l])
	}
	r.used[l/64] |= 1 << (l % 64)
	r.n += after - before
	return after > before
}

// del removes a route that exists.
func (r *routeSet) del(l int, k key) {
	var left int
	if r.v4 != nil {
		delete(r.v4[l], uint32(k.hi>>32))
		left = len(r.v4[l])
	} else {
		delete(r.v6[l], [2]uint64{k.hi, k.lo})
		left = len(r.v6[l])
	}
	if left == 0 {
		r.used[l/64] &^= 1 << (l % 64)
	}
	r.n--
}

// longest finds the longest route of length at most max containing k.
func (r *routeSet) longest(k key, max int) (l int, nh uint32, ok bool) {
	for max >= 0 {
		// Skip to the longest used length <= max.
		w := r.used[max/64] & (^uint64(0) >> (63 - max%64))
		if w == 0 {
			max = max/64*64 - 1
			continue
		}
		l = max/64*64 + 63 - bits.LeadingZeros64(w)
		if nh, ok = r.get(l, k.mask(l)); ok {
			return l, nh, true
		}
		max = l - 1
	}
	return 0, 0, false
}

// prefix checks p against the table and returns its masked key and
// length.
func (t *Table) prefix(p netip.Prefix) (key, int, error) {
	if !p.IsValid() {
		return key{}, 0, fmt.Errorf("fib: invalid prefix %v", p)
	}
	if (t.family == V4) != p.Addr().Is4() {
		return key{}, 0, fmt.Errorf("fib: %v is not an %v prefix", p, t.family)
	}
	l := p.Bits()
	return keyOf(p.Addr()).mask(l), l, nil
}

// Get returns the next hop of exactly prefix p (masked), if present.
func (t *Table) Get(p netip.Prefix) (uint32, bool) {
	k, l, err := t.prefix(p)
	if err != nil {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.routes.get(l, k)
}

// Covering returns the route that a matches (its longest matching
// prefix) and its next hop, from the route set; for "show ip fib ADDR".
func (t *Table) Covering(a netip.Addr) (netip.Prefix, uint32, bool) {
	if (t.family == V4) != a.Is4() || !a.IsValid() {
		return netip.Prefix{}, 0, false
	}
	k := keyOf(a)
	t.mu.Lock()
	l, nh, ok := t.routes.longest(k, t.width)
	t.mu.Unlock()
	if !ok {
		return netip.Prefix{}, 0, false
	}
	return netip.PrefixFrom(t.addrOf(k.mask(l)), l), nh, true
}

// route is a prefix and its next hop.
type route struct {
	p  netip.Prefix
	nh uint32
}

// Walk calls fn for every route in prefix order (by address, then by
// length) until fn returns false. It works on a copy of the route set
// made when it is called, so fn may change the table.
func (t *Table) Walk(fn func(p netip.Prefix, nh uint32) bool) {
	t.mu.Lock()
	rs := make([]route, 0, t.routes.n)
	for l, m := range t.routes.v4 {
		for a, nh := range m {
			rs = append(rs, route{netip.PrefixFrom(t.addrOf(key{uint64(a) << 32, 0}), l), nh})
		}
	}
	for l, m := range t.routes.v6 {
		for a, nh := range m {
			rs = append(rs, route{netip.PrefixFrom(t.addrOf(key{a[0], a[1]}), l), nh})
		}
	}
	t.mu.Unlock()
	slices.SortFunc(rs, func(a, b route) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return a.p.Bits() - b.p.Bits()
	})
	for _, r := range rs {
		if !fn(r.p, r.nh) {
			return
		}
	}
}
