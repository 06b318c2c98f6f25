package pipeline

import (
	"errors"
	"fmt"
	"sync"

	"roce-fwd/dpdk"
	"roce-fwd/impair"
)

// ImpairSpec configures the impair stage (roce mode only).
type ImpairSpec struct {
	Rules []impair.Rule
	Seed  uint64 // for rules without their own seed
	Hold  int    // packets a worker may hold back (delay, reorder); 0: DefaultImpairHold
}

// DefaultImpairHold is how many packets a worker holds back at most: at a
// few Mpps, a millisecond of delay on every packet of a QP or two.
const DefaultImpairHold = 4096

// reorderWait is how long a packet held by a reorder rule waits for the
// later packets it lets go first: when they do not come, it leaves anyway.
const reorderWait = 10_000_000 // ns

// impairStage is a worker's impairment rules and the packets they hold
// back, in the order they were held.
type impairStage struct {
	eng  *impair.Worker // nil: no rules (the stage stays while it holds packets)
	held []heldPkt
	n    int
	out  []uint64 // per tx queue: packets the stage let through, for reorder holds
}

// heldPkt is a packet held back by a delay or a reorder rule.
type heldPkt struct {
	m       uintptr // the mbuf's handle
	tx      int32   // the tx queue it leaves by
	until   uint64  // unix ns (delay); the tx queue's out count (reorder)
	at      int64   // when it was held
	reorder bool
}

// impairPass runs the impairment rules over the burst's packets still on
// their way out: a rule drops a packet (under its own impair_* reason,
// never mixed with real drops), holds it back, or changes it in place.
func (w *Worker) impairPass(b *burst) {
	is := w.imp
	rx, tx := w.rx[b.src].port, w.step.Txq[b.tx].Port
	b.impaired = true
	for j, m := range b.pkts {
		b.imp[j] = 0
		if !b.forwarded(j) {
			continue
		}
		v := is.eng.Apply(rx, tx, b.frame[j], &b.res[j], w.now)
		if v.Rule == 0 {
			is.out[b.tx]++
			continue
		}
		b.imp[j] = v.Rule
		switch v.Act {
		case impair.ActDrop:
			b.drop(j, DropImpair)
		case impair.ActRateLimit:
			b.drop(j, DropImpairRate)
		case impair.ActDelay, impair.ActReorder:
			if is.n == len(is.held) {
				b.drop(j, DropImpairHoldFull)
				continue
			}
			h := heldPkt{m: m.Handle(), tx: int32(b.tx), until: v.Until, at: w.now}
			if v.Act == impair.ActReorder {
				h.until, h.reorder = is.out[b.tx]+v.Until, true
			}
			is.held[is.n] = h
			is.n++
			b.take(j)
		default:
			is.out[b.tx]++
		}
	}
}

// releaseHeld sends the held packets whose time has come (all of them
// with all) into their tx queues, in the order they were held, as far as
// the queues have room.
func (w *Worker) releaseHeld(all bool) {
	is := w.imp
	k := 0
	for i := 0; i < is.n; i++ {
		h := is.held[i]
		ready := all
		switch {
		case ready:
		case h.reorder:
			ready = is.out[h.tx] >= h.until || w.now-h.at >= reorderWait
		default:
			ready = uint64(w.now) >= h.until
		}
		if txq := &w.step.Txq[h.tx]; ready && txq.Room() > 0 {
			txq.Push(dpdk.MbufOf(h.m))
			continue
		}
		is.held[k] = h
		k++
	}
	is.n = k
}

// drainHeld sends every held packet as the worker leaves its loop; what
// the tx queues still refuse is dropped as a stopping worker's leftovers.
func (w *Worker) drainHeld() {
	for range 8 {
		if w.imp.n == 0 {
			return
		}
		w.releaseHeld(true)
		w.step.Flush()
	}
	for _, h := range w.imp.held[:w.imp.n] {
		w.drop(dpdk.MbufOf(h.m), DropStopDiscard)
	}
	w.imp.n = 0
	w.step.Flush()
}

