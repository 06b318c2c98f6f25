package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"roce-fwd/dpdk"
	"roce-fwd/impair"
	"roce-fwd/internal/cacheline"
	"roce-fwd/roce"
)

// ImpairSpec configures the impair stage (roce mode only).
type ImpairSpec struct {
	Rules []impair.Rule
	Seed  uint64 // for rules without their own seed
	Hold  int    // packets a worker may hold back (delay, reorder); 0: DefaultImpairHold
	// Pools are where storm frames and duplicates come from, per socket.
	Pools map[int]*dpdk.Mempool
}

// DefaultImpairHold is how many packets a worker holds back at most: at a
// few Mpps, a millisecond of delay on every packet of a QP or two.
const DefaultImpairHold = 4096

// reorderWait is how long a packet held by a reorder rule waits for the
// later packets it lets go first: when they do not come, it leaves anyway.
const reorderWait = 10_000_000 // ns

// impairStage is a worker's impairment rules, the packets they hold back
// (in the order they were held), its PFC storms and its duplicates.
type impairStage struct {
	eng  *impair.Worker // nil: no rules (the stage stays while it holds packets)
	held []heldPkt
	n    int
	out  []uint64 // per tx queue: packets the stage let through, for reorder holds
	// storms are the PFC/PAUSE storms the worker sends; storming counts
	// the active ones.
	storms   []storm
	storming int
	// A burst's duplicates: the packets' indexes, and mbufs for the
	// copies (DPDK memory, filled by one AllocBulk) from pool.
	dup      []int32
	ndup     int
	dupMbufs []*dpdk.Mbuf
	pool     *dpdk.Mempool
	// generated counts the frames the stage made: storm frames and
	// duplicates (received + generated = sent + dropped + held).
	generated uint64
}

// heldPkt is a packet held back by a delay or a reorder rule, or a
// duplicate waiting for the end of the poll.
type heldPkt struct {
	m       uintptr // the mbuf's handle
	tx      int32   // the tx queue it leaves by
	until   uint64  // unix ns (delay); the tx queue's out count (reorder)
	at      int64   // when it was held
	reorder bool
}

// impairPass runs the impairment rules over the burst's packets still on
// their way out: a rule drops a packet (under its own impair_* reason,
// never mixed with real drops), holds it back, duplicates it, or changes
// it in place.
func (w *Worker) impairPass(b *burst) {
	is := w.imp
	rx, tx := w.rx[b.src].port, w.step.Txq[b.tx].Port
	b.impaired = true
	is.ndup = 0
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
		case impair.ActDuplicate:
			is.dup[is.ndup] = int32(j)
			is.ndup++
			is.out[b.tx]++
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
	if is.ndup > 0 {
		w.duplicate(b)
	}
}

