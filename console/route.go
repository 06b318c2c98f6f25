package console

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"roce-fwd/daemon"
	"roce-fwd/fib"
	"roce-fwd/pipeline"
	"roce-fwd/routing"
)

// The routed path's commands, in vppctl's words where testpmd has none:
//
//	show ip fib [<prefix>|<address>]     show ipv6 fib [...]
//	show neighbors                       show ecmp
//	route add <prefix> via <gateway> port <port> [weight <w>] [via ...]
//	route add <prefix> drop|local        route del <prefix>
//	neighbor add <port> <ip> <mac>       neighbor del <port> <ip>
func routeCommands() []*Command {
	return []*Command{
		{Syntax: "show ip fib [<rest>]", Section: "route", Help: "IPv4 routes (or the route of an address, or those within a prefix): source, kind, next hops",
			Run: func(s *Shell, w []string, j bool) (string, error) { return s.showFIB(true, w[3:], j) }},
		{Syntax: "show ipv6 fib [<rest>]", Section: "route", Help: "IPv6 routes, as show ip fib",
			Run: func(s *Shell, w []string, j bool) (string, error) { return s.showFIB(false, w[3:], j) }},
		{Syntax: "show neighbors", Section: "route", Help: "neighbour entries: port, IP, MAC",
			Run: (*Shell).showNeighbors},
		{Syntax: "show ecmp", Section: "route", Help: "ECMP groups: members, buckets, packets and bytes sent to each, share of the group",
			Run: (*Shell).showECMP},
		{Syntax: "route add|del <rest>", Section: "route", Help: "route add <prefix> via <gateway> port <port> [weight <w>] [via ...] | route add <prefix> drop|local | route del <prefix>",
			Run: (*Shell).route},
		{Syntax: "route load <rest>", Section: "route", Help: "route load <file>: add the routes of a file, one per line as after \"route add\", in batches",
			Run: (*Shell).routeLoad},
		{Syntax: "neighbor add|del <rest>", Section: "route", Help: "neighbor add <port> <ip> <mac> | neighbor del <port> <ip>",
			Run: (*Shell).neighbor},
	}
}

var errNotRouted = errors.New("not routed: the config has no port addresses, [[route]] or [[neighbor]]")

// withRouter runs f on the router under the daemon's lock.
func (s *Shell) withRouter(f func(r *routing.Router) error) error {
	var err error
	s.d.Do(func() {
		r := s.d.Router()
		if r == nil {
			err = errNotRouted
			return
		}
		err = f(r)
	})
	return err
}

type hopJSON struct {
	Port     string `json:"port"`
	Gateway  string `json:"gateway,omitempty"`
	MAC      string `json:"mac,omitempty"`
	Weight   int    `json:"weight,omitempty"`
	Buckets  int    `json:"buckets,omitempty"`
	Resolved bool   `json:"resolved"`
	Packets  uint64 `json:"packets"`
	Bytes    uint64 `json:"bytes"`
}

type routeJSON struct {
	Prefix string    `json:"prefix"`
	Source string    `json:"source"`
	Kind   string    `json:"kind"`
	Via    []hopJSON `json:"via,omitempty"`
}

func hopsJSON(hs []routing.HopInfo, st pipeline.RouteStats) []hopJSON {
	var out []hopJSON
	for _, h := range hs {
		j := hopJSON{Port: h.Port, MAC: h.MAC, Weight: h.Weight, Buckets: h.Buckets, Resolved: h.Resolved}
		if h.Gateway.IsValid() {
			j.Gateway = h.Gateway.String()
			if int(h.Adj) < len(st.Adj) {
				j.Packets, j.Bytes = st.Adj[h.Adj].Packets, st.Adj[h.Adj].Bytes
			}
		}
		out = append(out, j)
	}
	return out
}

