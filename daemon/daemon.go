// Package daemon wires a config to a running dataplane: EAL arguments
// (with the hugepage plan), ports, lcore placement and the pipeline, and
// turns their counters into the final report. The command line and the
// console drive it; it owns no flags.
package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/hugepages"
	"roce-fwd/linuxcp"
	"roce-fwd/numa"
	"roce-fwd/offload"
	"roce-fwd/pcidev"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/qpstats"
)

// MaxQueuesPerLcore is where placement starts warning that one lcore
// polls too many queues to keep up with them at line rate.
const MaxQueuesPerLcore = 4

// TxRetries is how many transmit calls that take nothing (a full ring)
// are tolerated before the rest of a burst is freed and counted as
// tx_full: enough to ride out a momentary stall, short enough that one
// slow port does not stop a worker's other queues.
const TxRetries = 8

// Options are the daemon's environment.
type Options struct {
	SysRoot string // "/" normally; a fixture tree in tests
	Log     *slog.Logger
}

// Daemon is a running dataplane.
type Daemon struct {
	Cfg      *config.Config
	EALArgs  []string
	Topo     *numa.Topology
	HugePlan *hugepages.Plan // nil when [eal] args set the memory themselves
	Plan     *numa.Plan
	Ports    *ports.Set
	Pipe     *pipeline.Pipeline
	Started  time.Time // when forwarding last started
	Stopped  time.Time // when it last stopped
	Flows    *offload.Manager
	log      *slog.Logger
	sysRoot  string
	pfcPools []*dpdk.Mempool
	events   periodic              // logs the workers' QoS events (qos.go)
	confine  periodic              // keeps runtime threads off the workers' CPUs
	route    *routed               // nil unless the config routes (routing.go)
	resync   map[netip.Prefix]bool // kernel route prefixes seen by a resync under way (kernel.go)
	// kernelResync reads the kernel's routes again (kernel.go), when they
	// are followed.
	kernelResync func()
	mu           sync.Mutex  // serialises the control operations (control.go)
	taps         taps        // capture and trace (capture.go)
	pdump        bool        // rte_pdump_init served dpdk-dumpcap
	sd           sdState     // systemd notifications (notify.go)
	imp          impairState // impairment rules (impair.go)
	storms       stormLog    // the PFC watchdog's storms (qos.go)
	base         baseline
	// qpMu guards qpFlows, the merged QP flows the reports reuse.
	qpMu    sync.Mutex
	qpFlows []qpstats.Flow
}

