package fib

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestRandom applies random adds, replacements and deletes to tables of
// several shapes and compares them with the brute-force reference after
// every few operations. The small group counts make Adds fail with
// ErrFull, after which the table must be exactly as before.
func TestRandom(t *testing.T) {
	cases := []struct {
		family    Family
		firstBits int
		groups    int
		ops       int
	}{
		{V4, 24, 4096, 3000},
		{V4, 16, 4096, 3000},
		{V4, 16, 40, 3000},
		{V4, 20, 60, 3000}, // the last level has 4 padding bits
		{V4, 8, 30, 2000},
		{V6, 16, 20000, 2000},
		{V6, 16, 300, 2000},
		{V6, 12, 200, 1500}, // padding bits again
	}
	for ci, c := range cases {
		t.Run(fmt.Sprintf("%v/F%d/G%d", c.family, c.firstBits, c.groups), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 42))
			gen := gen4
			if c.family == V6 {
				gen = gen6
			}
			tab := New(Config{FirstBits: c.firstBits, Groups: c.groups}, c.family)
			rf := &ref{}
			full := 0
			for op := 1; op <= c.ops; op++ {
				switch x := r.IntN(20); {
				case x < 12 || len(rf.routes) == 0: // add or replace
					var p netip.Prefix
					if x < 3 && len(rf.routes) > 0 {
						p = rf.routes[r.IntN(len(rf.routes))].p
					} else {
						p = gen(r)
					}
					nh := 1 + r.Uint32N(MaxNextHop)
					err := tab.Add(p, nh)
					if errors.Is(err, ErrFull) {
						full++
						if rf.find(p) >= 0 {
							t.Fatalf("replacing %v returned ErrFull", p)
						}
						// Nothing may have changed, here least of all.
						addrs := probes(r, rf, gen, 20)
						for range 20 {
							addrs = append(addrs, inside(r, p))
						}
						checkLookups(t, tab, rf, addrs)
						continue
					}
					if err != nil {
						t.Fatalf("Add(%v, %d): %v", p, nh, err)
					}
					rf.add(p, nh)
				case x < 19: // delete, sometimes a missing prefix
					p := gen(r)
					if x < 17 {
						p = rf.routes[r.IntN(len(rf.routes))].p
					}
					err := tab.Delete(p)
					if had := rf.del(p); had != (err == nil) || (!had && !errors.Is(err, ErrNotFound)) {
						t.Fatalf("Delete(%v) = %v, route present: %v", p, err, had)
					}
				default:
					tab.Reclaim()
				}
				if op%100 == 0 {
					checkLookups(t, tab, rf, probes(r, rf, gen, 300))
				}
				if op%500 == 0 || op == c.ops {
					checkRoutes(t, tab, rf)
					st := tab.Stats()
					cost := (1<<c.firstBits + st.GroupsUsed*groupSize) * len(rf.routes)
					checkStructure(t, tab, rf, cost < 3e7)
				}
			}
			st := tab.Stats()
			t.Logf("%d routes, %d Adds failed with ErrFull, stats %+v", len(rf.routes), full, st)
			if c.groups < 1000 && full == 0 {
				t.Errorf("no Add hit ErrFull with %d groups", c.groups)
			}

			// Deleting everything folds every group.
			for _, x := range slices.Clone(rf.routes) {
				if err := tab.Delete(x.p); err != nil {
					t.Fatal(err)
				}
				rf.del(x.p)
			}
			checkLookups(t, tab, rf, probes(r, rf, gen, 200))
			checkStructure(t, tab, rf, false)
			tab.Reclaim()
			if st := tab.Stats(); st.GroupsUsed != 0 || st.GroupsFree != c.groups || st.Routes != 0 {
				t.Fatalf("empty table: stats %+v", st)
			}
		})
	}
}

// TestBatchEqualsSingle compares the batch lookups with the single ones
// over batch lengths around the chunk size.
func TestBatchEqualsSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, family := range []Family{V4, V6} {
		gen := gen4
		if family == V6 {
			gen = gen6
		}
		tab := New(Config{FirstBits: 16, Groups: 20000}, family)
		rf := &ref{}
		for range 3000 {
			p, nh := gen(r), 1+r.Uint32N(1000)
			if err := tab.Add(p, nh); err != nil {
				t.Fatal(err)
			}
			rf.add(p, nh)
		}
		var scratch Scratch4
		for _, n := range []int{0, 1, 2, 31, 63, 64, 65, 128, 129, 1000} {
			addrs := probes(r, rf, gen, n)
			got := make([]uint32, n+1)
			got[n] = 12345 // must stay untouched
			want := make([]uint32, n)
			if family == V4 {
				in := make([]uint32, n)
				for i, a := range addrs {
					in[i] = u32(a)
					want[i] = tab.Lookup4(in[i])
				}
				tab.LookupBatch4(in, got, &scratch) // one Scratch4 through every batch
			} else {
				hi, lo := make([]uint64, n), make([]uint64, n)
				for i, a := range addrs {
					hi[i], lo[i] = u128(a)
					want[i] = tab.Lookup6(hi[i], lo[i])
				}
				tab.LookupBatch6(hi, lo, got, nil)
			}
			if !slices.Equal(got[:n], want) || got[n] != 12345 {
				t.Fatalf("%v batch of %d: got %v\nwant %v", family, n, got, want)
			}
			checkLookups(t, tab, rf, addrs)
		}
	}
}

