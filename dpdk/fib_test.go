package dpdk_test

// DPDK's rte_fib and rte_fib6 against roce-fwd's fib.Table on the same
// routes and addresses. EAL is up from TestMain in dpdk_test.go (it runs
// without hugepages and with 256 MiB), so the tables go on heaps of their
// own (dpdk.Heap) over memory the test maps: 4 KiB pages, or 2 MiB
// hugetlb pages when the machine has them free.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"roce-fwd/dpdk"
	"roce-fwd/fib"
)

// heapSeq numbers the heaps and FIBs of the process: their names are unique.
var heapSeq atomic.Int64

// newHeap makes a heap of size bytes, freed when tb ends; the table's
// memory must be freed first (Cleanup runs last-in first-out).
func newHeap(tb testing.TB, size int, huge bool) *dpdk.Heap {
	tb.Helper()
	h, err := dpdk.NewHeap(fmt.Sprintf("rf-fib-%d", heapSeq.Add(1)), size, huge)
	if err != nil {
		if huge {
			tb.Skipf("no 2 MiB pages: %v", err)
		}
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := h.Free(); err != nil {
			tb.Error(err)
		}
	})
	return h
}

// route is a prefix of either family: the address as hi:lo, IPv4 in the
// top 32 bits of hi.
type route struct {
	hi, lo uint64
	len    uint8
	nh     uint32
}

func (r route) v4() uint32 { return uint32(r.hi >> 32) }

func (r route) prefix(v4 bool) netip.Prefix {
	if v4 {
		return netip.PrefixFrom(addr4(r.v4()), int(r.len))
	}
	return netip.PrefixFrom(addr6(r.hi, r.lo), int(r.len))
}

func addr4(a uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], a)
	return netip.AddrFrom4(b)
}

func bytes6(hi, lo uint64) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return b
}

func addr6(hi, lo uint64) netip.Addr { return netip.AddrFrom16(bytes6(hi, lo)) }

// mask128 keeps the top l bits of hi:lo.
func mask128(hi, lo uint64, l int) (uint64, uint64) {
	switch {
	case l == 0:
		return 0, 0
	case l <= 64:
		return hi &^ (1<<(64-l) - 1), 0
	case l < 128:
		return hi, lo &^ (1<<(128-l) - 1)
	}
	return hi, lo
}

// routes4 makes n distinct IPv4 routes in 1.0.0.0-223.255.255.255: 55%
// /24, 35% /16../23, and one in ten longer, /25../32.
func routes4(n int, seed uint64) []route {
	r := rand.New(rand.NewPCG(seed, 44))
	seen := make(map[route]bool, n)
	out := make([]route, 0, n)
	for len(out) < n {
		var l int
		switch x := r.IntN(100); {
		case x < 55:
			l = 24
		case x < 90:
			l = 16 + r.IntN(8)
		default:
			l = 25 + r.IntN(8)
		}
		a := (1+r.Uint32N(223))<<24 | r.Uint32()>>8
		hi, _ := mask128(uint64(a)<<32, 0, l)
		k := route{hi: hi, len: uint8(l)}
		if !seen[k] {
			seen[k] = true
			k.nh = 1 + r.Uint32N(fib.MaxNextHop)
			out = append(out, k)
		}
	}
	return out
}

