package pipeline

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"roce-fwd/fib"
	"roce-fwd/internal/testenv"
	"roce-fwd/ports"
	"roce-fwd/roce"
	"roce-fwd/routing"
)

// withRoutes routes every port's packets by an ECMP default route over
// one gateway on each of the first two ports, and polls both.
func withRoutes(t testing.TB, set *ports.Set) func(*Spec) { return withRoutesSplit(t, set, false) }

// withRoutesSplit is withRoutes; with split, instead of the ECMP route,
// 20.R.0.0/28 goes to port R%2 and 20.R.0.16/28 to the other for R 0 to
// 7, so that the first half of a burst to 20.R.0.0-31 leaves by one port
// and the second half by the other, without an ECMP group in the plane.
func withRoutesSplit(t testing.TB, set *ports.Set, split bool) func(*Spec) {
	return func(s *Spec) {
		var rp []routing.Port
		for i, p := range set.Ports[:2] {
			r := routing.Port{ID: uint16(p.ID), Name: p.Name, Addrs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), 24)}}
			copy(r.MAC[:], p.MAC)
			rp = append(rp, r)
		}
		v4 := fib.New(fib.Config{FirstBits: 16, Groups: 64}, fib.V4)
		var plane *routing.Plane
		rt, err := routing.New(routing.Settings{Fields: routing.SrcIP | routing.DstIP | routing.SrcPort, Buckets: 64}, rp, v4, nil,
			func(p *routing.Plane) { plane = p })
		if err != nil {
			t.Fatal(err)
		}
		var via []routing.NextHop
		for i, p := range rp {
			gw := netip.AddrFrom4([4]byte{10, byte(i), 0, 2})
			if err := rt.SetNeighbor(p.Name, gw, [6]byte{0xb8, 0, 0, 0, 0, byte(i)}); err != nil {
				t.Fatal(err)
			}
			via = append(via, routing.NextHop{Port: p.Name, Gateway: gw, Weight: 1})
		}
		routes := []routing.Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: routing.PathForward, Via: via}}
		if split {
			routes = nil
			for r := range 8 {
				for half := range 2 {
					routes = append(routes, routing.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte(r), 0, byte(16 * half)}), 28),
						Kind: routing.PathForward, Via: via[half^r%2 : half^r%2+1]})
				}
			}
		}
		if err := rt.AddRoutes(routes); err != nil {
			t.Fatal(err)
		}
		s.Route = &RouteSpec{V4: v4, Plane: plane}
		s.Workers[0].Rx = []RxSpec{{Port: uint16(set.Ports[0].ID)}, {Port: uint16(set.Ports[1].ID)}}
	}
}

// routedFrames are 32 RoCE frames of distinct UDP source ports (so ECMP
// spreads them), valid ICRCs.
func primeRouted(t testing.TB, p *Pipeline, set *ports.Set) *Worker {
	t.Helper()
	w := p.Workers[0]
	for i, f := range testenv.Frames(32) {
		if binary.BigEndian.Uint16(f[12:]) != 0x0800 {
			continue
		}
		binary.BigEndian.PutUint16(f[34:], uint16(1000+i))
		if binary.BigEndian.Uint16(f[36:]) == 4791 {
			if err := roce.SetICRC(f); err != nil {
				t.Fatal(err)
			}
		}
		sendFrame(t, w, set, f)
	}
	w.Poll()
	return w
}

// The routed path allocates nothing per poll, in every mode, while
// bursts split over two ports.
func TestRoutedPollDoesNotAllocate(t *testing.T) {
	for _, mode := range []string{"io", "mac", "roce"} {
		t.Run(mode, func(t *testing.T) {
			cfg, set := openPorts(t, mode, "net_ring%d", "net_ring%d")
			p := newPipeline(t, cfg, set, withRoutes(t, set))
			w := primeRouted(t, p, set)
			// The frames go around until their TTL (64) runs out.
			allocs := testing.AllocsPerRun(40, func() {
				w.Poll()
				w.serveMailbox()
			})
			if allocs != 0 {
				t.Errorf("%v allocations per poll", allocs)
			}
			st := p.RouteStats()
			t.Logf("%s: %+v", mode, st)
			if st.Classes[RoutedECMP] < 40*20 || len(st.Adj) < 2 || st.Adj[0].Packets == 0 || st.Adj[1].Packets == 0 {
				t.Errorf("route stats %+v", st)
			}
			// Every packet routed to an adjacency is in its counts (which
			// packets take in turn in lanes), once.
			var sent uint64
			for _, a := range st.Adj {
				sent += a.Packets
			}
			if routed := st.Classes[RoutedForward] + st.Classes[RoutedECMP]; sent != routed {
				t.Errorf("adjacencies counted %d packets, the FIB routed %d to them", sent, routed)
			}
			for w.Poll() != 0 {
			}
			if d := w.Stats().Drops; d[DropTTLExpired] == 0 {
				t.Errorf("drops %v: the frames should have expired", d)
			}
			closeRing(t, p, set)
		})
	}
}

