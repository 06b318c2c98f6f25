package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"roce-fwd/config"
	"roce-fwd/linuxcp"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/routing"
)

type routingNeighbor = routing.NeighborInfo

// kernelSuffix names a port's exception-path TAP port ("up0.kernel"); the
// kernel interface itself takes the port's name.
const kernelSuffix = ".kernel"

// portsConfig is the config the port set opens: the file's ports, and a
// TAP port for each port with an exception path, with a tx queue per
// worker (each worker punts into it).
func portsConfig(cfg *config.Config, workers int) *config.Config {
	kp := cfg.KernelPorts()
	if len(kp) == 0 {
		return cfg
	}
	out := *cfg
	out.Ports = slices.Clone(cfg.Ports)
	off := false
	for k, i := range kp {
		p := cfg.Ports[i]
		out.Ports = append(out.Ports, config.Port{
			Name: p.Name + kernelSuffix, Vdev: fmt.Sprintf("net_tap%d,iface=%s", 90+k, p.Name),
			RxQueues: 1, TxQueues: max(workers, 1), RxDesc: 256, TxDesc: 256, Socket: -1,
			Promiscuous: &off, PeerMAC: "02:00:00:00:00:ff", Line: p.Line,
		})
	}
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
		tap, ok := set.ByName(pc.Name + kernelSuffix)
		if phys == nil || !ok {
			return nil, nil, fmt.Errorf("%s:%d: port %s: its exception path did not come up", d.Cfg.File, pc.Line, pc.Name)
		}
		if err := tap.ID.SetMAC(phys.MAC); err != nil {
			return nil, nil, fmt.Errorf("port %s: exception path: %w", pc.Name, err)
		}
		tap.MAC = phys.MAC
		ifc := linuxcp.Interface{Name: pc.Name, Port: pc.Name, MAC: phys.MAC, MTU: pc.MTU}
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
