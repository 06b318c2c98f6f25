// Package routing is the control plane of roce-fwd's routed path: the
// interface addresses, static routes, neighbours and ECMP groups, kept in
// the FIB (package fib) and in a Plane, the small tables a worker reads
// after a FIB lookup.
//
// A FIB entry's value names a path: forward to one adjacency (a next hop:
// port, gateway and the Ethernet header to write), spread over an ECMP
// group's buckets, drop, deliver to the box (local) or glean (a connected
// subnet's address whose neighbour is not known). Routes with the same
// next hops share a path, so a million routes over two uplinks are a
// million FIB entries and one path.
//
// Updates keep every packet routed by either the old or the new state:
// the Plane a route will point to is published to the workers (the
// publish callback returns once every worker has it) before the FIB
// entry is written; a path, adjacency or FIB group given up is reused
// only after a later publish, by when no worker can still hold it.
package routing

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"roce-fwd/fib"
)

// PathKind is what a path does with a packet.
type PathKind uint8

const (
	PathNone    PathKind = iota // a freed path: counted as no route
	PathForward                 // to one adjacency
	PathECMP                    // to a bucket's adjacency
	PathDrop                    // a drop route
	PathLocal                   // addressed to the box
	PathGlean                   // on a connected subnet, no neighbour entry
)

func (k PathKind) String() string {
	return [...]string{"none", "forward", "ecmp", "drop", "local", "glean"}[k]
}

// Path is a FIB value's meaning, as the workers read it.
type Path struct {
	Kind  PathKind
	Adj   uint32 // PathForward
	First uint32 // PathECMP: its buckets are Plane.Buckets[First : First+Mask+1]
	Mask  uint32
}

// Adj is an adjacency: a next hop's port and the Ethernet addresses to
// write (destination, then source), once its neighbour is known.
type Adj struct {
	Hdr      [12]byte
	Port     uint16
	Resolved bool
}

// Plane is the state a worker reads after a FIB lookup: Paths by FIB
// value, adjacencies, ECMP buckets (adjacency indices) and the hash. It
// is never changed once published.
type Plane struct {
	Paths   []Path
	Adjs    []Adj
	Buckets []uint32 // the ECMP groups' tables, one after another: none without a group
	Hash    Hasher
}

// Port is a port as routing knows it.
type Port struct {
	ID    uint16
	Name  string
	MAC   [6]byte
	Addrs []netip.Prefix
}

// NextHop is a route's gateway on a port.
type NextHop struct {
	Port    string
	Gateway netip.Addr
	Weight  int
}

// Route is a prefix and what to do with it.
type Route struct {
	Prefix netip.Prefix
	Kind   PathKind // PathForward (one or more next hops), PathDrop or PathLocal
	Via    []NextHop
}

// Source says where a route came from.
type Source uint8

const (
	Static    Source = iota // config or console
	Connected               // a port address's subnet
	Address                 // a port address itself
	Neighbor                // a neighbour's host route
	Kernel                  // followed from the kernel's routing table
)

func (s Source) String() string {
	return [...]string{"static", "connected", "local", "neighbor", "kernel"}[s]
}

// Settings are the [routing] options.
type Settings struct {
	Fields    Field
	Seed      uint32
	Symmetric bool
	Buckets   int
}

type adjKey struct {
	port int
	gw   netip.Addr
}

type adjacency struct {
	key  adjKey
	refs int
}

type path struct {
	key     string
	kind    PathKind
	adjs    []uint32 // one, or the ECMP members
	weights []int
	buckets []int // ECMP: member index per bucket
	refs    int
}

type route struct {
	r      Route
	source Source
	path   uint32
}

// Router holds the routed state. Its methods are not safe for concurrent
// use: the control plane calls them under its own lock.
type Router struct {
	set       Settings
	ports     []Port
	byName    map[string]int
	v4, v6    *fib.Table
	publish   func(*Plane)
	routes    map[netip.Prefix]*route
	neighbors map[adjKey][6]byte
	paths     []*path // by id; nil: free
	pathIDs   map[string]uint32
	adjs      []*adjacency
	adjIDs    map[adjKey]uint32
	// ids given up since the last publish: free after the next one
	freePaths, freeAdjs       []uint32
	pendingPaths, pendingAdjs []uint32
	plane                     *Plane
}

