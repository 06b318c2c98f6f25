package daemon

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/linuxcp"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/routing"
)

type routingNeighbor = routing.NeighborInfo

// portsConfig is the config the port set opens: the file's ports and
// the exception paths' TAP ports.
func portsConfig(cfg *config.Config) *config.Config {
	if len(cfg.KernelPorts()) == 0 {
		return cfg
	}
	out := *cfg
	out.Ports = cfg.PortsWithKernel()
	return &out
}

// setUpKernel gives each exception path's TAP its port's MAC, MTU and
// addresses, and returns the port → TAP map for the pipeline.
func (d *Daemon) setUpKernel(set *ports.Set) (map[uint16]uint16, []linuxcp.Interface, error) {
	m := map[uint16]uint16{}
	var ifcs []linuxcp.Interface
	for _, i := range d.Cfg.KernelPorts() {
		pc := d.Cfg.Ports[i]
		phys, _ := set.ByName(pc.Name)
		tap, ok := set.ByName(pc.Name + config.KernelSuffix)
		if phys == nil || !ok {
			return nil, nil, fmt.Errorf("%s:%d: port %s: its exception path did not come up", d.Cfg.File, pc.Line, pc.Name)
		}
		if err := tap.ID.SetMAC(phys.MAC); err != nil {
			return nil, nil, fmt.Errorf("port %s: exception path: %w", pc.Name, err)
		}
		tap.MAC = phys.MAC
		ifc := linuxcp.Interface{Name: pc.Name, Port: pc.Name, MTU: pc.MTU}
		if ifc.MTU == 0 {
			ifc.MTU, _ = phys.ID.MTU()
		}
		for _, a := range pc.Addresses {
			ifc.Addrs = append(ifc.Addrs, netip.MustParsePrefix(a))
		}
		if err := linuxcp.Setup(ifc); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: port %s: %w", d.Cfg.File, pc.Line, pc.Name, err)
		}
		m[uint16(phys.ID)] = uint16(tap.ID)
		ifcs = append(ifcs, ifc)
		d.log.Info("exception path up", "port", pc.Name, "tap", pc.Name, "mac", phys.MAC.String(), "addresses", pc.Addresses)
	}
	return m, ifcs, nil
}

// followKernel keeps the router's neighbours in step with the kernel's on
// the exception-path interfaces, until the daemon shuts down.
func (d *Daemon) followKernel(ifcs []linuxcp.Interface) error {
	if len(ifcs) == 0 || d.route == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan linuxcp.Neighbor, 4096)
	static := map[string]bool{}
	for _, n := range d.Cfg.Neighbors {
		static[n.Port+" "+n.IP] = true
	}
	err := linuxcp.FollowNeighbors(ctx, ifcs, func(n linuxcp.Neighbor) {
		select {
		case updates <- n:
		case <-ctx.Done():
		}
	}, func(err error) { d.log.Warn("exception path", "err", err) })
	if err != nil {
		cancel()
		return err
	}
	d.route.stop = cancel
	if d.Cfg.Kernel.Routes {
		if err := d.followKernelRoutes(ctx, ifcs); err != nil {
			cancel()
			return err
		}
	}
	if err := d.followLinks(ctx, ifcs); err != nil { // after: a link going down reads the routes again
		cancel()
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-updates:
				d.mu.Lock()
				if d.route != nil && !static[n.Port+" "+n.IP.String()] {
					var err error
					if n.MAC != nil {
						err = d.route.router.SetNeighbor(n.Port, n.IP, [6]byte(n.MAC))
					} else if slices.ContainsFunc(d.route.router.Neighbors(), func(x routingNeighbor) bool { return x.Port == n.Port && x.IP == n.IP }) {
						err = d.route.router.DeleteNeighbor(n.Port, n.IP)
					}
					if err != nil {
						d.log.Debug("kernel neighbour", "port", n.Port, "ip", n.IP, "err", err)
					}
				}
				d.mu.Unlock()
			}
		}
	}()
	return nil
}

// kernelRouteSpec completes the pipeline's route spec with the
// exception paths.
func kernelRouteSpec(rs *pipeline.RouteSpec, cfg *config.Config, taps map[uint16]uint16) {
	rs.Kernel, rs.PuntRate = taps, cfg.Kernel.PuntRate
}