// routes6 makes n distinct IPv6 routes in 2000::/3, under 20k /32
// allocations as in the Internet table: 10% the /32s themselves, 45% /48
// sites from the low end of their allocation, 15% /56, 15% /64, 10%
// /33../47 and a few longer ones, 5% /65../128 (half of them /128).
func routes6(n int, seed uint64) []route {
	r := rand.New(rand.NewPCG(seed, 66))
	allocs := make([]uint64, 20000)
	for i := range allocs {
		allocs[i] = (1<<61 | r.Uint64N(1<<61)) &^ (1<<32 - 1)
	}
	seen := make(map[route]bool, n)
	out := make([]route, 0, n)
	for len(out) < n {
		hi := allocs[r.IntN(len(allocs))]
		site := r.Uint64N(1024) << 16
		lo := r.Uint64()
		var l int
		switch x := r.IntN(100); {
		case x < 10:
			l = 32
		case x < 55:
			hi, l = hi|site, 48
		case x < 70:
			hi, l = hi|site|r.Uint64N(256)<<8, 56
		case x < 85:
			hi, l = hi|site|r.Uint64N(1<<16), 64
		case x < 95:
			hi, l = hi|site, 33+r.IntN(15)
		case x < 97:
			hi, l = hi|site|r.Uint64N(1<<16), 65+r.IntN(63)
		default:
			hi, l = hi|site|r.Uint64N(1<<16), 128
		}
		hi, lo = mask128(hi, lo, l)
		k := route{hi: hi, lo: lo, len: uint8(l)}
		if !seen[k] {
			seen[k] = true
			k.nh = 1 + r.Uint32N(fib.MaxNextHop)
			out = append(out, k)
		}
	}
	return out
}

// inside is a random address of route x.
func inside(r *rand.Rand, x route) (hi, lo uint64) {
	l := int(x.len)
	hi, lo = r.Uint64(), r.Uint64()
	mhi, mlo := mask128(^uint64(0), ^uint64(0), l)
	return x.hi | hi&^mhi, x.lo | lo&^mlo
}

// groupsNeeded is how many 256-entry groups a DIR-24-8 trie with a 24-bit
// first level (rte_fib's DIR24_8 and TRIE, and fib.Table with FirstBits
// 24) needs for routes: one per distinct prefix at each byte boundary
// from /24 that a longer route passes.
func groupsNeeded(routes []route) int {
	type pk struct {
		hi, lo uint64
		b      int
	}
	seen := map[pk]bool{}
	for _, x := range routes {
		for b := 24; b < int(x.len); b += 8 {
			hi, lo := mask128(x.hi, x.lo, b)
			seen[pk{hi, lo, b}] = true
		}
	}
	return len(seen)
}

// refLPM is longest-prefix match by brute force over the lengths.
type refLPM struct {
	byLen [129]map[[2]uint64]uint32
	width int
}

func newRef(routes []route, v4 bool) *refLPM {
	ref := &refLPM{width: 128}
	if v4 {
		ref.width = 32
	}
	for _, x := range routes {
		m := ref.byLen[x.len]
		if m == nil {
			m = map[[2]uint64]uint32{}
			ref.byLen[x.len] = m
		}
		m[[2]uint64{x.hi, x.lo}] = x.nh
	}
	return ref
}

func (ref *refLPM) lookup(hi, lo uint64) uint32 {
	for l := ref.width; l >= 0; l-- {
		if m := ref.byLen[l]; m != nil {
			mhi, mlo := mask128(hi, lo, l)
			if nh, ok := m[[2]uint64{mhi, mlo}]; ok {
				return nh
			}
		}
	}
	return 0
}

// dpdkArray is n elements of T in DPDK memory on socket, freed when tb
// ends.
func dpdkArray[T any](tb testing.TB, what string, n, socket int) []T {
	tb.Helper()
	var z T
	p, err := dpdk.Zmalloc(what, uintptr(n)*unsafe.Sizeof(z), socket)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dpdk.FreeMem(p) })
	return unsafe.Slice((*T)(p), n)
}

