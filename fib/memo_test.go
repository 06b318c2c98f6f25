package fib

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestMemoAgreesWithReference runs batches with one memo against the
// brute-force reference while routes come and go between batches, many
// of them inside the subnets the batches keep going to (what the memo
// holds), over first levels shorter and longer than those subnets.
func TestMemoAgreesWithReference(t *testing.T) {
	for _, fb := range []int{8, 16, 24} {
		r := rand.New(rand.NewPCG(uint64(fb), 11))
		tab := New(Config{FirstBits: fb, Groups: 20000}, V6)
		rf := &ref{}
		// Where most lookups go: a fabric's /64s, some of them routed
		// (the rest fall to shorter routes or none). Routes inside them
		// come in as the test goes.
		var hot []netip.Prefix
		for range 12 {
			hot = append(hot, netip.PrefixFrom(addr6(r.Uint64(), 0), 64))
		}
		add := func(p netip.Prefix) {
			nh := 1 + r.Uint32N(1000)
			if err := tab.Add(p, nh); err != nil {
				t.Fatal(err)
			}
			rf.add(p, nh)
		}
		for range 500 {
			add(gen6(r))
		}
		for _, p := range hot[:6] {
			add(p)
		}
		var m Memo
		hits, lookups := 0, 0
		for round := range 600 {
			switch x := r.IntN(40); {
			case x < 2: // a route inside a hot subnet, or a hot subnet itself
				h := hot[r.IntN(len(hot))]
				p := h
				if l := h.Bits() + r.IntN(129-h.Bits()); r.IntN(2) == 0 {
					p = netip.PrefixFrom(inside(r, h), l).Masked()
				}
				add(p)
			case x < 3 && len(rf.routes) > 0:
				p := rf.routes[r.IntN(len(rf.routes))].p
				if err := tab.Delete(p); err != nil {
					t.Fatal(err)
				}
				rf.del(p)
			case x < 4:
				tab.Reclaim()
			}
			n := 1 + r.IntN(80)
			addrs := make([]netip.Addr, n)
			hi, lo := make([]uint64, n), make([]uint64, n)
			for i := range addrs {
				if r.IntN(4) > 0 {
					addrs[i] = inside(r, hot[r.IntN(len(hot))])
				} else {
					addrs[i] = probes(r, rf, gen6, 1)[0]
				}
				hi[i], lo[i] = u128(addrs[i])
			}
			// Count the answers the memo holds before the batch.
			for i := range hi {
				if m.t == tab && m.gen == tab.gen.Load() &&
					(m.e[memoSubnet(hi[i])&(memoSize-1)].answers(hi[i], lo[i], m.epoch) || m.e[memoHost(hi[i], lo[i])&(memoSize-1)].answers(hi[i], lo[i], m.epoch)) {
					hits++
				}
			}
			lookups += n
			got := make([]uint32, n)
			tab.LookupBatch6(hi, lo, got, &m)
			for i, a := range addrs {
				w, _ := rf.lookup(a)
				if got[i] != w.nh {
					t.Fatalf("first bits %d, round %d: %v looks up as %d through the memo, want %d (route %v)", fb, round, a, got[i], w.nh, w.p)
				}
			}
		}
		// Without answers from the memo this would test nothing.
		if hits < lookups/10 {
			t.Errorf("first bits %d: the memo answered %d of %d lookups, want a tenth at least", fb, hits, lookups)
		}
		t.Logf("first bits %d: the memo answered %d of %d lookups", fb, hits, lookups)
	}
}

