package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Routing is the routed forwarding path: interface addresses on the ports
// ([[port]] addresses), static routes ([[route]]) and neighbours
// ([[neighbor]]), and how ECMP groups spread flows ([routing]). A config
// with none of them forwards port to port by [[forward]].
type Routing struct {
	// Hash is the fields an ECMP group's hash covers; HashFields lists
	// them. The default is the 5-tuple and the IPv6 flow label: a RoCEv2
	// flow's UDP source port is the entropy rdma-core derives from its QP.
	Hash      []string `toml:"hash"`
	Symmetric bool     `toml:"symmetric"` // both directions of a flow hash alike
	Seed      uint32   `toml:"seed"`      // per box, so that tiers do not polarise
	// Buckets is each ECMP group's bucket count (resilient hashing: a
	// member that goes away gives up only its own buckets).
	Buckets    int `toml:"buckets"`
	IPv4Groups int `toml:"ipv4_groups"` // FIB groups of 256 entries for prefixes longer than /24
	IPv6Groups int `toml:"ipv6_groups"` // FIB groups for IPv6 prefixes longer than /24
}

// HashFields are the names [routing] hash takes.
var HashFields = []string{"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "flow_label", "dest_qp"}

func (r *Routing) setDefaults() {
	r.Hash = []string{"src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "flow_label"}
	r.Buckets = 256
	r.IPv4Groups = 16384
	r.IPv6Groups = 65536
}

// Route is one static route: a prefix to next hops (two or more make an
// ECMP group), or dropped, or for the box itself.
type Route struct {
	Prefix string    `toml:"prefix"`
	Via    []NextHop `toml:"via,omitempty"`
	Action string    `toml:"action"` // "forward" (default), "drop" or "local"
	Line   int       `toml:"-"`
}

// NextHop is a gateway on a port, with its ECMP weight.
type NextHop struct {
	Port    string `toml:"port"`
	Gateway string `toml:"gateway"`
	Weight  int    `toml:"weight"`
}

func (h *NextHop) setDefaults() { h.Weight = 1 }

func (r *Route) setDefaults() { r.Action = "forward" }

// Neighbor is a static neighbour: the MAC address of an IP address on a
// port's subnet.
type Neighbor struct {
	Port string `toml:"port"`
	IP   string `toml:"ip"`
	MAC  string `toml:"mac"`
	Line int    `toml:"-"`
}

// Routed reports whether the config forwards by routes rather than by
// [[forward]].
func (c *Config) Routed() bool {
	if len(c.Routes) > 0 || len(c.Neighbors) > 0 {
		return true
	}
	for _, p := range c.Ports {
		if len(p.Addresses) > 0 {
			return true
		}
	}
	return false
}

func validateRouting(c *checker, cfg *Config) {
	rt := &cfg.Routing
	p := root.key("routing")
	seen := map[string]bool{}
	for i, f := range rt.Hash {
		switch {
		case !slices.Contains(HashFields, f):
			c.errorf(p.key("hash").index(i), "unknown field %q; valid: %s", f, strings.Join(HashFields, ", "))
		case seen[f]:
			c.errorf(p.key("hash").index(i), "%q is listed twice", f)
		}
		seen[f] = true
	}
	if len(rt.Hash) == 0 {
		c.errorf(p.key("hash"), "empty: an ECMP group would send every flow to one member")
	}
	if b := rt.Buckets; b < 16 || b > 4096 || b&(b-1) != 0 {
		c.errorf(p.key("buckets"), "%d: use a power of two in 16..4096", b)
	}
	c.intRange(p.key("ipv4_groups"), rt.IPv4Groups, 16, 1<<22)
	c.intRange(p.key("ipv6_groups"), rt.IPv6Groups, 16, 1<<22)

	if !cfg.Routed() {
		return
	}
	if len(cfg.Forward) > 0 {
		c.errorf(root.key("forward").index(0), "[[forward]] cannot be combined with routing (port addresses, [[route]] or [[neighbor]]): a routed config forwards by its routes")
	}
	// Interface addresses: their subnets are the connected routes, and
	// gateways and neighbours must be on one.
	subnets := make([][]netip.Prefix, len(cfg.Ports))
	owner := map[netip.Addr]string{}
	for i := range cfg.Ports {
		pt := &cfg.Ports[i]
		for j, a := range pt.Addresses {
			k := root.key("port").index(i).key("addresses").index(j)
			pf, err := netip.ParsePrefix(a)
			if err != nil {
				c.errorf(k, "%q is not an address with a prefix length like \"10.0.0.1/24\" or \"2001:db8::1/64\"", a)
				continue
			}
			if pf.Addr() == pf.Masked().Addr() && pf.Bits() < pf.Addr().BitLen()-1 {
				c.errorf(k, "%q is the subnet's own address: give the port's address within it", a)
				continue
			}
			if other, dup := owner[pf.Addr()]; dup {
				c.errorf(k, "%s is already an address of port %q", pf.Addr(), other)
				continue
			}
			owner[pf.Addr()] = pt.Name
			pf = netip.PrefixFrom(pf.Addr().Unmap(), pf.Bits())
			pt.Addresses[j] = pf.String()
			subnets[i] = append(subnets[i], pf)
		}
	}
	onSubnet := func(k path, port string, ip netip.Addr) {
		i, ok := cfg.PortByName(port)
		if !ok {
			return
		}
		for _, s := range subnets[i] {
			if s.Contains(ip) {
				return
			}
		}
		c.errorf(k, "%s is on none of port %q's subnets (%s): add an address to the port", ip, port, listPrefixes(subnets[i]))
	}
	portKey := func(k path, name string) bool {
		switch _, ok := cfg.PortByName(name); {
		case name == "":
			c.errorf(k, "missing; name a [[port]]")
		case !ok:
			c.errorf(k, "unknown port %q", name)
		default:
			return true
		}
		return false
	}
	prefixes := map[netip.Prefix]int{}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		rp := root.key("route").index(i)
		if c.failed(rp) {
			continue
		}
		pf, err := netip.ParsePrefix(r.Prefix)
		switch {
		case r.Prefix == "":
			c.errorf(rp.key("prefix"), `missing; e.g. prefix = "0.0.0.0/0"`)
		case err != nil:
			c.errorf(rp.key("prefix"), "%q is not a prefix like \"10.1.0.0/16\" or \"2001:db8::/32\"", r.Prefix)
		case pf.Masked() != pf:
			c.errorf(rp.key("prefix"), "%q has host bits set; did you mean %q?", r.Prefix, pf.Masked().String())
		default:
			if j, dup := prefixes[pf]; dup {
				c.errorf(rp.key("prefix"), "%s is already the prefix of route[%d] (line %d): give both next hops in one route's via", pf, j, cfg.Routes[j].Line)
			}
			prefixes[pf] = i
		}
		switch r.Action {
		case "forward":
			if len(r.Via) == 0 {
				c.errorf(rp.key("via"), `missing; give next hops, via = [{ port = "up0", gateway = "10.0.0.2" }], or action = "drop" or "local"`)
			}
		case "drop", "local":
			if len(r.Via) > 0 {
				c.errorf(rp.key("via"), "a %q route has no next hops", r.Action)
			}
		default:
			c.errorf(rp.key("action"), `%q: use "forward", "drop" or "local"`, r.Action)
		}
		hops := map[string]bool{}
		for j, h := range r.Via {
			hp := rp.key("via").index(j)
			if c.failed(hp) {
				continue
			}
			c.intRange(hp.key("weight"), h.Weight, 1, 256)
			ok := portKey(hp.key("port"), h.Port)
			gw, err := netip.ParseAddr(h.Gateway)
			switch {
			case h.Gateway == "":
				c.errorf(hp.key("gateway"), "missing; the next hop's IP address on the port's subnet")
				continue
			case err != nil || gw.Zone() != "":
				c.errorf(hp.key("gateway"), "%q is not an IP address", h.Gateway)
				continue
			}
			gw = gw.Unmap()
			if err == nil && pf.IsValid() && gw.Is4() != pf.Addr().Is4() {
				c.errorf(hp.key("gateway"), "%s is not of the prefix's address family", gw)
				continue
			}
			if ok {
				onSubnet(hp.key("gateway"), h.Port, gw)
			}
			id := h.Port + " " + gw.String()
			if hops[id] {
				c.errorf(hp, "next hop %s on %q is listed twice: raise its weight instead", gw, h.Port)
			}
			hops[id] = true
			r.Via[j].Gateway = gw.String()
		}
	}
	neighbors := map[string]int{}
	for i := range cfg.Neighbors {
		n := &cfg.Neighbors[i]
		np := root.key("neighbor").index(i)
		if c.failed(np) {
			continue
		}
		ok := portKey(np.key("port"), n.Port)
		ip, err := netip.ParseAddr(n.IP)
		switch {
		case n.IP == "":
			c.errorf(np.key("ip"), "missing; the neighbour's IP address")
		case err != nil || ip.Zone() != "":
			c.errorf(np.key("ip"), "%q is not an IP address", n.IP)
		default:
			ip = ip.Unmap()
			n.IP = ip.String()
			if ok {
				onSubnet(np.key("ip"), n.Port, ip)
			}
			id := n.Port + " " + n.IP
			if j, dup := neighbors[id]; dup {
				c.errorf(np.key("ip"), "%s on %q is already neighbor[%d] (line %d)", ip, n.Port, j, cfg.Neighbors[j].Line)
			}
			neighbors[id] = i
		}
		switch {
		case n.MAC == "":
			c.errorf(np.key("mac"), `missing; e.g. mac = "b8:ce:f6:00:00:01"`)
		case !macRE.MatchString(n.MAC):
			c.errorf(np.key("mac"), "%q is not a MAC address like \"b8:ce:f6:00:00:01\"", n.MAC)
		default:
			n.MAC = strings.ToLower(strings.ReplaceAll(n.MAC, "-", ":"))
		}
	}
}

func listPrefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "it has no addresses"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// String is a next hop as the console prints it.
func (h NextHop) String() string {
	s := fmt.Sprintf("%s via %s", h.Port, h.Gateway)
	if h.Weight != 1 {
		s += fmt.Sprintf(" weight %d", h.Weight)
	}
	return s
}
