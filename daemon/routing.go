package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/fib"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/routing"
)

// routed is the daemon's routing state: the FIBs in DPDK memory, shared
// by the workers, and the router that keeps them.
type routed struct {
	router *routing.Router
	v4, v6 *fib.Table
	mem    []unsafe.Pointer
	stop   func()      // ends following the kernel, if it was
	pump   *kernelPump // the exception paths' transmit, if any
}

// FIBConfigs are the FIB sizes of a routed config, per family (a zero
// Config: the family has no addresses and no routes, so no table).
func FIBConfigs(cfg *config.Config) (v4, v6 fib.Config) {
	has4, has6 := false, false
	mark := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			has4, has6 = has4 || p.Addr().Is4(), has6 || !p.Addr().Is4()
		}
	}
	for _, p := range cfg.Ports {
		for _, a := range p.Addresses {
			mark(a)
		}
	}
	for _, r := range cfg.Routes {
		mark(r.Prefix)
	}
	if has4 {
		v4 = fib.Config{FirstBits: 24, Groups: cfg.Routing.IPv4Groups}
	}
	if has6 {
		v6 = fib.Config{FirstBits: 24, Groups: cfg.Routing.IPv6Groups}
	}
	return v4, v6
}

// FIBBytes is the DPDK memory a config's FIBs take.
func FIBBytes(cfg *config.Config) uint64 {
	if !cfg.Routed() {
		return 0
	}
	var n uint64
	v4, v6 := FIBConfigs(cfg)
	for _, c := range []fib.Config{v4, v6} {
		if c.FirstBits > 0 {
			n += uint64(fib.Footprint(c))
		}
	}
	return n
}