func TestRteFIB(t *testing.T) {
	h := newHeap(t, 80<<20, false)
	f, err := dpdk.NewRteFIB(fmt.Sprintf("t4-%d", heapSeq.Add(1)), h.Socket, 1024, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Free)
	if f.Bytes < 64<<20 {
		t.Errorf("Bytes %d, want at least the 64 MiB first level", f.Bytes)
	}
	ip := func(a, b, c, d uint32) uint32 { return a<<24 | b<<16 | c<<8 | d }
	rs := []route{
		{hi: uint64(ip(10, 0, 0, 0)) << 32, len: 8, nh: 1},
		{hi: uint64(ip(10, 1, 0, 0)) << 32, len: 16, nh: 2},
		{hi: uint64(ip(10, 1, 2, 0)) << 32, len: 24, nh: 3},
		{hi: uint64(ip(10, 1, 2, 128)) << 32, len: 25, nh: 4},
		{hi: uint64(ip(10, 1, 2, 130)) << 32, len: 32, nh: 5},
		{hi: uint64(ip(192, 168, 0, 0)) << 32, len: 16, nh: 1<<31 - 1},
	}
	for _, x := range rs {
		if err := f.Add(x.v4(), x.len, uint64(x.nh)); err != nil {
			t.Fatal(err)
		}
	}
	// Bits past the depth are ignored: this replaces 10.1.0.0/16's hop.
	if err := f.Add(ip(10, 1, 255, 255), 16, 6); err != nil {
		t.Fatal(err)
	}
	rs[1].nh = 6
	ref := newRef(rs, true)
	probes := []uint32{ip(10, 9, 9, 9), ip(10, 1, 9, 9), ip(10, 1, 2, 1), ip(10, 1, 2, 129), ip(10, 1, 2, 130),
		ip(10, 1, 2, 131), ip(11, 0, 0, 0), ip(192, 168, 255, 255), 0, ^uint32(0)}
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		probes = append(probes, ip(10, 1, 2, 0)|r.Uint32N(256), ip(10, 0, 0, 0)|r.Uint32N(1<<24), r.Uint32())
	}
	ips := dpdkArray[uint32](t, "ips", len(probes), h.Socket)
	nhs := dpdkArray[uint64](t, "nhs", len(probes), h.Socket)
	copy(ips, probes)
	check := func(how string) {
		t.Helper()
		for i, a := range probes {
			if want := uint64(ref.lookup(uint64(a)<<32, 0)); nhs[i] != want {
				t.Fatalf("%s: %v: next hop %d, want %d", how, addr4(a), nhs[i], want)
			}
		}
		clear(nhs)
	}
	f.LookupBulk(&ips[0], &nhs[0], len(probes))
	check("LookupBulk")
	f.LookupBursts(&ips[0], &nhs[0], len(probes), 32)
	check("LookupBursts")
	f.LookupBursts(&ips[0], &nhs[0], len(probes), 0)
	// One group, under 10.1.2.0/24.
	if rsvd, used := f.Tbl8Use(); rsvd != 1 || used != 1 {
		t.Errorf("Tbl8Use: %d reserved, %d used, want 1 and 1", rsvd, used)
	}
	check("LookupBursts in one burst")

	for _, bad := range []struct {
		depth uint8
		nh    uint64
	}{{33, 1}, {255, 1}, {24, 1 << 31}} {
		if err := f.Add(ip(10, 0, 0, 0), bad.depth, bad.nh); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Add depth %d next hop %d: %v, want EINVAL", bad.depth, bad.nh, err)
		}
	}
	if _, err := dpdk.NewRteFIB(f.Name, h.Socket, 64, 64); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("second FIB named %s: %v, want EEXIST", f.Name, err)
	}
	if _, err := dpdk.NewRteFIB("t4-bad", h.Socket, 64, 0); err == nil {
		t.Error("FIB with no tbl8 created")
	}
	if _, err := dpdk.NewRteFIB(strings.Repeat("n", dpdk.MaxFIBName+1), h.Socket, 64, 64); err == nil {
		t.Error("FIB with a name longer than MaxFIBName created")
	}
	// 64 groups, one of them under 10.1.2.0/24: the 64th other /24 with
	// a longer route has none left.
	var err65 error
	for i := range uint32(65) {
		if err65 = f.Add(ip(20, 0, i, 1), 32, 1); err65 != nil {
			break
		}
	}
	if !errors.Is(err65, syscall.ENOSPC) {
		t.Errorf("65 /32s in distinct /24s with 63 groups free: %v, want ENOSPC", err65)
	}
}

