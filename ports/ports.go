// Package ports owns the lifecycle of the configured ethdev ports: probe,
// mempool on the port's NUMA socket, queue setup, start/stop/close, and
// stats snapshots with rates.
package ports

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
)

// Port is one configured, probed port.
type Port struct {
	Name      string
	Index     int // position in the config
	Cfg       config.Port
	ID        dpdk.Port
	Socket    int // where its queues and mempool live
	DevSocket int // the device's own NUMA socket (config override applied); -1: none (vdevs)
	Info      dpdk.DevInfo
	MAC       net.HardwareAddr
	PeerMAC   net.HardwareAddr
	Pool      *dpdk.Mempool
	Started   bool
	// RSSHashes is what the rx queues are spread by, as the device
	// reports it (0: no RSS: one queue, or a device without it);
	// RxOffloads the rx offloads on.
	RSSHashes, RxOffloads uint64

	mu   sync.Mutex
	last Snapshot // for rates since the previous snapshot
}

// Set is every configured port plus the per-socket mempools.
type Set struct {
	Ports []*Port
	Pools map[int]*dpdk.Mempool
}

// MbufDemand is cfg.MbufDemand for a pipeline burst of burst packets.
func MbufDemand(cfg *config.Config, socketOf func(config.Port) int, workers, burst int) map[int]int {
	c := *cfg
	c.Pipeline.Burst = burst
	return c.MbufDemand(socketOf, workers)
}

// newPool makes socket sock's pool of n mbufs on the driver [mempool]
// ops names. "auto" takes DPDK's lock-free LIFO stack where the
// platform's own choice is the plain ring. When mbufs leave a worker's
// lcore cache for good (punted to the kernel and freed by the exception
// path's pump) the cache refills from the common pool, and a ring hands
// out its oldest mbufs, cold in memory, where a stack hands out the ones
// freed last, still in the caches: punting 1 frame in 50 ran 2-7%
// faster on a stack, and the other benchmark rows within noise of the
// ring (interleaved daemon runs, 2 MiB pages). A platform with a
// pool of its own (a hardware mempool) keeps it, and so does a build of
// DPDK without the lock-free stack.
//
// The driver also decides the order of what a port takes from the pool
// at set-up: net_pcap's infinite_rx copy of its capture lies in
// descending addresses on the stack and ascending on the ring (queues
// are set up here without an lcore cache), and its per-packet copy of a
// 4 KB frame takes about 40% fewer cycles on ascending copies.
// testpmd's copies descend in runs of its cache's size, as the stack's
// do here, so the benchmark's large-frame rows compare like with like
// (docs/performance.md, "Tried at 7d3d4f7").
func newPool(cfg *config.Config, sock, n int) (*dpdk.Mempool, error) {
	name := fmt.Sprintf("rf_mbuf_s%d", sock)
	m := &cfg.Mempool
	ops := m.Ops
	if ops != "auto" {
		return dpdk.NewPktmbufPool(name, n, m.Cache, m.DataRoom, sock, ops)
	}
	if dpdk.BestMempoolOps() == "ring_mp_mc" {
		if p, err := dpdk.NewPktmbufPool(name, n, m.Cache, m.DataRoom, sock, "lf_stack"); err == nil {
			return p, nil
		}
	}
	return dpdk.NewPktmbufPool(name, n, m.Cache, m.DataRoom, sock, "")
}

// Open probes and starts every port of cfg. EAL must be running. workers
// is the number of worker lcores, for sizing the pools.
func Open(cfg *config.Config, workers int) (*Set, error) { return OpenWith(cfg, workers, nil) }