// TestRoutedRewriteOfEachFrame routes bursts of 32 frames, with and
// without VLAN-tagged frames among them, over a 2-way ECMP route whose
// members are two ports (so each burst splits), and checks every frame
// that comes out: the MACs of the port it left by and of that port's
// gateway, its tags as they were, its TTL one less with the header
// checksum made right, and every other byte as sent. With an egress rule
// on port 1 that sets the DSCP of every IPv4 packet, each port's share of
// a burst is read by the flow stage after routing: the frames out of
// port 1 must carry the new DSCP too, and those out of port 0 not.
func TestRoutedRewriteOfEachFrame(t *testing.T) {
	for _, c := range []struct {
		name                  string
		tagged, egress, split bool
	}{{"untagged", false, false, false}, {"some tagged", true, false, false}, {"egress rule", false, true, false},
		{"two routes", false, false, true}, {"two routes, some tagged", true, false, true}} {
		tagged := c.tagged
		t.Run(c.name, func(t *testing.T) {
			cfg, set := openPorts(t, "io", "net_ring%d", "net_ring%d")
			p := newPipeline(t, cfg, set, withRoutesSplit(t, set, c.split))
			w := p.Workers[0]
			dscp := map[int]byte{} // by port: the DSCP an egress rule sets
			if c.egress {
				id := uint16(set.Ports[1].ID)
				setFlows(t, p, id, FlowEgress, mustTable(t, fmt.Sprintf(
					"flow create %d egress pattern eth / ipv4 / udp / end actions set_ipv4_dscp dscp_value 26 / end", id)), nil)
				dscp[1] = 26
			}
			sent := map[uint16][]byte{} // by UDP source port
			offset := map[uint16]int{}  // IP header offset
			for round := range 8 {
				clear(sent)
				for i := range 32 {
					sport := uint16(1000 + round*32 + i)
					s := roce.FrameSpec{TTL: 64, SrcPort: sport, SrcIP: netip.MustParseAddr("10.9.0.1"),
						DstIP: netip.AddrFrom4([4]byte{20, byte(round), 0, byte(i)}), BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: uint32(i)}}
					if tagged && i%3 == 1 {
						s.Tags = []roce.VLANTag{{TPID: 0x8100, VID: uint16(10 + i)}}
					}
					if tagged && i%5 == 4 {
						s.Tags = []roce.VLANTag{{TPID: 0x88a8, VID: 100}, {TPID: 0x8100, VID: uint16(i)}}
					}
					f, err := s.Append(nil)
					if err != nil {
						t.Fatal(err)
					}
					sent[sport], offset[sport] = f, 14+4*len(s.Tags)
					sendFrame(t, w, set, f)
				}
				w.Poll() // sends them; port 0's ring returns them and they are routed
				w.step.Flush()
				got := map[int]int{}
				for w.step.Run() != 0 {
					for i := range w.rx {
						for _, m := range w.step.Rx(i) {
							sport := checkRewrite(t, m.Data(), i, set, sent, offset, dscp)
							// Split: the first 16 frames of a burst to port round%2, the rest to the other.
							if k := int(sport-1000) % 32; c.split && k/16^round%2 != i {
								t.Fatalf("round %d: frame %d of the burst out of port %d", round, k, i)
							}
							got[i]++
							w.step.Drop(m)
						}
					}
				}
				if got[0]+got[1] != 32 || got[0] == 0 || got[1] == 0 {
					t.Fatalf("round %d: frames out of the two ports %v, want all 32 spread over both", round, got)
				}
			}
			closeRing(t, p, set)
		})
	}
}

// TestRoutedBurstShapes routes bursts whose frames routePass takes in
// its IPv4 and IPv6 runs and in its general loop, in every order: all of
// a family, the families in turn or mixed, a frame of a run that fails
// its check (TTL 1, a bad checksum, a VLAN tag) among them, and in roce
// mode a burst with a frame the classifier dropped first. Every frame
// that may be routed comes back once, its hop count one less and its
// addresses rewritten; the others are counted under their reasons.
func TestRoutedBurstShapes(t *testing.T) {
	type kind int
	const (
		v4 kind = iota
		v6
		ttl1    // IPv4, TTL 1: dropped
		badSum  // IPv4, a wrong header checksum: dropped
		tagged  // IPv4 under a VLAN tag: routed by the general loop
		badICRC // IPv4, a wrong ICRC: dropped by the roce classifier
		hop1    // IPv6, hop limit 1: dropped
		nKinds
	)
	shapes := map[string][]kind{
		"all v4":           {v4, v4, v4, v4, v4, v4},
		"all v6":           {v6, v6, v6, v6, v6},
		"v4 then v6":       {v4, v4, v4, v6, v6, v6},
		"v6 then v4":       {v6, v6, v4, v4, v4},
		"in turn":          {v4, v6, v4, v6, v4, v6, v6, v4},
		"ttl 1 in a run":   {v4, v4, ttl1, v4, v4},
		"bad sum first":    {badSum, v4, v4, v6},
		"tag in a run":     {v4, tagged, v4, v4},
		"hop 1 in a run":   {v6, v6, hop1, v6, v4},
		"run to its end":   {v4, v4, v4, v4, v4, v4, v4, ttl1},
		"bad icrc first":   {badICRC, v4, v4, v6, v4},
		"bad icrc between": {v6, v6, badICRC, v6, v4},
	}
	for _, mode := range []string{"io", "roce"} {
		t.Run(mode, func(t *testing.T) {
			cfg, set := openPorts(t, mode, "net_ring%d")
			p := newPipeline(t, cfg, set, withHairpin(t, set))
			w := p.Workers[0]
			port := set.Ports[0]
			sport := uint16(2000)
			for name, shape := range shapes {
				if mode == "io" && slices.Contains(shape, badICRC) {
					continue // io mode does not look at the ICRC: the frame is routed
				}
				before := w.Stats().Drops
				sent := map[uint16][]byte{}
				var wantDrops [NumReasons]uint64
				for i, k := range shape {
					sport++
					s := roce.FrameSpec{TTL: 64, SrcPort: sport, BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: uint32(i)}}
					if k == v6 || k == hop1 {
						s.IPv6, s.SrcIP, s.DstIP = true, netip.MustParseAddr("fd00:2::1"), netip.AddrFrom16([16]byte{0xfd, 0, 0, 1, 14: byte(i), 15: 7})
					} else {
						s.SrcIP, s.DstIP = netip.MustParseAddr("10.2.0.1"), netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 2)})
					}
					switch k {
					case ttl1, hop1:
						s.TTL = 1
					case tagged:
						s.Tags = []roce.VLANTag{{TPID: 0x8100, VID: 7}}
					}
					f, err := s.Append(nil)
					if err != nil {
						t.Fatal(err)
					}
					switch k {
					case badSum:
						f[14+10] ^= 0x40
						wantDrops[DropIPChecksum]++
					case badICRC:
						f[len(f)-1] ^= 1
						wantDrops[DropBadICRC]++
					case ttl1, hop1:
						wantDrops[DropTTLExpired]++
					default:
						sent[sport] = f
					}
					sendFrame(t, w, set, f)
				}
				w.Poll() // sends them; the ring returns them and they are routed in one burst
				w.step.Flush()
				for w.step.Run() != 0 {
					for _, m := range w.step.Rx(0) {
						f := m.Data()
						l3 := 14
						if binary.BigEndian.Uint16(f[12:]) == 0x8100 {
							l3 = 18
						}
						v6 := f[l3]>>4 == 6
						l4 := l3 + 20
						if v6 {
							l4 = l3 + 40
						}
						sp := binary.BigEndian.Uint16(f[l4:])
						in, ok := sent[sp]
						if !ok {
							t.Fatalf("%s: frame % x came back, not one that routes, or twice", name, f)
						}
						delete(sent, sp)
						want := slices.Clone(in)
						copy(want[:6], []byte{0xb8, 0, 0, 0, 0, 9})
						copy(want[6:12], port.MAC)
						if v6 {
							want[l3+7]--
						} else {
							want[l3+8]--
							roce.IPv4(want[l3:]).SetChecksum()
						}
						if !slices.Equal(f, want) {
							t.Errorf("%s: routed\n% x\nwant\n% x", name, f, want)
						}
						w.step.Drop(m)
					}
				}
				if len(sent) != 0 {
					t.Errorf("%s: %d frames that route did not come back", name, len(sent))
				}
				after := w.Stats().Drops
				for r := range wantDrops {
					if got := after[r] - before[r]; got != wantDrops[r] {
						t.Errorf("%s: %s dropped %d, want %d", name, Reason(r), got, wantDrops[r])
					}
				}
			}
			closeRing(t, p, set)
		})
	}
}

