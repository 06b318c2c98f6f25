// Package pipeline is roce-fwd's data path: one poll loop per worker lcore
// over the (port, rx queue) pairs the placement plan gave it.
//
// A packet's life, top to bottom in Worker.Poll and Worker.handle:
//
//  1. dpdk.Step.Run — one cgo call — transmits what the previous poll
//     queued, frees what it dropped, and receives a burst from each of
//     the worker's (port, queue)s.
//  2. Each burst goes through the stages, each a pass over the whole
//     burst that records a fate per packet (burst.go): the mode's pass
//     ("io" forwards untouched, "mac" rewrites the Ethernet addresses
//     like testpmd's mac mode, "roce" classifies, counts and looks up
//     the per-QP table: rocestage.go), the software flow rules
//     (flowstage.go) when the rx port has an ingress table or the tx port
//     an egress table, the impairment rules (impairstage.go, roce mode,
//     when there are any), and the QoS stage (qosstage.go, roce mode).
//  3. dispose sends each packet out of the tx queue of the port its rx
//     port forwards to, or counts it under a named Reason (reasons.go),
//     or leaves it to the stage that took it (the QoS queues).
//
// The control plane reaches a worker only through its mailbox
// (mailbox.go). Counters are per worker, on their own cache lines.
// Nothing here allocates, locks or calls C per packet.
package pipeline

import (
	"fmt"
	"net"
	"sync/atomic"

	"roce-fwd/dpdk"
)

// Mode is what the pipeline does to each packet.
type Mode uint8

const (
	ModeIO   Mode = iota // forward untouched (testpmd io)
	ModeMAC              // set source MAC to the tx port's, destination to its peer (testpmd mac)
	ModeRoCE             // classify (RoCEv2, opcode, QP, ECN, TC), count per port and per QP, forward
)

// ParseMode maps a config mode name to a Mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "io":
		return ModeIO, nil
	case "mac":
		return ModeMAC, nil
	case "roce":
		return ModeRoCE, nil
	}
	return 0, fmt.Errorf("unknown forwarding mode %q (valid: io, mac, roce)", s)
}

func (m Mode) String() string {
	switch m {
	case ModeIO:
		return "io"
	case ModeMAC:
		return "mac"
	case ModeRoCE:
		return "roce"
	}
	return "unknown"
}

// rxSource is one (port, rx queue) a worker polls and where it forwards.
type rxSource struct {
	port, queue uint16
	tx          int // index into step.Txq
}

// Worker is the state of one worker lcore. Only its own lcore touches it
// while it runs, except the counters and the stop flag.
type Worker struct {
	Lcore   int
	Socket  int
	mode    Mode
	step    *dpdk.Step
	rx      []rxSource // in the step's rx queue order
	macHdr  [][12]byte // per tx queue: destination then source MAC
	stop    atomic.Bool
	looping atomic.Bool // Loop is running on the lcore
	// TSC at the start of the previous poll and whether it carried packets:
	// the cycles between two polls are charged to the first one's packets.
	lastTSC  uint64
	lastBusy bool
	// gapWatch is the shortest gap between two polls pollGap must see:
	// the longest so far, or the first stall bound if that is shorter.
	// gapBound are StallBounds in TSC cycles.
	gapWatch uint64
	gapBound [NumStallBounds]uint64
	_        [64]byte // keep the hot counters off other workers' lines
	c        lcoreCounters
	_        [64]byte
	snap     snapshot
	rs       *roceStage // ModeRoCE only
	qs       *qosStage  // ModeRoCE with QoS only
	clock    tscClock
	now      int64        // unix ns at the start of the current poll, when a stage needs it
	fs       *flowStage   // software flow tables (every mode)
	rt       *routeStage  // the routed path, when the config has routes
	b        burst        // the burst being handled
	box      mailbox      // the control plane's work for the worker
	taps     []*tap       // capture and trace (tap.go), usually none
	imp      *impairStage // impairment rules and the packets they hold, usually none
	// tableErrors counts table swaps the worker could not apply.
	tableErrors atomic.Uint64
}