// buildRouting makes the FIBs on socket and installs the config's
// addresses, neighbours and routes.
func (d *Daemon) buildRouting(set *ports.Set, socket int) (*pipeline.RouteSpec, error) {
	cfg := d.Cfg
	rt := &routed{}
	c4, c6 := FIBConfigs(cfg)
	alloc := func(c fib.Config, fam fib.Family) (*fib.Table, error) {
		if c.FirstBits == 0 {
			return nil, nil
		}
		mem, err := dpdk.Zmalloc(fam.String()+" FIB", uintptr(fib.Footprint(c)), socket)
		if err != nil {
			return nil, fmt.Errorf("%s: [routing] %s_groups: %w", cfg.File, map[fib.Family]string{fib.V4: "ipv4", fib.V6: "ipv6"}[fam], err)
		}
		rt.mem = append(rt.mem, mem)
		return fib.NewAt(mem, c, fam), nil
	}
	var err error
	if rt.v4, err = alloc(c4, fib.V4); err != nil {
		rt.free()
		return nil, err
	}
	if rt.v6, err = alloc(c6, fib.V6); err != nil {
		rt.free()
		return nil, err
	}
	fields, _ := routing.ParseFields(cfg.Routing.Hash)
	var rports []routing.Port
	for _, p := range set.Ports {
		rp := routing.Port{ID: uint16(p.ID), Name: p.Name}
		copy(rp.MAC[:], p.MAC)
		for _, a := range p.Cfg.Addresses {
			rp.Addrs = append(rp.Addrs, netip.MustParsePrefix(a))
		}
		rports = append(rports, rp)
	}
	// Until the pipeline exists there is no worker to tell.
	publish := func(pl *routing.Plane) {
		if d.Pipe != nil {
			if err := d.Pipe.SetPlane(pl); err != nil {
				d.log.Warn("routing update", "err", err)
			}
		}
	}
	rt.router, err = routing.New(routing.Settings{Fields: fields, Seed: cfg.Routing.Seed, Symmetric: cfg.Routing.Symmetric,
		Buckets: cfg.Routing.Buckets}, rports, rt.v4, rt.v6, publish)
	if err != nil {
		rt.free()
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	for _, n := range cfg.Neighbors {
		mac, _ := net.ParseMAC(n.MAC)
		if err := rt.router.SetNeighbor(n.Port, netip.MustParseAddr(n.IP), [6]byte(mac)); err != nil {
			rt.free()
			return nil, fmt.Errorf("%s:%d: neighbor: %w", cfg.File, n.Line, err)
		}
	}
	for _, r := range cfg.Routes {
		if err := rt.router.AddRoutes([]routing.Route{StaticRoute(r)}); err != nil {
			rt.free()
			return nil, fmt.Errorf("%s:%d: route: %w", cfg.File, r.Line, err)
		}
	}
	d.route = rt
	return &pipeline.RouteSpec{V4: rt.v4, V6: rt.v6, Plane: rt.router.Plane()}, nil
}

// StaticRoute is a config route as the router takes it.
func StaticRoute(r config.Route) routing.Route {
	out := routing.Route{Prefix: netip.MustParsePrefix(r.Prefix)}
	switch r.Action {
	case "drop":
		out.Kind = routing.PathDrop
	case "local":
		out.Kind = routing.PathLocal
	default:
		out.Kind = routing.PathForward
	}
	for _, h := range r.Via {
		out.Via = append(out.Via, routing.NextHop{Port: h.Port, Gateway: netip.MustParseAddr(h.Gateway), Weight: h.Weight})
	}
	return out
}

func (rt *routed) free() {
	if rt.stop != nil {
		rt.stop()
	}
	if rt.pump != nil {
		rt.pump.free()
		rt.pump = nil
	}
	for _, m := range rt.mem {
		dpdk.FreeMem(m)
	}
	rt.mem = nil
}

// Router is the routing control plane, nil unless the config routes.
// Callers hold the daemon's lock (Do).
func (d *Daemon) Router() *routing.Router {
	if d.route == nil {
		return nil
	}
	return d.route.router
}

// FIBStats are the FIBs' own counters (nil tables: zero).
func (d *Daemon) FIBStats() (v4, v6 fib.Stats) {
	if d.route == nil {
		return
	}
	if d.route.v4 != nil {
		v4 = d.route.v4.Stats()
	}
	if d.route.v6 != nil {
		v6 = d.route.v6.Stats()
	}
	return
}

// RouteReport is the routed path's state and counters.
type RouteReport struct {
	Punts map[string]uint64 `json:"punts"` // packets handed to the kernel per reason
	// PuntTxDropped is what the exception paths' TAPs refused of them.
	PuntTxDropped uint64               `json:"punt_tx_dropped"`
	Classes       map[string]uint64    `json:"classes"` // packets per route class
	FIB           map[string]fib.Stats `json:"fib"`     // per family
	// IPv6Lookups are the IPv6 FIB lookups by how they were answered:
	// "memo" (a worker remembered the subnet) or "walk" (the trie).
	IPv6Lookups map[string]uint64 `json:"ipv6_lookups"`
	ECMP        []ECMPReport      `json:"ecmp"`
}

// ECMPReport is one ECMP group and what each member carried.
type ECMPReport struct {
	ID       uint32             `json:"id"`
	Buckets  int                `json:"buckets"`
	Routes   int                `json:"routes"`
	Prefixes []string           `json:"prefixes"`
	Members  []ECMPMemberReport `json:"members"`
}

// ECMPMemberReport is an ECMP group member's counters.
type ECMPMemberReport struct {
	Port     string `json:"port"`
	Gateway  string `json:"gateway"`
	MAC      string `json:"mac,omitempty"` // "" while unresolved
	Weight   int    `json:"weight"`
	Buckets  int    `json:"buckets"`
	Resolved bool   `json:"resolved"`
	Packets  uint64 `json:"packets"`
	Bytes    uint64 `json:"bytes"`
}

// RouteReport is the routed path's state and counters, nil unless the
// config routes.
func (d *Daemon) RouteReport() *RouteReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.routeReport()
}

