package pipeline

import (
	"errors"
	"fmt"
)

// SetMode changes the forwarding mode of a stopped pipeline, like
// testpmd's "set fwd" (which also wants forwarding stopped first). A
// pipeline built with egress QoS stays in roce mode: its queues hang off
// the classifier.
func (p *Pipeline) SetMode(m Mode) error {
	if err := p.CheckMode(m); err != nil {
		return err
	}
	for _, w := range p.Workers {
		if m == ModeRoCE && w.rs == nil {
			if err := w.initRoCE(&p.Spec.RoCE, len(w.rx), p.Spec.rxBurst()); err != nil {
				return err
			}
		}
		w.mode = m
	}
	p.Spec.Mode = m
	return nil
}

// CheckMode says why SetMode(m) would fail, if it would.
func (p *Pipeline) CheckMode(m Mode) error {
	if p.running {
		return errors.New("forwarding is running: stop it first")
	}
	if m > ModeRoCE {
		return fmt.Errorf("unknown forwarding mode %d", m)
	}
	if p.Spec.QoS != nil && m != ModeRoCE {
		return errors.New("egress QoS is configured, which needs the roce mode's classifier: remove [qos]/[pfc] and restart to use io or mac")
	}
	return nil
}

// Sub is s with base's counts taken away: what was counted since base
// was taken from the same worker.
func (s LcoreStats) Sub(base LcoreStats) LcoreStats {
	s.Packets -= base.Packets
	s.Bursts -= base.Bursts
	s.EmptyPolls -= base.EmptyPolls
	s.BusyCycles -= base.BusyCycles
	for i := range s.Hist {
		s.Hist[i] -= base.Hist[i]
	}
	for i := range s.Drops {
		s.Drops[i] -= base.Drops[i]
	}
	for i := range s.Stalls {
		s.Stalls[i] -= base.Stalls[i]
	}
	return s // MaxPollGap stays the longest since start
}

// ResetQPTables empties every worker's QP table: a running worker does it
// between two polls.
func (p *Pipeline) ResetQPTables() {
	for _, w := range p.Workers {
		if rs := w.rs; rs != nil && rs.qp != nil {
			w.do("QP table reset", func() bool {
				rs.qp.Reset()
				return true
			})
		}
	}
}
