package pipeline

import (
	"errors"
	"fmt"

	"roce-fwd/qos"
)

// Tables are the parts of the Spec that can change while the workers
// run: the classifier's TC map and ICRC/malformed policy, where each rx
// port forwards, and each port's QoS parameters. Update hands every
// worker its own precomputed view; a worker takes it between two polls,
// so a packet sees either the old tables or the new ones, never a mix,
// and nothing on the packet path locks or waits.
type Tables struct {
	RoCE    RoCESpec              // TCMap, VerifyICRC, DropBadICRC, DropMalformed (table sizes cannot change)
	Forward map[uint16]uint16     // rx port → tx port
	QoS     map[uint16]qos.Config // per port, when the pipeline has QoS
}

// workerTables is one worker's view of Tables.
type workerTables struct {
	roce  RoCESpec
	rxTx  []int        // per rx source: index into step.Txq
	eg    []qos.Config // per egress, the worker's share of the rate applied
	pfcTx []qos.PFCTxConfig
	pfcOn []bool // per ingress: has a PFC generator to reconfigure
}

// Tables returns the tables in force.
func (p *Pipeline) Tables() Tables {
	t := Tables{RoCE: p.Spec.RoCE, Forward: map[uint16]uint16{}}
	for _, ws := range p.Spec.Workers {
		for _, rx := range ws.Rx {
			t.Forward[rx.Port] = rx.To
		}
	}
	if p.Spec.QoS != nil {
		t.QoS = map[uint16]qos.Config{}
		for id, pc := range p.Spec.QoS.Ports {
			t.QoS[id] = pc.Config
		}
	}
	return t
}

// Update checks t against what the running pipeline can change, then
// hands it to every worker and waits until each has taken it (at most a
// second: a worker takes it after its current poll). On error nothing
// changed. What cannot change without rebuilding the pipeline — a
// forward to a port a worker has no tx queue on, a TC becoming lossless
// or lossy, the PFC priority map, turning QoS on or off — is refused
// with the reason.
func (p *Pipeline) Update(t Tables) error {
	if (t.QoS != nil) != (p.Spec.QoS != nil) {
		return errors.New("turning egress QoS on or off needs a restart")
	}
	if t.RoCE.QPTable != p.Spec.RoCE.QPTable || t.RoCE.QPMaxAge != p.Spec.RoCE.QPMaxAge {
		return errors.New("changing the QP table's size or ageing needs a restart")
	}
	if p.Spec.QoS != nil {
		for id, old := range p.Spec.QoS.Ports {
			c, ok := t.QoS[id]
			if !ok {
				return fmt.Errorf("port %s: no QoS configuration", p.Spec.Ports[id].Name)
			}
			if c.LosslessTCs() != old.Config.LosslessTCs() {
				return fmt.Errorf("port %s: the lossless TCs would change from %s to %s, which needs a restart",
					p.Spec.Ports[id].Name, qos.MaskList(old.Config.LosslessTCs()), qos.MaskList(c.LosslessTCs()))
			}
			if c.PrioToTC != old.Config.PrioToTC {
				return fmt.Errorf("port %s: the PFC priority to TC map would change, which needs a restart", p.Spec.Ports[id].Name)
			}
			if err := c.Validate(); err != nil {
				return fmt.Errorf("port %s: %w", p.Spec.Ports[id].Name, err)
			}
		}
	}
	views := make([]*workerTables, len(p.Workers))
	for i, w := range p.Workers {
		v, err := w.view(&t, p)
		if err != nil {
			return err
		}
		views[i] = v
	}
	var errsBefore uint64
	for _, w := range p.Workers {
		errsBefore += w.tableErrors.Load()
	}
	for i, w := range p.Workers {
		v := views[i]
		if err := w.do("new tables", func() bool {
			w.takeTables(v)
			return true
		}); err != nil {
			return err
		}
	}
	var errsAfter uint64
	for _, w := range p.Workers {
		errsAfter += w.tableErrors.Load()
	}
	if errsAfter != errsBefore {
		// The checks above missed a case: the workers run with part of
		// the new tables, which the caller must hear of.
		return fmt.Errorf("%d QoS reconfiguration(s) failed on the workers: the running QoS tables are partly updated", errsAfter-errsBefore)
	}
	p.Spec.RoCE = t.RoCE
	for wi := range p.Spec.Workers {
		for j := range p.Spec.Workers[wi].Rx {
			rx := &p.Spec.Workers[wi].Rx[j]
			if to, ok := t.Forward[rx.Port]; ok {
				rx.To = to
			}
		}
	}
	if p.Spec.QoS != nil {
		for id, c := range t.QoS {
			pc := p.Spec.QoS.Ports[id]
			pc.Config = c
			p.Spec.QoS.Ports[id] = pc
		}
	}
	return nil
}

// view computes the worker's share of t.
func (w *Worker) view(t *Tables, p *Pipeline) (*workerTables, error) {
	v := &workerTables{roce: t.RoCE, rxTx: make([]int, len(w.rx))}
	for i, src := range w.rx {
		to, ok := t.Forward[src.port]
		if !ok {
			v.rxTx[i] = src.tx
			continue
		}
		v.rxTx[i] = -1
		for k := range w.step.Txq {
			if w.step.Txq[k].Port == to {
				v.rxTx[i] = k
			}
		}
		if v.rxTx[i] < 0 {
			return nil, fmt.Errorf("forwarding %s to %s: lcore %d has no tx queue on %s (tx queues are assigned at start), which needs a restart",
				p.Spec.Ports[src.port].Name, p.Spec.Ports[to].Name, w.Lcore, p.Spec.Ports[to].Name)
		}
	}
	if qs := w.qs; qs != nil {
		for i := range qs.eg {
			c := t.QoS[qs.eg[i].port]
			splitRate(&c, qs.eg[i].senders)
			v.eg = append(v.eg, c)
		}
		for j := range qs.in {
			in := &qs.in[j]
			v.pfcOn = append(v.pfcOn, in.pfcTx != nil)
			c := t.QoS[in.port]
			v.pfcTx = append(v.pfcTx, c.PFCTxConfig(p.Spec.QoS.Ports[in.port].Speed))
		}
	}
	return v, nil
}

// takeTables applies tables handed over by Update: a mailbox job.
func (w *Worker) takeTables(v *workerTables) {
	if rs := w.rs; rs != nil {
		rs.tcmap = v.roce.TCMap
		rs.verifyICRC, rs.dropBadICRC, rs.dropMalformed = v.roce.VerifyICRC, v.roce.DropBadICRC, v.roce.DropMalformed
	}
	w.fs.tcmap = v.roce.TCMap
	for i := range w.rx {
		w.rx[i].tx = v.rxTx[i]
	}
	if qs := w.qs; qs != nil {
		now := w.clock.ns(w.step.TSC())
		for i := range qs.eg {
			e := &qs.eg[i]
			// Update validated the configs; an error here would be a bug
			// in that check, and is counted rather than ignored.
			if e.sched.Reconfigure(&v.eg[i], now) != nil || e.wd.Reconfigure(&v.eg[i]) != nil {
				w.tableErrors.Add(1)
			}
			e.idle = false // the next poll decides again under the new shaper
		}
		for j := range qs.in {
			if v.pfcOn[j] && qs.in[j].pfcTx.Reconfigure(v.pfcTx[j]) != nil {
				w.tableErrors.Add(1)
			}
		}
	}
}