// checkRewrite checks frame f, which left by port i of set, against the
// frame sent with its UDP source port (with the DSCP dscp[i], if any),
// and returns that port.
func checkRewrite(t *testing.T, f []byte, i int, set *ports.Set, sent map[uint16][]byte, offset map[uint16]int, dscp map[int]byte) uint16 {
	t.Helper()
	var l3 int
	for l3 = 14; binary.BigEndian.Uint16(f[l3-2:]) != 0x0800; l3 += 4 {
	}
	sport := binary.BigEndian.Uint16(f[l3+20:])
	in, ok := sent[sport]
	if !ok || offset[sport] != l3 || len(in) != len(f) {
		t.Fatalf("port %d sent % x: not a frame sent, or its tags changed", i, f)
	}
	if want := []byte{0xb8, 0, 0, 0, 0, byte(i)}; !slices.Equal(f[:6], want) || !slices.Equal(f[6:12], set.Ports[i].MAC) {
		t.Errorf("sport %d out of port %d: MACs % x, want % x from % x", sport, i, f[:12], want, []byte(set.Ports[i].MAC))
	}
	want := slices.Clone(in)
	want[l3+8]--
	if d, ok := dscp[i]; ok {
		want[l3+1] = d<<2 | want[l3+1]&3
	}
	ip := roce.IPv4(want[l3:])
	ip.SetChecksum()
	if !slices.Equal(f[12:], want[12:]) {
		t.Errorf("sport %d: sent\n% x\ngot\n% x\nwant\n% x", sport, in[12:], f[12:], want[12:])
	}
	delete(sent, sport)
	return sport
}

// withHairpin routes a port's packets out of itself: a 10.0.0.0/24 (and
// fd00:1::/64) route over one gateway of the port, among 1000 other
// prefixes, so that one net_ring port loops routed frames.
func withHairpin(t testing.TB, set *ports.Set) func(*Spec) { return withHairpinVia(t, set, false) }

// withHairpinVia is withHairpin, with ecmp every route a 2-way ECMP group
// (gateways .2 and .3 of the port's subnets, both on the port).
func withHairpinVia(t testing.TB, set *ports.Set, ecmp bool) func(*Spec) {
	return func(s *Spec) {
		p := set.Ports[0]
		rp := routing.Port{ID: uint16(p.ID), Name: p.Name, Addrs: []netip.Prefix{
			netip.MustParsePrefix("10.9.0.1/24"), netip.MustParsePrefix("fd00:9::1/64")}}
		copy(rp.MAC[:], p.MAC)
		v4 := fib.New(fib.Config{FirstBits: 24, Groups: 1 << 12}, fib.V4)
		v6 := fib.New(fib.Config{FirstBits: 24, Groups: 1 << 14}, fib.V6)
		var plane *routing.Plane
		rt, err := routing.New(routing.Settings{Fields: routing.SrcIP | routing.DstIP | routing.SrcPort, Buckets: 64},
			[]routing.Port{rp}, v4, v6, func(p *routing.Plane) { plane = p })
		if err != nil {
			t.Fatal(err)
		}
		routes := []routing.Route{}
		for _, gw := range []string{"10.9.0.2", "fd00:9::2", "10.9.0.3", "fd00:9::3"} {
			if err := rt.SetNeighbor(p.Name, netip.MustParseAddr(gw), [6]byte{0xb8, 0, 0, 0, 0, 9}); err != nil {
				t.Fatal(err)
			}
		}
		via4 := []routing.NextHop{{Port: p.Name, Gateway: netip.MustParseAddr("10.9.0.2"), Weight: 1}}
		via6 := []routing.NextHop{{Port: p.Name, Gateway: netip.MustParseAddr("fd00:9::2"), Weight: 1}}
		if ecmp {
			via4 = append(via4, routing.NextHop{Port: p.Name, Gateway: netip.MustParseAddr("10.9.0.3"), Weight: 1})
			via6 = append(via6, routing.NextHop{Port: p.Name, Gateway: netip.MustParseAddr("fd00:9::3"), Weight: 1})
		}
		routes = append(routes, routing.Route{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Kind: routing.PathForward, Via: via4},
			routing.Route{Prefix: netip.MustParsePrefix("fd00:1::/64"), Kind: routing.PathForward, Via: via6})
		for i := range 500 {
			routes = append(routes,
				routing.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte(i >> 8), byte(i), 0}), 24+i%8).Masked(), Kind: routing.PathForward, Via: via4},
				routing.Route{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, byte(i >> 8), byte(i), 15: 1}), 48+i%32).Masked(), Kind: routing.PathForward, Via: via6})
		}
		if err := rt.AddRoutes(routes); err != nil {
			t.Fatal(err)
		}
		s.Route = &RouteSpec{V4: v4, V6: v6, Plane: plane}
		s.Workers[0].Rx = []RxSpec{{Port: uint16(p.ID)}}
	}
}