// Poll is one step of the loop: a burst in from every rx queue of the
// worker (one cgo call for all of them, which also sent the previous
// poll's packets), each burst through the stages, and the QoS stage's
// transmissions. It returns the number of packets received.
func (w *Worker) Poll() int {
	total := w.step.Run()

	tsc := w.step.TSC()
	if gap := tsc - w.lastTSC; gap > w.gapWatch {
		w.pollGap(gap)
	}
	if w.lastBusy {
		w.c.busyCycles += tsc - w.lastTSC
	}
	w.lastTSC, w.lastBusy = tsc, total > 0
	// QP ageing, the QoS stage, flow meters, punt limits and held packets
	// need the time.
	if w.qs != nil || total > 0 && (w.rs != nil || w.rt != nil || len(w.fs.installed) > 0) || impairBuilt && w.imp != nil && (w.imp.n > 0 || w.imp.storming > 0) {
		w.now = w.clock.ns(tsc)
	}
	for i := range w.rx {
		pkts := w.step.Rx(i)
		w.c.hist[histBucket(len(pkts))]++
		if len(pkts) == 0 {
			continue
		}
		w.b.reset(i, w.rx[i].tx, pkts)
		w.handle(&w.b)
	}
	w.c.packets += uint64(total)
	if is := w.imp; impairBuilt && is != nil && (is.n > 0 || is.storming > 0) {
		w.releaseHeld(false) // impairstage.go: delayed and reordered packets
		w.stormTx()          // and PFC/PAUSE storms
	}
	if w.qs != nil {
		w.qosTx(w.now)
	}
	return total
}

// pollGap records a gap of gap TSC cycles between the start of the
// previous poll and this one's: a new longest gap, or a stall.
func (w *Worker) pollGap(gap uint64) {
	if w.lastTSC == 0 {
		return // the first poll (Loop sets lastTSC; a test's Poll may not)
	}
	w.c.maxGap = max(w.c.maxGap, gap)
	for i := NumStallBounds - 1; i >= 0; i-- {
		if gap > w.gapBound[i] {
			w.c.stalls[i]++
			break
		}
	}
	w.gapWatch = min(w.c.maxGap, w.gapBound[0])
}

// handle takes a burst through the stages of the worker's mode, each a
// pass over the whole burst, and disposes of it.
func (w *Worker) handle(b *burst) {
	if tapBuilt && len(w.taps) != 0 && w.mode != ModeRoCE {
		w.tapRx(b) // as received: before a stage changes a byte
	}
	if w.rt != nil && w.rt.fromKernel[b.src] >= 0 {
		// What the kernel sends out of a port's exception path (ARP, ND,
		// its own traffic, what it forwarded) leaves by the port as is.
		b.tx = int(w.rt.fromKernel[b.src])
		w.egress(b)
		return
	}
	in := w.fs.in[b.src] // software flow tables, or nil
	switch w.mode {
	case ModeIO:
		if w.rt == nil {
			w.ioPass(b) // MAC control frames are consumed (by routePass when routed)
		}
	case ModeMAC:
		w.macPass(b, in == nil && w.rt == nil) // ingress rules see the addresses as received
	case ModeRoCE:
		w.classifyPass(b) // rocestage.go: classify, count, stage QP lookups
		w.qpPass(b)       // the per-QP table
		if tapBuilt && len(w.taps) != 0 {
			w.tapRx(b) // neither pass changes a byte; a filter reads their results
		}
	}
	if w.mode != ModeRoCE && (in != nil || w.fs.anyOut) {
		w.flowClassifyPass(b) // flowstage.go
	}
	if in != nil {
		w.flowPass(b, in)
		if w.mode == ModeMAC && w.rt == nil {
			w.rewritePass(b)
		}
	}
	if w.rt != nil {
		w.routePass(b) // routestage.go: FIB, ECMP, rewrite; egress per port
		return
	}
	w.egress(b)
}