func TestRteFIB6(t *testing.T) {
	h := newHeap(t, 80<<20, false)
	f, err := dpdk.NewRteFIB6(fmt.Sprintf("t6-%d", heapSeq.Add(1)), h.Socket, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Free)
	p := func(s string) route {
		x := netip.MustParsePrefix(s)
		b := x.Addr().As16()
		return route{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:]), len: uint8(x.Bits())}
	}
	rs := []route{p("2001:db8::/32"), p("2001:db8:1::/48"), p("2001:db8:1:2::/64"),
		p("2001:db8:1:2::80/121"), p("2001:db8:1:2::81/128"), p("2400::/12")}
	for i := range rs {
		rs[i].nh = uint32(i + 1)
		if err := f.Add(bytes6(rs[i].hi, rs[i].lo), rs[i].len, uint64(rs[i].nh)); err != nil {
			t.Fatal(err)
		}
	}
	ref := newRef(rs, false)
	r := rand.New(rand.NewPCG(6, 6))
	var probes [][2]uint64
	for range 1000 {
		for _, x := range rs {
			hi, lo := inside(r, x)
			probes = append(probes, [2]uint64{hi, lo})
		}
		probes = append(probes, [2]uint64{r.Uint64(), r.Uint64()}, [2]uint64{0x2001_0db8_0000_0000 | r.Uint64N(1<<32), r.Uint64()})
	}
	ips := dpdkArray[[dpdk.FIB6AddrSize]byte](t, "ips6", len(probes), h.Socket)
	nhs := dpdkArray[uint64](t, "nhs", len(probes), h.Socket)
	for i, a := range probes {
		ips[i] = bytes6(a[0], a[1])
	}
	check := func(how string) {
		t.Helper()
		for i, a := range probes {
			if want := uint64(ref.lookup(a[0], a[1])); nhs[i] != want {
				t.Fatalf("%s: %v: next hop %d, want %d", how, addr6(a[0], a[1]), nhs[i], want)
			}
		}
		clear(nhs)
	}
	f.LookupBulk(&ips[0], &nhs[0], len(probes))
	check("LookupBulk")
	f.LookupBursts(&ips[0], &nhs[0], len(probes), 32)
	check("LookupBursts")
	// Each route reserves and uses the groups for the bytes between its
	// covering route and itself: 2001:db8::/32 byte 3, the /48 bytes 4
	// and 5, the /64 bytes 6 and 7, the /121 bytes 8 to 15; the /128
	// shares the /121's last group, 2400::/12 needs none.
	if rsvd, used := f.Tbl8Use(); rsvd != 13 || used != 13 {
		t.Errorf("Tbl8Use: %d reserved, %d used, want 13 and 13", rsvd, used)
	}

	for _, bad := range []struct {
		depth uint8
		nh    uint64
	}{{129, 1}, {255, 1}, {48, 1 << 31}} {
		if err := f.Add(bytes6(rs[0].hi, 0), bad.depth, bad.nh); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Add depth %d next hop %d: %v, want EINVAL", bad.depth, bad.nh, err)
		}
	}
}

// TestRteFIBMatchesGo puts the same random routes in rte_fib, rte_fib6
// and fib.Table and checks all three against brute force.
func TestRteFIBMatchesGo(t *testing.T) {
	for _, v4 := range []bool{true, false} {
		t.Run(map[bool]string{true: "ipv4", false: "ipv6"}[v4], func(t *testing.T) {
			s := buildSet(t, v4, 20_000, false)
			ref := newRef(s.routes, v4)
			for _, i := range s.sample(10_000) {
				var want uint32
				if v4 {
					want = ref.lookup(uint64(s.a4[i])<<32, 0)
				} else {
					want = ref.lookup(s.hi[i], s.lo[i])
				}
				if want == 0 || uint32(s.rteNH[i]) != want {
					t.Fatalf("address %d: rte next hop %d, reference %d", i, s.rteNH[i], want)
				}
			}
		})
	}
}

