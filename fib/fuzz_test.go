package fib

import (
	"errors"
	"net/netip"
	"testing"
)

// FuzzFIB decodes a table shape and a sequence of operations from the
// input and checks the table against the brute-force reference after
// each one, and its whole structure at the end.
//
// Input: byte 0 picks the family (bit 0) and FirstBits (8, 12 or 16);
// byte 1 the group count (1..64, small so ErrFull happens); then 7 bytes
// per operation: the kind (add, add, delete, reclaim), 4 address bytes,
// the prefix length and the next hop.
func FuzzFIB(f *testing.F) {
	f.Add([]byte{0, 10, 0, 10, 1, 2, 3, 32, 5, 0, 10, 1, 2, 0, 24, 6, 2, 10, 1, 2, 3, 32, 0})
	f.Add([]byte{1, 40, 0, 1, 2, 3, 4, 128, 1, 0, 1, 2, 0, 0, 48, 2, 2, 1, 2, 3, 4, 128, 0, 3, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 3, 0, 0, 0, 0, 0, 0, 1, 1, 192, 168, 1, 1, 30, 2, 0, 192, 168, 1, 129, 25, 3, 2, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 63, 1, 255, 255, 255, 255, 9, 7, 0, 17, 34, 51, 68, 64, 8, 2, 255, 255, 255, 255, 9, 0})
	f.Fuzz(fuzzFIB)
}

func fuzzFIB(t *testing.T, data []byte) {
	if len(data) < 2 {
		return
	}
	family := V4
	if data[0]&1 != 0 {
		family = V6
	}
	fb := 8 + 4*int(data[0]>>1%3)
	tab := New(Config{FirstBits: fb, Groups: 1 + int(data[1]%64)}, family)
	rf := &ref{}
	var seen []netip.Prefix
	for data = data[2:]; len(data) >= 7; data = data[7:] {
		p := fuzzPrefix(family, data[1:6])
		nh := 1 + uint32(data[6])
		seen = append(seen, p)
		switch data[0] % 4 {
		case 0, 1:
			err := tab.Add(p, nh)
			if errors.Is(err, ErrFull) {
				if rf.find(p) >= 0 {
					t.Fatalf("replacing %v: ErrFull", p)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			rf.add(p, nh)
		case 2:
			err := tab.Delete(p)
			if rf.del(p) != (err == nil) {
				t.Fatalf("Delete(%v): %v", p, err)
			}
		case 3:
			tab.Reclaim()
		}
		checkLookups(t, tab, rf, edges(p))
	}
	var addrs []netip.Addr
	for _, p := range seen {
		addrs = append(addrs, edges(p)...)
	}
	checkLookups(t, tab, rf, addrs)
	checkRoutes(t, tab, rf)
	st := tab.Stats()
	checkStructure(t, tab, rf, (1<<fb+st.GroupsUsed*groupSize)*len(rf.routes) < 1e7)
}

// fuzzPrefix makes a prefix from 4 address bytes and a length byte. For
// IPv6 the bytes land at different group levels of 2001::/16.
func fuzzPrefix(family Family, b []byte) netip.Prefix {
	if family == V4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4]%33)).Masked()
	}
	var a [16]byte
	a[0], a[1] = 0x20, 0x01
	a[2], a[6], a[8], a[15] = b[0], b[1], b[2], b[3]
	return netip.PrefixFrom(netip.AddrFrom16(a), int(b[4]%129)).Masked()
}

// edges is the first and last address of p and the ones just outside.
func edges(p netip.Prefix) []netip.Addr {
	first := p.Addr()
	k := keyOf(first)
	m := key{^uint64(0), ^uint64(0)}.mask(p.Bits())
	k = key{k.hi | ^m.hi, k.lo | ^m.lo}
	var last netip.Addr
	if first.Is4() {
		last = addr4(uint32(k.hi >> 32))
	} else {
		last = addr6(k.hi, k.lo)
	}
	out := []netip.Addr{first, last}
	for _, a := range []netip.Addr{first.Prev(), last.Next()} {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}
