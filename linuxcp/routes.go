package linuxcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Hop is a kernel route's next hop through an exception-path interface.
type Hop struct {
	Port    string
	Gateway netip.Addr
	Weight  int
}

// RouteChange is one kernel route of the followed table appearing,
// changing (the whole route: all its next hops) or going (Gone).
type RouteChange struct {
	Prefix    netip.Prefix
	Hops      []Hop
	Blackhole bool // a blackhole, unreachable or prohibit route: dropped
	Gone      bool
	// Resync starts a full dump after notifications were lost (the
	// kernel's queue overflowed): every route that is not in it, up to
	// the change with Synced, is gone.
	Resync, Synced bool
}

// rcvbuf is the netlink receive buffer asked for: a routing daemon
// converging sends a notification per route, 100k and more at once.
const rcvbuf = 256 << 20

// FollowRoutes reports the routes of the kernel's table (254 is main)
// that go through the interfaces, then every change until ctx ends. A
// route with a next hop through another interface, or without a
// gateway (a connected subnet: roce-fwd has it from the port's
// addresses), is reported as gone, so that a route moving off the
// exception path is withdrawn. It returns once the initial dump has been
// reported.
func FollowRoutes(ctx context.Context, ifcs []Interface, table int, update func(RouteChange), onErr func(error)) error {
	ports := map[int]string{}
	for _, ifc := range ifcs {
		link, err := netlink.LinkByName(ifc.Name)
		if err != nil {
			return fmt.Errorf("exception path %s: %w", ifc.Name, err)
		}
		ports[link.Attrs().Index] = ifc.Port
	}
	convert := func(r netlink.Route, gone bool) (RouteChange, bool) { return routeChange(r, gone, table, ports) }
	subscribe := func() (chan netlink.RouteUpdate, chan struct{}, error) {
		ch := make(chan netlink.RouteUpdate, 65536)
		done := make(chan struct{})
		err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
			ErrorCallback:          func(err error) { onErr(fmt.Errorf("route updates: %w", err)) },
			ReceiveBufferSize:      rcvbuf,
			ReceiveBufferForceSize: true,
		})
		if err != nil {
			close(done)
			return nil, nil, fmt.Errorf("route updates: %w", err)
		}
		return ch, done, nil
	}
	dump := func() error {
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rs, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
			if err != nil {
				return fmt.Errorf("routing table %d: %w", table, err)
			}
			for _, r := range rs {
				if c, ok := convert(r, false); ok && !c.Gone {
					update(c)
				}
			}
		}
		return nil
	}
	// Subscribe before the dump, so that nothing between the two is lost.
	ch, done, err := subscribe()
	if err != nil {
		return err
	}
	if err := dump(); err != nil {
		close(done)
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				close(done)
				return
			case u, ok := <-ch:
				if ok {
					if c, ok := convert(u.Route, u.Type == unix.RTM_DELROUTE); ok {
						update(c)
					}
					continue
				}
			}
			// The subscription ended (the kernel's queue overflowed):
			// subscribe again and take the whole table once more.
			close(done)
			onErr(errors.New("route updates lost: reading the whole table again"))
			for {
				if ch, done, err = subscribe(); err == nil {
					update(RouteChange{Resync: true})
					if err = dump(); err == nil {
						update(RouteChange{Synced: true})
						break
					}
					close(done)
				}
				onErr(err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	return nil
}

// routeChange is a kernel route of the table as a RouteChange; false for
// routes the data path has no business with.
func routeChange(r netlink.Route, gone bool, table int, ports map[int]string) (RouteChange, bool) {
	if r.Table != table {
		return RouteChange{}, false
	}
	var c RouteChange
	if r.Dst == nil {
		if r.Family == unix.AF_INET6 {
			c.Prefix = netip.MustParsePrefix("::/0")
		} else {
			c.Prefix = netip.MustParsePrefix("0.0.0.0/0")
		}
	} else {
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return RouteChange{}, false
		}
		ones, _ := r.Dst.Mask.Size()
		c.Prefix = netip.PrefixFrom(a.Unmap(), ones).Masked()
	}
	if c.Prefix.Addr().Is6() && c.Prefix.Addr().IsLinkLocalUnicast() || c.Prefix.Addr().IsMulticast() {
		return RouteChange{}, false
	}
	switch r.Type {
	case unix.RTN_UNICAST:
	case unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT:
		c.Blackhole, c.Gone = true, gone
		return c, true
	default:
		return RouteChange{}, false // local, broadcast, ...: the kernel's own
	}
	c.Gone = gone
	hop := func(link int, gw net.IP, via netlink.Destination, weight int) bool {
		if gw == nil {
			if v, isVia := via.(*netlink.Via); isVia {
				gw = v.Addr
			}
		}
		port, ok := ports[link]
		g, gok := netip.AddrFromSlice(gw)
		if !ok || !gok {
			return false
		}
		c.Hops = append(c.Hops, Hop{Port: port, Gateway: g.Unmap(), Weight: weight})
		return true
	}
	ok := true
	if len(r.MultiPath) > 0 {
		for _, p := range r.MultiPath {
			ok = hop(p.LinkIndex, p.Gw, p.Via, p.Hops+1) && ok
		}
	} else {
		ok = hop(r.LinkIndex, r.Gw, r.Via, 1)
	}
	if !ok || len(c.Hops) == 0 {
		c.Hops, c.Gone = nil, true // not (or no longer) a route of the exception path
	}
	return c, true
}

// DumpRoutes is the kernel table's routes through the interfaces now,
// as FollowRoutes reports them. The kernel sends no withdrawal for the
// IPv4 routes it flushes when an interface goes down: a follower reads
// the table again then.
func DumpRoutes(ifcs []Interface, table int) ([]RouteChange, error) {
	ports := map[int]string{}
	for _, ifc := range ifcs {
		link, err := netlink.LinkByName(ifc.Name)
		if err != nil {
			return nil, fmt.Errorf("exception path %s: %w", ifc.Name, err)
		}
		ports[link.Attrs().Index] = ifc.Port
	}
	var out []RouteChange
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("routing table %d: %w", table, err)
		}
		for _, r := range rs {
			if c, ok := routeChange(r, false, table, ports); ok && !c.Gone {
				out = append(out, c)
			}
		}
	}
	return out, nil
}