// routeReport gathers the RouteReport; the daemon's lock is held.
func (d *Daemon) routeReport() *RouteReport {
	if d.route == nil {
		return nil
	}
	st := d.Pipe.RouteStats()
	rr := &RouteReport{Classes: map[string]uint64{}, FIB: map[string]fib.Stats{}, Punts: st.Punts}
	if d.route.pump != nil {
		rr.PuntTxDropped = d.route.pump.dropped()
	}
	for i, n := range st.Classes {
		rr.Classes[pipeline.RouteClassNames[i]] = n
	}
	if d.route.v6 != nil {
		rr.IPv6Lookups = map[string]uint64{"memo": st.IPv6Memo, "walk": st.IPv6Walked}
	}
	v4, v6 := d.FIBStats()
	if d.route.v4 != nil {
		rr.FIB["ipv4"] = v4
	}
	if d.route.v6 != nil {
		rr.FIB["ipv6"] = v6
	}
	for _, g := range d.route.router.Groups() {
		er := ECMPReport{ID: g.Path, Buckets: g.Buckets, Routes: g.Routes}
		for _, p := range g.Prefixes {
			er.Prefixes = append(er.Prefixes, p.String())
		}
		for _, m := range g.Members {
			mr := ECMPMemberReport{Port: m.Port, Gateway: m.Gateway.String(), MAC: m.MAC, Weight: m.Weight, Buckets: m.Buckets, Resolved: m.Resolved}
			if int(m.Adj) < len(st.Adj) {
				mr.Packets, mr.Bytes = st.Adj[m.Adj].Packets, st.Adj[m.Adj].Bytes
			}
			er.Members = append(er.Members, mr)
		}
		rr.ECMP = append(rr.ECMP, er)
	}
	return rr
}

// reloadRoutes brings the router from the running config's static routes
// and neighbours to cfg's: new and changed ones are installed, gone ones
// removed, all while forwarding. Neighbours go first, so that new routes
// find their next hops resolved, and leave last.
func (d *Daemon) reloadRoutes(cfg *config.Config) error {
	r := d.route.router
	type nkey struct{ port, ip string }
	oldN, newN := map[nkey]string{}, map[nkey]string{}
	for _, n := range d.Cfg.Neighbors {
		oldN[nkey{n.Port, n.IP}] = n.MAC
	}
	for _, n := range cfg.Neighbors {
		newN[nkey{n.Port, n.IP}] = n.MAC
	}
	for k, mac := range newN {
		if oldN[k] != mac {
			hw, _ := net.ParseMAC(mac)
			if err := r.SetNeighbor(k.port, netip.MustParseAddr(k.ip), [6]byte(hw)); err != nil {
				return err
			}
		}
	}
	oldR := map[string]config.Route{}
	for _, rt := range d.Cfg.Routes {
		oldR[rt.Prefix] = rt
	}
	var add []routing.Route
	seen := map[string]bool{}
	for _, rt := range cfg.Routes {
		seen[rt.Prefix] = true
		if o, ok := oldR[rt.Prefix]; !ok || !sameRoute(o, rt) {
			add = append(add, StaticRoute(rt))
		}
	}
	var del []netip.Prefix
	for p := range oldR {
		if !seen[p] {
			del = append(del, netip.MustParsePrefix(p))
		}
	}
	if len(add) > 0 {
		if err := r.AddRoutes(add); err != nil {
			return err
		}
	}
	if len(del) > 0 {
		if err := r.DeleteRoutes(del); err != nil {
			return err
		}
	}
	for k := range oldN {
		if _, ok := newN[k]; !ok {
			if err := r.DeleteNeighbor(k.port, netip.MustParseAddr(k.ip)); err != nil {
				return err
			}
		}
	}
	return nil
}

func sameRoute(a, b config.Route) bool {
	if a.Action != b.Action || len(a.Via) != len(b.Via) {
		return false
	}
	for i := range a.Via {
		if a.Via[i] != b.Via[i] {
			return false
		}
	}
	return true
}
