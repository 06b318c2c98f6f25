package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/roce"
)

// The flow stage runs rte_flow rules in software, with the semantics the
// NIC gives them (package flowrule): a port's ingress table on what the
// worker receives from the port, right after classification, and a port's
// egress table on what it is about to send to the port, before the QoS
// stage. A drop is counted under flow_drop or flow_meter; a mark or flag
// is written into the mbuf where a PMD puts it; a DSCP rewrite moves the
// packet to the traffic class of its new DSCP, as if the NIC had rewritten
// it before roce-fwd saw it.
//
// Tables are compiled by the control plane and are immutable; what a
// worker writes (counters, meter buckets) is in its own flowrule.State per
// port and direction. SetFlows hands a new table to the workers like
// Update does, so a packet sees the old table or the new one; the new
// State takes over the old one's counters on the worker, between polls.

// FlowDir says which direction a port's software table runs in.
type FlowDir uint8

const (
	FlowIngress FlowDir = iota // packets received from the port
	FlowEgress                 // packets about to be sent to the port
)

func (d FlowDir) String() string {
	switch d {
	case FlowIngress:
		return "ingress"
	case FlowEgress:
		return "egress"
	}
	return "unknown"
}

// FlowStats is a port's software table in one direction and its counters
// summed over the workers.
type FlowStats struct {
	Table *flowrule.Table    // nil: no table
	Rules []flowrule.Counter // index i: rule i of Table
	// NotApplicable counts packets that hit a rule with actions that only
	// mean something on a NIC (queue, rss), since the port and direction
	// got a table (replacements keep counting; a removal resets it).
	NotApplicable uint64
}

// portFlows is one worker's instance of a port's table in one direction.
type portFlows struct {
	t             *flowrule.Table
	ingress       bool // a DSCP rewrite here changes the TC the packet is queued in
	st            *flowrule.State
	notApplicable uint64
	pub           []flowrule.Counter // published copy; capacity set by the control plane
	pubNA         uint64
}

// flowStage is a worker's software flow tables.
type flowStage struct {
	in        []*portFlows // per rx source: its port's ingress table, or nil
	out       []*portFlows // per tx queue: its port's egress table, or nil
	anyOut    bool         // some tx queue has an egress table
	installed []*portFlows // each table once; never grows past its capacity
	tcmap     roce.TCMap   // io and mac modes' classifier map
	path      flowrule.Path
}

func newFlowStage(rxs, txqs int, m *roce.TCMap) *flowStage {
	return &flowStage{
		in:        make([]*portFlows, rxs),
		out:       make([]*portFlows, txqs),
		installed: make([]*portFlows, 0, rxs+txqs),
		tcmap:     *m,
	}
}

// flowClassifyPass classifies the forwarded packets of an io or mac
// mode burst for the flow rules (without the ICRC check).
func (w *Worker) flowClassifyPass(b *burst) {
	fs := w.fs
	for j, m := range b.pkts {
		if b.forwarded(j) {
			b.frame[j], b.size[j] = m.Data(), uint32(m.PktLen())
			roce.Classify(b.frame[j], &fs.tcmap, false, &b.res[j])
		}
	}
}

// flowPass runs one table on the forwarded packets of a classified burst.
func (w *Worker) flowPass(b *burst, pf *portFlows) {
	if !b.flowed {
		clear(b.flowHit[:len(b.pkts)])
		b.flowed = true
	}
	for j, m := range b.pkts {
		if b.forwarded(j) {
			w.applyFlows(b, j, pf, m)
		}
	}
}

// applyFlows runs one table on packet j of b.
func (w *Worker) applyFlows(b *burst, j int, pf *portFlows, m *dpdk.Mbuf) {
	fs := w.fs
	frame, r := b.frame[j], &b.res[j]
	// A jump into a group where nothing matches still ran the jumping
	// rules' actions on a NIC: the path, not the final match, decides.
	pf.t.MatchPath(frame, r, &fs.path)
	if fs.path.N == 0 {
		return
	}
	b.flowHit[j] = int32(pf.t.Rules()[fs.path.Rules[fs.path.N-1]].ID) + 1
	v := pf.t.ApplyPath(&fs.path, frame, r, pf.st, w.now, int(b.size[j]))
	if v.Drop {
		if v.Reason == flowrule.DropMeter {
			b.drop(j, DropFlowMeter)
		} else {
			b.drop(j, DropFlowRule)
		}
		return
	}
	if v.HasMark {
		m.SetMark(v.Mark)
	}
	if v.Flag {
		m.SetFlag()
	}
	if v.DSCPSet && pf.ingress {
		// Apply rewrote r.DSCP: the QoS stage queues by the new one, as
		// if the NIC had rewritten it before roce-fwd saw the packet. An
		// egress rewrite happens after scheduling on a NIC: the TC stays.
		r.TC = w.tcmap().TC(r)
	}
	if v.NotInSoftware != 0 {
		pf.notApplicable++
	}
}

// tcmap is the map the worker's classifier uses.
func (w *Worker) tcmap() *roce.TCMap {
	if w.mode == ModeRoCE {
		return &w.rs.tcmap
	}
	return &w.fs.tcmap
}

// publish copies the counters of every table into the buffers the
// control plane sized; the worker calls it from a mailbox job, or the
// control plane while the worker is stopped.
func (fs *flowStage) publish() {
	for _, pf := range fs.installed {
		pf.pub = pf.st.Snapshot(pf.pub)
		pf.pubNA = pf.notApplicable
	}
}

