package fib

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// ref is the brute-force model: a list of routes, looked up by scanning
// them all for the longest match.
type ref struct {
	routes []refRoute
}

type refRoute struct {
	p  netip.Prefix
	nh uint32
}

func (r *ref) find(p netip.Prefix) int {
	return slices.IndexFunc(r.routes, func(x refRoute) bool { return x.p == p })
}

func (r *ref) add(p netip.Prefix, nh uint32) {
	if i := r.find(p); i >= 0 {
		r.routes[i].nh = nh
		return
	}
	r.routes = append(r.routes, refRoute{p, nh})
}

func (r *ref) del(p netip.Prefix) bool {
	i := r.find(p)
	if i < 0 {
		return false
	}
	r.routes[i] = r.routes[len(r.routes)-1]
	r.routes = r.routes[:len(r.routes)-1]
	return true
}

// lookup is the longest route containing a.
func (r *ref) lookup(a netip.Addr) (refRoute, bool) {
	best, ok := refRoute{}, false
	for _, x := range r.routes {
		if x.p.Contains(a) && (!ok || x.p.Bits() > best.p.Bits()) {
			best, ok = x, true
		}
	}
	return best, ok
}

func (r *ref) sorted() []refRoute {
	s := slices.Clone(r.routes)
	slices.SortFunc(s, func(a, b refRoute) int {
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.p.Bits(), b.p.Bits())
	})
	return s
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u128(a netip.Addr) (uint64, uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func addr4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func addr6(hi, lo uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

// gen4 makes IPv4 prefixes that nest and share groups: a few /8s, a few
// second octets, so long and short routes overlap.
func gen4(r *rand.Rand) netip.Prefix {
	a := [...]uint32{10, 172, 192}[r.IntN(3)] << 24
	if r.IntN(10) == 0 {
		a = r.Uint32()
	} else {
		a |= r.Uint32N(4)<<16 | r.Uint32N(16)<<8 | r.Uint32N(256)
	}
	var l int
	switch x := r.IntN(10); {
	case x < 2:
		l = r.IntN(33)
	case x < 5:
		l = 16 + r.IntN(9)
	default:
		l = 25 + r.IntN(8)
	}
	return netip.PrefixFrom(addr4(a), l).Masked()
}

// gen6 makes IPv6 prefixes: mostly /48 and /64 under a few /32s, some
// /128, the rest of any length.
func gen6(r *rand.Rand) netip.Prefix {
	hi := [...]uint64{0x20010db8, 0x20010db9, 0x2a001450}[r.IntN(3)] << 32
	lo := uint64(0)
	if r.IntN(10) == 0 {
		hi, lo = r.Uint64(), r.Uint64()
	} else {
		hi |= r.Uint64N(8)<<16 | r.Uint64N(4)
		lo = r.Uint64()
	}
	var l int
	switch x := r.IntN(10); {
	case x < 3:
		l = 48
	case x < 6:
		l = 64
	case x < 7:
		l = 128
	default:
		l = r.IntN(129)
	}
	return netip.PrefixFrom(addr6(hi, lo), l).Masked()
}

// inside is a random address of p.
func inside(r *rand.Rand, p netip.Prefix) netip.Addr {
	if p.Addr().Is4() {
		host := uint32(0)
		if p.Bits() < 32 {
			host = r.Uint32() >> p.Bits()
		}
		return addr4(u32(p.Addr()) | host)
	}
	hi, lo := u128(p.Addr())
	rh, rl := r.Uint64(), r.Uint64()
	k := key{rh, rl}.mask(p.Bits())
	return addr6(hi|(rh&^k.hi), lo|(rl&^k.lo))
}

// probes is n addresses, half inside routes of rf, half from gen.
func probes(r *rand.Rand, rf *ref, gen func(*rand.Rand) netip.Prefix, n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for range n {
		if len(rf.routes) > 0 && r.IntN(2) == 0 {
			out = append(out, inside(r, rf.routes[r.IntN(len(rf.routes))].p))
		} else {
			out = append(out, inside(r, gen(r)))
		}
	}
	return out
}

// checkLookups compares single, batch and control-plane lookups of every
// address with the reference.
func checkLookups(t testing.TB, tab *Table, rf *ref, addrs []netip.Addr) {
	t.Helper()
	want := make([]uint32, len(addrs))
	for i, a := range addrs {
		w, ok := rf.lookup(a)
		want[i] = w.nh
		got, gotOK := tab.Lookup(a)
		if got != w.nh || gotOK != ok {
			t.Fatalf("Lookup(%v) = %d, %v; want %d, %v (route %v)", a, got, gotOK, w.nh, ok, w.p)
		}
		cp, cnh, cok := tab.Covering(a)
		if cok != ok || cp != w.p || cnh != w.nh {
			t.Fatalf("Covering(%v) = %v %d %v; want %v %d %v", a, cp, cnh, cok, w.p, w.nh, ok)
		}
	}
	got := make([]uint32, len(addrs))
	if tab.Family() == V4 {
		in := make([]uint32, len(addrs))
		for i, a := range addrs {
			in[i] = u32(a)
		}
		tab.LookupBatch4(in, got, nil)
	} else {
		hi, lo := make([]uint64, len(addrs)), make([]uint64, len(addrs))
		for i, a := range addrs {
			hi[i], lo[i] = u128(a)
		}
		tab.LookupBatch6(hi, lo, got, nil)
	}
	for i := range addrs {
		if got[i] != want[i] {
			t.Fatalf("batch lookup of %v (#%d of %d) = %d, want %d", addrs[i], i, len(addrs), got[i], want[i])
		}
	}
}

// checkRoutes compares the route set (Len, Get, Walk) with the reference.
func checkRoutes(t testing.TB, tab *Table, rf *ref) {
	t.Helper()
	if tab.Len() != len(rf.routes) {
		t.Fatalf("Len = %d, want %d", tab.Len(), len(rf.routes))
	}
	want := rf.sorted()
	var got []refRoute
	tab.Walk(func(p netip.Prefix, nh uint32) bool {
		got = append(got, refRoute{p, nh})
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("Walk = %v\nwant %v", got, want)
	}
	for _, x := range rf.routes {
		if nh, ok := tab.Get(x.p); !ok || nh != x.nh {
			t.Fatalf("Get(%v) = %d, %v; want %d", x.p, nh, ok, x.nh)
		}
	}
}

// checkStructure walks the trie: every group reachable once, none of them
// free or pending, the counts adding up, no group that could be folded,
// and no leaf deeper than its level. With exhaustive, every reachable
// entry is compared with what the reference says it must hold: a group
// pointer exactly where a longer route lies below it, otherwise the leaf
// of the longest route that covers it.
func checkStructure(t testing.TB, tab *Table, rf *ref, exhaustive bool) {
	t.Helper()
	st := tab.Stats()
	if st.GroupsUsed+st.GroupsFree+st.GroupsPending != tab.cfg.Groups {
		t.Fatalf("stats %+v do not add up to %d groups", st, tab.cfg.Groups)
	}
	state := make([]byte, tab.cfg.Groups) // 1 free, 2 pending, 3 reached
	for _, g := range tab.free {
		state[g] = 1
	}
	for _, g := range tab.pending {
		if state[g] != 0 {
			t.Fatalf("group %d both free and pending", g)
		}
		state[g] = 2
	}
	reached := 0
	var walk func(blk []uint32, s, w uint, k key)
	walk = func(blk []uint32, s, w uint, k key) {
		for idx, e := range blk {
			ek := k
			var want uint32
			if exhaustive {
				ek = placeBits(k, s, w, uint32(idx))
				want = expectEntry(rf, ek, s+w)
			}
			if e&groupBit != 0 {
				if exhaustive && want != groupBit {
					t.Fatalf("entry for %v (level bits %d..%d) is a group, want %#x", tab.addrOf(ek), s, s+w, want)
				}
				g := e & payloadMask
				if int(g) >= tab.cfg.Groups || state[g] != 0 {
					t.Fatalf("entry %#x at level bit %d: bad group or group state %d", e, s, state[g])
				}
				state[g] = 3
				reached++
				gb := tab.groupBase(g)
				grp := tab.mem[gb : gb+groupSize]
				if grp[0]&groupBit == 0 && grp[0]>>depthShift <= uint32(s+w)+1 &&
					!slices.ContainsFunc(grp, func(x uint32) bool { return x != grp[0] }) {
					t.Fatalf("group %d at level bit %d is uniform (%#x) but not folded", g, s+w, grp[0])
				}
				walk(grp, s+w, 8, ek)
				continue
			}
			if d := e >> depthShift; d > 0 && d-1 > uint32(s+w) {
				t.Fatalf("leaf %#x of depth %d in level ending at bit %d", e, d, s+w)
			}
			if exhaustive && want != e {
				t.Fatalf("entry for %v (level bits %d..%d) = %#x, want %#x", tab.addrOf(ek), s, s+w, e, want)
			}
		}
	}
	walk(tab.first, 0, uint(tab.fbits), key{})
	if reached != st.GroupsUsed {
		t.Fatalf("%d groups reachable, stats say %d used", reached, st.GroupsUsed)
	}
}

// placeBits puts the w-bit value v at bit s of k (bits past 128 dropped).
func placeBits(k key, s, w uint, v uint32) key {
	x := key{0, uint64(v)}
	if end := s + w; end <= 128 {
		x = x.shl(128 - end)
	} else {
		x.lo >>= end - 128
	}
	return key{k.hi | x.hi, k.lo | x.lo}
}

// expectEntry is the entry that must cover k up to bit end: a group if
// a longer route starts inside, else the longest covering route's leaf.
func expectEntry(rf *ref, k key, end uint) uint32 {
	best := -1
	var nh uint32
	for _, x := range rf.routes {
		rk, l := keyOf(x.p.Addr()), x.p.Bits()
		if uint(l) > end {
			if k.mask(int(end)) == rk.mask(int(end)) {
				return groupBit
			}
			continue
		}
		if k.mask(l) == rk && l > best {
			best, nh = l, x.nh
		}
	}
	if best < 0 {
		return 0
	}
	return leaf(best, nh)
}

func (r refRoute) String() string { return fmt.Sprintf("%v→%d", r.p, r.nh) }
