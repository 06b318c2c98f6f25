package pipeline

import (
	"roce-fwd/dpdk"
	"roce-fwd/internal/cacheline"
	"roce-fwd/roce"
)

// burst is one rx queue's packets from one poll and what the stages
// decided for each: the unit every stage works on. Each stage is a pass
// over the whole burst (so that a stage's cache misses overlap, and its
// code stays in the instruction cache); dispose ends the burst.
type burst struct {
	src  int // rx source, index into Worker.rx
	tx   int // the tx queue the source forwards to
	pkts []*dpdk.Mbuf
	res  []roce.Result // per packet, once a pass classified the burst
	// frame and size are each packet's first segment and length, once
	// the classify pass (roce mode) or the flow rules' (io and mac modes,
	// with flow tables) read them: later passes do not touch the mbuf
	// again (with large frames its line has left the L1 cache by then).
	// Without either they are not set.
	frame [][]byte
	size  []uint32
	fate  []fate // per packet: what dispose does with it
	odd   int    // packets whose fate is not fateForward
	// classified: res, frame and size hold the classify pass's results.
	classified bool
	// impaired: imp holds, per packet, the impairment rule that acted on
	// it (its index in the rule set plus one; 0: none), for the taps.
	impaired bool
	imp      []int32
	// flowed: flowHit holds, per packet, the ID plus one of the last
	// software flow rule it matched (0: none), for the taps.
	flowed  bool
	flowHit []int32
	// qslot is, per packet, its flow's slot in the worker's QP table (-1:
	// none), once the roce passes ran: the QoS stage counts what it does
	// to the flow there.
	qslot []int32
}

// fate is what becomes of a packet at the end of its burst.
type fate uint8

const (
	fateForward fate = iota // out of the burst's tx queue
	fateTaken               // a stage has it: queued or sent by QoS
	fateDrop                // fateDrop+r: dropped and counted under Reason r
)

// newBurst sizes a burst for up to n packets.
func newBurst(n int) burst {
	return burst{res: cacheline.Alone[roce.Result](n), fate: cacheline.Alone[fate](n), frame: cacheline.Alone[[]byte](n), size: cacheline.Alone[uint32](n), imp: cacheline.Alone[int32](n), qslot: cacheline.Alone[int32](n), flowHit: cacheline.Alone[int32](n)}
}

// reset starts the burst of rx source src.
func (b *burst) reset(src, tx int, pkts []*dpdk.Mbuf) {
	b.src, b.tx, b.pkts, b.odd = src, tx, pkts, 0
	b.classified, b.impaired, b.flowed = false, false, false
	clear(b.fate[:len(pkts)])
}

// forwarded reports whether packet j is still on its way out, so that a
// stage should look at it.
func (b *burst) forwarded(j int) bool { return b.fate[j] == fateForward }

// drop makes packet j a drop for reason.
func (b *burst) drop(j int, reason Reason) {
	b.fate[j] = fateDrop + fate(reason)
	b.odd++
}

// take marks packet j as taken by a stage.
func (b *burst) take(j int) {
	b.fate[j] = fateTaken
	b.odd++
}

// dispose ends a burst: every packet goes out of the burst's tx queue,
// is counted under its drop reason, or is left to the stage that took it.
// A burst in which every packet is forwarded is queued in one copy.
func (w *Worker) dispose(b *burst) {
	if tapBuilt && len(w.taps) != 0 {
		w.tapOut(b, true, true)
	}
	txq := &w.step.Txq[b.tx]
	if b.odd == 0 {
		txq.PushAll(b.pkts)
		return
	}
	for j, m := range b.pkts {
		switch f := b.fate[j]; {
		case f == fateForward:
			txq.Push(m)
		case f >= fateDrop:
			w.drop(m, Reason(f-fateDrop))
		}
	}
}