// OpenWith is Open with beforeStart called on each port once its queues are
// set up and before it starts: rte_flow_configure has to come then.
func OpenWith(cfg *config.Config, workers int, beforeStart func(*Port) error) (*Set, error) {
	s := &Set{Pools: map[int]*dpdk.Mempool{}}
	for i, pc := range cfg.Ports {
		p, err := probe(pc)
		if err != nil {
			s.Close()
			return nil, err
		}
		p.Index = i
		s.Ports = append(s.Ports, p)
	}
	demand := MbufDemand(cfg, func(pc config.Port) int {
		p, _ := s.ByName(pc.Name)
		return p.Socket
	}, workers, cfg.Pipeline.Burst)
	sockets := make([]int, 0, len(demand))
	for sock := range demand {
		sockets = append(sockets, sock)
	}
	sort.Ints(sockets)
	for _, sock := range sockets {
		n := cfg.Mempool.Mbufs
		if n < demand[sock] {
			s.Close()
			return nil, fmt.Errorf("%s: mempool.mbufs = %d is too small for socket %d: its rx/tx rings, bursts and lcore caches can hold %d mbufs at once; set mbufs to at least %d",
				cfg.File, n, sock, demand[sock], demand[sock])
		}
		pool, err := newPool(cfg, sock, n)
		if err != nil {
			s.Close()
			if ops := cfg.Mempool.Ops; ops != "auto" && errors.Is(err, syscall.EINVAL) {
				// rte_mempool_set_ops_byname's answer to a name it has not registered.
				return nil, fmt.Errorf("%s: mempool.ops = %q: DPDK has no mempool driver of that name (ring_mp_mc, stack and lf_stack are in every build): %w", cfg.File, ops, err)
			}
			return nil, fmt.Errorf("%w (free more DPDK memory: raise -m or --socket-mem in [eal] args, or lower mempool.mbufs)", err)
		}
		s.Pools[sock] = pool
	}
	for _, p := range s.Ports {
		p.Pool = s.Pools[p.Socket]
		if err := p.setup(); err != nil {
			s.Close()
			return nil, err
		}
		if beforeStart != nil {
			if err := beforeStart(p); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func probe(pc config.Port) (*Port, error) {
	devargs := pc.Vdev
	if pc.PCI != "" {
		devargs = pc.PCI
		if pc.Devargs != "" {
			devargs += "," + pc.Devargs
		}
	}
	id, err := dpdk.ProbeDevice(devargs)
	if err != nil {
		return nil, fmt.Errorf("port %s: cannot probe %q: %v%s", pc.Name, devargs, err, probeHint(pc))
	}
	p := &Port{Name: pc.Name, Cfg: pc, ID: id}
	if p.Info, err = id.Info(); err != nil {
		return nil, fmt.Errorf("port %s: %w", pc.Name, err)
	}
	p.DevSocket = pc.Socket
	if p.DevSocket < 0 {
		p.DevSocket = id.Socket()
	}
	p.Socket = p.DevSocket
	if p.Socket < 0 {
		p.Socket = dpdk.LcoreSocket(dpdk.MainLcore()) // vdevs have no socket of their own
	}
	if p.MAC, err = id.MAC(); err != nil {
		return nil, fmt.Errorf("port %s: %w", pc.Name, err)
	}
	if p.PeerMAC, err = net.ParseMAC(pc.PeerMAC); err != nil {
		return nil, fmt.Errorf("port %s: peer_mac %q: %v", pc.Name, pc.PeerMAC, err)
	}
	return p, nil
}

// probeHint explains the usual causes of a failed probe.
func probeHint(pc config.Port) string {
	if pc.PCI != "" {
		return fmt.Sprintf("; check that %s is not excluded by -b or --no-pci in [eal] args, that its driver suits DPDK (roce-fwd ports), and the EAL log above", pc.PCI)
	}
	drv := pc.Vdev
	if i := strings.IndexByte(drv, ','); i >= 0 {
		drv = drv[:i]
	}
	drv = strings.TrimRight(drv, "0123456789")
	lib := drv
	if l, ok := vdevLibrary[drv]; ok {
		lib = l
	} else if rest, ok := strings.CutPrefix(drv, "eth_"); ok {
		lib = "net_" + rest // legacy alias of the same driver
	}
	if known := installedPMDs(); len(known) > 0 {
		if !slices.Contains(known, lib) {
			return fmt.Sprintf("; no DPDK driver named %q is installed (virtual device drivers: %s)", drv, strings.Join(vdevPMDs(known), ", "))
		}
	}
	return "; check the devargs (see the EAL log above)"
}

// vdevLibrary maps vdev driver names to the library that registers them
// where the two differ.
var vdevLibrary = map[string]string{"net_bonding": "net_bond", "net_virtio_user": "net_virtio"}

// installedPMDs lists the net PMDs in DPDK's plugin directory, which EAL
// loads at start (runtime packages ship only the versioned names).
func installedPMDs() []string {
	files, _ := filepath.Glob("/usr/lib/*/dpdk/pmds-*/librte_net_*.so*")
	var names []string
	for _, f := range files {
		base, _, _ := strings.Cut(filepath.Base(f), ".so")
		name := "net_" + strings.TrimPrefix(base, "librte_net_")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// vdevPMDs keeps the drivers usable as --vdev, for hints.
func vdevPMDs(all []string) []string {
	virtual := map[string]bool{"net_af_packet": true, "net_af_xdp": true, "net_null": true, "net_pcap": true,
		"net_ring": true, "net_tap": true, "net_vhost": true, "net_virtio_user": true, "net_bonding": true, "net_memif": true}
	var out []string
	for _, n := range all {
		if virtual[n] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

// RSS says how the port spreads its rx queues, for the log and show port
// info; ok is false when it has several and cannot spread them.
func (p *Port) RSS() (desc string, ok bool) {
	switch {
	case p.Cfg.RxQueues <= 1:
		return "off (1 rx queue)", true
	case p.RSSHashes == 0:
		return fmt.Sprintf("unsupported by %s: its %d rx queues are not spread (a NIC delivers every packet to queue 0)",
			p.Info.Driver, p.Cfg.RxQueues), false
	}
	var by []string
	if p.RSSHashes&dpdk.RSSIP != 0 {
		by = append(by, "ip")
	}
	if p.RSSHashes&dpdk.RSSUDP != 0 {
		by = append(by, "udp")
	}
	if len(by) == 0 { // the device applied other hash types than asked
		by = append(by, fmt.Sprintf("hash types %#x", p.RSSHashes))
	}
	return fmt.Sprintf("%s over %d rx queues", strings.Join(by, " "), p.Cfg.RxQueues), true
}

// IPv4ChecksumOffload reports whether the port checks received IPv4
// header checksums (the routed path then takes its verdict).
func (p *Port) IPv4ChecksumOffload() bool { return p.RxOffloads&dpdk.RxOffloadIPv4Cksum != 0 }

func (p *Port) setup() error {
	pc := p.Cfg
	wrap := func(err error) error { return fmt.Errorf("port %s (%s): %w", p.Name, p.Info.Driver, err) }
	if pc.RxQueues > p.Info.MaxRxQueues {
		return wrap(fmt.Errorf("rx_queues = %d but the device has at most %d", pc.RxQueues, p.Info.MaxRxQueues))
	}
	if pc.TxQueues > p.Info.MaxTxQueues {
		return wrap(fmt.Errorf("tx_queues = %d but the device has at most %d", pc.TxQueues, p.Info.MaxTxQueues))
	}
	if pc.MTU != 0 && p.Info.MaxMTU != 0 && (pc.MTU > p.Info.MaxMTU || pc.MTU < p.Info.MinMTU) {
		return wrap(fmt.Errorf("mtu = %d outside the device's range %d..%d", pc.MTU, p.Info.MinMTU, p.Info.MaxMTU))
	}
	conf := dpdk.PortConf{RxQueues: pc.RxQueues, TxQueues: pc.TxQueues, MTU: pc.MTU}
	if pc.RxQueues > 1 {
		// Without RSS a NIC delivers every packet to queue 0. The hash
		// covers the addresses and the UDP ports: a RoCEv2 QP's entropy
		// is the UDP source port its host picked for it.
		conf.RSSHashes = (dpdk.RSSIP | dpdk.RSSUDP) & p.Info.RSSHashes
	}
	// The NIC's verdict on IPv4 header checksums spares the routed path
	// its own check (RTE_MBUF_F_RX_IP_CKSUM_GOOD).
	conf.RxOffloads = dpdk.RxOffloadIPv4Cksum & p.Info.RxOffloadCapa
	if err := p.ID.Configure(conf); err != nil {
		return wrap(err)
	}
	p.RSSHashes, p.RxOffloads = conf.RSSHashes, conf.RxOffloads
	if conf.RSSHashes != 0 {
		// What the device applied, in case it took fewer hash types.
		if hf, err := p.ID.RSSHashConf(); err == nil {
			p.RSSHashes = hf
		}
	}
	for q := 0; q < pc.RxQueues; q++ {
		if err := p.ID.RxQueueSetup(q, pc.RxDesc, p.Socket, p.Pool); err != nil {
			return wrap(err)
		}
	}
	for q := 0; q < pc.TxQueues; q++ {
		if err := p.ID.TxQueueSetup(q, pc.TxDesc, p.Socket); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// Start starts every stopped port and applies promiscuous mode.
func (s *Set) Start() error {
	for _, p := range s.Ports {
		if err := p.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Start starts the port.
func (p *Port) Start() error {
	if p.Started {
		return nil
	}
	if err := p.ID.Start(); err != nil {
		return fmt.Errorf("port %s: %w", p.Name, err)
	}
	p.Started = true
	promisc := p.Cfg.Promiscuous == nil || *p.Cfg.Promiscuous
	if err := p.ID.SetPromiscuous(promisc); err != nil && !errors.Is(err, syscall.ENOTSUP) {
		// ENOTSUP is normal for vdevs without a MAC filter.
		return fmt.Errorf("port %s: %w", p.Name, err)
	}
	return nil
}

// Stop stops the port; its rx and tx queues stay configured.
func (p *Port) Stop() error {
	if !p.Started {
		return nil
	}
	p.Started = false
	if err := p.ID.Stop(); err != nil {
		return fmt.Errorf("port %s: %w", p.Name, err)
	}
	return nil
}

// Stop stops every port.
func (s *Set) Stop() error {
	var errs []error
	for _, p := range s.Ports {
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}

// Close stops and closes every port, then frees the pools. Every mbuf
// must be back in its pool by then (the workers are stopped).
func (s *Set) Close() error {
	var errs []error
	for _, p := range s.Ports {
		errs = append(errs, p.Stop())
		if err := p.ID.Close(); err != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", p.Name, err))
		}
	}
	s.Ports = nil
	for sock, pool := range s.Pools {
		if n := pool.InUse(); n != 0 {
			errs = append(errs, fmt.Errorf("mempool %s: %d mbufs still in use after every port closed", pool.Name, n))
		} else {
			pool.Free()
		}
		delete(s.Pools, sock)
	}
	return errors.Join(errs...)
}

// ByName finds a port by its configured name.
func (s *Set) ByName(name string) (*Port, bool) {
	for _, p := range s.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Snapshot is a port's counters at one instant, with rates since the
// previous snapshot of the same port.
type Snapshot struct {
	At       time.Time
	Stats    dpdk.Stats
	Link     dpdk.Link
	Interval time.Duration // since the previous snapshot; 0 for the first
	RxPPS    float64
	TxPPS    float64
	RxBPS    float64 // bits per second
	TxBPS    float64
}

// Snapshot reads the port's counters and link state, with rates since
// the previous Snapshot, which it then replaces ("since last show").
func (p *Port) Snapshot() (Snapshot, error) { return p.snapshot(true) }

// Peek reads the counters like Snapshot without rates and without
// moving the "since last show" mark: for scrapers, which must not
// shorten the interval an operator's next show reports on.
func (p *Port) Peek() (Snapshot, error) { return p.snapshot(false) }

func (p *Port) snapshot(mark bool) (Snapshot, error) {
	st, err := p.ID.Stats()
	if err != nil {
		return Snapshot{}, fmt.Errorf("port %s: %w", p.Name, err)
	}
	link, _ := p.ID.Link(false)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	snap := Snapshot{At: now, Stats: st, Link: link}
	if !mark {
		return snap, nil
	}
	if !p.last.At.IsZero() {
		snap.Interval = now.Sub(p.last.At)
		if sec := snap.Interval.Seconds(); sec > 0 {
			snap.RxPPS = float64(st.RxPackets-p.last.Stats.RxPackets) / sec
			snap.TxPPS = float64(st.TxPackets-p.last.Stats.TxPackets) / sec
			snap.RxBPS = 8 * float64(st.RxBytes-p.last.Stats.RxBytes) / sec
			snap.TxBPS = 8 * float64(st.TxBytes-p.last.Stats.TxBytes) / sec
		}
	}
	p.last = snap
	return snap, nil
}

// CheckPCI reads each PCI port's kernel driver from sysfs before EAL
// starts, and explains how to fix a device DPDK cannot use.
func CheckPCI(cfg *config.Config, sysRoot string) error {
	var errs []error
	for _, pc := range cfg.Ports {
		if pc.PCI == "" {
			continue
		}
		if err := checkOnePCI(pc, sysRoot); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: port %s: %w", cfg.File, pc.Line, pc.Name, err))
		}
	}
	return errors.Join(errs...)
}