// New makes a router over the two FIBs (either may be nil: that family is
// not routed), publishing each new Plane with publish, and installs the
// ports' connected and local routes.
func New(set Settings, ports []Port, v4, v6 *fib.Table, publish func(*Plane)) (*Router, error) {
	if set.Buckets < 1 || set.Buckets&(set.Buckets-1) != 0 {
		return nil, fmt.Errorf("routing: %d ECMP buckets: need a power of two", set.Buckets)
	}
	r := &Router{set: set, ports: ports, byName: map[string]int{}, v4: v4, v6: v6, publish: publish,
		routes: map[netip.Prefix]*route{}, neighbors: map[adjKey][6]byte{}, pathIDs: map[string]uint32{},
		adjIDs: map[adjKey]uint32{}}
	for i, p := range ports {
		r.byName[p.Name] = i
	}
	r.paths = append(r.paths, nil) // id 0: FIB value 0 is "no route"
	var rs []route
	for _, p := range ports {
		for _, a := range p.Addrs {
			rs = append(rs, route{r: Route{Prefix: a.Masked(), Kind: PathGlean, Via: []NextHop{{Port: p.Name}}}, source: Connected},
				route{r: Route{Prefix: netip.PrefixFrom(a.Addr(), a.Addr().BitLen()), Kind: PathLocal}, source: Address})
		}
	}
	if err := r.apply(rs, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// Plane is the state last published.
func (r *Router) Plane() *Plane { return r.plane }

// AddRoutes installs or replaces static routes, all with one publish.
func (r *Router) AddRoutes(routes []Route) error {
	rs := make([]route, len(routes))
	for i, rt := range routes {
		if err := r.check(&rt); err != nil {
			return err
		}
		rs[i] = route{r: rt, source: Static}
	}
	return r.apply(rs, nil)
}

// SyncKernel applies a batch of changes to the routes followed from the
// kernel, with one publish: add installs or replaces, del removes. A
// prefix that has a route of another source is left to it; a route that
// fails the checks (a gateway on no port's subnet) is skipped and
// reported in the error, the rest applied.
func (r *Router) SyncKernel(add []Route, del []netip.Prefix) error {
	var rs []route
	var errs []error
	for _, rt := range add {
		if err := r.check(&rt); err != nil {
			errs = append(errs, err)
			continue
		}
		if old, ok := r.routes[rt.Prefix]; ok && old.source != Kernel {
			continue
		}
		rs = append(rs, route{r: rt, source: Kernel})
	}
	var ds []netip.Prefix
	for _, p := range del {
		if old, ok := r.routes[p.Masked()]; ok && old.source == Kernel {
			ds = append(ds, p)
		}
	}
	if err := r.apply(rs, ds); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// DeleteRoutes removes static routes.
func (r *Router) DeleteRoutes(prefixes []netip.Prefix) error {
	for _, p := range prefixes {
		rt, ok := r.routes[p.Masked()]
		if !ok {
			return fmt.Errorf("no route %s", p)
		}
		if rt.source != Static {
			return fmt.Errorf("%s is a %s route: change the port's addresses or the neighbour instead", p, rt.source)
		}
	}
	return r.apply(nil, prefixes)
}

// SetNeighbor adds or changes a neighbour: its adjacencies resolve and a
// host route sends its own address to it.
func (r *Router) SetNeighbor(port string, ip netip.Addr, mac [6]byte) error {
	pi, ok := r.byName[port]
	if !ok {
		return fmt.Errorf("unknown port %q", port)
	}
	ip = ip.Unmap()
	if !r.onSubnet(pi, ip) {
		return fmt.Errorf("%s is on none of port %q's subnets", ip, port)
	}
	r.neighbors[adjKey{pi, ip}] = mac
	host := netip.PrefixFrom(ip, ip.BitLen())
	if rt, ok := r.routes[host]; ok && rt.source != Neighbor {
		return r.apply(nil, nil) // a static host route wins; the adjacency resolves
	}
	return r.apply([]route{{r: Route{Prefix: host, Kind: PathForward, Via: []NextHop{{Port: port, Gateway: ip, Weight: 1}}}, source: Neighbor}}, nil)
}

// DeleteNeighbor forgets a neighbour: its adjacencies are unresolved again.
func (r *Router) DeleteNeighbor(port string, ip netip.Addr) error {
	pi, ok := r.byName[port]
	ip = ip.Unmap()
	if _, known := r.neighbors[adjKey{pi, ip}]; !ok || !known {
		return fmt.Errorf("no neighbour %s on %q", ip, port)
	}
	delete(r.neighbors, adjKey{pi, ip})
	host := netip.PrefixFrom(ip, ip.BitLen())
	if rt, ok := r.routes[host]; ok && rt.source == Neighbor {
		return r.apply(nil, []netip.Prefix{host})
	}
	return r.apply(nil, nil)
}

func (r *Router) onSubnet(pi int, ip netip.Addr) bool {
	for _, a := range r.ports[pi].Addrs {
		if a.Masked().Contains(ip) {
			return true
		}
	}
	return false
}

// check validates a static route against the ports.
func (r *Router) check(rt *Route) error {
	if !rt.Prefix.IsValid() {
		return errors.New("invalid prefix")
	}
	rt.Prefix = rt.Prefix.Masked()
	if r.table(rt.Prefix.Addr()) == nil {
		return fmt.Errorf("%s: no %s FIB", rt.Prefix, family(rt.Prefix.Addr()))
	}
	switch rt.Kind {
	case PathForward:
		if len(rt.Via) == 0 {
			return fmt.Errorf("%s: no next hop", rt.Prefix)
		}
	case PathDrop, PathLocal:
		if len(rt.Via) > 0 {
			return fmt.Errorf("%s: a %s route has no next hops", rt.Prefix, rt.Kind)
		}
	default:
		return fmt.Errorf("%s: a route forwards, drops or is local", rt.Prefix)
	}
	for i := range rt.Via {
		h := &rt.Via[i]
		pi, ok := r.byName[h.Port]
		if !ok {
			return fmt.Errorf("%s: unknown port %q", rt.Prefix, h.Port)
		}
		h.Gateway = h.Gateway.Unmap()
		if h.Gateway.Is4() != rt.Prefix.Addr().Is4() {
			return fmt.Errorf("%s: gateway %s is of the other address family", rt.Prefix, h.Gateway)
		}
		if !r.onSubnet(pi, h.Gateway) {
			return fmt.Errorf("%s: gateway %s is on none of port %q's subnets", rt.Prefix, h.Gateway, h.Port)
		}
		if h.Weight < 1 || h.Weight > 256 {
			return fmt.Errorf("%s: weight %d out of range 1..256", rt.Prefix, h.Weight)
		}
	}
	return nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func (r *Router) table(a netip.Addr) *fib.Table {
	if a.Is4() {
		return r.v4
	}
	return r.v6
}

// apply installs routes and removes prefixes: new paths are published
// before the FIB points to them, and what was given up is freed after.
func (r *Router) apply(add []route, del []netip.Prefix) error {
	type change struct {
		prefix netip.Prefix
		id     uint32
	}
	var writes []change
	var release []uint32
	for _, nr := range add {
		id, err := r.pathFor(&nr.r)
		if err != nil {
			for _, w := range writes {
				r.unref(w.id)
			}
			return err
		}
		writes = append(writes, change{nr.r.Prefix, id})
	}
	r.publishPlane() // the new paths exist on every worker
	var firstErr error
	for i, w := range writes {
		nr := add[i]
		t := r.table(w.prefix.Addr())
		if t == nil {
			release = append(release, w.id)
			firstErr = cmpErr(firstErr, fmt.Errorf("%s: no %s FIB", w.prefix, family(w.prefix.Addr())))
			continue
		}
		if err := t.Add(w.prefix, w.id); err != nil {
			release = append(release, w.id)
			firstErr = cmpErr(firstErr, fmt.Errorf("%s: %w", w.prefix, err))
			continue
		}
		if old, ok := r.routes[w.prefix]; ok {
			release = append(release, old.path)
		}
		r.routes[w.prefix] = &route{r: nr.r, source: nr.source, path: w.id}
	}
	for _, p := range del {
		p = p.Masked()
		old, ok := r.routes[p]
		if !ok {
			continue
		}
		if err := r.table(p.Addr()).Delete(p); err != nil {
			firstErr = cmpErr(firstErr, fmt.Errorf("%s: %w", p, err))
			continue
		}
		delete(r.routes, p)
		release = append(release, old.path)
	}
	for _, id := range release {
		r.unref(id)
	}
	// Ids and FIB groups given up before the previous publish are past
	// every worker now; this publish drops the ones given up since.
	r.freePaths = append(r.freePaths, r.pendingPaths...)
	r.freeAdjs = append(r.freeAdjs, r.pendingAdjs...)
	r.pendingPaths, r.pendingAdjs = nil, nil
	if len(release) > 0 || len(del) > 0 {
		r.publishPlane()
		for _, t := range []*fib.Table{r.v4, r.v6} {
			if t != nil {
				t.Reclaim()
			}
		}
	}
	return firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// pathFor returns the id of the path rt takes, with a reference taken.
func (r *Router) pathFor(rt *Route) (uint32, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "%d", rt.Kind)
	via := slices.Clone(rt.Via)
	slices.SortFunc(via, func(a, b NextHop) int {
		if c := strings.Compare(a.Port, b.Port); c != 0 {
			return c
		}
		return a.Gateway.Compare(b.Gateway)
	})
	for _, h := range via {
		fmt.Fprintf(&key, " %s/%s/%d", h.Port, h.Gateway, h.Weight)
	}
	k := key.String()
	if id, ok := r.pathIDs[k]; ok {
		r.paths[id].refs++
		return id, nil
	}
	p := &path{key: k, kind: rt.Kind, refs: 1}
	if rt.Kind == PathForward || rt.Kind == PathGlean {
		for _, h := range via {
			if rt.Kind == PathGlean {
				break
			}
			p.adjs = append(p.adjs, r.adjFor(adjKey{r.byName[h.Port], h.Gateway}))
			p.weights = append(p.weights, h.Weight)
		}
		if len(via) > 1 {
			p.kind = PathECMP
			p.buckets = fill(r.set.Buckets, p.weights, r.previousLayout(rt.Prefix, p.adjs))
		}
	}
	var id uint32
	if n := len(r.freePaths); n > 0 {
		id, r.freePaths = r.freePaths[n-1], r.freePaths[:n-1]
		r.paths[id] = p
	} else {
		id = uint32(len(r.paths))
		if id >= 1<<23-1 {
			return 0, errors.New("too many distinct next-hop sets")
		}
		r.paths = append(r.paths, p)
	}
	r.pathIDs[k] = id
	return id, nil
}

// previousLayout is the bucket layout of the group prefix used until now,
// as indices into adjs, so that a changed group keeps its members' buckets.
func (r *Router) previousLayout(prefix netip.Prefix, adjs []uint32) []int {
	old, ok := r.routes[prefix]
	if !ok || r.paths[old.path] == nil || r.paths[old.path].kind != PathECMP {
		return nil
	}
	op := r.paths[old.path]
	out := make([]int, len(op.buckets))
	for i, m := range op.buckets {
		out[i] = slices.Index(adjs, op.adjs[m])
	}
	return out
}

func (r *Router) adjFor(k adjKey) uint32 {
	if id, ok := r.adjIDs[k]; ok {
		r.adjs[id].refs++
		return id
	}
	a := &adjacency{key: k, refs: 1}
	var id uint32
	if n := len(r.freeAdjs); n > 0 {
		id, r.freeAdjs = r.freeAdjs[n-1], r.freeAdjs[:n-1]
		r.adjs[id] = a
	} else {
		id = uint32(len(r.adjs))
		r.adjs = append(r.adjs, a)
	}
	r.adjIDs[k] = id
	return id
}

func (r *Router) unref(id uint32) {
	p := r.paths[id]
	if p.refs--; p.refs > 0 {
		return
	}
	for _, a := range p.adjs {
		if adj := r.adjs[a]; adj != nil {
			if adj.refs--; adj.refs == 0 {
				delete(r.adjIDs, adj.key)
				r.adjs[a] = nil
				r.pendingAdjs = append(r.pendingAdjs, a)
			}
		}
	}
	delete(r.pathIDs, p.key)
	r.paths[id] = nil
	r.pendingPaths = append(r.pendingPaths, id)
}

// publishPlane builds the Plane from the paths and adjacencies and hands
// it to the workers.
func (r *Router) publishPlane() {
	pl := &Plane{Paths: make([]Path, len(r.paths)), Adjs: make([]Adj, len(r.adjs)),
		Hash: NewHasher(r.set.Fields, r.set.Seed, r.set.Symmetric)}
	for id, p := range r.paths {
		if p == nil {
			continue
		}
		pp := Path{Kind: p.kind}
		switch p.kind {
		case PathForward:
			pp.Adj = p.adjs[0]
		case PathECMP:
			pp.First, pp.Mask = uint32(len(pl.Buckets)), uint32(len(p.buckets)-1)
			for _, m := range p.buckets {
				pl.Buckets = append(pl.Buckets, p.adjs[m])
			}
		}
		pl.Paths[id] = pp
	}
	for id, a := range r.adjs {
		if a == nil {
			continue
		}
		pt := &r.ports[a.key.port]
		adj := Adj{Port: pt.ID}
		copy(adj.Hdr[6:], pt.MAC[:])
		if mac, ok := r.neighbors[a.key]; ok {
			copy(adj.Hdr[:6], mac[:])
			adj.Resolved = true
		}
		pl.Adjs[id] = adj
	}
	r.plane = pl
	if r.publish != nil {
		r.publish(pl)
	}
}
