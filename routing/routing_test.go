package routing

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"roce-fwd/fib"
)

func TestFillWeightsAndResilience(t *testing.T) {
	b := fill(256, []int{1, 2, 1}, nil)
	count := func(b []int) map[int]int {
		c := map[int]int{}
		for _, m := range b {
			c[m]++
		}
		return c
	}
	if c := count(b); c[0] != 64 || c[1] != 128 || c[2] != 64 {
		t.Fatalf("shares %v, want 64 128 64", c)
	}
	// Member 2 goes: members 0 and 1 keep every bucket they had.
	prev := make([]int, len(b))
	for i, m := range b {
		prev[i] = m
		if m == 2 {
			prev[i] = -1
		}
	}
	after := fill(256, []int{1, 2}, prev)
	moved := 0
	for i := range b {
		if b[i] != 2 && after[i] != b[i] {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d buckets of the remaining members moved", moved)
	}
	if c := count(after); c[0] != 85 && c[0] != 86 || c[0]+c[1] != 256 {
		t.Errorf("shares after removal %v", c)
	}
}

func TestHashSpreadAndSymmetry(t *testing.T) {
	h := NewHasher(SrcIP|DstIP|IPProto|SrcPort|DstPort, 7, false)
	const flows, members = 10000, 4
	var got [members]int
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < flows; i++ {
		// RoCEv2 flows between two hosts differ only in the source port.
		k := FlowKey{S1: 0x0a000001, D1: 0x0a000102, Proto: 17, SPort: uint32(49152 + rng.IntN(16384)), DPort: 4791}
		got[h.Sum(&k)%members]++
	}
	for m, n := range got {
		if d := float64(n)/float64(flows/members) - 1; d > 0.05 || d < -0.05 {
			t.Errorf("member %d got %d of %d flows", m, n, flows)
		}
	}
	s := NewHasher(SrcIP|DstIP|SrcPort|DstPort, 7, true)
	a := FlowKey{S1: 1, D1: 2, SPort: 1000, DPort: 4791}
	r := FlowKey{S1: 2, D1: 1, SPort: 4791, DPort: 1000}
	if s.Sum(&a) != s.Sum(&r) {
		t.Error("symmetric hash differs between directions")
	}
	if h.Sum(&a) == h.Sum(&r) {
		t.Error("asymmetric hash is the same both ways (possible, but not for this pair)")
	}
	h1, h2 := NewHasher(SrcIP, 1, false), NewHasher(SrcIP, 2, false)
	if h1.Sum(&a) == h2.Sum(&a) {
		t.Error("the seed does not change the hash")
	}
}

// TestSumAll checks the burst form against each key's Sum over random
// field sets, seeds and symmetry, and both against the values the hash
// has always given (a change of the hash would move flows between
// members on an upgrade).
func TestSumAll(t *testing.T) {
	key := func(rng *rand.Rand) FlowKey {
		return FlowKey{S0: rng.Uint64(), S1: rng.Uint64(), D0: rng.Uint64(), D1: rng.Uint64(), Proto: rng.Uint32() & 0xff,
			SPort: rng.Uint32() & 0xffff, DPort: rng.Uint32() & 0xffff, FlowLabel: rng.Uint32() & 0xfffff, QP: rng.Uint32() & 0xffffff}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i, want := range []uint32{0x5be5a9a8, 0xd24093c8, 0xaaa8fd88, 0x511c2003, 0xdf795704, 0x71bbbd7f} {
		h := NewHasher(Field(rng.IntN(1<<len(FieldNames))), rng.Uint32(), i%2 == 0)
		k := key(rng)
		if got := h.Sum(&k); got != want {
			t.Errorf("key %d: %#x, want %#x", i, got, want)
		}
	}
	for i := range 2000 {
		h := NewHasher(Field(rng.IntN(1<<len(FieldNames))), rng.Uint32(), i%2 == 0)
		keys := make([]FlowKey, 1+rng.IntN(64))
		for j := range keys {
			keys[j] = key(rng)
		}
		out := make([]uint32, len(keys))
		h.SumAll(keys, out)
		for j := range keys {
			if want := h.Sum(&keys[j]); out[j] != want {
				t.Fatalf("key %d of %d: SumAll %#x, Sum %#x", j, len(keys), out[j], want)
			}
		}
	}
}

// TestSumV4 checks the IPv4 form, from the fields, against Sum of the
// same flow's key over random field sets and seeds.
func TestSumV4(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for range 20000 {
		h := NewHasher(Field(rng.IntN(1<<len(FieldNames))), rng.Uint32(), false)
		src, dst, proto := rng.Uint32(), rng.Uint32(), uint8(rng.Uint32())
		sp, dp, qp := rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffffff
		k := FlowKey{S1: uint64(src), D1: uint64(dst), Proto: uint32(proto), SPort: sp, DPort: dp, QP: qp}
		if got, want := h.SumV4(src, dst, L4Word(proto, sp<<16|dp), qp), h.Sum(&k); got != want {
			t.Fatalf("%+v: SumV4 %#x, Sum %#x", k, got, want)
		}
	}
	if sym, not := NewHasher(SrcIP, 1, true), NewHasher(SrcIP, 1, false); !sym.Symmetric() || not.Symmetric() {
		t.Error("Symmetric does not say what NewHasher was given")
	}
}

func testRouter(t *testing.T) (*Router, *[]*Plane) {
	t.Helper()
	var planes []*Plane
	ports := []Port{
		{ID: 0, Name: "up0", MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("2001:db8::1/64")}},
		{ID: 1, Name: "up1", MAC: [6]byte{2, 0, 0, 0, 0, 2}, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.1.1/24")}},
	}
	v4 := fib.New(fib.Config{FirstBits: 16, Groups: 64}, fib.V4)
	v6 := fib.New(fib.Config{FirstBits: 16, Groups: 64}, fib.V6)
	r, err := New(Settings{Fields: SrcIP | DstIP | SrcPort | DstPort, Buckets: 64}, ports, v4, v6, func(p *Plane) { planes = append(planes, p) })
	if err != nil {
		t.Fatal(err)
	}
	return r, &planes
}

// resolve follows a destination through the FIB and the plane, as a
// worker does: the adjacency, or the path kind that stopped it.
func resolve(r *Router, dst netip.Addr, k FlowKey) (PathKind, *Adj) {
	nh, _ := r.table(dst).Lookup(dst)
	pl := r.Plane()
	if int(nh) >= len(pl.Paths) || nh == 0 {
		return PathNone, nil
	}
	p := pl.Paths[nh]
	switch p.Kind {
	case PathForward:
		return p.Kind, &pl.Adjs[p.Adj]
	case PathECMP:
		return p.Kind, &pl.Adjs[pl.Buckets[p.First+pl.Hash.Sum(&k)&p.Mask]]
	}
	return p.Kind, nil
}

func TestRouterPaths(t *testing.T) {
	r, planes := testRouter(t)
	a := netip.MustParseAddr
	if k, _ := resolve(r, a("10.0.0.1"), FlowKey{}); k != PathLocal {
		t.Errorf("own address: %v", k)
	}
	if k, _ := resolve(r, a("10.0.1.7"), FlowKey{}); k != PathGlean {
		t.Errorf("connected, no neighbour: %v", k)
	}
	if k, _ := resolve(r, a("192.0.2.1"), FlowKey{}); k != PathNone {
		t.Errorf("no route: %v", k)
	}
	if err := r.AddRoutes([]Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: PathForward,
		Via: []NextHop{{Port: "up0", Gateway: a("10.0.0.2"), Weight: 1}, {Port: "up1", Gateway: a("10.0.1.2"), Weight: 1}}}}); err != nil {
		t.Fatal(err)
	}
	k, adj := resolve(r, a("192.0.2.1"), FlowKey{SPort: 1})
	if k != PathECMP || adj.Resolved {
		t.Fatalf("default route before neighbours: %v %+v", k, adj)
	}
	mac0, mac1 := [6]byte{0xb8, 0, 0, 0, 0, 2}, [6]byte{0xb8, 0, 0, 0, 1, 2}
	if err := r.SetNeighbor("up0", a("10.0.0.2"), mac0); err != nil {
		t.Fatal(err)
	}
	if err := r.SetNeighbor("up1", a("10.0.1.2"), mac1); err != nil {
		t.Fatal(err)
	}
	// 1000 flows spread over both; each adjacency has the port's MAC as
	// source and the neighbour's as destination.
	seen := map[uint16]int{}
	for i := 0; i < 1000; i++ {
		_, adj := resolve(r, a("192.0.2.1"), FlowKey{S1: 1, D1: 2, SPort: uint32(i)})
		if !adj.Resolved || [6]byte(adj.Hdr[6:]) != [6]byte{2, 0, 0, 0, 0, byte(adj.Port + 1)} {
			t.Fatalf("adjacency %+v", adj)
		}
		want := mac0
		if adj.Port == 1 {
			want = mac1
		}
		if [6]byte(adj.Hdr[:6]) != want {
			t.Fatalf("adjacency %+v: destination MAC", adj)
		}
		seen[adj.Port]++
	}
	if seen[0] < 400 || seen[1] < 400 {
		t.Errorf("spread %v", seen)
	}
	// The neighbour's host route goes to it directly.
	if k, adj := resolve(r, a("10.0.1.2"), FlowKey{}); k != PathForward || adj.Port != 1 {
		t.Errorf("neighbour host route: %v %+v", k, adj)
	}
	// A longer static route wins; deleting it gives the default back.
	more := Route{Prefix: netip.MustParsePrefix("192.0.2.0/25"), Kind: PathDrop}
	if err := r.AddRoutes([]Route{more}); err != nil {
		t.Fatal(err)
	}
	if k, _ := resolve(r, a("192.0.2.1"), FlowKey{}); k != PathDrop {
		t.Errorf("drop route: %v", k)
	}
	if err := r.DeleteRoutes([]netip.Prefix{more.Prefix}); err != nil {
		t.Fatal(err)
	}
	if k, _ := resolve(r, a("192.0.2.1"), FlowKey{}); k != PathECMP {
		t.Errorf("after delete: %v", k)
	}
	if err := r.DeleteRoutes([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}); err == nil {
		t.Error("a connected route was deleted")
	}
	if len(*planes) == 0 {
		t.Error("nothing published")
	}
}