// followKernelRoutes keeps the router's kernel routes in step with the
// kernel's table. Changes are applied in batches (what arrived within a
// few milliseconds, at most routeBatch), each one publish to the workers:
// a routing daemon converging sends tens of thousands at once.
func (d *Daemon) followKernelRoutes(ctx context.Context, ifcs []linuxcp.Interface) error {
	changes := make(chan linuxcp.RouteChange, 1<<16)
	d.kernelResync = func() {
		rs, err := linuxcp.DumpRoutes(ifcs, d.Cfg.Kernel.Table)
		if err != nil {
			d.log.Warn("kernel routes", "err", err)
			return
		}
		for _, c := range append(append([]linuxcp.RouteChange{{Resync: true}}, rs...), linuxcp.RouteChange{Synced: true}) {
			select {
			case changes <- c:
			case <-ctx.Done():
				return
			}
		}
	}
	go func() {
		const routeBatch = 20000
		for {
			var batch []linuxcp.RouteChange
			select {
			case <-ctx.Done():
				return
			case c := <-changes:
				batch = append(batch, c)
			}
			deadline := time.After(5 * time.Millisecond)
		more:
			for len(batch) < routeBatch {
				select {
				case c := <-changes:
					batch = append(batch, c)
				case <-deadline:
					break more
				case <-ctx.Done():
					return
				}
			}
			d.applyKernelRoutes(batch)
		}
	}()
	err := linuxcp.FollowRoutes(ctx, ifcs, d.Cfg.Kernel.Table, func(c linuxcp.RouteChange) {
		select {
		case changes <- c:
		case <-ctx.Done():
		}
	}, func(err error) { d.log.Warn("kernel routes", "err", err) })
	if err != nil {
		return err
	}
	d.log.Info("following the kernel's routes", "table", d.Cfg.Kernel.Table)
	return nil
}