func (s *Shell) showFIB(v4 bool, w []string, jsonOut bool) (string, error) {
	var routes []routing.RouteInfo
	var st pipeline.RouteStats
	var fs fib.Stats
	err := s.withRouter(func(r *routing.Router) error {
		st = s.d.Pipe.RouteStats()
		f4, f6 := s.d.FIBStats()
		if fs = f4; !v4 {
			fs = f6
		}
		switch {
		case len(w) == 0:
			routes = r.Routes(v4, netip.Prefix{})
		case strings.Contains(w[0], "/"):
			p, err := netip.ParsePrefix(w[0])
			if err != nil || p.Addr().Is4() != v4 {
				return fmt.Errorf("%q is not an %s prefix", w[0], map[bool]string{true: "IPv4", false: "IPv6"}[v4])
			}
			routes = r.Routes(v4, p)
		default:
			a, err := netip.ParseAddr(w[0])
			if err != nil || a.Unmap().Is4() != v4 {
				return fmt.Errorf("%q is not an %s address", w[0], map[bool]string{true: "IPv4", false: "IPv6"}[v4])
			}
			if ri, ok := r.Lookup(a); ok {
				routes = []routing.RouteInfo{ri}
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if jsonOut {
		out := []routeJSON{}
		for _, ri := range routes {
			out = append(out, routeJSON{Prefix: ri.Prefix.String(), Source: ri.Source.String(), Kind: ri.Kind.String(), Via: hopsJSON(ri.Via, st)})
		}
		j := map[string]any{"routes": out, "fib": fs, "punts": st.Punts}
		if !v4 {
			j["lookups"] = map[string]uint64{"memo": st.IPv6Memo, "walk": st.IPv6Walked}
		}
		return asJSON(j)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tSOURCE\tKIND\tNEXT HOPS")
	for _, ri := range routes {
		var hops []string
		for _, h := range hopsJSON(ri.Via, st) {
			switch {
			case h.Gateway == "":
				hops = append(hops, h.Port+" (connected)")
			default:
				mac := h.MAC
				if !h.Resolved {
					mac = "unresolved"
				}
				e := fmt.Sprintf("%s via %s [%s]", h.Port, h.Gateway, mac)
				if len(ri.Via) > 1 {
					e += fmt.Sprintf(" weight %d buckets %d", h.Weight, h.Buckets)
				}
				hops = append(hops, e)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ri.Prefix, ri.Source, ri.Kind, strings.Join(hops, "; "))
	}
	tw.Flush()
	fmt.Fprintf(&b, "%d routes in the FIB; %d of %d groups used, %d MiB\n", fs.Routes, fs.GroupsUsed, fs.GroupsUsed+fs.GroupsFree+fs.GroupsPending, fs.Bytes>>20)
	if n := st.IPv6Memo + st.IPv6Walked; !v4 && n > 0 {
		fmt.Fprintf(&b, "%d lookups, %.1f%% answered by the workers' memos of recent subnets\n", n, 100*float64(st.IPv6Memo)/float64(n))
	}
	var punts []string
	for _, r := range pipeline.Punted {
		if n := st.Punts[r.String()]; n > 0 {
			punts = append(punts, fmt.Sprintf("%s %d", r, n))
		}
	}
	if len(punts) > 0 {
		fmt.Fprintf(&b, "punted to the kernel: %s\n", strings.Join(punts, ", "))
	}
	return b.String(), nil
}

func (s *Shell) showNeighbors(_ []string, jsonOut bool) (string, error) {
	var ns []routing.NeighborInfo
	if err := s.withRouter(func(r *routing.Router) error { ns = r.Neighbors(); return nil }); err != nil {
		return "", err
	}
	if jsonOut {
		out := []map[string]string{}
		for _, n := range ns {
			out = append(out, map[string]string{"port": n.Port, "ip": n.IP.String(), "mac": n.MAC})
		}
		return asJSON(out)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tIP\tMAC")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Port, n.IP, n.MAC)
	}
	tw.Flush()
	return b.String(), nil
}

func (s *Shell) showECMP(_ []string, jsonOut bool) (string, error) {
	rr := s.d.RouteReport()
	if rr == nil {
		return "", errNotRouted
	}
	if jsonOut {
		if rr.ECMP == nil {
			rr.ECMP = []daemon.ECMPReport{}
		}
		return asJSON(rr.ECMP)
	}
	var b strings.Builder
	for _, g := range rr.ECMP {
		more := ""
		if g.Routes > len(g.Prefixes) {
			more = fmt.Sprintf(" and %d more", g.Routes-len(g.Prefixes))
		}
		fmt.Fprintf(&b, "group %d: %d buckets, %d routes (%s%s)\n", g.ID, g.Buckets, g.Routes, strings.Join(g.Prefixes, ", "), more)
		var total uint64
		for _, m := range g.Members {
			total += m.Packets
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PORT\tGATEWAY\tMAC\tWEIGHT\tBUCKETS\tPACKETS\tBYTES\tSHARE")
		for _, m := range g.Members {
			share := "-"
			if total > 0 {
				share = fmt.Sprintf("%.1f%%", 100*float64(m.Packets)/float64(total))
			}
			mac := m.MAC
			if !m.Resolved {
				mac = "unresolved"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", m.Port, m.Gateway, mac, m.Weight, m.Buckets, m.Packets, m.Bytes, share)
		}
		tw.Flush()
	}
	if len(rr.ECMP) == 0 {
		b.WriteString("no ECMP groups\n")
	}
	return b.String(), nil
}

// parseRoute reads "route add"'s words after the prefix.
func parseRoute(w []string) (routing.Route, error) {
	if len(w) < 2 {
		return routing.Route{}, errors.New("usage: route add <prefix> via <gateway> port <port> [weight <w>] [via ...] | route add <prefix> drop|local")
	}
	p, err := netip.ParsePrefix(w[0])
	if err != nil {
		return routing.Route{}, fmt.Errorf("%q is not a prefix like 10.1.0.0/16", w[0])
	}
	rt := routing.Route{Prefix: p.Masked(), Kind: routing.PathForward}
	switch w[1] {
	case "drop":
		rt.Kind = routing.PathDrop
		return rt, nil
	case "local":
		rt.Kind = routing.PathLocal
		return rt, nil
	}
	for i := 1; i < len(w); {
		if w[i] != "via" || i+3 >= len(w) || w[i+2] != "port" {
			return rt, fmt.Errorf("at %q: expected via <gateway> port <port> [weight <w>]", strings.Join(w[i:], " "))
		}
		gw, err := netip.ParseAddr(w[i+1])
		if err != nil {
			return rt, fmt.Errorf("%q is not an IP address", w[i+1])
		}
		h := routing.NextHop{Port: w[i+3], Gateway: gw, Weight: 1}
		i += 4
		if i+1 < len(w) && w[i] == "weight" {
			if h.Weight, err = strconv.Atoi(w[i+1]); err != nil {
				return rt, fmt.Errorf("weight %q is not a number", w[i+1])
			}
			i += 2
		}
		rt.Via = append(rt.Via, h)
	}
	return rt, nil
}

func (s *Shell) route(w []string, jsonOut bool) (string, error) {
	args := w[2:]
	if w[1] == "del" {
		if len(args) != 1 {
			return "", errors.New("usage: route del <prefix>")
		}
		p, err := netip.ParsePrefix(args[0])
		if err != nil {
			return "", fmt.Errorf("%q is not a prefix", args[0])
		}
		if err := s.withRouter(func(r *routing.Router) error { return r.DeleteRoutes([]netip.Prefix{p}) }); err != nil {
			return "", err
		}
		return ok(jsonOut, "Route "+p.Masked().String()+" deleted")
	}
	rt, err := parseRoute(args)
	if err != nil {
		return "", err
	}
	if err := s.withRouter(func(r *routing.Router) error { return r.AddRoutes([]routing.Route{rt}) }); err != nil {
		return "", err
	}
	return ok(jsonOut, "Route "+rt.Prefix.String()+" added")
}

// routeBatch is how many routes route load adds under one hold of the
// daemon's lock: each batch is one publish to the workers.
const routeBatch = 10000

func (s *Shell) routeLoad(w []string, jsonOut bool) (string, error) {
	if len(w) != 3 {
		return "", errors.New("usage: route load <file>")
	}
	data, err := os.ReadFile(w[2])
	if err != nil {
		return "", err
	}
	var routes []routing.Route
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rt, err := parseRoute(f)
		if err != nil {
			return "", fmt.Errorf("%s:%d: %w", w[2], i+1, err)
		}
		routes = append(routes, rt)
	}
	start := time.Now()
	for len(routes) > 0 {
		n := min(len(routes), routeBatch)
		if err := s.withRouter(func(r *routing.Router) error { return r.AddRoutes(routes[:n]) }); err != nil {
			return "", err
		}
		routes = routes[n:]
	}
	d := time.Since(start)
	n := strings.Count(string(data), "\n")
	msg := fmt.Sprintf("Routes of %s added in %v", w[2], d.Round(time.Millisecond))
	if jsonOut {
		return asJSON(map[string]any{"ok": true, "message": msg, "seconds": d.Seconds(), "lines": n})
	}
	return msg + "\n", nil
}

func (s *Shell) neighbor(w []string, jsonOut bool) (string, error) {
	args := w[2:]
	if len(args) < 2 {
		return "", errors.New("usage: neighbor add <port> <ip> <mac> | neighbor del <port> <ip>")
	}
	ip, err := netip.ParseAddr(args[1])
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", args[1])
	}
	if w[1] == "del" {
		if err := s.withRouter(func(r *routing.Router) error { return r.DeleteNeighbor(args[0], ip) }); err != nil {
			return "", err
		}
		return ok(jsonOut, fmt.Sprintf("Neighbor %s on %s deleted", ip, args[0]))
	}
	if len(args) != 3 {
		return "", errors.New("usage: neighbor add <port> <ip> <mac>")
	}
	mac, err := net.ParseMAC(args[2])
	if err != nil || len(mac) != 6 {
		return "", fmt.Errorf("%q is not a MAC address", args[2])
	}
	if err := s.withRouter(func(r *routing.Router) error { return r.SetNeighbor(args[0], ip, [6]byte(mac)) }); err != nil {
		return "", err
	}
	return ok(jsonOut, fmt.Sprintf("Neighbor %s on %s is %s", ip, args[0], mac))
}