// flowUpdate is one SetFlows on its way to a worker.
type flowUpdate struct {
	port  uint16
	dir   FlowDir
	pf    *portFlows // nil: remove the table
	carry []int
}

// takeFlows installs a table handed over by SetFlows: a mailbox job.
func (w *Worker) takeFlows(u *flowUpdate) {
	fs := w.fs
	var old *portFlows
	if u.dir == FlowIngress {
		for i := range w.rx {
			if w.rx[i].port == u.port {
				old, fs.in[i] = fs.in[i], u.pf
			}
		}
	} else {
		for k := range w.step.Txq {
			if w.step.Txq[k].Port == u.port {
				old, fs.out[k] = fs.out[k], u.pf
			}
		}
		fs.anyOut = slices.ContainsFunc(fs.out, func(pf *portFlows) bool { return pf != nil })
	}
	if old != nil {
		for j, pf := range fs.installed {
			if pf == old {
				last := len(fs.installed) - 1
				fs.installed[j] = fs.installed[last]
				fs.installed[last] = nil
				fs.installed = fs.installed[:last]
				break
			}
		}
	}
	if u.pf != nil {
		if old != nil {
			u.pf.st.Carry(old.st, u.carry)
			u.pf.notApplicable = old.notApplicable
		}
		fs.installed = append(fs.installed, u.pf)
	}
}

// flowKey names a port's table in one direction.
type flowKey struct {
	port uint16
	dir  FlowDir
}

// flowInstall is a table the control plane installed, and its instance
// on each worker that runs it.
type flowInstall struct {
	t       *flowrule.Table
	workers []*Worker
	pfs     []*portFlows
}

// pipelineFlows is the control plane's record of the installed tables.
type pipelineFlows struct {
	mu     sync.Mutex // one SetFlows or FlowCounters at a time
	tables map[flowKey]*flowInstall
}

// runsFlows reports whether the worker receives from (ingress) or
// transmits to (egress) port.
func (w *Worker) runsFlows(port uint16, dir FlowDir) bool {
	if dir == FlowIngress {
		for _, r := range w.rx {
			if r.port == port {
				return true
			}
		}
		return false
	}
	for k := range w.step.Txq {
		if w.step.Txq[k].Port == port {
			return true
		}
	}
	return false
}

// SetFlows installs t (nil removes) as port's software table for dir on
// every worker that receives from (ingress) or transmits to (egress) the
// port; a port no worker receives from (or sends to) holds the table
// without running it. carry maps each rule index of t to the index of the
// same rule in the table being replaced (-1: a new rule; nil: all new),
// so that counters and meters survive a recompilation. It returns once
// every worker has taken the table between two polls, as Update does
// (while stopped, the control plane installs it itself). The workers'
// States are allocated here, not on the workers.
func (p *Pipeline) SetFlows(port uint16, dir FlowDir, t *flowrule.Table, carry []int) error {
	if dir != FlowIngress && dir != FlowEgress {
		return fmt.Errorf("flow direction %d: want ingress or egress", dir)
	}
	if _, ok := p.Spec.Ports[port]; !ok {
		return fmt.Errorf("port %d is not configured", port)
	}
	if t != nil && carry != nil && len(carry) != len(t.Rules()) {
		return fmt.Errorf("carry has %d entries for a table of %d rules", len(carry), len(t.Rules()))
	}
	p.flows.mu.Lock()
	defer p.flows.mu.Unlock()
	var ws []*Worker
	for _, w := range p.Workers {
		if w.runsFlows(port, dir) {
			ws = append(ws, w)
		}
	}
	inst := &flowInstall{t: t}
	var errs []error
	for _, w := range ws {
		u := &flowUpdate{port: port, dir: dir, carry: carry}
		if t != nil {
			// Each worker meters its share of the port's traffic: together
			// they hold the configured rate, as one NIC meter would.
			u.pf = &portFlows{t: t, ingress: dir == FlowIngress, st: flowrule.NewStateShare(t, len(ws)), pub: make([]flowrule.Counter, 0, len(t.Rules()))}
			inst.workers = append(inst.workers, w)
			inst.pfs = append(inst.pfs, u.pf)
		}
		errs = append(errs, w.do("flow table", func() bool {
			w.takeFlows(u)
			return true
		}))
	}
	// A worker that did not take the table keeps its old one, and counts
	// nothing into the new one's state.
	err := errors.Join(errs...)
	key := flowKey{port, dir}
	if t == nil {
		delete(p.flows.tables, key)
	} else {
		if p.flows.tables == nil {
			p.flows.tables = map[flowKey]*flowInstall{}
		}
		p.flows.tables[key] = inst
	}
	return err
}

// FlowCounters merges the workers' counters of port's current table for
// dir, through the snapshot handshake: each worker copies them into
// buffers sized when the table was installed.
func (p *Pipeline) FlowCounters(port uint16, dir FlowDir) FlowStats {
	p.flows.mu.Lock()
	defer p.flows.mu.Unlock()
	inst := p.flows.tables[flowKey{port, dir}]
	if inst == nil {
		return FlowStats{}
	}
	s := FlowStats{Table: inst.t, Rules: make([]flowrule.Counter, len(inst.t.Rules()))}
	for i, w := range inst.workers {
		pf := inst.pfs[i]
		w.do("flow counters snapshot", func() bool {
			w.fs.publish()
			s.Rules = flowrule.AddCounters(s.Rules, pf.pub)
			s.NotApplicable += pf.pubNA
			return true
		})
	}
	return s
}