// duplicate copies the burst's packets a duplicate rule chose into
// fresh mbufs (taken in one call) and holds the copies until the end of
// the poll: each leaves after its original's burst.
func (w *Worker) duplicate(b *burst) {
	is := w.imp
	n := is.ndup
	if room := len(is.held) - is.n; n > room || is.pool == nil || !is.pool.AllocBulk(is.dupMbufs[:n]) {
		for _, j := range is.dup[:n] {
			is.eng.Failed(b.imp[j] - 1)
		}
		return
	}
	for k, j := range is.dup[:n] {
		m := is.dupMbufs[k]
		// A chained mbuf (a jumbo frame in segments) is not copied.
		if f := b.frame[j]; int(b.size[j]) != len(f) || m.SetData(f) != nil {
			is.eng.Failed(b.imp[j] - 1)
			w.step.Drop(m)
			continue
		}
		is.held[is.n] = heldPkt{m: m.Handle(), tx: int32(b.tx), at: w.now}
		is.n++
		is.generated++
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
	if len(is.dupMbufs) > 0 {
		dpdk.FreeMem(unsafe.Pointer(&is.dupMbufs[0]))
		is.dupMbufs = nil
	}
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
	mu    sync.Mutex
	set   *impair.Set
	hold  int
	pools map[int]*dpdk.Mempool // per socket: where storm frames are built
	// staged is set once a worker has been given a stage: until then the
	// counts need no round trip to the workers.
	staged atomic.Bool
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
		fresh, err := p.imp.freshStage(w)
		if err != nil {
			errs = append(errs, err)
			continue
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
			out[k].Failed += c[k].Failed
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

// impairCounts sums over the workers the packets the impair stages hold
// and the frames they made.
func (p *Pipeline) impairCounts() (held int, generated uint64) {
	if !p.imp.staged.Load() {
		return 0, 0
	}
	for _, w := range p.Workers {
		w.do("impairment counts", func() bool {
			if w.imp != nil {
				held, generated = held+w.imp.n, generated+w.imp.generated
			}
			return true
		})
	}
	return held, generated
}

// heldPackets counts the packets the impair stages hold.
func (p *Pipeline) heldPackets() int {
	held, _ := p.impairCounts()
	return held
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
	p.imp.pools = spec.Pools
	if len(spec.Rules) == 0 {
		return nil
	}
	if err := p.SetImpair(spec.Rules, spec.Seed); err != nil {
		return fmt.Errorf("impair: %w", err)
	}
	return nil
}

// storm is a PFC or PAUSE storm a worker sends out of one of its tx
// queues, ahead of the data (MAC control frames wait behind nothing).
type storm struct {
	spec         impair.Storm
	tx           int
	pool         *dpdk.Mempool
	frame        [roce.MinFrameLen]byte
	n            int
	next, until  int64 // ns: the next frame, the storm's end
	every        int64
	sent, failed uint64
	active       bool
}

// StormStatus is a storm as the control plane sees it.
type StormStatus struct {
	Storm  impair.Storm `json:"storm"`
	Active bool         `json:"active"`
	Sent   uint64       `json:"sent"`   // frames transmitted
	Failed uint64       `json:"failed"` // frames not sent: no mbuf, or the tx queue was full
}

// stormTx sends the frames of the worker's storms that are due.
func (w *Worker) stormTx() {
	is := w.imp
	for i := range is.storms {
		s := &is.storms[i]
		if !s.active {
			continue
		}
		if s.next >= s.until { // every frame of the storm is out
			s.active = false
			is.storming--
			continue
		}
		if w.now < s.next {
			continue
		}
		// A frame a poll, each at its time: a late poll (the worker lost
		// its CPU) catches up over the next polls, microseconds apart, so
		// a storm sends exactly its count of frames.
		s.next += s.every
		if !w.sendFrame(s.tx, s.pool, s.frame[:s.n]) {
			s.failed++
			continue
		}
		s.sent++
		is.generated++
	}
}

// StartStorm has the worker that transmits on the storm's port send it,
// replacing a storm the port was sending.
func (p *Pipeline) StartStorm(s impair.Storm) error {
	ps, ok := p.Spec.Ports[uint16(s.Port)]
	if !ok {
		return fmt.Errorf("port %d is not configured", s.Port)
	}
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	var src roce.MAC
	copy(src[:], ps.MAC)
	st := storm{spec: s, every: s.Every.Nanoseconds(), active: true}
	var err error
	if s.Pause {
		st.n, err = roce.BuildPause(st.frame[:], src, s.Quanta)
	} else {
		var q [8]uint16
		for i := range q {
			if s.Prios&(1<<i) != 0 {
				q[i] = s.Quanta
			}
		}
		st.n, err = roce.BuildPFC(st.frame[:], src, s.Prios, q)
	}
	if err != nil {
		return err
	}
	for _, w := range p.Workers {
		tx := w.txqOf(uint16(s.Port))
		if tx < 0 {
			continue
		}
		if st.pool = p.imp.pools[w.Socket]; st.pool == nil {
			return fmt.Errorf("no mbuf pool on socket %d for the storm's frames", w.Socket)
		}
		st.tx = tx
		fresh, err := p.imp.freshStage(w)
		if err != nil {
			return err
		}
		return w.do("PFC storm", func() bool {
			if w.imp == nil {
				w.imp = fresh
			}
			now := w.clock.ns(w.step.TSC())
			st.next, st.until = now, now+s.For.Nanoseconds()
			is := w.imp
			for i := range is.storms {
				if is.storms[i].spec.Port == s.Port {
					if is.storms[i].active {
						is.storming--
					}
					is.storms[i] = st
					is.storming++
					return true
				}
			}
			if len(is.storms) < cap(is.storms) { // capacity from freshStage: no allocation here
				is.storms = append(is.storms, st)
				is.storming++
			}
			return true
		})
	}
	return fmt.Errorf("no worker transmits on port %d: a storm leaves by a port traffic is forwarded to", s.Port)
}

// StopStorm ends the storm of port (-1: every storm).
func (p *Pipeline) StopStorm(port int) error {
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	var errs []error
	for _, w := range p.Workers {
		errs = append(errs, w.do("PFC storm stop", func() bool {
			if w.imp == nil {
				return true
			}
			for i := range w.imp.storms {
				if s := &w.imp.storms[i]; s.active && (port < 0 || s.spec.Port == port) {
					s.active = false
					w.imp.storming--
				}
			}
			return true
		}))
	}
	return errors.Join(errs...)
}

// Storms reports every storm started, the ended ones too.
func (p *Pipeline) Storms() []StormStatus {
	p.imp.mu.Lock()
	defer p.imp.mu.Unlock()
	if !p.imp.staged.Load() {
		return nil
	}
	var out []StormStatus
	for _, w := range p.Workers {
		w.do("PFC storm status", func() bool {
			if w.imp != nil {
				for _, s := range w.imp.storms {
					out = append(out, StormStatus{Storm: s.spec, Active: s.active, Sent: s.sent, Failed: s.failed})
				}
			}
			return true
		})
	}
	return out
}

// txqOf is the index of the worker's tx queue on port (not an exception
// path's ring), or -1.
func (w *Worker) txqOf(port uint16) int {
	for i := range w.step.Txq {
		if t := &w.step.Txq[i]; t.Port == port && !t.IsRing() {
			return i
		}
	}
	return -1
}

// maxStorms is how many ports of a worker can storm at once.
const maxStorms = 8

// freshStage is a stage for w to take if it has none yet: made here, on
// the control plane, so that the worker allocates nothing.
func (ims *impairs) freshStage(w *Worker) (*impairStage, error) {
	if w.imp != nil {
		return nil, nil
	}
	ims.staged.Store(true)
	n := len(w.b.fate) // the most packets a burst holds
	mbufs, err := dpdk.MbufArray(n, w.Socket)
	if err != nil {
		return nil, err
	}
	is := cacheline.New[impairStage]()
	*is = impairStage{held: cacheline.Alone[heldPkt](ims.hold), out: cacheline.Alone[uint64](len(w.step.Txq)), storms: cacheline.Alone[storm](maxStorms)[:0],
		dup: cacheline.Alone[int32](n), dupMbufs: mbufs, pool: ims.pools[w.Socket]}
	return is, nil
}