// TestFoldAndReclaim checks that deleting long routes folds their groups,
// that folded groups are neither changed nor reused before Reclaim, and
// that Reclaim makes them free.
func TestFoldAndReclaim(t *testing.T) {
	tab := New(Config{FirstBits: 16, Groups: 4}, V4)
	pfx := netip.MustParsePrefix
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	stats := func(used, free, pending int) {
		t.Helper()
		st := tab.Stats()
		if st.GroupsUsed != used || st.GroupsFree != free || st.GroupsPending != pending {
			t.Fatalf("stats %+v, want used %d free %d pending %d", st, used, free, pending)
		}
	}
	must(tab.Add(pfx("10.0.0.0/8"), 1))
	must(tab.Add(pfx("10.1.2.3/32"), 2)) // groups for 10.1/16 and 10.1.2/24
	must(tab.Add(pfx("10.1.3.0/25"), 3)) // one more, for 10.1.3/24
	stats(3, 1, 0)
	must(tab.Delete(pfx("10.1.3.0/25")))
	stats(2, 1, 1)
	folded := tab.pending[0]
	gb := tab.groupBase(folded)
	before := slices.Clone(tab.mem[gb : gb+groupSize])
	for _, e := range before {
		if e != leaf(8, 1) {
			t.Fatalf("folded group holds %#x, want the /8's leaf %#x", e, leaf(8, 1))
		}
	}

	// One free group: the next long route uses it, not the pending one.
	must(tab.Add(pfx("10.2.0.0/17"), 4))
	stats(3, 0, 1)
	if err := tab.Add(pfx("10.3.0.0/17"), 5); !errors.Is(err, ErrFull) {
		t.Fatalf("Add with only a pending group: %v, want ErrFull", err)
	}
	if !slices.Equal(tab.mem[gb:gb+groupSize], before) {
		t.Fatal("pending group changed before Reclaim")
	}
	tab.Reclaim()
	stats(3, 1, 0)
	must(tab.Add(pfx("10.3.0.0/17"), 5))
	stats(4, 0, 0)

	// Deleting the /32 folds both of its groups, deepest first.
	must(tab.Delete(pfx("10.1.2.3/32")))
	stats(2, 0, 2)
	for a, want := range map[string]uint32{"10.1.2.3": 1, "10.2.0.1": 4, "10.3.127.255": 5, "10.3.128.0": 1, "11.0.0.0": 0} {
		if got, _ := tab.Lookup(netip.MustParseAddr(a)); got != want {
			t.Errorf("Lookup(%s) = %d, want %d", a, got, want)
		}
	}
	must(tab.Delete(pfx("10.2.0.0/17")))
	must(tab.Delete(pfx("10.3.0.0/17")))
	stats(0, 0, 4)
	tab.Reclaim()
	stats(0, 4, 0)
	if tab.Len() != 1 {
		t.Fatalf("Len = %d", tab.Len())
	}
}

