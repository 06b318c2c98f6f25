// Package linuxcp is the Linux side of roce-fwd's exception path: it
// sets up the TAP interface of each routed port (named after the port,
// with its MAC, MTU and addresses) and follows the kernel's neighbour
// table on those interfaces through netlink, so that what the kernel
// resolves (ARP, IPv6 neighbour discovery) reaches the data path's
// adjacencies. roce-fwd writes no ARP or ND of its own: it hands those
// packets to the kernel and learns back what the kernel decides.
package linuxcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Interface is a TAP interface of the exception path and the port it
// stands for.
type Interface struct {
	Name  string // the TAP's name: the port's
	Port  string
	MTU   int // 0: leave it
	Addrs []netip.Prefix
}

// Setup gives the TAP its MTU and addresses and brings it up. Its MAC is
// the port's, set through DPDK, which owns the TAP; an address already
// there is kept.
func Setup(ifc Interface) error {
	link, err := netlink.LinkByName(ifc.Name)
	if err != nil {
		return fmt.Errorf("exception path %s: %w", ifc.Name, err)
	}
	if ifc.MTU > 0 {
		if err := netlink.LinkSetMTU(link, ifc.MTU); err != nil {
			return fmt.Errorf("exception path %s: mtu %d: %w", ifc.Name, ifc.MTU, err)
		}
	}
	for _, p := range ifc.Addrs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD // the port's address is the port's: no duplicate detection delay
		}
		if err := netlink.AddrReplace(link, a); err != nil {
			return fmt.Errorf("exception path %s: address %s: %w", ifc.Name, p, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("exception path %s: up: %w", ifc.Name, err)
	}
	return nil
}

// Neighbor is a kernel neighbour entry on an exception-path interface.
type Neighbor struct {
	Port string
	IP   netip.Addr
	MAC  net.HardwareAddr // nil: gone or failed
}

// usable reports whether the kernel's entry in this state has a MAC the
// data path may send to.
func usable(state int) bool {
	return state&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0
}

// FollowNeighbors reports the neighbours the kernel has on the interfaces
// (by name), then every change, until ctx ends: each call of update is
// one entry that appeared, changed, or went (MAC nil). It returns once
// the initial dump has been reported; errors after that go to onErr.
func FollowNeighbors(ctx context.Context, ifcs []Interface, update func(Neighbor), onErr func(error)) error {
	ports := map[int]string{}
	for _, ifc := range ifcs {
		link, err := netlink.LinkByName(ifc.Name)
		if err != nil {
			return fmt.Errorf("exception path %s: %w", ifc.Name, err)
		}
		ports[link.Attrs().Index] = ifc.Port
	}
	ch := make(chan netlink.NeighUpdate, 1024)
	done := make(chan struct{})
	// Subscribe before the dump, so that nothing between the two is lost.
	if err := netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{
		ErrorCallback: func(err error) { onErr(fmt.Errorf("neighbour updates: %w", err)) },
	}); err != nil {
		return fmt.Errorf("neighbour updates: %w", err)
	}
	report := func(n netlink.Neigh, gone bool) {
		port, ok := ports[n.LinkIndex]
		if !ok || n.IP == nil {
			return
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || ip.Is6() && ip.IsLinkLocalUnicast() || ip.IsMulticast() {
			return
		}
		nb := Neighbor{Port: port, IP: ip.Unmap()}
		if !gone && usable(n.State) && len(n.HardwareAddr) == 6 {
			nb.MAC = n.HardwareAddr
		}
		update(nb)
	}
	for idx := range ports {
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			ns, err := netlink.NeighList(idx, fam)
			if err != nil {
				close(done)
				return fmt.Errorf("neighbour table: %w", err)
			}
			for _, n := range ns {
				report(n, false)
			}
		}
	}
	follow(ctx, ch, done, "neighbour updates", onErr, func(u netlink.NeighUpdate) { report(u.Neigh, u.Type == unix.RTM_DELNEIGH) })
	return nil
}

// follow hands each update of a netlink subscription to handle, on a
// goroutine of its own, until ctx ends (then it closes done, which ends
// the subscription) or the subscription closes (reported to onErr).
func follow[T any](ctx context.Context, ch <-chan T, done chan struct{}, what string, onErr func(error), handle func(T)) {
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-ch:
				if !ok {
					onErr(fmt.Errorf("%s: netlink subscription closed", what))
					return
				}
				handle(u)
			}
		}
	}()
}

// FollowLinks reports the operational state of kernel interfaces (by
// name) as it changes, until ctx ends: update gets the interface's name
// and whether it is up (carrier and admin). The current states are
// reported first.
func FollowLinks(ctx context.Context, names []string, update func(name string, up bool), onErr func(error)) error {
	watch := map[string]bool{}
	for _, n := range names {
		watch[n] = true
	}
	ch := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) { onErr(fmt.Errorf("link updates: %w", err)) },
	}); err != nil {
		return fmt.Errorf("link updates: %w", err)
	}
	last := map[string]bool{}
	report := func(a *netlink.LinkAttrs) {
		if a == nil || !watch[a.Name] {
			return
		}
		up := a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown && a.Flags&net.FlagUp != 0
		if was, seen := last[a.Name]; !seen || was != up {
			last[a.Name] = up
			update(a.Name, up)
		}
	}
	for _, n := range names {
		link, err := netlink.LinkByName(n)
		if err != nil {
			close(done)
			return fmt.Errorf("interface %s: %w", n, err)
		}
		report(link.Attrs())
	}
	follow(ctx, ch, done, "link updates", onErr, func(u netlink.LinkUpdate) { report(u.Attrs()) })
	return nil
}

// SetUp brings an exception path's TAP up or down: down, the kernel
// withdraws the routes through it and forgets its neighbours, as it
// would for a NIC that lost its link.
func SetUp(name string, up bool) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("exception path %s: %w", name, err)
	}
	if up {
		return netlink.LinkSetUp(link)
	}
	return netlink.LinkSetDown(link)
}
