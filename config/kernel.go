package config

import (
	"fmt"
	"slices"
	"strings"
)

// Kernel is the exception path to the Linux kernel: for each routed port
// that gets one, a TAP interface named after the port, with its MAC and
// addresses, into which the data path punts what the kernel handles (ARP,
// packets for the box, packets to a connected neighbour not yet known,
// expiring TTLs, IPv4 options) and whose output leaves by the port. The
// kernel's neighbour table is followed back.
type Kernel struct {
	// ExceptionPath is "auto" (ports with addresses that face a real
	// wire: PCI devices and net_af_packet interfaces), "on" (every port
	// with addresses) or "off".
	ExceptionPath string `toml:"exception_path"`
	// PuntRate is the punted packets per second allowed per reason, all
	// workers together; the rest are dropped as punt_limit.
	PuntRate int `toml:"punt_rate"`
	// Routes follows the kernel's routing table Table (254: main) through
	// the exception-path interfaces: what a routing daemon such as FRR
	// installs there (multipath routes as ECMP groups) is routed in the
	// data path.
	Routes bool `toml:"routes"`
	Table  int  `toml:"table"`
}

func (k *Kernel) setDefaults() {
	k.ExceptionPath = "auto"
	k.PuntRate = 100000
	k.Table = 254
}

// KernelPorts are the indices of the ports that get an exception path.
func (c *Config) KernelPorts() []int {
	var out []int
	for i, p := range c.Ports {
		if len(p.Addresses) == 0 {
			continue
		}
		switch c.Kernel.ExceptionPath {
		case "on":
			out = append(out, i)
		case "auto":
			if p.PCI != "" || strings.HasPrefix(p.Vdev, "net_af_packet") || strings.HasPrefix(p.Vdev, "eth_af_packet") {
				out = append(out, i)
			}
		}
	}
	return out
}

// KernelSuffix names a port's exception-path TAP port ("up0.kernel"); the
// kernel interface itself takes the port's name.
const KernelSuffix = ".kernel"

// PortsWithKernel is the ports the daemon opens: the file's, then a TAP
// port for each port with an exception path (one rx queue, which the
// workers poll, and one tx queue, which the kernel pump uses).
func (c *Config) PortsWithKernel() []Port {
	out := slices.Clone(c.Ports)
	off := false
	for k, i := range c.KernelPorts() {
		p := c.Ports[i]
		out = append(out, Port{
			Name: p.Name + KernelSuffix, Vdev: fmt.Sprintf("net_tap%d,iface=%s", 90+k, p.Name),
			RxQueues: 1, TxQueues: 1, RxDesc: 256, TxDesc: 512, Socket: p.Socket,
			Promiscuous: &off, PeerMAC: "02:00:00:00:00:ff", Line: p.Line,
		})
	}
	return out
}

// MbufDemand counts, per socket (socketOf gives a port's), the mbufs that
// the ports' rx and tx rings, the workers' bursts and the lcore caches can
// hold at once: the pool of a socket must be at least that.
func (c *Config) MbufDemand(socketOf func(Port) int, workers int) map[int]int {
	d := map[int]int{}
	for _, p := range c.Ports {
		d[socketOf(p)] += p.RxQueues*p.RxDesc + p.TxQueues*p.TxDesc
	}
	for s := range d {
		// Each worker holds a received burst, a tx burst per port and a drop list.
		d[s] += workers*c.Pipeline.Burst*(len(c.Ports)+2) + (workers+1)*c.Mempool.Cache
	}
	return d
}

func validateKernel(c *checker, cfg *Config) {
	k := &cfg.Kernel
	p := root.key("kernel")
	oneOf(c, p.key("exception_path"), k.ExceptionPath, "auto", "on", "off")
	c.intRange(p.key("punt_rate"), k.PuntRate, 0, 100_000_000)
	c.intRange(p.key("table"), k.Table, 1, 1<<31-1)
	if k.Routes && len(cfg.KernelPorts()) == 0 {
		c.errorf(p.key("routes"), "no port has an exception path to follow the kernel's routes through (ports with addresses; see exception_path)")
	}
	for _, i := range cfg.KernelPorts() {
		// The TAP interface takes the port's name.
		if n := cfg.Ports[i].Name; len(n) > 15 {
			c.errorf(root.key("port").index(i).key("name"), "%q is longer than 15 characters, the most a Linux interface name (its exception path's TAP) can have", n)
		}
	}
}
