package pipeline

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"roce-fwd/dpdk"
	"roce-fwd/internal/cacheline"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// Spec is everything the pipeline needs to run, already placed.
type Spec struct {
	Mode      Mode
	Burst     int
	MaxBursts int // rx bursts taken from a busy queue per poll (1: one burst)
	TxRetries int // transmit calls that take nothing before a burst's rest is dropped
	Workers   []WorkerSpec
	Ports     map[uint16]PortSpec
	RoCE      RoCESpec // for ModeRoCE
	QoS       *QoSSpec // for ModeRoCE; nil: no egress QoS, packets go straight to tx
	// Route, when set, routes every packet by the FIB (routestage.go);
	// RxSpec.To is then unused and every worker has a tx queue on every
	// port.
	Route *RouteSpec
	// Impair, when set, sizes the impair stage and installs its first
	// rules (roce mode); SetImpair changes them while forwarding.
	Impair *ImpairSpec
}

// RoCESpec configures the "roce" stage.
type RoCESpec struct {
	TCMap         roce.TCMap
	VerifyICRC    bool
	DropBadICRC   bool
	DropMalformed bool
	QPTable       int           // slots per worker; 0: no per-QP telemetry
	QPMaxAge      time.Duration // 0: entries never age
}

// WorkerSpec is one worker lcore and the rx queues it polls.
type WorkerSpec struct {
	Lcore  int
	Socket int
	Rx     []RxSpec
}

// RxSpec is a (port, rx queue) to poll and the port to forward to.
type RxSpec struct {
	Port, Queue uint16
	To          uint16
}

// PortSpec is what the pipeline needs to know of a port.
type PortSpec struct {
	Name     string
	TxQueues int
	MAC      net.HardwareAddr // the port's own address (mac mode source)
	PeerMAC  net.HardwareAddr // where mac mode sends (destination)
}

// Pipeline is the set of workers.
type Pipeline struct {
	Spec    Spec
	Workers []*Worker
	running bool
	flows   pipelineFlows
	imp     impairs
	// qpMu makes QPFlowsInto's callers take turns in the workers' QP
	// table copy buffers; qpTables holds its views of them.
	qpMu     sync.Mutex
	qpTables [][]qpstats.Entry
}