// Removing an ECMP member moves only the flows that were on it.
func TestRouterResilientRemoval(t *testing.T) {
	r, _ := testRouter(t)
	a := netip.MustParseAddr
	gw := []netip.Addr{a("10.0.0.2"), a("10.0.0.3"), a("10.0.1.2")}
	ports := []string{"up0", "up0", "up1"}
	var via []NextHop
	for i := range gw {
		via = append(via, NextHop{Port: ports[i], Gateway: gw[i], Weight: 1})
		if err := r.SetNeighbor(ports[i], gw[i], [6]byte{0xb8, 0, 0, 0, 0, byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	def := netip.MustParsePrefix("0.0.0.0/0")
	if err := r.AddRoutes([]Route{{Prefix: def, Kind: PathForward, Via: via}}); err != nil {
		t.Fatal(err)
	}
	member := func(i int) byte {
		_, adj := resolve(r, a("198.51.100.9"), FlowKey{S1: 1, D1: 2, SPort: uint32(i)})
		return adj.Hdr[5]
	}
	before := make([]byte, 10000)
	for i := range before {
		before[i] = member(i)
	}
	if err := r.AddRoutes([]Route{{Prefix: def, Kind: PathForward, Via: via[:2]}}); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if after := member(i); before[i] != 2 && after != before[i] {
			t.Fatalf("flow %d moved from member %d to %d though its member stayed", i, before[i], after)
		} else if after == 2 {
			t.Fatalf("flow %d still on the removed member", i)
		}
	}
}