// The benchmarks look up bursts of 32 addresses, perIter per iteration,
// walking through a pool of addresses much larger than the caches, as
// roce-fwd/fib's own benchmarks do.
const (
	burst   = 32
	perIter = 8192
	pool    = 1 << 20
)

// benchSet is one route set in an rte table and a fib.Table, both in the
// same heap, and the address pool in DPDK memory.
type benchSet struct {
	v4     bool
	routes []route
	groups int // groupsNeeded(routes)
	rte4   *dpdk.RteFIB
	rte6   *dpdk.RteFIB6
	tab    *fib.Table
	cfg    fib.Config

	// The pool: a4 for IPv4 (read by both), ip6 for rte_fib6, hi and lo
	// for fib.Table.
	a4     []uint32
	ip6    [][dpdk.FIB6AddrSize]byte
	hi, lo []uint64

	rteNH []uint64 // pool entries: results of the check, then scratch
	goNH  []uint32
}

// genCache keeps generated routes and pools across the runs of -count.
var genCache = map[string]struct {
	routes []route
	hi, lo []uint64
}{}

func generate(v4 bool, n int) ([]route, []uint64, []uint64) {
	key := fmt.Sprint(v4, n)
	if c, ok := genCache[key]; ok {
		return c.routes, c.hi, c.lo
	}
	var routes []route
	if v4 {
		routes = routes4(n, 1)
	} else {
		routes = routes6(n, 1)
	}
	r := rand.New(rand.NewPCG(2, 2))
	hi, lo := make([]uint64, pool), make([]uint64, pool)
	for i := range hi {
		hi[i], lo[i] = inside(r, routes[r.IntN(len(routes))])
	}
	c := genCache[key]
	c.routes, c.hi, c.lo = routes, hi, lo
	genCache[key] = c
	return routes, hi, lo
}

// tbl8Reserve is an upper bound of the tbl8 groups rte_fib6's TRIE
// reserves for routes: every byte from /24 to each route's length (see
// RteFIB6.Tbl8Use).
func tbl8Reserve(routes []route) int {
	n := 0
	for _, x := range routes {
		if x.len > 24 {
			n += (int(x.len)+7)/8 - 3
		}
	}
	return n
}