// TestUnroutedReasons sends one burst mixing packets that forward with
// packets of each kind that does not, interleaved, and checks each is
// counted once under its own reason (without an exception path nothing is
// punted): a route whose gateway has no neighbour entry and a host of a
// connected subnet without one (neighbor_unresolved), a drop route
// (route_drop), the box's own address (for_us) and no route (no_route).
func TestUnroutedReasons(t *testing.T) {
	cfg, set := openPorts(t, "io", "net_ring%d")
	p := newPipeline(t, cfg, set, func(s *Spec) {
		port := set.Ports[0]
		rp := routing.Port{ID: uint16(port.ID), Name: port.Name, Addrs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}}
		copy(rp.MAC[:], port.MAC)
		v4 := fib.New(fib.Config{FirstBits: 24, Groups: 1 << 8}, fib.V4)
		var plane *routing.Plane
		rt, err := routing.New(routing.Settings{Fields: routing.SrcIP | routing.DstIP, Buckets: 64}, []routing.Port{rp}, v4, nil,
			func(p *routing.Plane) { plane = p })
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.SetNeighbor(port.Name, netip.MustParseAddr("10.9.0.2"), [6]byte{0xb8, 0, 0, 0, 0, 2}); err != nil {
			t.Fatal(err)
		}
		via := func(gw string) []routing.NextHop {
			return []routing.NextHop{{Port: port.Name, Gateway: netip.MustParseAddr(gw), Weight: 1}}
		}
		if err := rt.AddRoutes([]routing.Route{
			{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Kind: routing.PathForward, Via: via("10.9.0.2")},
			{Prefix: netip.MustParsePrefix("10.1.0.0/24"), Kind: routing.PathForward, Via: via("10.9.0.3")}, // no neighbour
			{Prefix: netip.MustParsePrefix("10.2.0.0/24"), Kind: routing.PathDrop},
		}); err != nil {
			t.Fatal(err)
		}
		s.Route = &RouteSpec{V4: v4, Plane: plane}
		s.Workers[0].Rx = []RxSpec{{Port: uint16(port.ID)}}
	})
	w := p.Workers[0]
	reasons := map[string]Reason{
		"10.0.0.7": reasonNone, "10.1.0.7": DropNeighborUnresolved, "10.9.0.5": DropNeighborUnresolved,
		"10.2.0.7": DropRouteDrop, "10.9.0.1": DropForUs, "10.3.0.7": DropNoRoute,
	}
	want := map[Reason]uint64{}
	var forwardPath uint64 // packets whose route is to a single next hop, resolved or not
	// Every kind in one burst, then a burst whose only packets that do
	// not forward have a route (to an unresolved gateway), then bursts
	// that begin with such a packet, before any packet is bound to a port.
	for _, burst := range [][]string{
		{"10.0.0.7", "10.1.0.7", "10.9.0.5", "10.2.0.7", "10.9.0.1", "10.3.0.7"},
		{"10.0.0.7", "10.1.0.7"},
		{"10.1.0.7", "10.0.0.7"},
		{"10.1.0.7"},
	} {
		for round := range 3 {
			for _, dst := range burst {
				s := roce.FrameSpec{TTL: 64, SrcIP: netip.MustParseAddr("10.8.0.1"), DstIP: netip.MustParseAddr(dst),
					SrcPort: uint16(1000 + round), BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: 5}}
				f, err := s.Append(nil)
				if err != nil {
					t.Fatal(err)
				}
				sendFrame(t, w, set, f)
				want[reasons[dst]]++
				if dst == "10.0.0.7" || dst == "10.1.0.7" {
					forwardPath++
				}
			}
		}
		w.Poll() // sends them, the ring returns them, and they are routed in one burst
		if c := p.RouteStats().Classes; c[RoutedForward] != forwardPath || c[RoutedECMP] != 0 {
			t.Errorf("route classes %v, want %d forward and no ecmp", c, forwardPath)
		}
		var sent uint64
		for _, a := range p.RouteStats().Adj {
			sent += a.Packets
		}
		if sent != want[reasonNone] {
			t.Errorf("sent %d to next hops, want %d", sent, want[reasonNone])
		}
		drops := w.Stats().Drops
		for r, n := range want {
			if r != reasonNone && drops[r] != n {
				t.Errorf("%s: %d drops, want %d", r, drops[r], n)
			}
		}
		drainRing(w) // what was sent comes back: not routed again
	}
	closeRing(t, p, set)
}

// TestECMPMemberOfEachFlow routes RoCEv2 frames one at a time over a
// 2-way ECMP default route (IPv4 and IPv6) hashed on every field, and
// checks each goes to the member that the group's hash of the flow, built
// from the frame's spec rather than read from its bytes, picks.
func TestECMPMemberOfEachFlow(t *testing.T) {
	// IPv4 flows are hashed as their fields are read, unless the hash is
	// symmetric: then from keys, as IPv6 flows always are.
	for _, sym := range []bool{false, true} {
		t.Run(map[bool]string{false: "asymmetric", true: "symmetric"}[sym], func(t *testing.T) { testECMPMemberOfEachFlow(t, sym) })
	}
}

