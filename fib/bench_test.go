package fib

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// The benchmarks look up bursts of 32 addresses (a typical rx burst),
// each iteration perIter lookups from a pool much larger than the caches.
const (
	burst   = 32
	perIter = 8192
)

// fullV4 is like an Internet table: 60% /24, 35% /16../23, 5% /25../32,
// all distinct, in unicast space.
func fullV4(n int, seed uint64) []refRoute {
	r := rand.New(rand.NewPCG(seed, 4))
	seen := make(map[netip.Prefix]bool, n)
	out := make([]refRoute, 0, n)
	for len(out) < n {
		var l int
		switch x := r.IntN(100); {
		case x < 60:
			l = 24
		case x < 95:
			l = 16 + r.IntN(8)
		default:
			l = 25 + r.IntN(8)
		}
		a := (1 + r.Uint32N(223)) << 24 // 1.0.0.0 .. 223.255.255.255
		a |= r.Uint32() >> 8
		p := netip.PrefixFrom(addr4(a), l).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, refRoute{p, 1 + r.Uint32N(MaxNextHop)})
		}
	}
	return out
}

// fullV6 clusters routes under 25k allocations in 2000::/3, as in the
// IPv6 Internet table: /32 allocations, /48 sites numbered from the
// bottom of their allocation, some /56, /64, /40s and /128s.
func fullV6(n int, seed uint64) []refRoute {
	r := rand.New(rand.NewPCG(seed, 6))
	allocs := make([]uint64, 25000)
	for i := range allocs {
		allocs[i] = (1<<61 | r.Uint64N(1<<61)) &^ (1<<32 - 1) // a /32 in 2000::/3
	}
	seen := make(map[netip.Prefix]bool, n)
	out := make([]refRoute, 0, n)
	for len(out) < n {
		hi := allocs[r.IntN(len(allocs))]
		site := r.Uint64N(512) << 16 // the /48 within the /32
		var lo uint64
		var l int
		switch x := r.IntN(100); {
		case x < 10:
			l = 32
		case x < 60:
			hi, l = hi|site, 48
		case x < 75:
			hi, l = hi|site|r.Uint64N(256)<<8, 56
		case x < 85:
			hi, l = hi|site|r.Uint64N(1<<16), 64
		case x < 90:
			hi, l = hi|site, 33+r.IntN(15)
		case x < 95:
			hi, lo, l = hi|site|r.Uint64N(1<<16), r.Uint64(), 128
		default:
			hi, l = hi|r.Uint64N(1<<32), 33+r.IntN(31)
		}
		p := netip.PrefixFrom(addr6(hi, lo), l).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, refRoute{p, 1 + r.Uint32N(MaxNextHop)})
		}
	}
	return out
}

type benchSet struct {
	tab    *Table
	routes []refRoute
	a4     []uint32
	hi, lo []uint64
	build  time.Duration
}

// benchSets caches tables across the runs the framework makes.
var benchSets = map[string]*benchSet{}

// pageNames are the sub-benchmarks' memory: the Go heap's 4 KiB pages,
// or 2 MiB pages as in DPDK memory.
var pageNames = map[bool]string{false: "4k", true: "2M"}

func benchTable(b *testing.B, family Family, n int, c Config, huge bool) *benchSet {
	name := fmt.Sprintf("%v/%d/%v", family, n, huge)
	if s := benchSets[name]; s != nil {
		return s
	}
	s := &benchSet{tab: newBenchTable(b, c, family, huge)}
	gen := fullV4
	if family == V6 {
		gen = fullV6
	}
	s.routes = gen(n, 1)
	start := time.Now()
	for _, x := range s.routes {
		if err := s.tab.Add(x.p, x.nh); err != nil {
			b.Fatalf("Add(%v): %v (stats %+v)", x.p, err, s.tab.Stats())
		}
	}
	s.build = time.Since(start)
	// Addresses inside random routes.
	r := rand.New(rand.NewPCG(2, 2))
	const pool = 1 << 20
	for range pool {
		a := inside(r, s.routes[r.IntN(len(s.routes))].p)
		if family == V4 {
			s.a4 = append(s.a4, u32(a))
		} else {
			h, l := u128(a)
			s.hi, s.lo = append(s.hi, h), append(s.lo, l)
		}
	}
	st := s.tab.Stats()
	b.Logf("%v %d routes, %s pages: built in %v (%.0f adds/s), %d groups used, footprint %d MiB (%d MiB touched)",
		family, n, pageNames[huge], s.build.Round(time.Millisecond), float64(n)/s.build.Seconds(), st.GroupsUsed,
		st.Bytes>>20, (1<<c.FirstBits+st.GroupsUsed*groupSize)*4>>20)
	benchSets[name] = s
	return s
}

func BenchmarkLookupBatch4(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		for _, huge := range []bool{false, true} {
			b.Run(fmt.Sprintf("routes=%d/pages=%s", n, pageNames[huge]), func(b *testing.B) {
				s := benchTable(b, V4, n, Config{FirstBits: 24, Groups: 1 << 16}, huge)
				nh := make([]uint32, burst)
				var scratch Scratch4 // as a worker keeps one
				pos := 0
				for b.Loop() {
					for range perIter / burst {
						if pos+burst > len(s.a4) {
							pos = 0
						}
						s.tab.LookupBatch4(s.a4[pos:pos+burst], nh, &scratch)
						pos += burst
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perIter), "ns/lookup")
			})
		}
	}
}

