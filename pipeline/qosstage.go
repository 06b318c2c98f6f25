package pipeline

import (
	"cmp"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"roce-fwd/dpdk"
	"roce-fwd/hwpfc"
	"roce-fwd/internal/cacheline"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// The QoS stage makes each egress port behave like the egress of a
// lossless RoCE switch port (package qos has the algorithms):
//
//   - enqueue, on the worker that received the packet: the classifier's
//     TC picks one of the port's 8 queues; WRED-ECN marks CE (or drops a
//     Not-ECT packet of a lossy TC); the bytes are charged to the ingress
//     port's PFC account when the TC is lossless;
//   - dequeue, once per poll: strict priority then DWRR, under the port
//     shaper and the pause state of the port's link partner, into the
//     worker's tx queue of that port;
//   - PFC: frames received on a port pause its egress (on every worker
//     that sends to it, through the port's pause board); the bytes an
//     ingress port holds decide when to send it XOFF and XON;
//   - the PFC watchdog, every watchdogPeriod.
//
// A port left idle by the last poll (queues empty, not paused, no shaper)
// passes arrivals straight to its tx queue, counted as enqueued and sent:
// the scheduler would send them all in this poll anyway, and skipping the
// queue halves the stage's cost at line rate. The first packet that has
// to wait, or a PFC frame for the port, ends it until the next poll.
//
// Queues are per worker: each worker owns a tx queue on each port it
// sends to, so it runs the scheduler of its own queues and no two lcores
// touch one queue. The port's rate is split evenly between the workers
// that send to it. What the workers share, per port, is the pause board
// and the PFC byte account, both atomics updated at most once per poll.

// QoSSpec configures the QoS stage (ModeRoCE only). Every port the
// pipeline sends to or receives from has an entry.
type QoSSpec struct {
	Ports map[uint16]QoSPort
	Pools map[int]*dpdk.Mempool // per socket: where PFC frames are built
	// Mbufs is the data pool's size per socket: a TC queue cannot hold
	// more packets than that, so no ring gets more slots. 0: 16383.
	Mbufs int
}

// QoSPort is one port's QoS.
type QoSPort struct {
	Config qos.Config // its egress queues, scheduler, shaper (Config.Rate) and PFC thresholds
	// Speed is the link speed, in bits/s, that PFC quanta are timed at.
	Speed uint64
	MAC   roce.MAC // source address of the PFC frames
	Mode  string   // how PFC runs: hwpfc's "software", "hardware" or "kernel"
}

// SoftwarePFC reports whether roce-fwd sends this port's link partner
// XOFF/XON for the lossless priorities (not when the NIC or the kernel
// does PFC itself).
func (p *QoSPort) SoftwarePFC() bool { return p.Mode == hwpfc.Software }

// watchdogPeriod is how often the PFC watchdog samples: SONiC polls at
// 100 ms for a 200 ms detection time; finer costs nothing here.
const watchdogPeriod = 10_000_000 // ns

// pauseBoard carries a port's received pause state from the worker that
// receives its PFC frames to every worker that sends to the port. Per
// priority: when the last frame naming it arrived, and until when it
// pauses (until <= at: resumed). gen moves after each update.
type pauseBoard struct {
	gen   atomic.Uint64
	at    [qos.NumTC]atomic.Int64
	until [qos.NumTC]atomic.Int64
}

// portShared is the state of a port every worker may touch.
type portShared struct {
	board   pauseBoard
	held    [qos.NumTC]atomic.Int64 // bytes received on this port, per priority, in egress queues
	owner   *Worker                 // sends this port's PFC frames (software PFC)
	senders int                     // workers forwarding to this port: they share its rate
}

// egress is one worker's queues on one port.
type egress struct {
	port     uint16
	senders  int // workers sharing the port's rate
	sched    *qos.Scheduler
	wd       *qos.Watchdog
	rx       *qos.PFCRx // mirror of the port's pause board
	board    *pauseBoard
	gen      uint64
	seenAt   [qos.NumTC]int64
	seenTill [qos.NumTC]int64
	tcToPrio [qos.NumTC]uint8
	lossless uint8 // lossless TCs
	// idle: at the end of the last poll the port's queues were empty and
	// nothing paused or shaped it, so arrivals go straight to the tx queue
	// (cut-through) until a packet has to wait.
	idle      bool
	flushing  uint8             // TCs in a storm whose queue the watchdog is emptying
	wdFlushed [qos.NumTC]uint64 // packets the watchdog flushed, per TC
	overflow  [qos.NumTC]int64  // last lossless-overflow event, per TC
	mem       unsafe.Pointer
}

// ingress is one port a worker receives from.
type ingress struct {
	port   uint16
	rx     qos.PFCRx // decodes and counts the port's received PFC frames
	shared *portShared
	delta  [qos.NumTC]int64 // change of the bytes held this poll, per priority
	pfcTx  *qos.PFCTx       // the owner's PFC generator; nil on other workers
	txq    int              // the owner's tx queue on this port
	mac    roce.MAC
	pool   *dpdk.Mempool
	frame  [64]byte
	sent   uint64 // PFC frames transmitted
	failed uint64 // PFC frames that could not be sent (no mbuf or tx room)
}

type qosStage struct {
	eg     []egress  // per tx queue of the worker, in step.Txq order
	in     []ingress // per port the worker receives from
	rxIn   []int     // per rx source: index into in
	slots  []qos.Slot
	ev     [qos.NumTC]qos.WDEvent
	nextWD int64
	events eventRing
	pub    []egressStats // published copies (snapshot handshake)
	pubIn  []ingressStats
}

// initQoS builds the worker's QoS state; targets are its tx queues.
func (w *Worker) initQoS(spec *QoSSpec, shared map[uint16]*portShared, targets []dpdk.Queue, slots int) error {
	qs := cacheline.New[qosStage]()
	*qs = qosStage{slots: cacheline.Alone[qos.Slot](slots)}
	w.qs = qs
	pool := spec.Pools[w.Socket]
	for _, rx := range w.rx {
		idx := -1
		for j := range qs.in {
			if qs.in[j].port == rx.port {
				idx = j
			}
		}
		if idx < 0 {
			pc, ok := spec.Ports[rx.port]
			if !ok {
				return fmt.Errorf("no QoS configuration for port %d", rx.port)
			}
			idx = len(qs.in)
			qs.in = append(qs.in, ingress{port: rx.port, shared: shared[rx.port], txq: -1, mac: pc.MAC, pool: pool})
			if err := qs.in[idx].rx.Init(pc.Speed, &pc.Config.PrioToTC); err != nil {
				return fmt.Errorf("port %d: %w", rx.port, err)
			}
		}
		qs.rxIn = append(qs.rxIn, idx)
	}
	for _, t := range targets {
		pc, ok := spec.Ports[t.Port]
		if !ok {
			return fmt.Errorf("no QoS configuration for port %d", t.Port)
		}
		e, err := newEgress(&pc, t.Port, w.Socket, shared[t.Port], w.Lcore, cmp.Or(spec.Mbufs, 16383))
		if err != nil {
			qs.free()
			return fmt.Errorf("port %d: %w", t.Port, err)
		}
		qs.eg = append(qs.eg, e)
	}
	for j := range qs.in {
		in := &qs.in[j]
		pc := spec.Ports[in.port]
		if !pc.SoftwarePFC() || in.shared.owner != w || pc.Config.PFCPriorities() == 0 {
			continue
		}
		for k, t := range targets {
			if t.Port == in.port {
				in.txq = k
			}
		}
		tx, err := qos.NewPFCTx(pc.Config.PFCTxConfig(pc.Speed))
		if err != nil {
			qs.free()
			return fmt.Errorf("port %d: %w", in.port, err)
		}
		in.pfcTx = tx
	}
	qs.pub = make([]egressStats, len(qs.eg))
	qs.pubIn = make([]ingressStats, len(qs.in))
	return nil
}

// splitRate gives one of senders workers its share of c's shapers.
func splitRate(c *qos.Config, senders int) {
	if n := uint64(max(senders, 1)); n > 1 {
		c.Rate /= n
		for i := range c.TC {
			c.TC[i].MaxRate /= n
		}
	}
}

// newEgress builds one port's queues with their rings in DPDK memory.
// Each TC gets room for its byte limit in minimum-size frames, but never
// more slots than the socket has mbufs.
func newEgress(pc *QoSPort, port uint16, socket int, sh *portShared, lcore, maxSlots int) (egress, error) {
	cfg := pc.Config
	splitRate(&cfg, sh.senders)
	var sizes [qos.NumTC]int
	total := 0
	for i := range cfg.TC {
		n := maxSlots
		if l := cfg.TC[i].Limit; l != 0 && l/60+1 < uint64(n) {
			n = int(l/60 + 1)
		}
		sizes[i] = n
		total += n
	}
	mem, err := dpdk.Zmalloc(fmt.Sprintf("port %d TC queues of lcore %d", port, lcore), uintptr(total)*unsafe.Sizeof(qos.Slot{}), socket)
	if err != nil {
		return egress{}, err
	}
	all := unsafe.Slice((*qos.Slot)(mem), total)
	var rings [qos.NumTC][]qos.Slot
	off := 0
	for i, n := range sizes {
		rings[i] = all[off : off+n : off+n]
		off += n
	}
	rx, err := qos.NewPFCRx(pc.Speed, &cfg.PrioToTC)
	if err != nil {
		dpdk.FreeMem(mem)
		return egress{}, err
	}
	s, err := qos.NewScheduler(&cfg, &rings, rx, uint64(port)<<32|uint64(lcore))
	if err != nil {
		dpdk.FreeMem(mem)
		return egress{}, err
	}
	wd, err := qos.NewWatchdog(&cfg, s)
	if err != nil {
		dpdk.FreeMem(mem)
		return egress{}, err
	}
	// A port without a shaper is idle from the start: its first packets
	// need not wait for a poll's end to cut through.
	return egress{port: port, senders: sh.senders, sched: s, wd: wd, rx: rx, board: &sh.board, mem: mem,
		tcToPrio: cfg.TCToPrio(), lossless: cfg.LosslessTCs(), idle: s.Idle(0)}, nil
}

func (qs *qosStage) free() {
	for i := range qs.eg {
		dpdk.FreeMem(qs.eg[i].mem)
		qs.eg[i].mem = nil
	}
}

// qosPass offers every forwarded packet of a classified burst to the
// egress queues of its tx port; the queues take it (fateTaken) or refuse
// it under a drop reason. While the port is idle, packets cut through:
// counted by the scheduler and left to dispose, which sends them before
// anything the queues release later, so the order holds.
func (w *Worker) qosPass(b *burst) {
	e := &w.qs.eg[b.tx]
	// A pause received earlier in this poll holds this burst already.
	if e.syncPause() && e.idle && e.rx.PausedMask(w.now) != 0 {
		e.idle = false
	}
	room := w.step.Txq[b.tx].Room() - (len(b.pkts) - b.odd) // what dispose will push
	for j, m := range b.pkts {
		if !b.forwarded(j) {
			continue
		}
		r := &b.res[j]
		n := int(b.size[j])
		if e.idle && room >= 0 {
			e.sched.CutThrough(r.TC, uint32(n))
			continue
		}
		room++ // not pushed by dispose after all
		if why, refused := w.qosEnqueue(b.src, e, m, b.frame[j], r, n, b.qslot[j]); refused {
			b.drop(j, why)
		} else {
			b.take(j)
		}
	}
}

// qosEnqueue offers one classified packet (frame, n bytes), received from rx
// source src, to egress e, and says why if it was refused. What it does to
// the packet is counted to its flow's QP table slot (-1: none).
func (w *Worker) qosEnqueue(src int, e *egress, m *dpdk.Mbuf, frame []byte, r *roce.Result, n int, slot int32) (Reason, bool) {
	qs := w.qs
	tc := r.TC & 7
	e.idle = false // this packet waits: so must the ones after it
	in := qs.rxIn[src]
	lossless := e.lossless&(1<<tc) != 0
	sl := qos.Slot{Handle: m.Handle(), Len: uint32(n), Src: uint16(in)}
	prio := e.tcToPrio[tc]
	if lossless {
		sl.Src |= uint16(prio)<<8 | srcCharged
	}
	markCE, why := e.sched.Enqueue(tc, sl, r.ECN)
	if why != qos.ReasonNone {
		reason := dropReasonOf(why, lossless)
		if reason == DropLosslessOverflow && w.now-e.overflow[tc] >= overflowEventGap {
			e.overflow[tc] = w.now
			qs.events.put(Event{Kind: EventLosslessOverflow, Port: e.port, TC: tc, At: w.now})
		}
		w.victim(slot, qpstats.VictimDropped)
		return reason, true
	}
	if markCE {
		qos.MarkCE(frame, int(r.L3), r.IPVersion)
		w.victim(slot, qpstats.VictimMarked)
	}
	if e.rx != nil && e.rx.Paused(tc, w.now) {
		w.victim(slot, qpstats.VictimHeld)
	}
	if lossless {
		qs.in[in].delta[prio] += int64(n)
	}
	return 0, false
}

// victim counts what the QoS stage did to a packet in its flow's QP table
// slot, when the flow has one (show pfc victims, show ecn marks).
func (w *Worker) victim(slot int32, k qpstats.VictimKind) {
	if slot >= 0 && w.rs.qp != nil {
		w.rs.qp.Victim(slot, k)
	}
}

// overflowEventGap spaces the log lines of a lossless queue that keeps
// overflowing: its drop counter has every packet, the log one line a second.
const overflowEventGap = 1_000_000_000 // ns

// dropReasonOf names a QoS refusal. A full lossless queue is not a tail
// drop but a failure of PFC to hold the sender back.
func dropReasonOf(r qos.Reason, lossless bool) Reason {
	switch r {
	case qos.ReasonWRED:
		return DropQoSWRED
	case qos.ReasonPFCWD:
		return DropPFCWatchdog
	}
	if lossless {
		return DropLosslessOverflow
	}
	return DropQoSTail
}

// consumeMAC takes packet j of b, a PFC or PAUSE frame, off the data
// path: it pauses the port's egress (when QoS runs, which classified the
// frame: b.res[j] says what it is) and is counted, never forwarded.
func (w *Worker) consumeMAC(b *burst, j int, frame []byte) {
	if frame == nil {
		frame = b.pkts[j].Data() // io and mac modes read only the EtherType
	}
	kind := roce.MACCtlOf(frame)
	if kind != roce.MACCtlPFC && kind != roce.MACCtlPause {
		b.drop(j, DropMACControlOther)
		return
	}
	b.drop(j, DropMACControl)
	qs := w.qs
	if qs == nil {
		return
	}
	now := w.now
	in := &qs.in[qs.rxIn[b.src]]
	for i := range qs.eg {
		if qs.eg[i].port == in.port {
			qs.eg[i].idle = false // until the next poll has seen the pause
		}
	}
	r := &b.res[j]
	r.MACCtl = kind // io and mac modes did not classify the frame
	req, ok := roce.ParseMACControl(frame, r)
	if !ok {
		return
	}
	ce := req.ClassEnable
	if r.MACCtl == roce.MACCtlPFC {
		in.rx.ReceivePFC(now, ce, &req.Quanta)
	} else {
		in.rx.ReceivePause(now, req.Quanta[0])
	}
	board := &in.shared.board
	for p := range uint8(qos.NumTC) {
		if ce&(1<<p) != 0 {
			board.until[p].Store(in.rx.Until(p))
			board.at[p].Store(now)
		}
	}
	board.gen.Add(1)
}

// syncPause mirrors the port's pause board into this egress.
func (e *egress) syncPause() bool {
	g := e.board.gen.Load()
	if g == e.gen {
		return false
	}
	e.gen = g
	for p := range uint8(qos.NumTC) {
		at, until := e.board.at[p].Load(), e.board.until[p].Load()
		if at != e.seenAt[p] || until != e.seenTill[p] {
			e.seenAt[p], e.seenTill[p] = at, until
			e.rx.Mirror(at, p, until)
		}
	}
	return true
}

// qosTx runs once per poll, after the bursts were enqueued: each egress
// sends what its scheduler allows into the worker's tx queue, the
// watchdog samples, and the PFC accounts are settled.
func (w *Worker) qosTx(now int64) {
	qs := w.qs
	for i := range qs.eg {
		e := &qs.eg[i]
		e.syncPause()
		txq := &w.step.Txq[i]
		room := min(txq.Room(), len(qs.slots))
		if room == 0 {
			// The tx queue is full of this poll's cut-through packets.
			// Whether the next poll's may cut through too depends on the
			// queues alone: the tx queue is empty again after the next Run,
			// and qosPass checks its room.
			e.idle = e.sched.Idle(now)
			continue
		}
		if e.flushing != 0 {
			w.flushStorms(e)
		}
		k := e.sched.Dequeue(now, qs.slots[:room], 0)
		for _, s := range qs.slots[:k] {
			txq.Push(dpdk.MbufOf(s.Handle))
		}
		if e.lossless != 0 {
			qs.unhold(qs.slots[:k])
		}
		e.idle = e.sched.Idle(now)
	}
	if now >= qs.nextWD {
		qs.nextWD = now + watchdogPeriod
		w.qosWatchdog(now)
	}
	for j := range qs.in {
		w.settlePFC(&qs.in[j], now)
	}
}

// unhold returns the bytes of slots, just taken out of a queue, to their
// ingress ports' PFC accounts (only packets of lossless TCs were charged).
func (qs *qosStage) unhold(slots []qos.Slot) {
	for _, s := range slots {
		if s.Src&srcCharged != 0 {
			qs.in[s.Src&0xff].delta[(s.Src>>8)&7] -= int64(s.Len)
		}
	}
}

// A slot's Src packs the worker's ingress index (low byte), the PFC
// priority (bits 8-10) and whether the bytes were charged to PFC.
const srcCharged = 1 << 15

// flushStorms drops, as SONiC's pfcwd "drop" action does, what the
// queues of TCs in a storm hold, as far as this poll's drop list allows.
func (w *Worker) flushStorms(e *egress) {
	qs := w.qs
	for m := e.flushing; m != 0; m &= m - 1 {
		tc := uint8(bits.TrailingZeros8(m))
		for {
			room := min(w.step.DropRoom(), len(qs.slots))
			if room == 0 {
				return
			}
			k := e.sched.Flush(tc, qs.slots[:room])
			for _, s := range qs.slots[:k] {
				w.step.Drop(dpdk.MbufOf(s.Handle))
			}
			w.c.drops[DropPFCWatchdog] += uint64(k)
			e.wdFlushed[tc] += uint64(k)
			qs.unhold(qs.slots[:k])
			if k < room {
				e.flushing &^= 1 << tc
				break
			}
		}
	}
}

// qosWatchdog samples every egress's PFC watchdog and acts on storms.
func (w *Worker) qosWatchdog(now int64) {
	qs := w.qs
	for i := range qs.eg {
		e := &qs.eg[i]
		n := e.wd.Poll(now, qs.ev[:])
		for _, ev := range qs.ev[:n] {
			kind := EventStormRestored
			if ev.Kind == qos.StormDetected {
				kind = EventStormDetected
				if ev.Action == qos.ActionDrop {
					e.flushing |= 1 << ev.TC
				}
			}
			qs.events.put(Event{Kind: kind, Port: e.port, TC: ev.TC, Action: ev.Action, At: ev.At})
		}
	}
}

// settlePFC publishes this poll's change of the bytes held from ingress
// port in, and on the port's PFC owner sends XOFF/XON as they require.
func (w *Worker) settlePFC(in *ingress, now int64) {
	for p := range in.delta {
		if d := in.delta[p]; d != 0 {
			in.shared.held[p].Add(d)
			in.delta[p] = 0
		}
	}
	if in.pfcTx == nil {
		return
	}
	for m := in.pfcTx.Enabled(); m != 0; m &= m - 1 {
		p := uint8(bits.TrailingZeros8(m))
		in.pfcTx.Set(p, uint64(max(in.shared.held[p].Load(), 0)))
	}
	f, send := in.pfcTx.Check(now)
	if !send {
		return
	}
	w.sendPFC(in, &f)
}

// sendPFC transmits a PFC frame out of ingress port in, ahead of the
// egress queues (MAC control frames are not queued behind data).
func (w *Worker) sendPFC(in *ingress, f *qos.PFCFrame) {
	n, err := f.Build(in.frame[:], in.mac)
	if err != nil || !w.sendFrame(in.txq, in.pool, in.frame[:n]) {
		in.failed++
		return
	}
	in.sent++
}

// sendFrame transmits a frame the worker built (PFC, a storm's) out of tx
// queue tx, ahead of what the QoS queues hold, in an mbuf from pool. It
// reports false when there was no mbuf or no room.
func (w *Worker) sendFrame(tx int, pool *dpdk.Mempool, frame []byte) bool {
	txq := &w.step.Txq[tx]
	if txq.Room() == 0 || pool == nil {
		return false
	}
	m := pool.Alloc()
	if m == nil {
		return false
	}
	if m.SetData(frame) != nil {
		w.step.Drop(m)
		return false
	}
	txq.Push(m)
	return true
}

// drainTimeout bounds how long a stopping worker keeps sending what its
// QoS queues hold (at the shaped rate, honouring pauses).
const drainTimeout = 1_000_000_000 // ns

// drainQoS runs after Stop: it sends what the QoS queues still hold as
// the scheduler allows, for up to drainTimeout, then frees what is left
// under the stop_discard reason, so that a stopped pipeline holds nothing.
func (w *Worker) drainQoS() {
	qs := w.qs
	deadline := w.clock.ns(w.step.TSC()) + drainTimeout
	for w.qosBacklog() > 0 {
		now := w.clock.ns(w.step.TSC())
		if now >= deadline {
			w.discardQoS()
			break
		}
		w.now = now
		w.qosTx(now)
		w.step.Flush()
	}
	for j := range qs.in {
		w.settlePFC(&qs.in[j], w.clock.ns(w.step.TSC()))
	}
	w.step.Flush()
}

func (w *Worker) qosBacklog() int {
	n := 0
	for i := range w.qs.eg {
		_, k := w.qs.eg[i].sched.Backlog()
		n += k
	}
	return n
}

// discardQoS frees every queued packet, counted as stop_discard.
func (w *Worker) discardQoS() {
	qs := w.qs
	for i := range qs.eg {
		e := &qs.eg[i]
		for tc := range uint8(qos.NumTC) {
			for {
				if w.step.DropRoom() == 0 {
					w.step.Flush() // a full drop list would read as an empty queue
				}
				room := min(w.step.DropRoom(), len(qs.slots))
				k := e.sched.Flush(tc, qs.slots[:room])
				for _, s := range qs.slots[:k] {
					w.step.Drop(dpdk.MbufOf(s.Handle))
				}
				w.c.drops[DropStopDiscard] += uint64(k)
				qs.unhold(qs.slots[:k])
				if k == 0 {
					break
				}
				w.step.Flush() // frees the drop list
			}
		}
	}
}

// clockNow is the worker clock read from the control plane.
func (w *Worker) clockNow() int64 { return w.clock.ns(dpdk.RDTSC()) }