func testECMPMemberOfEachFlow(t *testing.T, sym bool) {
	cfg, set := openPorts(t, "io", "net_ring%d", "net_ring%d")
	var plane *routing.Plane
	v4 := fib.New(fib.Config{FirstBits: 16, Groups: 16}, fib.V4)
	v6 := fib.New(fib.Config{FirstBits: 16, Groups: 256}, fib.V6)
	p := newPipeline(t, cfg, set, func(s *Spec) {
		var rp []routing.Port
		for i, p := range set.Ports[:2] {
			r := routing.Port{ID: uint16(p.ID), Name: p.Name, Addrs: []netip.Prefix{
				netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), 24),
				netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, byte(i), 15: 1}), 64)}}
			copy(r.MAC[:], p.MAC)
			rp = append(rp, r)
		}
		all := routing.SrcIP | routing.DstIP | routing.IPProto | routing.SrcPort | routing.DstPort | routing.FlowLabel | routing.DestQP
		rt, err := routing.New(routing.Settings{Fields: all, Seed: 7, Buckets: 64, Symmetric: sym}, rp, v4, v6, func(p *routing.Plane) { plane = p })
		if err != nil {
			t.Fatal(err)
		}
		var via4, via6 []routing.NextHop
		for i, p := range rp {
			gw4, gw6 := netip.AddrFrom4([4]byte{10, byte(i), 0, 2}), netip.AddrFrom16([16]byte{0xfd, 0, 0, byte(i), 15: 2})
			for _, gw := range []netip.Addr{gw4, gw6} {
				if err := rt.SetNeighbor(p.Name, gw, [6]byte{0xb8, 0, 0, 0, 0, byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			via4 = append(via4, routing.NextHop{Port: p.Name, Gateway: gw4, Weight: 1})
			via6 = append(via6, routing.NextHop{Port: p.Name, Gateway: gw6, Weight: 1})
		}
		if err := rt.AddRoutes([]routing.Route{
			{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: routing.PathForward, Via: via4},
			{Prefix: netip.MustParsePrefix("::/0"), Kind: routing.PathForward, Via: via6},
			{Prefix: netip.MustParsePrefix("30.0.0.0/8"), Kind: routing.PathForward, Via: via4[1:]},
		}); err != nil {
			t.Fatal(err)
		}
		s.Route = &RouteSpec{V4: v4, V6: v6, Plane: plane}
		s.Workers[0].Rx = []RxSpec{{Port: uint16(set.Ports[0].ID)}, {Port: uint16(set.Ports[1].ID)}}
	})
	w := p.Workers[0]
	drain := func() { // what was routed comes back on the rings: dropped, not routed again
		for w.step.Run() != 0 {
			for i := range w.rx {
				for _, m := range w.step.Rx(i) {
					w.step.Drop(m)
				}
			}
		}
		w.step.Flush()
	}
	// frame makes the i-th test frame, to dst's subnet (20/8, 2001:db8::/32
	// or the single next hop's 30/8), and says which adjacency the group's
	// hash of its flow picks.
	r := rand.New(rand.NewPCG(5, 5))
	frame := func(i int, six bool, dst byte) ([]byte, routing.FlowKey, uint32, roce.FrameSpec) {
		s := roce.FrameSpec{TTL: 64, SrcPort: uint16(49152 + r.IntN(16384)), FlowLabel: r.Uint32() & 0xfffff,
			BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpSendOnly, DestQP: r.Uint32() & 0xffffff}}
		k := routing.FlowKey{Proto: 17, SPort: uint32(s.SrcPort), DPort: 4791, QP: s.BTH.DestQP}
		if s.IPv6 = six; s.IPv6 {
			src, dst := [16]byte{0xfd, 0, 0, 9, 15: byte(i)}, [16]byte{0x20, 0x01, 0xd, 0xb8, 8: byte(r.Uint32()), 15: byte(r.Uint32())}
			s.SrcIP, s.DstIP = netip.AddrFrom16(src), netip.AddrFrom16(dst)
			k.S0, k.S1 = binary.BigEndian.Uint64(src[:8]), binary.BigEndian.Uint64(src[8:])
			k.D0, k.D1 = binary.BigEndian.Uint64(dst[:8]), binary.BigEndian.Uint64(dst[8:])
			k.FlowLabel = s.FlowLabel
		} else {
			src, dst := [4]byte{10, 9, 0, byte(i)}, [4]byte{dst, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
			s.SrcIP, s.DstIP = netip.AddrFrom4(src), netip.AddrFrom4(dst)
			k.S1, k.D1 = uint64(binary.BigEndian.Uint32(src[:])), uint64(binary.BigEndian.Uint32(dst[:]))
		}
		f, err := s.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		nh, _ := v4.Lookup(s.DstIP)
		if s.IPv6 {
			nh, _ = v6.Lookup(s.DstIP)
		}
		path := plane.Paths[nh]
		if path.Kind != routing.PathECMP {
			return f, k, path.Adj, s
		}
		return f, k, plane.Buckets[path.First+plane.Hash.Sum(&k)&path.Mask], s
	}
	// routed polls once (what was queued is sent, comes back on the ring
	// and is routed) and returns the packets each adjacency got.
	routed := func() []uint64 {
		var before, got []uint64
		for _, a := range p.RouteStats().Adj {
			before = append(before, a.Packets)
		}
		w.Poll()
		for a, c := range p.RouteStats().Adj {
			if a < len(before) {
				c.Packets -= before[a]
			}
			got = append(got, c.Packets)
		}
		drain()
		return got
	}
	tally := func(adjs []uint32, n int) []uint64 { // n adjacencies
		c := make([]uint64, n)
		for _, a := range adjs {
			if int(a) < n {
				c[a]++
			}
		}
		return c
	}
	// One frame a poll: each lands at its own flow's member.
	members := map[uint32]int{}
	for i := range 200 {
		f, k, want, s := frame(i, i%2 == 1, 20)
		sendFrame(t, w, set, f)
		if got := routed(); !slices.Equal(got, tally([]uint32{want}, len(got))) || int(want) >= len(got) {
			t.Fatalf("frame %d (%v -> %v, sport %d, qp %#x): adjacencies got %v, want the frame at adjacency %d", i, s.SrcIP, s.DstIP, s.SrcPort, k.QP, got, want)
		}
		members[want]++
	}
	// Frames cut short within their UDP header or BTH (the routed path
	// checks no payload length; an IPv4 frame's total length says so):
	// the flow has no QP, and no ports either when the UDP header's first
	// 4 bytes are cut, which the hash then reads as 0. Half of them would
	// land elsewhere if they were read from past the frame's end.
	for i := range 400 {
		six := i%2 == 0
		f, k, _, s := frame(i, six, 20)
		cut := i / 2 % 16 // bytes left after the IP header
		lookup := v4.Lookup
		if six {
			f, lookup = f[:14+40+cut], v6.Lookup
		} else {
			f = f[:14+20+cut]
			ip := roce.IPv4(f[14:])
			binary.BigEndian.PutUint16(ip[roce.IPv4TotalLenOffset:], uint16(20+cut))
			ip.SetChecksum()
		}
		k.QP = 0
		if cut < 4 {
			k.SPort, k.DPort = 0, 0
		}
		path := plane.Paths[func() uint32 { nh, _ := lookup(s.DstIP); return nh }()]
		want := plane.Buckets[path.First+plane.Hash.Sum(&k)&path.Mask]
		sendFrame(t, w, set, f)
		if got := routed(); !slices.Equal(got, tally([]uint32{want}, len(got))) || int(want) >= len(got) {
			t.Fatalf("frame %d cut to %d bytes: adjacencies got %v, want the frame at adjacency %d", i, len(f), got, want)
		}
	}
	// IPv4 fragments, first (more to come) or later (an offset): the
	// flow is hashed on addresses and protocol alone, as only the first
	// fragment carries the ports.
	for i := range 200 {
		f, k, _, s := frame(i, false, 20)
		ip := roce.IPv4(f[14:])
		flags := uint16(0x2000) // MF
		if i%2 == 1 {
			flags = uint16(1 + i) // an offset, the last fragment
		}
		binary.BigEndian.PutUint16(ip[6:], flags)
		ip.SetChecksum()
		k.SPort, k.DPort, k.QP = 0, 0, 0
		nh, _ := v4.Lookup(s.DstIP)
		path := plane.Paths[nh]
		want := plane.Buckets[path.First+plane.Hash.Sum(&k)&path.Mask]
		sendFrame(t, w, set, f)
		if got := routed(); !slices.Equal(got, tally([]uint32{want}, len(got))) || int(want) >= len(got) {
			t.Fatalf("fragment %d (flags %#04x): adjacencies got %v, want the frame at adjacency %d", i, flags, got, want)
		}
	}
	// Other than RoCEv2: UDP to another port (no QP), TCP (its ports, no
	// QP) and ICMP (neither), IPv4 and IPv6.
	for i := range 300 {
		f, k, _, s := frame(i, i%2 == 1, 20)
		l3, protoAt := 14, 14+9
		if s.IPv6 {
			protoAt = 14 + 6
		}
		l4 := l3 + 20
		if s.IPv6 {
			l4 = l3 + 40
		}
		k.QP = 0
		switch i % 3 {
		case 0:
			binary.BigEndian.PutUint16(f[l4+2:], 4792)
			k.DPort = 4792
		case 1:
			f[protoAt], k.Proto = 6, 6
		case 2:
			f[protoAt], k.Proto = 1, 1
			k.SPort, k.DPort = 0, 0
		}
		if !s.IPv6 {
			roce.IPv4(f[14:]).SetChecksum()
		}
		lookup := v4.Lookup
		if s.IPv6 {
			lookup = v6.Lookup
		}
		path := plane.Paths[func() uint32 { nh, _ := lookup(s.DstIP); return nh }()]
		want := plane.Buckets[path.First+plane.Hash.Sum(&k)&path.Mask]
		sendFrame(t, w, set, f)
		if got := routed(); !slices.Equal(got, tally([]uint32{want}, len(got))) || int(want) >= len(got) {
			t.Fatalf("frame %d (protocol %d, % x): adjacencies got %v, want the frame at adjacency %d", i, k.Proto, f, got, want)
		}
	}
	// Bursts of both families' ECMP frames with frames to the single next
	// hop among them, and in every other burst tagged frames: each still
	// lands at its own flow's member.
	for round := range 20 {
		var want []uint32
		for i := range 24 {
			dst := byte(20)
			if i%3 == 2 {
				dst = 30
			}
			f, _, a, _ := frame(i, i%3 == 1, dst)
			if round%2 == 1 && i%4 == 3 { // a VLAN tag: the burst's offsets are read per packet
				f = slices.Concat(f[:12], []byte{0x81, 0x00, 0x00, byte(i)}, f[12:])
			}
			want = append(want, a)
			sendFrame(t, w, set, f)
		}
		if got := routed(); !slices.Equal(got, tally(want, len(got))) || slices.Max(want) >= uint32(len(got)) {
			t.Fatalf("burst %d: adjacencies got %v, want %v", round, got, tally(want, int(slices.Max(want))+1))
		}
	}
	if len(members) != 4 { // two members per family
		t.Errorf("frames spread over adjacencies %v, want both members of each group", members)
	}
	closeRing(t, p, set)
}