// TestDefaultRoute covers /0 and /32 (/128) at the edges of the address
// space, and replacing a next hop in place.
func TestDefaultRoute(t *testing.T) {
	for _, c := range []struct {
		family         Family
		zero, top, one string
	}{
		{V4, "0.0.0.0/0", "255.255.255.255/32", "0.0.0.0/32"},
		{V6, "::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "::/128"},
	} {
		tab := New(Config{FirstBits: 8, Groups: 64}, c.family)
		for _, s := range []string{c.zero, c.top, c.one} {
			if err := tab.Add(netip.MustParsePrefix(s), 7); err != nil {
				t.Fatal(err)
			}
		}
		if err := tab.Add(netip.MustParsePrefix(c.zero), 9); err != nil {
			t.Fatal(err)
		}
		rf := &ref{}
		tab.Walk(func(p netip.Prefix, nh uint32) bool { rf.add(p, nh); return true })
		if nh, _ := tab.Get(netip.MustParsePrefix(c.zero)); nh != 9 || len(rf.routes) != 3 {
			t.Fatalf("%v: routes %v", c.family, rf.routes)
		}
		r := rand.New(rand.NewPCG(1, 2))
		gen := gen4
		if c.family == V6 {
			gen = gen6
		}
		addrs := probes(r, rf, gen, 200)
		for _, s := range []string{c.zero, c.top, c.one} {
			a := netip.MustParsePrefix(s).Addr()
			addrs = append(addrs, a, a.Next(), a.Prev())
		}
		addrs = slices.DeleteFunc(addrs, func(a netip.Addr) bool { return !a.IsValid() })
		checkLookups(t, tab, rf, addrs)
		checkStructure(t, tab, rf, true)
	}
}

func TestErrors(t *testing.T) {
	v4 := New(Config{FirstBits: 8, Groups: 1}, V4)
	v6 := New(Config{FirstBits: 8, Groups: 1}, V6)
	p4, p6 := netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")
	for _, err := range []error{
		v4.Add(p6, 1),
		v6.Add(p4, 1),
		v6.Add(netip.MustParsePrefix("::ffff:10.0.0.0/104"), 0),
		v4.Add(p4, 0),
		v4.Add(p4, MaxNextHop+1),
		v4.Add(netip.Prefix{}, 1),
		v4.Delete(p6),
	} {
		if err == nil {
			t.Error("want an error")
		}
	}
	if err := v4.Add(p4, MaxNextHop); err != nil {
		t.Fatal(err)
	}
	if nh, ok := v4.Lookup(netip.MustParseAddr("10.1.1.1")); nh != MaxNextHop || !ok {
		t.Fatalf("Lookup = %d, %v", nh, ok)
	}
	if _, ok := v4.Lookup(netip.MustParseAddr("::ffff:10.1.1.1")); ok {
		t.Error("an IPv6 address matched an IPv4 table")
	}
	if _, _, ok := v4.Covering(netip.Addr{}); ok {
		t.Error("Covering of the zero Addr")
	}
	if err := v4.Delete(netip.MustParsePrefix("10.0.0.0/9")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete of a missing route: %v", err)
	}
	if err := v4.Add(netip.MustParsePrefix("10.0.0.0/16"), 2); err != nil {
		t.Fatal(err)
	}
	if err := v4.Add(netip.MustParsePrefix("10.0.1.0/24"), 2); !errors.Is(err, ErrFull) {
		t.Errorf("second group of one: %v", err)
	}
	// Masking: a prefix with host bits names its masked prefix.
	if nh, ok := v4.Get(netip.MustParsePrefix("10.0.77.77/16")); !ok || nh != 2 {
		t.Errorf("Get of unmasked prefix = %d, %v", nh, ok)
	}

	for _, c := range []Config{{FirstBits: 7}, {FirstBits: 25}, {Groups: -1}, {Groups: MaxGroups + 1}} {
		if c.Validate() == nil {
			t.Errorf("%+v valid", c)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", c)
				}
			}()
			New(c, V4)
		}()
	}
	if (Config{}).Validate() != nil || (Config{FirstBits: 8, Groups: MaxGroups}).Validate() != nil {
		t.Error("valid configs rejected")
	}
}

// TestAllocs: the batch lookups allocate nothing.
func TestAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	t4 := New(Config{FirstBits: 16, Groups: 1000}, V4)
	t6 := New(Config{FirstBits: 16, Groups: 5000}, V6)
	for range 500 {
		t4.Add(gen4(r), 1+r.Uint32N(100))
		t6.Add(gen6(r), 1+r.Uint32N(100))
	}
	a4 := make([]uint32, 300)
	hi, lo := make([]uint64, 300), make([]uint64, 300)
	for i := range a4 {
		a4[i] = u32(inside(r, gen4(r)))
		hi[i], lo[i] = u128(inside(r, gen6(r)))
	}
	nh := make([]uint32, 300)
	var scratch Scratch4
	for _, s := range []*Scratch4{nil, &scratch} {
		if n := testing.AllocsPerRun(100, func() { t4.LookupBatch4(a4, nh, s) }); n != 0 {
			t.Errorf("LookupBatch4 (scratch %v): %v allocations", s != nil, n)
		}
	}
	var m Memo
	if n := testing.AllocsPerRun(100, func() { t6.LookupBatch6(hi, lo, nh, &m) }); n != 0 {
		t.Errorf("LookupBatch6: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { nh[0] = t4.Lookup4(a4[0]) + t6.Lookup6(hi[0], lo[0]) }); n != 0 {
		t.Errorf("Lookup4/6: %v allocations", n)
	}
}