// egress is the stages of the port a burst goes out of: its egress flow
// rules, QoS, and the burst's disposal.
func (w *Worker) egress(b *burst) {
	if out := w.fs.out[b.tx]; out != nil {
		w.flowPass(b, out) // egress rules see the frames as sent
	}
	if impairBuilt && w.imp != nil && w.imp.eng != nil && b.classified {
		w.impairPass(b) // impairstage.go: drop, mark, corrupt, hold back
	}
	if w.qs != nil {
		w.qosPass(b) // qosstage.go: egress queues, WRED-ECN, PFC
	}
	w.dispose(b) // burst.go
}

// ioPass forwards every frame untouched, but PFC and PAUSE frames, which
// the port consumes.
func (w *Worker) ioPass(b *burst) {
	for j, m := range b.pkts {
		if m.IsMACControl() {
			w.consumeMAC(b, j, nil)
		}
	}
}

// macPass drops runts, consumes PFC and PAUSE frames and, with rewrite,
// sets the Ethernet addresses as testpmd's mac mode does.
func (w *Worker) macPass(b *burst, rewrite bool) {
	hdr := &w.macHdr[b.tx]
	for j, m := range b.pkts {
		d := m.Data()
		switch {
		case len(d) < 14:
			b.drop(j, DropRunt)
		case m.IsMACControl():
			w.consumeMAC(b, j, nil)
		case rewrite:
			copy(d[:12], hdr[:])
		}
	}
}

// rewritePass is macPass's rewrite, after the ingress flow rules.
func (w *Worker) rewritePass(b *burst) {
	hdr := &w.macHdr[b.tx]
	for j, m := range b.pkts {
		if b.forwarded(j) {
			copy(m.Data()[:12], hdr[:])
		}
	}
}

// Loop polls until Stop, then transmits what is still queued.
func (w *Worker) Loop() {
	// The time the worker was stopped is neither busy nor a gap between
	// polls.
	w.lastTSC, w.lastBusy = dpdk.RDTSC(), false
	w.looping.Store(true)
	for !w.stop.Load() {
		w.Poll()
		w.serveMailbox()
	}
	if w.qs != nil {
		w.drainQoS()
	}
	if w.imp != nil {
		w.drainHeld()
	}
	w.step.Flush()
	w.finishMailbox()
	w.looping.Store(false)
}

// Stats snapshots the worker's counters.
func (w *Worker) Stats() LcoreStats {
	c := w.counters(nil)
	s := LcoreStats{
		Lcore:      w.Lcore,
		Socket:     w.Socket,
		Packets:    c.packets,
		Bursts:     sum(c.hist[1:]),
		EmptyPolls: c.hist[0],
		BusyCycles: c.busyCycles,
		Hist:       c.hist,
		Drops:      c.drops,
		MaxPollGap: w.clock.duration(c.maxGap),
	}
	for i := range s.Stalls { // cumulative: over each bound
		s.Stalls[i] = sum(c.stalls[i:])
	}
	for _, r := range w.rx {
		s.Queues = append(s.Queues, fmt.Sprintf("%d/%d", r.port, r.queue))
	}
	for i := range w.step.Txq {
		s.Drops[DropTxFull] += w.step.Txq[i].Dropped()
	}
	return s
}

// TxQueues reports, per transmit queue of the worker, its port and queue
// and the packets the PMD accepted.
func (w *Worker) TxQueues() []TxQueueStats {
	out := make([]TxQueueStats, len(w.step.Txq))
	for i := range w.step.Txq {
		t := &w.step.Txq[i]
		out[i] = TxQueueStats{Port: t.Port, Queue: t.Queue, Sent: t.Sent(), Dropped: t.Dropped()}
	}
	return out
}

// TxQueueStats counts one worker transmit queue.
type TxQueueStats struct {
	Port, Queue   uint16
	Sent, Dropped uint64
}

func macHeader(dst, src net.HardwareAddr) [12]byte {
	var h [12]byte
	copy(h[:6], dst)
	copy(h[6:], src)
	return h
}

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}
