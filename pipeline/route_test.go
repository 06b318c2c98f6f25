package pipeline

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"roce-fwd/fib"
	"roce-fwd/internal/testenv"
	"roce-fwd/ports"
	"roce-fwd/roce"
	"roce-fwd/routing"
)

// withRoutes routes every port's packets by an ECMP default route over
// one gateway on each of the first two ports, and polls both.
func withRoutes(t testing.TB, set *ports.Set) func(*Spec) {
	return func(s *Spec) {
		var rp []routing.Port
		for i, p := range set.Ports[:2] {
			r := routing.Port{ID: uint16(p.ID), Name: p.Name, Addrs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 1}), 24)}}
			copy(r.MAC[:], p.MAC)
			rp = append(rp, r)
		}
		v4 := fib.New(fib.Config{FirstBits: 16, Groups: 16}, fib.V4)
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
		if err := rt.AddRoutes([]routing.Route{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: routing.PathForward, Via: via}}); err != nil {
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
		m := set.Ports[0].Pool.Alloc()
		if err := m.SetData(f); err != nil {
			t.Fatal(err)
		}
		w.step.Txq[0].Push(m)
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
			for w.Poll() != 0 {
			}
			if d := w.Stats().Drops; d[DropTTLExpired] == 0 {
				t.Errorf("drops %v: the frames should have expired", d)
			}
			closeRing(t, p, set)
		})
	}
}