// BenchmarkLookup4 is the unbatched loop, for comparison.
func BenchmarkLookup4(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		for _, huge := range []bool{false, true} {
			b.Run(fmt.Sprintf("routes=%d/pages=%s", n, pageNames[huge]), func(b *testing.B) {
				s := benchTable(b, V4, n, Config{FirstBits: 24, Groups: 1 << 16}, huge)
				nh := make([]uint32, burst)
				pos := 0
				for b.Loop() {
					for range perIter / burst {
						if pos+burst > len(s.a4) {
							pos = 0
						}
						for i, a := range s.a4[pos : pos+burst] {
							nh[i] = s.tab.Lookup4(a)
						}
						pos += burst
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perIter), "ns/lookup")
			})
		}
	}
}

// BenchmarkLookupBatch6 looks up addresses inside random routes, where
// a memo rarely answers (it costs its checks and what it learns), and,
// as "subnets", hosts of 16 routed /64s (a fabric's racks) among the same
// routes, where it answers nearly every lookup.
func BenchmarkLookupBatch6(b *testing.B) {
	for _, n := range []int{1_000, 200_000} {
		for _, huge := range []bool{false, true} {
			for _, memo := range []bool{false, true} {
				b.Run(fmt.Sprintf("routes=%d/pages=%s/memo=%v", n, pageNames[huge], memo), func(b *testing.B) {
					s := benchTable(b, V6, n, Config{FirstBits: 24, Groups: 1 << 19}, huge)
					benchBatch6(b, s.tab, s.hi, s.lo, memo)
				})
			}
		}
	}
	for _, memo := range []bool{false, true} {
		b.Run(fmt.Sprintf("subnets/memo=%v", memo), func(b *testing.B) {
			s := benchTable(b, V6, 1_000, Config{FirstBits: 24, Groups: 1 << 19}, true)
			r := rand.New(rand.NewPCG(5, 5))
			var nets []netip.Prefix
			for range 16 {
				p := netip.PrefixFrom(addr6(0xfd00<<48|r.Uint64N(1<<32), 0), 64)
				nets = append(nets, p)
				if err := s.tab.Add(p, 1+r.Uint32N(100)); err != nil {
					b.Fatal(err)
				}
			}
			defer func() {
				for _, p := range nets {
					s.tab.Delete(p)
				}
			}()
			hi, lo := make([]uint64, perIter), make([]uint64, perIter)
			for i := range hi {
				hi[i], lo[i] = u128(inside(r, nets[r.IntN(len(nets))]))
			}
			benchBatch6(b, s.tab, hi, lo, memo)
		})
	}
	for _, n := range []int{256, 4096, 65536} {
		for _, memo := range []bool{false, true} {
			b.Run(fmt.Sprintf("hosts=%d/memo=%v", n, memo), func(b *testing.B) { benchHosts6(b, n, memo) })
		}
	}
}

// benchHosts6 is BenchmarkLookupBatch6's host-route case: n hosts of one
// routed /64, each with a /128 of its own (fabrics that route to each
// host), among 1k random routes. Every walk goes to the last level, so
// the memo must know hosts, not one subnet; with more hosts than its
// entries it cannot know them all.
func benchHosts6(b *testing.B, n int, memo bool) {
	s := benchTable(b, V6, 1_000, Config{FirstBits: 24, Groups: 1 << 19}, true)
	r := rand.New(rand.NewPCG(6, 6))
	subnet := netip.PrefixFrom(addr6(0xfd00<<48|r.Uint64N(1<<32), 0), 64)
	routes := []netip.Prefix{subnet}
	hosts := make([]netip.Addr, n)
	for i := range hosts {
		hosts[i] = inside(r, subnet)
		routes = append(routes, netip.PrefixFrom(hosts[i], 128))
	}
	for _, p := range routes {
		if err := s.tab.Add(p, 1+r.Uint32N(100)); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, p := range routes {
			s.tab.Delete(p)
		}
		s.tab.Reclaim()
	}()
	hi, lo := make([]uint64, 1<<18), make([]uint64, 1<<18) // many passes over 65536 hosts
	for i := range hi {
		hi[i], lo[i] = u128(hosts[r.IntN(n)])
	}
	benchBatch6(b, s.tab, hi, lo, memo)
}

func benchBatch6(b *testing.B, tab *Table, hi, lo []uint64, memo bool) {
	var m *Memo
	if memo {
		m = new(Memo)
	}
	nh := make([]uint32, burst)
	pos := 0
	for b.Loop() {
		for range perIter / burst {
			if pos+burst > len(hi) {
				pos = 0
			}
			tab.LookupBatch6(hi[pos:pos+burst], lo[pos:pos+burst], nh, m)
			pos += burst
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perIter), "ns/lookup")
}

// BenchmarkAdd4 fills a table with 1M routes, 10k per iteration, and
// starts over with an empty one (not timed) when it is full.
func BenchmarkAdd4(b *testing.B) {
	const n, step = 1_000_000, 10_000
	routes := fullV4(n, 1)
	c := Config{FirstBits: 24, Groups: 1 << 16}
	tab := New(c, V4)
	pos := 0
	for b.Loop() {
		if pos == n {
			b.StopTimer()
			tab, pos = New(c, V4), 0
			b.StartTimer()
		}
		for _, x := range routes[pos : pos+step] {
			if err := tab.Add(x.p, x.nh); err != nil {
				b.Fatal(err)
			}
		}
		pos += step
	}
	b.ReportMetric(float64(b.N*step)/b.Elapsed().Seconds(), "adds/s")
}