// applyKernelRoutes applies a batch of kernel route changes, the last
// change of each prefix winning. During a resync (after lost
// notifications) it notes the prefixes the dump has, and at its end
// removes the kernel routes the dump did not have.
func (d *Daemon) applyKernelRoutes(batch []linuxcp.RouteChange) {
	last := map[netip.Prefix]linuxcp.RouteChange{}
	var order []netip.Prefix
	var stale []netip.Prefix
	for _, c := range batch {
		switch {
		case c.Resync:
			d.resync = map[netip.Prefix]bool{}
			continue
		case c.Synced:
			d.mu.Lock()
			if d.route != nil && d.resync != nil {
				for _, v4 := range []bool{true, false} {
					for _, ri := range d.route.router.Routes(v4, netip.Prefix{}) {
						if ri.Source == routing.Kernel && !d.resync[ri.Prefix] {
							stale = append(stale, ri.Prefix)
						}
					}
				}
			}
			d.resync = nil
			d.mu.Unlock()
			continue
		}
		if d.resync != nil {
			d.resync[c.Prefix] = true
		}
		if _, seen := last[c.Prefix]; !seen {
			order = append(order, c.Prefix)
		}
		last[c.Prefix] = c
	}
	var add []routing.Route
	del := stale
	for _, p := range order {
		c := last[p]
		switch {
		case c.Gone:
			del = append(del, p)
		case c.Blackhole:
			add = append(add, routing.Route{Prefix: p, Kind: routing.PathDrop})
		default:
			rt := routing.Route{Prefix: p, Kind: routing.PathForward}
			for _, h := range c.Hops {
				rt.Via = append(rt.Via, routing.NextHop{Port: h.Port, Gateway: h.Gateway, Weight: min(h.Weight, 256)})
			}
			add = append(add, rt)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.route == nil {
		return
	}
	if err := d.route.router.SyncKernel(add, del); err != nil {
		d.log.Warn("kernel routes", "err", err)
	}
}

// kernelPump is the exception paths' transmit, off the workers: rings the
// workers punt into, drained into the TAPs by a goroutine on the control
// plane's CPUs.
type kernelPump struct {
	pump  *dpdk.Pump
	rings []*dpdk.Ring
	stop  chan struct{}
	done  chan struct{}
}

// newKernelPump makes a ring per TAP of taps (port → TAP port).
func newKernelPump(taps map[uint16]uint16, socket int) (*kernelPump, map[uint16]*dpdk.Ring, error) {
	kp := &kernelPump{}
	rings := map[uint16]*dpdk.Ring{}
	var qs []dpdk.PumpQueue
	for _, tap := range taps {
		r, err := dpdk.NewRing(fmt.Sprintf("rf_punt_%d", tap), 4096, socket)
		if err != nil {
			kp.free()
			return nil, nil, err
		}
		kp.rings = append(kp.rings, r)
		rings[tap] = r
		qs = append(qs, dpdk.PumpQueue{Ring: r, Port: tap, Queue: 0})
	}
	p, err := dpdk.NewPump(qs, socket)
	if err != nil {
		kp.free()
		return nil, nil, err
	}
	kp.pump = p
	return kp, rings, nil
}

// dropped is what the TAPs refused of the pump's packets (the kernel's
// queue full, or a TAP down).
func (kp *kernelPump) dropped() uint64 {
	var n uint64
	for i := range kp.rings {
		_, d := kp.pump.Counts(i)
		n += d
	}
	return n
}

// pumpWait is the pause after a round that found less than a burst
// waiting: what the workers punt meanwhile goes out together in the next
// round. (A Go sleep this short lasts about a millisecond on a VM; the
// 4096-slot rings hold that many punts at up to 4 M/s.)
const pumpWait = 100 * time.Microsecond

// start runs the pump until stop. Its thread is an EAL thread for the
// while: the TAPs' transmit frees each mbuf it wrote, and with an lcore
// id those go through a mempool cache.
//
// It waits after every round short of a full burst, not only after an
// empty one. A pump that ran again at once took each punt as it came,
// one or two a round, and every round moved the ring's lines and the
// punted mbufs' between its CPU and the worker's. (At 1 punt in 50, the
// routed rate with the wait was the higher in two sets of interleaved
// rounds, by less than the benchmark VM's swings: the README has the
// figures.)
func (kp *kernelPump) start(log func(msg string, args ...any)) {
	kp.stop, kp.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(kp.done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := dpdk.RegisterThread(); err != nil {
			log("exception path: the pump frees mbufs without a mempool cache", "err", err)
		} else {
			defer dpdk.UnregisterThread()
		}
		for {
			select {
			case <-kp.stop:
				kp.pump.Run() // what the stopped workers left
				return
			default:
			}
			if kp.pump.Run() < dpdk.PumpBurst {
				time.Sleep(pumpWait)
			}
		}
	}()
}

// free stops the pump and releases it and its rings (mbufs on them are
// freed); the workers must be stopped.
func (kp *kernelPump) free() {
	if kp.stop != nil {
		close(kp.stop)
		<-kp.done
		kp.stop = nil
	}
	if kp.pump != nil {
		kp.pump.Free()
	}
	for _, r := range kp.rings {
		r.Free()
	}
	kp.rings = nil
}

// underlying is the kernel interface a port's frames come through, when
// roce-fwd can tell: a net_af_packet port's iface.
func underlying(p config.Port) string {
	if !strings.HasPrefix(p.Vdev, "net_af_packet") && !strings.HasPrefix(p.Vdev, "eth_af_packet") {
		return ""
	}
	for _, kv := range strings.Split(p.Vdev, ",")[1:] {
		if v, ok := strings.CutPrefix(kv, "iface="); ok {
			return v
		}
	}
	return ""
}

// followLinks mirrors the link state of the ports onto their TAPs: a
// port whose wire goes down takes its TAP down, so the kernel (and a
// routing daemon with it) withdraws the routes through it. A
// net_af_packet port's interface is followed through netlink; any other
// port (a NIC DPDK drives) by the link state DPDK reports, polled.
func (d *Daemon) followLinks(ctx context.Context, ifcs []linuxcp.Interface) error {
	tapOf := map[string]linuxcp.Interface{}
	var names []string
	polled := map[string]linuxcp.Interface{}
	for _, ifc := range ifcs {
		i, _ := d.Cfg.PortByName(ifc.Port)
		if u := underlying(d.Cfg.Ports[i]); u != "" {
			tapOf[u] = ifc
			names = append(names, u)
		} else {
			polled[ifc.Port] = ifc
		}
	}
	if len(polled) > 0 {
		go watchLinks(ctx, slices.Sorted(maps.Keys(polled)), linkPoll, d.portLink, func(port string, up bool) {
			d.linkChanged(polled[port], "the NIC's link (DPDK)", up)
		})
	}
	if len(names) == 0 {
		return nil
	}
	return linuxcp.FollowLinks(ctx, names, func(name string, up bool) {
		d.linkChanged(tapOf[name], name, up)
	}, func(err error) { d.log.Warn("exception path", "err", err) })
}

// linkChanged takes a port's exception-path TAP up or down with the port's
// link (via says what told).
func (d *Daemon) linkChanged(ifc linuxcp.Interface, via string, up bool) {
	d.log.Info("port link", "port", ifc.Port, "from", via, "up", up)
	var err error
	if up {
		err = linuxcp.Setup(ifc) // up, with its addresses
	} else {
		err = linuxcp.SetUp(ifc.Name, false)
	}
	if err != nil {
		d.log.Warn("exception path", "port", ifc.Port, "err", err)
	}
	if !up && d.kernelResync != nil {
		// The kernel flushed the routes through the TAP without a
		// word: read its table again.
		go d.kernelResync()
	}
}

// linkPoll is how often a NIC's link state is read: a link that flaps
// faster is seen in its state at these instants.
const linkPoll = 200 * time.Millisecond

// portLink is the link state DPDK reports for the port named port.
func (d *Daemon) portLink(port string) (bool, error) {
	for _, p := range d.Ports.Ports {
		if p.Name == port {
			l, err := p.ID.Link(false)
			return l.Up, err
		}
	}
	return false, fmt.Errorf("port %q: not a port", port)
}

// watchLinks reads each port's link state every period until ctx ends and
// calls changed when it differs from the last reading (the first reading
// counts as a change only when the link is down: the TAPs start up). A
// port whose state cannot be read is left as it was.
func watchLinks(ctx context.Context, ports []string, period time.Duration, link func(string) (bool, error), changed func(port string, up bool)) {
	last := map[string]bool{}
	for _, p := range ports {
		last[p] = true
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		for _, p := range ports {
			if up, err := link(p); err == nil && up != last[p] {
				last[p] = up
				changed(p, up)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