// New builds the workers: each gets a burst step on its socket and its
// own tx queue on every port it forwards to. Two workers never share a
// tx queue (PMD tx queues are not thread-safe).
func New(spec Spec) (*Pipeline, error) {
	if spec.Burst < 1 {
		return nil, fmt.Errorf("burst %d: must be at least 1", spec.Burst)
	}
	if spec.rxBurst() > maxPoll {
		return nil, fmt.Errorf("burst %d x max_bursts %d: a poll takes at most %d packets", spec.Burst, spec.MaxBursts, maxPoll)
	}
	if len(spec.Workers) == 0 {
		return nil, errors.New("no worker lcores")
	}
	if spec.Mode > ModeRoCE {
		return nil, fmt.Errorf("unknown forwarding mode %d", spec.Mode)
	}
	if spec.QoS != nil && spec.Mode != ModeRoCE {
		return nil, errors.New("egress QoS needs the roce mode's classifier")
	}
	nextTxq := map[uint16]int{} // per port: next free tx queue
	p := &Pipeline{Spec: spec}
	// Per port, what every worker shares: the pause board and the PFC
	// account. The first worker polling a port sends its PFC frames, so
	// it needs a tx queue on the port even if it forwards elsewhere.
	shared := map[uint16]*portShared{}
	pfcOwner := map[uint16]int{} // port -> index in spec.Workers
	if spec.QoS != nil {
		for id := range spec.Ports {
			shared[id] = &portShared{}
		}
		for wi, ws := range spec.Workers {
			for _, rx := range ws.Rx {
				if _, ok := pfcOwner[rx.Port]; !ok {
					pfcOwner[rx.Port] = wi
				}
			}
		}
		// Each worker shapes its own queues of a port: the port's rate
		// is shared evenly by the workers that send to it.
		for _, ws := range spec.Workers {
			seen := map[uint16]bool{}
			for _, d := range spec.destinations(ws) {
				if !seen[d] {
					seen[d] = true
					shared[d].senders++
				}
			}
		}
	}
	for wi, ws := range spec.Workers {
		if len(ws.Rx) == 0 {
			continue // an idle lcore; placement already warned
		}
		var dests []uint16
		txIndex := map[uint16]int{}
		addDest := func(d uint16) {
			if _, ok := txIndex[d]; !ok {
				txIndex[d] = len(dests)
				dests = append(dests, d)
			}
		}
		for _, d := range spec.destinations(ws) {
			addDest(d)
		}
		w := cacheline.New[Worker]()
		*w = Worker{Lcore: ws.Lcore, Socket: ws.Socket, mode: spec.Mode, clock: newTSCClock(), b: newBurst(spec.rxBurst())}
		for i, d := range StallBounds {
			w.gapBound[i] = w.clock.cycles(d)
		}
		if spec.QoS != nil {
			for _, rx := range ws.Rx {
				if qp := spec.QoS.Ports[rx.Port]; pfcOwner[rx.Port] == wi && qp.SoftwarePFC() {
					shared[rx.Port].owner = w
					addDest(rx.Port)
				}
			}
		}
		if spec.Route != nil {
			txOf := make([]int16, maxPortID(spec.Ports)+1)
			for i := range txOf {
				txOf[i] = -1
			}
			for i, d := range dests {
				txOf[d] = int16(i)
			}
			var rx []rxSource
			for _, r := range ws.Rx {
				rx = append(rx, rxSource{port: r.Port, queue: r.Queue})
			}
			w.rt = newRouteStage(spec.Route, spec.rxBurst(), txOf, rx, len(spec.Workers))
		}
		targets := make([]dpdk.Queue, len(dests))
		w.fs = newFlowStage(len(ws.Rx), len(dests), &spec.RoCE.TCMap)
		w.macHdr = make([][12]byte, len(dests))
		if spec.Mode == ModeRoCE {
			if err := w.initRoCE(&spec.RoCE, len(ws.Rx), spec.rxBurst()); err != nil {
				p.Free()
				return nil, fmt.Errorf("lcore %d: %w", ws.Lcore, err)
			}
		}
		for i, d := range dests {
			ps, ok := spec.Ports[d]
			if !ok {
				p.Free()
				return nil, fmt.Errorf("lcore %d forwards to port %d, which is not configured", ws.Lcore, d)
			}
			if spec.Route != nil && spec.Route.KernelRings[d] != nil {
				// An exception path's TAP: its packets go on a ring, which
				// a pump off the workers' lcores transmits.
				targets[i] = dpdk.Queue{Port: d, Ring: spec.Route.KernelRings[d]}
				w.macHdr[i] = macHeader(ps.PeerMAC, ps.MAC)
				continue
			}
			q := nextTxq[d]
			if q >= ps.TxQueues {
				p.Free()
				return nil, fmt.Errorf("port %s has %d tx queue(s) but %d worker lcores forward to it: set tx_queues = %d for it (tx queues cannot be shared between lcores)",
					ps.Name, ps.TxQueues, q+1, q+1)
			}
			nextTxq[d] = q + 1
			targets[i] = dpdk.Queue{Port: d, Queue: uint16(q)}
			w.macHdr[i] = macHeader(ps.PeerMAC, ps.MAC)
		}
		var rxs []dpdk.Queue
		for _, rx := range ws.Rx {
			w.rx = append(w.rx, rxSource{port: rx.Port, queue: rx.Queue, tx: txIndex[rx.To]})
			rxs = append(rxs, dpdk.Queue{Port: rx.Port, Queue: rx.Queue})
		}
		step, err := dpdk.NewStep(spec.Burst, spec.MaxBursts, ws.Socket, rxs, targets, spec.TxRetries)
		if err != nil {
			if w.rs != nil {
				w.rs.free()
			}
			p.Free()
			return nil, fmt.Errorf("lcore %d: %w", ws.Lcore, err)
		}
		w.step = step
		if w.rt != nil {
			for i, k := range w.rt.fromKernel {
				if k >= 0 {
					// A TAP's every poll is a read system call: the kernel's
					// output (ARP, ICMP, BGP) waits at most 64 polls.
					if err := step.SetRxEvery(i, kernelPollEvery); err != nil {
						step.Free()
						p.Free()
						return nil, fmt.Errorf("lcore %d: %w", ws.Lcore, err)
					}
				}
			}
		}
		p.Workers = append(p.Workers, w)
		if spec.QoS != nil {
			if err := w.initQoS(spec.QoS, shared, targets, step.Capacity()); err != nil {
				p.Free()
				return nil, fmt.Errorf("lcore %d: %w", ws.Lcore, err)
			}
		}
	}
	if len(p.Workers) == 0 {
		return nil, errors.New("no worker has an rx queue to poll: check [[forward]]")
	}
	if err := p.initImpair(spec.Impair); err != nil {
		p.Free()
		return nil, err
	}
	return p, nil
}

