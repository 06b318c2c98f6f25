package routing

import (
	"net"
	"net/netip"
	"sort"
)

// HopInfo is a next hop as the console shows it.
type HopInfo struct {
	Port     string
	Gateway  netip.Addr // invalid for a connected route
	MAC      string     // "" while unresolved
	Weight   int
	Adj      uint32
	Buckets  int // ECMP buckets it holds
	Resolved bool
}

// RouteInfo is a route as the console shows it.
type RouteInfo struct {
	Prefix netip.Prefix
	Source Source
	Kind   PathKind
	Path   uint32 // its FIB value
	Via    []HopInfo
}

// Routes lists the routes of one family (v4 true: IPv4) in prefix order:
// all of them, or those within a prefix when within is valid.
func (r *Router) Routes(v4 bool, within netip.Prefix) []RouteInfo {
	var out []RouteInfo
	for p, rt := range r.routes {
		if p.Addr().Is4() != v4 || within.IsValid() && !(within.Bits() <= p.Bits() && within.Contains(p.Addr())) {
			continue
		}
		out = append(out, r.info(rt))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Prefix, out[j].Prefix
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	return out
}

// Lookup is the route the FIB gives addr, from the control plane's copy.
func (r *Router) Lookup(addr netip.Addr) (RouteInfo, bool) {
	addr = addr.Unmap()
	t := r.table(addr)
	if t == nil {
		return RouteInfo{}, false
	}
	p, _, ok := t.Covering(addr)
	if rt, known := r.routes[p]; ok && known {
		return r.info(rt), true
	}
	return RouteInfo{}, false
}

func (r *Router) info(rt *route) RouteInfo {
	ri := RouteInfo{Prefix: rt.r.Prefix, Source: rt.source, Kind: rt.r.Kind, Path: rt.path}
	p := r.paths[rt.path]
	if p == nil {
		return ri
	}
	ri.Kind = p.kind
	if p.kind == PathGlean {
		ri.Via = []HopInfo{{Port: rt.r.Via[0].Port}}
		return ri
	}
	for m, a := range p.adjs {
		ri.Via = append(ri.Via, r.hop(a, p.weights[m], p, m))
	}
	return ri
}

func (r *Router) hop(a uint32, weight int, p *path, member int) HopInfo {
	adj := r.adjs[a]
	h := HopInfo{Port: r.ports[adj.key.port].Name, Gateway: adj.key.gw, Weight: weight, Adj: a}
	if mac, ok := r.neighbors[adj.key]; ok {
		h.MAC, h.Resolved = net.HardwareAddr(mac[:]).String(), true
	}
	for _, b := range p.buckets {
		if b == member {
			h.Buckets++
		}
	}
	return h
}

// GroupInfo is an ECMP group and the prefixes that use it.
type GroupInfo struct {
	Path     uint32
	Buckets  int
	Members  []HopInfo
	Prefixes []netip.Prefix // at most a few, for the console
	Routes   int
}

// Groups lists the ECMP groups.
func (r *Router) Groups() []GroupInfo {
	var out []GroupInfo
	for id, p := range r.paths {
		if p == nil || p.kind != PathECMP {
			continue
		}
		g := GroupInfo{Path: uint32(id), Buckets: len(p.buckets), Routes: p.refs}
		for m, a := range p.adjs {
			g.Members = append(g.Members, r.hop(a, p.weights[m], p, m))
		}
		out = append(out, g)
	}
	for p, rt := range r.routes {
		for i := range out {
			if out[i].Path == rt.path && len(out[i].Prefixes) < 4 {
				out[i].Prefixes = append(out[i].Prefixes, p)
			}
		}
	}
	for i := range out {
		sort.Slice(out[i].Prefixes, func(a, b int) bool { return out[i].Prefixes[a].String() < out[i].Prefixes[b].String() })
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// NeighborInfo is a neighbour entry.
type NeighborInfo struct {
	Port string
	IP   netip.Addr
	MAC  string
}

// Neighbors lists the neighbours by port, then address.
func (r *Router) Neighbors() []NeighborInfo {
	var out []NeighborInfo
	for k, mac := range r.neighbors {
		out = append(out, NeighborInfo{Port: r.ports[k.port].Name, IP: k.gw, MAC: net.HardwareAddr(mac[:]).String()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Port != out[j].Port {
			return out[i].Port < out[j].Port
		}
		return out[i].IP.Less(out[j].IP)
	})
	return out
}