// free releases the packets still held by a worker that never left a
// loop (one polled by hand: a loop sends them as it ends).
func (is *impairStage) free() {
	for _, h := range is.held[:is.n] {
		dpdk.FreeMbufs([]*dpdk.Mbuf{dpdk.MbufOf(h.m)})
	}
	is.n = 0
}

// takeImpair is the worker's side of SetImpair: the new rules (nil: none)
// and, the first time, the stage. Held packets wait on as they were.
func (w *Worker) takeImpair(eng *impair.Worker, fresh *impairStage) {
	if w.imp == nil {
		w.imp = fresh
	}
	if eng != nil {
		eng.Carry(w.imp.eng)
	}
	w.imp.eng = eng
}

// impairs are the pipeline's impairment rules as installed.
type impairs struct {
	mu   sync.Mutex
	set  *impair.Set
	hold int
}

// SetImpair installs rules (none: the stage is off) on every worker of a
// roce-mode pipeline, with seed for the rules without their own, and
// returns once each worker has taken them between two polls. A rule whose
// ID and line are unchanged keeps its counters and its place in its
// cycles.
func (p *Pipeline) SetImpair(rules []impair.Rule, seed uint64) error {
	if p.Spec.Mode != ModeRoCE {
		return errors.New("impairment needs forwarding mode roce: the rules match on the classifier's fields")
	}
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	var set *impair.Set
	if len(rules) > 0 {
		var err error
		if set, err = impair.Compile(rules, seed, len(p.Workers)); err != nil {
			return err
		}
	}
	var errs []error
	for i, w := range p.Workers {
		var eng *impair.Worker // made here, carried over on the worker
		if set != nil {
			eng = impair.NewWorker(set, i)
		}
		var fresh *impairStage
		if w.imp == nil {
			fresh = &impairStage{held: make([]heldPkt, p.imp.hold), out: make([]uint64, len(w.step.Txq))}
		}
		errs = append(errs, w.do("impairment rules", func() bool {
			w.takeImpair(eng, fresh)
			return true
		}))
	}
	p.imp.set = set
	return errors.Join(errs...)
}

// ImpairRules are the installed rules.
func (p *Pipeline) ImpairRules() []impair.Rule {
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	if p.imp.set == nil {
		return nil
	}
	return p.imp.set.Rules()
}

// ImpairStats sums the rules' counters over the workers (one per rule, in
// the rules' order) and reports how many packets the workers hold back.
// A rule has expired when it expired on every worker it ran on.
func (p *Pipeline) ImpairStats() (out []impair.Counter, held int) {
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	if p.imp.set == nil {
		return nil, p.heldPackets()
	}
	n := p.imp.set.Len()
	out = make([]impair.Counter, n)
	ran, expired := make([]int, n), make([]int, n)
	c := make([]impair.Counter, n)
	for _, w := range p.Workers {
		ok := false
		w.do("impairment counters", func() bool {
			if w.imp != nil && w.imp.eng != nil && w.imp.eng.Set() == p.imp.set {
				w.imp.eng.Counters(c)
				ok = true
			}
			return true
		})
		if !ok {
			continue
		}
		for k := range out {
			out[k].Matched += c[k].Matched
			out[k].Acted += c[k].Acted
			if c[k].Matched != 0 || c[k].Expired {
				ran[k]++
			}
			if c[k].Expired {
				expired[k]++
			}
		}
	}
	for k := range out {
		out[k].Expired = ran[k] > 0 && expired[k] == ran[k]
	}
	return out, p.heldPackets()
}

// heldPackets counts the packets the impair stage holds on every worker.
func (p *Pipeline) heldPackets() int {
	n := 0
	for _, w := range p.Workers {
		w.do("impairment hold count", func() bool {
			if w.imp != nil {
				n += w.imp.n
			}
			return true
		})
	}
	return n
}

// initImpair installs the spec's rules before the workers start.
func (p *Pipeline) initImpair(spec *ImpairSpec) error {
	p.imp.hold = DefaultImpairHold
	if spec == nil {
		return nil
	}
	if spec.Hold > 0 {
		p.imp.hold = spec.Hold
	}
	if len(spec.Rules) == 0 {
		return nil
	}
	if err := p.SetImpair(spec.Rules, spec.Seed); err != nil {
		return fmt.Errorf("impair: %w", err)
	}
	return nil
}