// Start launches every worker's loop on its lcore.
func (p *Pipeline) Start() error {
	if p.running {
		return errors.New("forwarding is already started")
	}
	// SetFlows, FlowCounters and the counter snapshots act for a stopped
	// worker themselves, under these locks: a worker starting in the
	// middle would run next to them.
	p.flows.mu.Lock()
	defer p.flows.mu.Unlock()
	for i, w := range p.Workers {
		w.stop.Store(false)
		// Looping from before the launch: the control plane must not
		// touch the worker's state itself while the loop starts.
		w.box.mu.Lock()
		w.looping.Store(true)
		err := dpdk.Launch(w.Lcore, w.Loop)
		w.box.mu.Unlock()
		if err != nil {
			w.looping.Store(false)
			for _, v := range p.Workers[:i] {
				v.stop.Store(true)
				dpdk.Wait(v.Lcore)
			}
			return err
		}
	}
	p.running = true
	return nil
}

// Stop asks every worker to finish its burst, flush and return, and waits.
func (p *Pipeline) Stop() {
	if !p.running {
		return
	}
	for _, w := range p.Workers {
		w.stop.Store(true)
	}
	for _, w := range p.Workers {
		dpdk.Wait(w.Lcore)
	}
	p.running = false
}

// kernelPollEvery is how often a worker polls an exception path's TAP:
// once every so many polls.
const kernelPollEvery = 64

// destinations are the ports a worker sends to: its rx queues' [[forward]]
// targets, or every port when it routes.
func (s *Spec) destinations(ws WorkerSpec) []uint16 {
	var out []uint16
	if s.Route != nil {
		for id := range s.Ports {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	for _, rx := range ws.Rx {
		out = append(out, rx.To)
	}
	return out
}

func maxPortID(ports map[uint16]PortSpec) int {
	m := 0
	for id := range ports {
		m = max(m, int(id))
	}
	return m
}

// rxBurst is the most packets one poll takes from one rx queue.
func (s *Spec) rxBurst() int { return s.Burst * max(s.MaxBursts, 1) }

// Running reports whether the workers are running.
func (p *Pipeline) Running() bool { return p.running }

// Free releases the workers' DPDK memory; the pipeline must be stopped.
func (p *Pipeline) Free() {
	for _, w := range p.Workers {
		if w.qs != nil {
			w.qs.free()
		}
		if w.rs != nil {
			w.rs.free()
		}
		if w.imp != nil {
			w.imp.free()
		}
		if w.step != nil {
			w.step.Free()
		}
	}
	p.Workers = nil
}

// Stats snapshots every worker, sorted by lcore.
func (p *Pipeline) Stats() []LcoreStats {
	out := make([]LcoreStats, 0, len(p.Workers))
	for _, w := range p.Workers {
		s := w.Stats()
		for i, r := range w.rx {
			if ps, ok := p.Spec.Ports[r.port]; ok {
				s.Queues[i] = fmt.Sprintf("%s/%d", ps.Name, r.queue)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lcore < out[j].Lcore })
	return out
}

// Drops sums the drop counters of every worker by reason name.
func (p *Pipeline) Drops() map[string]uint64 {
	d := map[string]uint64{}
	for _, s := range p.Stats() {
		for r, v := range s.Drops {
			d[Reason(r).String()] += v
		}
	}
	return d
}