// TestFootprint logs the memory of the configurations the benchmarks use.
func TestFootprint(t *testing.T) {
	for _, c := range []Config{{}, {Groups: 1 << 17}, {FirstBits: 16, Groups: 1 << 12}, {Groups: 1 << 19}} {
		c = c.withDefaults()
		t.Logf("FirstBits %d, Groups %d: %d bytes (%.0f MiB)", c.FirstBits, c.Groups, Footprint(c), float64(Footprint(c))/(1<<20))
	}
	if got, want := Footprint(Config{}), (1<<24+DefaultGroups*256)*4; got != want {
		t.Errorf("Footprint = %d, want %d", got, want)
	}
}

// TestEveryStoreOldOrNew checks the state readers see after every single
// entry store of an Add or Delete, not just after the call: each address
// must look up as before the call or as after it, never anything else
// (in particular never empty while a route covers it before and after).
func TestEveryStoreOldOrNew(t *testing.T) {
	defer func() { afterStore = nil }()
	for ci, c := range []struct {
		family    Family
		firstBits int
		groups    int
	}{{V4, 8, 64}, {V4, 12, 200}, {V6, 8, 400}} {
		r := rand.New(rand.NewPCG(uint64(ci), 9))
		gen := gen4
		if c.family == V6 {
			gen = gen6
		}
		tab := New(Config{FirstBits: c.firstBits, Groups: c.groups}, c.family)
		rf := &ref{}
		var addrs []netip.Addr
		var before, after []uint32
		// The addresses as the hot path takes them, and batch results.
		var a4 []uint32
		var hi, lo []uint64
		batch := make([]uint32, 32)
		// A memo kept across the checks and the operations: mid-change it
		// answers old or new, and each change must make it forget.
		var memo Memo
		memoBatch := make([]uint32, 32)
		stores, op := 0, 0
		check := func() {
			if c.family == V4 {
				tab.LookupBatch4(a4, batch, nil)
			} else {
				tab.LookupBatch6(hi, lo, batch, nil)
				tab.LookupBatch6(hi, lo, memoBatch, &memo)
				for i, a := range addrs {
					if got := memoBatch[i]; got != before[i] && got != after[i] {
						t.Fatalf("op %d store %d: %v looks up through the memo as %d, want %d (before) or %d (after)",
							op, stores, a, got, before[i], after[i])
					}
				}
			}
			for i, a := range addrs {
				var got uint32
				if c.family == V4 {
					got = tab.Lookup4(a4[i])
				} else {
					got = tab.Lookup6(hi[i], lo[i])
				}
				if got != batch[i] || (got != before[i] && got != after[i]) {
					t.Fatalf("%v op %d store %d: %v looks up as %d (batch %d), want %d (before) or %d (after)",
						c.family, op, stores, a, got, batch[i], before[i], after[i])
				}
			}
		}
		afterStore = func() {
			stores++
			check()
		}
		for op = range 400 {
			var p netip.Prefix
			del := len(rf.routes) > 0 && r.IntN(3) == 0
			if del {
				p = rf.routes[r.IntN(len(rf.routes))].p
			} else {
				p = gen(r)
			}
			addrs = probes(r, rf, gen, 16)
			for range 16 {
				addrs = append(addrs, inside(r, p))
			}
			before, after = nil, nil
			a4, hi, lo = a4[:0], hi[:0], lo[:0]
			for _, a := range addrs {
				if c.family == V4 {
					a4 = append(a4, u32(a))
				} else {
					h, l := u128(a)
					hi, lo = append(hi, h), append(lo, l)
				}
			}
			for _, a := range addrs {
				w, _ := rf.lookup(a)
				before = append(before, w.nh)
			}
			next := &ref{routes: slices.Clone(rf.routes)}
			nh := 1 + r.Uint32N(50)
			if del {
				next.del(p)
			} else {
				next.add(p, nh)
			}
			for _, a := range addrs {
				w, _ := next.lookup(a)
				after = append(after, w.nh)
			}
			stores = 0
			var err error
			if del {
				err = tab.Delete(p)
			} else {
				err = tab.Add(p, nh)
			}
			switch {
			case errors.Is(err, ErrFull):
				if stores != 0 {
					t.Fatalf("Add(%v) failed with ErrFull after %d stores", p, stores)
				}
				continue
			case err != nil:
				t.Fatal(err)
			}
			rf = next
			// After the call only the new state is correct.
			before, stores = slices.Clone(after), -1
			check()
			if op%100 == 0 {
				tab.Reclaim()
			}
		}
		t.Logf("%v: %d routes, stats %+v", c.family, len(rf.routes), tab.Stats())
	}
}