// BenchmarkRoutedPoll is the routed path's cost per packet in io mode,
// and in roce mode with 2-way ECMP (classify, QP table, route, hash):
// one net_ring port looping 32 RoCE frames to distinct hosts of a routed
// subnet back to itself, each pass routed (header checks, FIB lookup,
// rewrite). Their hop limit falls by one a pass: every 250 polls the
// frames are made again (about 1% of the time; stopping the timer would
// stop the world each time).
func BenchmarkRoutedPoll(b *testing.B) {
	for _, c := range []struct {
		name, mode string
		v6, ecmp   bool
	}{{"io-ipv4", "io", false, false}, {"io-ipv6", "io", true, false}, {"io-ipv4-ecmp", "io", false, true},
		{"roce-ipv4-ecmp", "roce", false, true}, {"roce-ipv6-ecmp", "roce", true, true}} {
		v6 := c.v6
		b.Run(c.name, func(b *testing.B) {
			cfg, set := openPorts(b, c.mode, "net_ring%d")
			p := newPipeline(b, cfg, set, withHairpinVia(b, set, c.ecmp),
				func(s *Spec) { s.RoCE.VerifyICRC = false }) // off by default
			w := p.Workers[0]
			var frames [][]byte
			for i := range 32 {
				s := roce.FrameSpec{TTL: 255, SrcPort: uint16(1000 + i), BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: uint32(i)}}
				if v6 {
					s.IPv6 = true
					s.SrcIP = netip.MustParseAddr("fd00:2::1")
					s.DstIP = netip.AddrFrom16([16]byte{0xfd, 0, 0, 1, 14: byte(i), 15: 7})
				} else {
					s.SrcIP = netip.MustParseAddr("10.2.0.1")
					s.DstIP = netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 2)})
				}
				f, err := s.Append(nil)
				if err != nil {
					b.Fatal(err)
				}
				frames = append(frames, f)
			}
			prime := func() {
				drainRing(w)
				for _, f := range frames {
					sendFrame(b, w, set, f)
				}
				w.Poll() // sends them; the ring returns them
			}
			prime()
			var n, polls int
			for b.Loop() {
				if polls++; polls%250 == 0 {
					prime()
				}
				n += w.Poll()
			}
			b.StopTimer()
			if st := p.RouteStats(); st.Classes[RoutedForward]+st.Classes[RoutedECMP] < uint64(n)*9/10 {
				b.Fatalf("%d of %d packets routed", st.Classes[RoutedForward]+st.Classes[RoutedECMP], n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/packet")
			closeRing(b, p, set)
		})
	}
}