// TestMemoRemembersTheBitsUsed checks what the memo keeps for a walk and
// that it forgets it when the table changes, or is another table.
func TestMemoRemembersTheBitsUsed(t *testing.T) {
	tab, hi, lo := subnetHosts(t, 32)
	var m Memo
	nh := make([]uint32, 32)
	lookup := func(tab *Table, want func(i int) uint32) {
		t.Helper()
		tab.LookupBatch6(hi, lo, nh, &m)
		for i := range nh {
			if nh[i] != want(i) {
				t.Fatalf("fd00::%x looks up as %d, want %d", i, nh[i], want(i))
			}
		}
	}
	lookup(tab, func(int) uint32 { return 1 })
	if memo, walked := m.Counts(); memo != 0 || walked != 32 {
		t.Fatalf("first batch: %d lookups answered by the memo, %d walked; want 0 and 32", memo, walked)
	}
	// The walk to a /64 under a 24-bit first level used 64 bits: five
	// groups of 8.
	e := m.e[memoSubnet(hi[0])&(memoSize-1)]
	if e.mhi != ^uint64(0) || e.mlo != 0 || e.nh != 1 {
		t.Fatalf("memo entry %+v, want the upper 64 bits and next hop 1", e)
	}
	lookup(tab, func(int) uint32 { return 1 })
	if memo, walked := m.Counts(); memo != 32 || walked != 32 {
		t.Fatalf("second batch: %d lookups answered by the memo in all, %d walked; want 32 and 32", memo, walked)
	}

	// A host route under the remembered /64.
	if err := tab.Add(netip.MustParsePrefix("fd00::5/128"), 2); err != nil {
		t.Fatal(err)
	}
	host := func(i int) uint32 {
		if i == 5 {
			return 2
		}
		return 1
	}
	lookup(tab, host)
	lookup(tab, host)
	if e := m.e[memoHost(hi[0], lo[0])&(memoSize-1)]; e.mhi != ^uint64(0) || e.mlo != ^uint64(0) {
		t.Fatalf("memo entry %+v for fd00::0 after the /128 under it: want all 128 bits", e)
	}
	if err := tab.Delete(netip.MustParsePrefix("fd00::/64")); err != nil {
		t.Fatal(err)
	}
	lookup(tab, func(i int) uint32 { return host(i) &^ 1 })
	// Another table: nothing remembered from the first.
	lookup(New(Config{FirstBits: 24, Groups: 10}, V6), func(int) uint32 { return 0 })
}

// TestMemoForgetsByEpoch checks that a change to the table retires the
// memo's entries without clearing them (each answers only in the epoch
// it was learnt in, and a change starts a new one), and that when the
// epoch comes round again, after 4 billion changes, the memo is cleared:
// entries from the previous round must not answer for a changed table.
func TestMemoForgetsByEpoch(t *testing.T) {
	tab, hi, lo := subnetHosts(t, 8)
	var m Memo
	nh := make([]uint32, len(hi))
	lookup := func(want uint32, answered, walked uint64) {
		t.Helper()
		m0, w0 := m.Counts()
		tab.LookupBatch6(hi, lo, nh, &m)
		for i := range nh {
			if nh[i] != want {
				t.Fatalf("fd00::%x looks up as %d, want %d", i, nh[i], want)
			}
		}
		if m1, w1 := m.Counts(); m1-m0 != answered || w1-w0 != walked {
			t.Fatalf("%d lookups answered by the memo and %d walked, want %d and %d", m1-m0, w1-w0, answered, walked)
		}
	}
	lookup(1, 0, 8)
	lookup(1, 8, 0)
	e := &m.e[memoSubnet(hi[0])&(memoSize-1)]
	if e.epoch != 1 || e.nh != 1 {
		t.Fatalf("memo entry %+v after the first walk to fd00::/64, want epoch 1 and next hop 1", *e)
	}

	// A change: the entry stays, but answers no more.
	if err := tab.Add(netip.MustParsePrefix("fd00::/64"), 2); err != nil {
		t.Fatal(err)
	}
	lookup(2, 0, 8)
	lookup(2, 8, 0)
	if e.epoch != 2 || e.nh != 2 {
		t.Fatalf("memo entry %+v after the change, want epoch 2 and next hop 2", *e)
	}

	// The last epoch before they come round: the next change starts
	// epoch 1 again, that of an entry learnt for a table long changed.
	*e = memoEntry{hi: e.hi, mhi: e.mhi, nh: 1, epoch: 1}
	m.epoch = ^uint32(0)
	if err := tab.Add(netip.MustParsePrefix("fd00::/64"), 3); err != nil {
		t.Fatal(err)
	}
	lookup(3, 0, 8)
	lookup(3, 8, 0)
	if m.epoch != 1 {
		t.Fatalf("epoch %d after coming round, want 1", m.epoch)
	}
}

// subnetHosts makes an IPv6 table with fd00::/64 to next hop 1, and the
// addresses of n hosts in it, fd00::0 to fd00::n-1.
func subnetHosts(t *testing.T, n int) (tab *Table, hi, lo []uint64) {
	t.Helper()
	tab = New(Config{FirstBits: 24, Groups: 100}, V6)
	if err := tab.Add(netip.MustParsePrefix("fd00::/64"), 1); err != nil {
		t.Fatal(err)
	}
	hi, lo = make([]uint64, n), make([]uint64, n)
	for i := range hi {
		hi[i], lo[i] = u128(netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(i)}))
	}
	return tab, hi, lo
}