// Start brings the dataplane up and starts forwarding.
func Start(cfg *config.Config, opt Options) (*Daemon, error) {
	if opt.SysRoot == "" {
		opt.SysRoot = "/"
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	d := &Daemon{Cfg: cfg, log: opt.Log, sysRoot: opt.SysRoot}
	if err := ports.CheckPCI(cfg, opt.SysRoot); err != nil {
		return nil, err
	}
	topo, err := numa.Read(opt.SysRoot)
	if err != nil {
		opt.Log.Warn("cannot read the NUMA topology; placing lcores without it", "err", err)
	}
	d.Topo = topo
	if err := d.ealArgs(opt.SysRoot); err != nil {
		return nil, err
	}
	opt.Log.Info("starting EAL", "args", d.EALArgs)
	if err := dpdk.Init(d.EALArgs); err != nil {
		return nil, fmt.Errorf("%s: [eal] args: %w", cfg.File, err)
	}
	// dpdk-dumpcap and dpdk-pdump attach as secondary processes: only
	// with EAL's shared runtime directory.
	if !slices.Contains(d.EALArgs, "--no-shconf") && !slices.Contains(d.EALArgs, "--in-memory") {
		if err := dpdk.PdumpInit(); err != nil {
			opt.Log.Warn("dpdk-dumpcap will not attach", "err", err)
		} else {
			d.pdump = true
			opt.Log.Info("dpdk-dumpcap and dpdk-pdump can capture", "file-prefix", dpdk.RuntimeDir())
		}
	}
	if err := d.bringUp(); err != nil {
		d.shutdown()
		return nil, err
	}
	return d, nil
}

// ealArgs completes [eal] args: when they set no memory option, the
// hugepage plan supplies --socket-mem/--huge-dir or a --no-huge fallback.
func (d *Daemon) ealArgs(sysRoot string) error {
	args := slices.Clone(d.Cfg.EAL.Args)
	if !HasMemoryArg(args) {
		st, err := hugepages.Read(sysRoot)
		if err != nil {
			d.log.Warn("cannot read hugepage state", "err", err)
		}
		plan := hugepages.MakePlan(st, Demands(d.Cfg, sysRoot), 0)
		for _, w := range plan.Warnings {
			d.log.Warn(w)
		}
		d.HugePlan = &plan
		args = append(args, plan.EALArgs...)
	}
	d.EALArgs = args
	return nil
}

// HasMemoryArg reports whether EAL args already size the memory.
func HasMemoryArg(args []string) bool {
	for _, a := range args {
		switch {
		case a == "-m", a == "--no-huge", a == "--socket-mem", a == "--in-memory",
			len(a) > 2 && a[:2] == "-m", len(a) > 13 && a[:13] == "--socket-mem=":
			return true
		}
	}
	return false
}

// Demands is what the config asks of each socket's memory, for the
// hugepage plan. PCI ports' sockets come from sysfs since EAL is not up.
// Which socket a worker lands on is decided after EAL starts, so every
// socket with ports is counted as holding every worker's QP table, in any
// mode (the console can switch to roce): on the safe side.
func Demands(cfg *config.Config, sysRoot string) []hugepages.Demand {
	all, _, _ := cfg.EAL.Lcores()
	lcores := len(all)
	if lcores == 0 {
		lcores = runtime.NumCPU()
	}
	workers := len(cfg.Pipeline.Lcores)
	if workers == 0 {
		workers = max(lcores-1, 1)
	}
	var tables uint64
	if cfg.RoCE.QPTable > 0 {
		tables = uint64(workers) * uint64(qpstats.Footprint(cfg.RoCE.QPTable)+qpstats.CopyFootprint(cfg.RoCE.QPTable))
	}
	tables += FIBBytes(cfg) // counted on every socket, like the QP tables
	bySocket := map[int]*hugepages.Demand{}
	for _, p := range cfg.Ports {
		s := p.Socket
		if s < 0 && p.PCI != "" {
			if dev, err := pcidev.Get(sysRoot, p.PCI); err == nil {
				s = dev.NUMANode
			}
		}
		s = max(s, 0)
		dm, ok := bySocket[s]
		if !ok {
			dm = &hugepages.Demand{Socket: s, Mbufs: cfg.Mempool.Mbufs, DataRoom: cfg.Mempool.DataRoom,
				Cache: cfg.Mempool.Cache, Lcores: lcores, TableBytes: tables}
			bySocket[s] = dm
		}
		dm.RxDesc += p.RxQueues * p.RxDesc
		dm.TxDesc += p.TxQueues * p.TxDesc
	}
	var out []hugepages.Demand
	for _, dm := range bySocket {
		out = append(out, *dm)
	}
	slices.SortFunc(out, func(a, b hugepages.Demand) int { return a.Socket - b.Socket })
	return out
}

// controlPs is how many Ps (the Go scheduler's slots for running
// goroutines) the control plane has beside the workers'. Some of its
// goroutines hold theirs while they block in system calls (a capture
// file's writes, the exception path's TAP writes, netlink) until the
// runtime takes it back, tens of microseconds to milliseconds later.
// With two, the runtime's scheduler trace showed both busy all the time
// during a capture to disk of every packet, and the capture wrote 44-68%
// of what it selected (3.7-5.0 M packets/s); with four, 66-87% (4.8-5.3
// M/s), in five interleaved pairs on the 2-CPU benchmark VM. A P costs
// nothing while idle.
const controlPs = 4

func (d *Daemon) bringUp() error {
	cfg := d.Cfg
	workers := cfg.Pipeline.Lcores
	if len(workers) == 0 {
		workers = dpdk.WorkerLcores()
	}
	if n := len(workers) + controlPs; runtime.GOMAXPROCS(0) < n {
		// Each worker holds a P for good; the control plane needs its own.
		runtime.GOMAXPROCS(n)
	}
	flows, err := offload.New(cfg.Offload.Backend)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	d.Flows = flows
	set, err := ports.OpenWith(portsConfig(cfg), len(workers), d.probeFlows)
	if err != nil {
		return err
	}
	d.Ports = set
	for sock, p := range set.Pools {
		d.log.Info("mbuf pool", "socket", sock, "mbufs", p.Size, "driver", p.Ops())
	}
	for _, p := range set.Ports {
		link, err := p.ID.Link(false)
		if err != nil {
			d.log.Warn("link status", "port", p.Name, "err", err)
			continue
		}
		rss, spread := p.RSS()
		d.log.Info("port up", "port", p.Name, "id", int(p.ID), "driver", p.Info.Driver, "socket", p.DevSocket,
			"mac", p.MAC.String(), "link", link.String(), "rx_queues", p.Cfg.RxQueues, "tx_queues", p.Cfg.TxQueues, "rss", rss)
		if !spread {
			d.log.Warn("rx queues not spread", "port", p.Name, "rss", rss)
		}
	}

	main := numa.Lcore{ID: dpdk.MainLcore(), Socket: dpdk.LcoreSocket(dpdk.MainLcore())}
	var lcores []numa.Lcore
	for _, l := range workers {
		lcores = append(lcores, numa.Lcore{ID: l, Socket: dpdk.LcoreSocket(l)})
	}
	var queues []numa.Queue
	to := map[dpdk.Port]dpdk.Port{}
	forwards := cfg.Forward
	if cfg.Routed() {
		// Every port is polled (the exception paths' TAPs too); the FIB
		// says where each packet goes.
		forwards = nil
		for _, p := range set.Ports {
			forwards = append(forwards, config.Forward{From: p.Name, To: p.Name})
		}
	}
	for _, f := range forwards {
		from, _ := set.ByName(f.From)
		dst, _ := set.ByName(f.To)
		to[from.ID] = dst.ID
		for q := 0; q < from.Cfg.RxQueues; q++ {
			queues = append(queues, numa.Queue{Port: int(from.ID), PortName: from.Name, Queue: q, Socket: from.DevSocket})
		}
	}
	plan, err := numa.Place(main, lcores, queues, MaxQueuesPerLcore, d.Topo)
	if err != nil {
		return fmt.Errorf("%s: placing rx queues on lcores: %w", cfg.File, err)
	}
	for _, w := range plan.Warnings {
		d.log.Warn(w)
	}
	d.Plan = plan

	mode, err := pipeline.ParseMode(cfg.Pipeline.Mode)
	if err != nil {
		return err
	}
	var kernelIfcs []linuxcp.Interface
	spec := pipeline.Spec{Mode: mode, Burst: cfg.Pipeline.Burst, TxRetries: TxRetries, MaxBursts: cfg.Pipeline.MaxBursts, Ports: map[uint16]pipeline.PortSpec{},
		RoCE: RoCESpec(cfg)}
	for _, p := range set.Ports {
		spec.Ports[uint16(p.ID)] = pipeline.PortSpec{Name: p.Name, TxQueues: p.Cfg.TxQueues, MAC: p.MAC, PeerMAC: p.PeerMAC}
	}
	for _, w := range plan.Workers {
		ws := pipeline.WorkerSpec{Lcore: w.Lcore, Socket: w.Socket}
		for _, q := range w.Queues {
			ws.Rx = append(ws.Rx, pipeline.RxSpec{Port: uint16(q.Port), Queue: uint16(q.Queue), To: uint16(to[dpdk.Port(q.Port)])})
		}
		spec.Workers = append(spec.Workers, ws)
	}
	if cfg.QoSEnabled() {
		if spec.QoS, err = d.qosSpec(set, d.sysRoot); err != nil {
			return err
		}
	}
	if cfg.Routed() {
		socket := 0
		if len(spec.Workers) > 0 {
			socket = spec.Workers[0].Socket
		}
		if spec.Route, err = d.buildRouting(set, socket); err != nil {
			return err
		}
		taps, ifcs, err := d.setUpKernel(set)
		if err != nil {
			return err
		}
		kernelRouteSpec(spec.Route, cfg, taps)
		kernelIfcs = ifcs
		if len(taps) > 0 {
			kp, rings, err := newKernelPump(taps, socket)
			if err != nil {
				return err
			}
			d.route.pump, spec.Route.KernelRings = kp, rings
			kp.start(d.log.Warn)
		}
	}
	// Impairment rules from the config act on the first packet.
	if spec.Impair, err = d.impairSpec(cfg); err != nil {
		return err
	}
	pipe, err := pipeline.New(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	d.Pipe = pipe
	if err := d.installFlows(); err != nil {
		return err
	}
	// A capture from the config sees the first packet.
	if c := cfg.Capture; c != nil {
		if err := d.startCapture(strings.Fields(c.Start)); err != nil {
			return fmt.Errorf("%s:%d: capture.start: %w", cfg.File, c.Line, err)
		}
	}
	if err := d.startForwarding(); err != nil {
		return err
	}
	if err := d.followKernel(kernelIfcs); err != nil {
		d.log.Warn("exception path: not following the kernel's neighbours", "err", err)
	}
	return nil
}

// RoCESpec is the "roce" stage's configuration from [roce] and [qos].
func RoCESpec(cfg *config.Config) pipeline.RoCESpec {
	return pipeline.RoCESpec{
		TCMap:         cfg.TCMap(),
		VerifyICRC:    cfg.RoCE.VerifyICRC,
		DropBadICRC:   cfg.RoCE.BadICRC == "drop",
		DropMalformed: cfg.RoCE.Malformed == "drop",
		QPTable:       cfg.RoCE.QPTable,
		QPMaxAge:      cfg.RoCE.QPMaxAgeDuration(),
	}
}

// startForwarding (re)starts the ports and the workers.
func (d *Daemon) startForwarding() error {
	if err := d.Ports.Start(); err != nil {
		return err
	}
	if err := d.flowsStarted(); err != nil {
		d.log.Warn("flow rules", "err", err)
	}
	if err := d.Pipe.Start(); err != nil {
		return err
	}
	d.Started = time.Now()
	if d.Pipe.Spec.QoS != nil {
		d.events.start(eventPeriod, d.logEvents, d.logEvents)
	}
	for _, w := range d.Plan.Workers {
		d.log.Info("worker started", "lcore", w.Lcore, "socket", w.Socket, "cpu", dpdk.LcoreCPU(w.Lcore), "queues", len(w.Queues))
	}
	d.confineRuntime()
	return nil
}

// confineRuntime moves every thread but the workers' off the workers'
// CPUs, so that the Go runtime and the control plane never preempt a
// worker. Measured: without it the scheduler puts runtime threads on
// worker CPUs and costs a few percent of throughput.
func (d *Daemon) confineRuntime() {
	if d.Topo == nil {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	var tids map[int]int
	for {
		tids = dpdk.LcoreThreadIDs()
		started := 0
		for _, w := range d.Pipe.Workers {
			if _, ok := tids[w.Lcore]; ok {
				started++
			}
		}
		if started == len(d.Pipe.Workers) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	keep := map[int]bool{}
	lcoreOf := map[int]int{} // a worker's CPU -> its lcore
	for _, w := range d.Pipe.Workers {
		if tid, ok := tids[w.Lcore]; ok {
			keep[tid] = true
		}
		lcoreOf[dpdk.LcoreCPU(w.Lcore)] = w.Lcore
	}
	var cpus []int
	for _, c := range d.Topo.CPUs() {
		if _, worker := lcoreOf[c]; !worker {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		d.log.Warn("every CPU runs a worker lcore: the control plane and Go runtime share their CPUs")
		return
	}
	n, err := numa.ConfineThreads(keep, cpus)
	if err != nil {
		d.log.Warn("keeping runtime threads off worker CPUs", "err", err)
		return
	}
	d.log.Debug("runtime threads kept off worker CPUs", "threads", n, "cpus", numa.FormatCPUList(cpus))
	irqs := newIRQWatch("/", lcoreOf, d.log)
	irqs.check() // the counts as they are
	stalls := newStallWatch(d.log)
	d.confine.start(confinePeriod, func() {
		d.confineAgain(keep, cpus)
		irqs.check()
		if d.mu.TryLock() { // not while a reload or a stop holds the daemon
			if d.Pipe != nil {
				stalls.check(d.Pipe.Stats())
			}
			d.mu.Unlock()
		}
	}, nil)
}

// confinePeriod is how often the threads are confined again. A worker's
// thread is locked while it runs Go code, so the runtime clones new
// threads from its template thread, not from the worker's; but a thread
// it starts before the lock (its own entry into Go on the lcore's thread
// comes first) is a clone of the lcore's, pinned to the worker's CPU.
const confinePeriod = time.Second

// confineAgain confines the threads to cpus (all but those in keep).
func (d *Daemon) confineAgain(keep map[int]bool, cpus []int) {
	n, err := numa.ConfineThreads(keep, cpus)
	if err != nil {
		d.log.Warn("keeping runtime threads off worker CPUs", "err", err)
	} else if n > 0 {
		d.log.Debug("runtime threads moved off worker CPUs", "threads", n)
	}
}

// StopForwarding stops the workers if they run; every packet they hold
// is sent or freed. Ports keep running (and counting rx_missed) like
// testpmd's stop.
func (d *Daemon) StopForwarding() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopForwarding()
}

func (d *Daemon) stopForwarding() {
	if d.Pipe.Running() {
		d.Pipe.Stop()
		d.Stopped = time.Now()
	}
	d.events.halt()
	d.confine.halt()
}

// Close stops forwarding, closes the ports, checks that every mbuf came
// back, and releases EAL.
func (d *Daemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.shutdown()
}

func (d *Daemon) shutdown() error {
	var errs []error
	if d.Pipe != nil {
		d.stopTaps()
		d.Pipe.Stop()
		d.events.halt()
		d.confine.halt()
		d.Pipe.Free()
		d.Pipe = nil
	}
	if d.route != nil {
		d.route.free()
		d.route = nil
	}
	if d.Flows != nil {
		errs = append(errs, d.Flows.Close())
		d.Flows = nil
	}
	if d.Ports != nil {
		errs = append(errs, d.Ports.Close())
		d.Ports = nil
	}
	for _, p := range d.pfcPools {
		if n := p.InUse(); n != 0 {
			errs = append(errs, fmt.Errorf("%d PFC frame mbufs were not returned", n))
		}
		p.Free()
	}
	d.pfcPools = nil
	if d.pdump {
		errs = append(errs, dpdk.PdumpUninit())
		d.pdump = false
	}
	errs = append(errs, dpdk.Cleanup())
	return errors.Join(errs...)
}