// TestIPv4Sum checks ipv4SumOK, the routed path's header checksum test,
// against the ones' complement sum of RFC 1071 over random headers,
// with their checksum set right, left random, and with a bit flipped, and
// over all-ones bytes (every fold carries).
func TestIPv4Sum(t *testing.T) {
	ref := func(h []byte) bool {
		var s uint32
		for i := 0; i < 20; i += 2 {
			s += uint32(binary.BigEndian.Uint16(h[i:]))
		}
		for s > 0xffff {
			s = s&0xffff + s>>16
		}
		return s == 0xffff
	}
	r := rand.New(rand.NewPCG(4, 4))
	h := make([]byte, 20)
	for i := range 100000 {
		for k := range h {
			h[k] = byte(r.Uint32())
		}
		if i%2 == 0 { // a right checksum
			h[10], h[11] = 0, 0
			var s uint32
			for k := 0; k < 20; k += 2 {
				s += uint32(binary.BigEndian.Uint16(h[k:]))
			}
			for s > 0xffff {
				s = s&0xffff + s>>16
			}
			binary.BigEndian.PutUint16(h[10:], ^uint16(s))
			if !ipv4SumOK(h) {
				t.Fatalf("% x: right checksum refused", h)
			}
			b := r.IntN(160)
			h[b/8] ^= 1 << (b % 8)
			if ipv4SumOK(h) {
				t.Fatalf("% x: a flipped bit passes", h)
			}
		}
		if got, want := ipv4SumOK(h), ref(h); got != want {
			t.Fatalf("% x: ipv4SumOK(h) is %v, want %v", h, got, want)
		}
	}
	for k := range h {
		h[k] = 0xff
	}
	if !ipv4SumOK(h) || !ref(h) {
		t.Fatal("all ones: the sum is 0xffff")
	}
	// Headers whose 64-bit words carry out (the end-around carries of
	// ipv4WordsSumOK): bytes 0-15 all ones, the last four each value
	// that gives a right checksum or misses it by one.
	for _, last := range []uint32{0, 1, 0xfffe, 0xffff, 0x10000, 0xfffeffff, 0xffffffff} {
		for k := range 16 {
			h[k] = 0xff
		}
		binary.BigEndian.PutUint32(h[16:], last)
		if got, want := ipv4SumOK(h), ref(h); got != want {
			t.Fatalf("% x: ipv4SumOK(h) is %v, want %v", h, got, want)
		}
	}
	// All zeros: the sum is 0, a multiple of 0xffff but not 0xffff.
	clear(h)
	if ipv4SumOK(h) || ref(h) {
		t.Fatal("all zeros passes")
	}
	// Sums that are multiples of 0xffff above it: words adding to
	// 2*0xffff (0xffff after one end-around carry) pass, and those
	// adding to 2*0xffff - 1 do not.
	for _, total := range []uint32{2 * 0xffff, 3 * 0xffff, 2*0xffff - 1} {
		clear(h)
		left := total
		for k := 0; k < 20 && left > 0; k += 2 {
			w := min(left, 0xffff)
			binary.BigEndian.PutUint16(h[k:], uint16(w))
			left -= w
		}
		if got, want := ipv4SumOK(h), ref(h); got != want || want != (total%0xffff == 0) {
			t.Fatalf("% x (words adding to %#x): ipv4SumOK %v, reference %v", h, total, got, want)
		}
	}
}

// The routed path takes the port's verdict on an IPv4 header checksum
// when the port gave one (a NIC with the IPV4_CKSUM rx offload): a header
// it found sound is not checked again, even if its checksum field is
// wrong. Without a verdict, or with a bad one, the software check decides,
// in the inline path (untagged) and in routeParse (tagged).
func TestRoutedTakesThePortsChecksumVerdict(t *testing.T) {
	const unknown, good, bad = 0, 1, 2
	cases := []struct {
		name    string
		tagged  bool
		wrong   bool // the checksum field is wrong
		verdict int
		routed  bool
	}{
		{"right, no verdict", false, false, unknown, true},
		{"wrong, no verdict", false, true, unknown, false},
		{"wrong, port says good", false, true, good, true},
		{"wrong, port says bad", false, true, bad, false},
		{"right, port says bad: software decides", false, false, bad, true},
		{"tagged, wrong, no verdict", true, true, unknown, false},
		{"tagged, wrong, port says good", true, true, good, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, set := openPorts(t, "io", "net_ring%d")
			p := newPipeline(t, cfg, set, withHairpin(t, set))
			w := p.Workers[0]
			s := roce.FrameSpec{SrcIP: netip.MustParseAddr("10.2.0.1"), DstIP: netip.MustParseAddr("10.0.0.7"),
				BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: 5}}
			if c.tagged {
				s.Tags = []roce.VLANTag{{TPID: 0x8100, VID: 10}}
			}
			f, err := s.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.wrong {
				l3 := 14 + 4*len(s.Tags)
				f[l3+10] ^= 0x5a
			}
			m := sendFrame(t, w, set, f)
			if c.verdict != unknown {
				m.SetIPv4Checksum(c.verdict == good) // before the Poll that sends it
			}
			w.Poll() // sends it, the ring returns it, and it is routed (or dropped)
			st := p.RouteStats()
			routed, dropped := st.Classes[RoutedForward] == 1, w.Stats().Drops[DropIPChecksum] == 1
			if routed != c.routed || dropped == c.routed {
				t.Errorf("routed %d, dropped for its checksum %d; want routed: %v", st.Classes[RoutedForward], w.Stats().Drops[DropIPChecksum], c.routed)
			}
			closeRing(t, p, set)
		})
	}
}