// buildSet fills both tables with n routes on a heap of their own (all
// freed when tb ends) and checks that they agree on the pool.
func buildSet(tb testing.TB, v4 bool, n int, huge bool) *benchSet {
	tb.Helper()
	routes, hi, lo := generate(v4, n)
	s := &benchSet{v4: v4, routes: routes, groups: groupsNeeded(routes)}
	// fib.Table gets the groups the routes need and a margin; DIR24_8
	// the same (it reserves exactly what it needs); TRIE what it may
	// reserve.
	groups := s.groups + s.groups/8 + 64
	tbl8 := groups
	if !v4 {
		tbl8 = tbl8Reserve(routes) + 64
	}
	s.cfg = fib.Config{FirstBits: 24, Groups: groups}
	arrays := pool * (4 + 8 + 4)
	if !v4 {
		arrays = pool * (16 + 8 + 8 + 8 + 4)
	}
	rteSize := 64<<20 + (tbl8+1)*(1<<10+1) + 2*n*320
	h := newHeap(tb, (rteSize+fib.Footprint(s.cfg)+arrays)*21/20+32<<20, huge)

	name := fmt.Sprintf("b%d", heapSeq.Add(1))
	start := time.Now()
	var err error
	if v4 {
		s.rte4, err = dpdk.NewRteFIB(name, h.Socket, n, tbl8)
		if err == nil {
			tb.Cleanup(s.rte4.Free)
		}
	} else {
		s.rte6, err = dpdk.NewRteFIB6(name, h.Socket, n, tbl8)
		if err == nil {
			tb.Cleanup(s.rte6.Free)
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, x := range routes {
		if v4 {
			err = s.rte4.Add(x.v4(), x.len, uint64(x.nh))
		} else {
			err = s.rte6.Add(bytes6(x.hi, x.lo), x.len, uint64(x.nh))
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	rteBuild := time.Since(start)

	fam := fib.V6
	if v4 {
		fam = fib.V4
	}
	mem, err := dpdk.Zmalloc("fib.Table", uintptr(fib.Footprint(s.cfg)), h.Socket)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dpdk.FreeMem(mem) })
	// The table's entries are in DPDK memory; what its Go heap grows by
	// is the control plane's route set.
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc
	start = time.Now()
	s.tab = fib.NewAt(mem, s.cfg, fam)
	for _, x := range routes {
		if err := s.tab.Add(x.prefix(v4), x.nh); err != nil {
			tb.Fatalf("fib.Table.Add(%v): %v (stats %+v)", x.prefix(v4), err, s.tab.Stats())
		}
	}
	goBuild := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	goHeap := int64(ms.HeapAlloc) - int64(heapBefore)

	if v4 {
		s.a4 = dpdkArray[uint32](tb, "pool4", pool, h.Socket)
		for i, a := range hi {
			s.a4[i] = uint32(a >> 32)
		}
	} else {
		s.ip6 = dpdkArray[[dpdk.FIB6AddrSize]byte](tb, "pool6", pool, h.Socket)
		s.hi = dpdkArray[uint64](tb, "pool-hi", pool, h.Socket)
		s.lo = dpdkArray[uint64](tb, "pool-lo", pool, h.Socket)
		copy(s.hi, hi)
		copy(s.lo, lo)
		for i := range hi {
			s.ip6[i] = bytes6(hi[i], lo[i])
		}
	}
	s.rteNH = dpdkArray[uint64](tb, "rte-nh", pool, h.Socket)
	s.goNH = dpdkArray[uint32](tb, "go-nh", pool, h.Socket)

	// Every address of the sample is inside a route: both must find it,
	// with the same next hop.
	for _, i := range s.sample(10_000) {
		if v4 {
			s.rte4.LookupBulk(&s.a4[i], &s.rteNH[i], 1)
			s.tab.LookupBatch4(s.a4[i:i+1], s.goNH[i:i+1], nil)
		} else {
			s.rte6.LookupBulk(&s.ip6[i], &s.rteNH[i], 1)
			s.tab.LookupBatch6(s.hi[i:i+1], s.lo[i:i+1], s.goNH[i:i+1], nil)
		}
		if s.rteNH[i] == 0 || s.rteNH[i] != uint64(s.goNH[i]) {
			tb.Fatalf("pool address %d: rte next hop %d, fib.Table %d", i, s.rteNH[i], s.goNH[i])
		}
	}
	// And in bursts, over the whole pool.
	if v4 {
		s.rte4.LookupBursts(&s.a4[0], &s.rteNH[0], pool, burst)
		s.tab.LookupBatch4(s.a4, s.goNH, nil)
	} else {
		s.rte6.LookupBursts(&s.ip6[0], &s.rteNH[0], pool, burst)
		s.tab.LookupBatch6(s.hi, s.lo, s.goNH, nil)
	}
	for i := range pool {
		if s.rteNH[i] == 0 || s.rteNH[i] != uint64(s.goNH[i]) {
			tb.Fatalf("bursts: pool address %d: rte next hop %d, fib.Table %d", i, s.rteNH[i], s.goNH[i])
		}
	}

	st := s.tab.Stats()
	var rteBytes int64
	var rsvd, used, rteTbl8 int
	if v4 {
		rteBytes, rteTbl8 = s.rte4.Bytes, (tbl8+63)&^63
		rsvd, used = s.rte4.Tbl8Use()
	} else {
		rteBytes, rteTbl8 = s.rte6.Bytes, tbl8
		rsvd, used = s.rte6.Tbl8Use()
	}
	// 4-byte entries: a 2^24 first level and groups of 256, one more
	// group than configured for rte.
	const mib = 1 << 20
	rteTables := 4 * (1<<24 + (rteTbl8+1)*256)
	tb.Logf("%s %d routes, %d KiB pages, %d groups needed (%d used by fib.Table, %d by rte, %d reserved by rte); "+
		"rte: %d tbl8, %.1f MiB from the heap = tables %.1f MiB + RIB and free lists %.1f MiB, built in %v; "+
		"fib.Table: %d groups, Footprint %.1f MiB + route set %.1f MiB of Go heap, built in %v; heap %d MiB, %d MiB left",
		fam, n, h.PageSize>>10, s.groups, st.GroupsUsed, used, rsvd,
		tbl8, float64(rteBytes)/mib, float64(rteTables)/mib, float64(rteBytes-int64(rteTables))/mib, rteBuild.Round(time.Millisecond),
		groups, float64(st.Bytes)/mib, float64(goHeap)/mib, goBuild.Round(time.Millisecond),
		h.Size()>>20, (int64(h.Size())-h.Allocated())>>20)
	return s
}

// sample is k pool indexes, fixed.
func (s *benchSet) sample(k int) []int {
	r := rand.New(rand.NewPCG(3, 3))
	out := make([]int, k)
	for i := range out {
		out[i] = r.IntN(pool)
	}
	return out
}

// run times the three ways over the pool: rte_fib with every burst of 32
// in one cgo call of perIter lookups ("rte"), one cgo call per burst
// ("rte-per-call"), and fib.Table.LookupBatch per burst ("go"). Each
// iteration looks up the next perIter addresses of the pool, its results
// into the next perIter entries of a pool-sized array, the same for all.
func (s *benchSet) run(b *testing.B) {
	bench := func(sub string, iter func(pos int)) {
		b.Run(sub, func(b *testing.B) {
			pos := 0
			for b.Loop() {
				iter(pos)
				if pos += perIter; pos == pool {
					pos = 0
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perIter), "ns/lookup")
		})
	}
	if s.v4 {
		bench("rte", func(pos int) { s.rte4.LookupBursts(&s.a4[pos], &s.rteNH[pos], perIter, burst) })
		bench("rte-per-call", func(pos int) {
			for i := pos; i < pos+perIter; i += burst {
				s.rte4.LookupBulk(&s.a4[i], &s.rteNH[i], burst)
			}
		})
		bench("go", func(pos int) {
			for i := pos; i < pos+perIter; i += burst {
				s.tab.LookupBatch4(s.a4[i:i+burst], s.goNH[i:i+burst], nil)
			}
		})
		return
	}
	bench("rte", func(pos int) { s.rte6.LookupBursts(&s.ip6[pos], &s.rteNH[pos], perIter, burst) })
	bench("rte-per-call", func(pos int) {
		for i := pos; i < pos+perIter; i += burst {
			s.rte6.LookupBulk(&s.ip6[i], &s.rteNH[i], burst)
		}
	})
	bench("go", func(pos int) {
		for i := pos; i < pos+perIter; i += burst {
			s.tab.LookupBatch6(s.hi[i:i+burst], s.lo[i:i+burst], s.goNH[i:i+burst], nil)
		}
	})
}

// benchFIB runs every size on 4 KiB and on 2 MiB pages, each on a heap
// of its own, freed before the next is built.
func benchFIB(b *testing.B, v4 bool, sizes []int) {
	for _, n := range sizes {
		for _, huge := range []bool{false, true} {
			pages := map[bool]string{false: "4k", true: "2M"}[huge]
			b.Run(fmt.Sprintf("routes=%d/pages=%s", n, pages), func(b *testing.B) {
				buildSet(b, v4, n, huge).run(b)
			})
		}
	}
}

func BenchmarkRteFIB4(b *testing.B) {
	benchFIB(b, true, []int{1_000, 100_000, 1_000_000})
}

func BenchmarkRteFIB6(b *testing.B) {
	benchFIB(b, false, []int{1_000, 200_000})
}