// TestSetPlaneKeepsCounts checks that a new Plane keeps what the worker
// counted per adjacency, for ids the new plane has and for ids past its
// end (an id given up may come back), and that each adjacency's tx index
// says whether it can be sent to.
func TestSetPlaneKeepsCounts(t *testing.T) {
	rs := &routeStage{txOf: []int16{0, -1, 1}}
	hdr := [12]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	rs.setPlane(&routing.Plane{Adjs: []routing.Adj{
		{Hdr: hdr, Port: 2, Resolved: true}, // tx 1
		{Port: 0, Resolved: false},          // unresolved
		{Port: 1, Resolved: true},           // no tx queue on port 1
		{Port: 7, Resolved: true},           // no such port
	}})
	want := []int16{1, adjUnresolved, adjNoTx, adjNoTx}
	for i, o := range rs.out {
		if o.tx != want[i] {
			t.Errorf("adjacency %d: tx %d, want %d", i, o.tx, want[i])
		}
	}
	if rs.out[0].hdr != hdr {
		t.Errorf("adjacency 0 writes % x, want % x", rs.out[0].hdr, hdr)
	}
	for i := range rs.out { // in a lane each, so that every lane is seen kept
		rs.out[i].packets[i%adjLanes], rs.out[i].bytes[(i+1)%adjLanes] = uint64(i+1), uint64(100*(i+1))
	}
	rs.setPlane(&routing.Plane{Adjs: []routing.Adj{{Port: 0, Resolved: true}, {Port: 0, Resolved: true}}})
	if len(rs.out) != 4 {
		t.Fatalf("%d adjacencies after a smaller plane, want the 4 counted", len(rs.out))
	}
	for i, o := range rs.out {
		if p, n := o.counts(); p != uint64(i+1) || n != uint64(100*(i+1)) {
			t.Errorf("adjacency %d: %d packets %d bytes after the swap, want %d and %d", i, p, n, i+1, 100*(i+1))
		}
	}
	if rs.out[1].tx != 0 || rs.out[2].tx != adjNoTx {
		t.Errorf("tx of adjacency 1 (resolved on port 0) %d, of 2 (gone) %d; want 0 and %d", rs.out[1].tx, rs.out[2].tx, adjNoTx)
	}
}

// hopIPv4 agrees with the TTL and checksum update written byte by byte
// (RFC 1624's HC' = HC + 0x100, end-around), for every TTL that is
// forwarded and every checksum a right header can have.
func TestHopIPv4(t *testing.T) {
	for ttl := 2; ttl < 256; ttl++ {
		for hc := 0; hc < 0xffff; hc++ {
			var h [12]byte
			h[8], h[9], h[10], h[11] = byte(ttl), 17, byte(hc>>8), byte(hc)
			hopIPv4(&h)
			c := uint32(hc) + 0x100
			c += c >> 16
			if h[8] != byte(ttl-1) || h[9] != 17 || h[10] != byte(c>>8) || h[11] != byte(c) {
				t.Fatalf("TTL %d checksum %#04x: got TTL %d protocol %d checksum %#02x%02x, want %d, %#04x",
					ttl, hc, h[8], h[9], h[10], h[11], ttl-1, c&0xffff)
			}
		}
	}
}

// ipv4Forwardable, reading the header as three words, agrees with the
// same checks made field by field, on headers with each field set at and
// around its limits and at random.
func TestIPv4Forwardable(t *testing.T) {
	ref := func(h []byte, room int) bool {
		tl := int(binary.BigEndian.Uint16(h[2:]))
		return tl >= 20 && tl <= room && h[16] < 224 && binary.BigEndian.Uint16(h[6:])&0x3fff == 0 && h[8] > 1
	}
	r := rand.New(rand.NewPCG(7, 9))
	lengths := []uint16{0, 19, 20, 21, 100, 1500, 1501, 0xffff}
	frags := []uint16{0, 0x4000, 0x8000, 0x2000, 0x0001, 0x1fff, 0x6000, 0x00ff, 0x0100}
	ttls := []byte{0, 1, 2, 64, 255}
	dsts := []byte{0, 10, 223, 224, 239, 255}
	n := 0
	for _, tl := range lengths {
		for _, fr := range frags {
			for _, ttl := range ttls {
				for _, d := range dsts {
					for range 4 {
						var h [20]byte
						for i := range h {
							h[i] = byte(r.Uint32())
						}
						h[0] = 0x45
						binary.BigEndian.PutUint16(h[2:], tl)
						binary.BigEndian.PutUint16(h[6:], fr)
						h[8], h[16] = ttl, d
						room := []int{20, 100, 1500, 0xffff}[r.IntN(4)]
						x0, x1, x2 := binary.LittleEndian.Uint64(h[0:]), binary.LittleEndian.Uint64(h[8:]), binary.LittleEndian.Uint32(h[16:])
						got, want := ipv4Forwardable(x0, x1, x2, room), ref(h[:], room)
						if got != want {
							t.Fatalf("% x with %d bytes of room: ipv4Forwardable %v, field by field %v", h, room, got, want)
						}
						if want {
							n++
						}
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no header passed: the cases test one side only")
	}
}
