package pipeline

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"roce-fwd/cbpf"
	"roce-fwd/dpdk"
	"roce-fwd/internal/cacheline"
	"roce-fwd/prefetch"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// A tap copies the packets its filter selects, with where they came from
// and what became of them, into a ring per worker that a goroutine of the
// control plane drains: packet capture (pcapng) and packet trace both read
// taps. A worker with no tap pays one length check per burst. A worker
// with one copies at most Snaplen bytes per selected packet and never
// waits: a full ring counts the packet as lost, and forwarding goes on.
//
// Packets are seen at two points: as received, before any stage changed
// them (TapRx), and at the end of their burst, as they leave (TapTx: sent,
// or queued by QoS to be sent) or are dropped under a reason (TapDrop).
// A drop that happens after the burst (tx_full, in the PMD's ring; a
// QoS queue flushed by the PFC watchdog) is counted but not tapped.

// TapDir is a set of the points a tap sees packets at.
type TapDir uint8

const (
	TapRx   TapDir = 1 << iota // as received
	TapTx                      // as sent out of a port, or queued by QoS for it
	TapDrop                    // dropped, with the reason
	TapAll  = TapRx | TapTx | TapDrop
)

func (d TapDir) String() string {
	switch d {
	case TapRx:
		return "rx"
	case TapTx:
		return "tx"
	case TapDrop:
		return "drop"
	case TapAll:
		return "all"
	}
	s := ""
	for _, x := range []TapDir{TapRx, TapTx, TapDrop} {
		if d&x != 0 {
			if s != "" {
				s += ","
			}
			s += x.String()
		}
	}
	return s
}

// TapFilter selects packets. The zero value of each field but Dirs selects
// everything.
type TapFilter struct {
	Dirs    TapDir
	Port    int    // rx port for rx and drop, tx port for tx; -1: any
	Reasons uint64 // drops: bit r selects Reason r; 0: every reason
	QP      int64  // RoCEv2 destination QP; -1: any
	Classes uint8  // RoCEv2 opcode classes (bit qpstats.Class*); 0: any
	BPF     []cbpf.Insn
}

// roce reports whether the filter looks at RoCE fields.
func (f *TapFilter) roce() bool { return f.QP >= 0 || f.Classes != 0 }

// TapSpec is what a tap takes.
type TapSpec struct {
	Filter  TapFilter
	Snaplen int    // bytes kept of each packet
	Count   uint64 // packets to take; 0: no limit
	Slots   int    // ring slots (records) per worker, a power of two
}

// tapDataBytes is the size of a worker's ring of packet bytes for spec:
// room for every slot's packet at up to 2 KiB each (a jumbo frame takes
// more and so fewer fit), and for at least two of the largest; 4 KiB at
// the least.
func tapDataBytes(spec TapSpec) int {
	n := max(spec.Slots*min(spec.Snaplen, 2048), 2*spec.Snaplen)
	p := 4096 // at least: take writes up to 64 bytes past a short packet
	for p < n {
		p <<= 1
	}
	return p
}

// TapRecord is one tapped packet.
type TapRecord struct {
	NS       int64 // unix nanoseconds of the poll
	Lcore    uint16
	RxPort   uint16
	RxQueue  uint16
	TxPort   uint16 // TapTx: the port it leaves by
	Dir      TapDir
	Reason   Reason // TapDrop
	Queued   bool   // TapTx: queued by QoS, sent later
	RxECN    uint8  // roce mode: the ECN codepoint as received (TapTx)
	HasRxECN bool
	Paused   bool   // TapTx with QoS: its TC was paused by PFC on the tx port
	Impair   int32  // the ID of the impairment rule that acted on it (dropped, held, changed it); 0: none
	FlowRule int32  // the ID plus one of the last software flow rule it matched; 0: none
	Len      uint32 // the frame's length
	Data     []byte // the first Snaplen bytes (a view into the ring: copy it to keep it)
}

// tapRing is one worker's ring: the worker writes records and their bytes
// and publishes them with tail, the control plane reads up to tail and
// frees slots with head. A slot is 48 bytes with no pointer (Read makes
// the TapRecord), so that the worker's stores need no GC write barrier
// and the lines it must take back from the reader's core are few: three
// slots in two lines.
//
// The bytes go into a second ring, packed one packet after another (a
// packet never wraps: one that would is put at the start), so a capture
// of small frames touches few cache lines and pages on both sides, not a
// snaplen-sized slot each. The reader frees bytes with dhead as it frees
// their slots.
type tapRing struct {
	slots []tapSlot
	data  []byte
	snap  int
	mask  uint64
	dmask uint64
	_     [64]byte
	head  atomic.Uint64
	dhead atomic.Uint64 // bytes freed, as a position that only grows
	_     [48]byte
	tail  atomic.Uint64
	lost  atomic.Uint64 // selected but the ring was full
	took  atomic.Uint64 // selected and written
	_     [40]byte
}

// tapSlot is a TapRecord as the ring holds it, with where its bytes are:
// the n bytes before end, rounded up to 8, as a position in data that
// only grows (the reader frees the bytes up to end).
type tapSlot struct {
	NS       int64
	end      uint64
	Len      uint32
	n        uint32
	Impair   int32
	FlowRule int32
	Lcore    uint16
	RxPort   uint16
	RxQueue  uint16
	TxPort   uint16
	Dir      TapDir
	Reason   Reason
	flags    uint8 // tapQueued, tapHasRxECN, tapPaused
	RxECN    uint8
}

const (
	tapQueued = 1 << iota
	tapHasRxECN
	tapPaused
)

// A slot is three to two cache lines.
var _ [48]byte = [unsafe.Sizeof(tapSlot{})]byte{}

// tap is a worker's view of a tap: its filter, ring and limit, and the
// worker's own write position.
type tap struct {
	f      TapFilter
	ring   *tapRing
	limit  uint64
	pos    uint64 // next slot to write; published to ring.tail per burst
	dpos   uint64 // where the next packet's bytes go (before wrapping)
	head   uint64 // ring.head and dhead as last read: read again only when
	dhead  uint64 // the ring looks full,
	looked bool   // and then once a burst (set when read this burst)
	taken  uint64
	lost   uint64
	res    roce.Result  // scratch for filters on RoCE fields outside roce mode
	sel    []*dpdk.Mbuf // the packets of a burst selected, for take
	at     []uint16     // and their places in the burst (tapOut)
}

func newTapRing(snap, slots, dataBytes int) *tapRing {
	r := cacheline.New[tapRing]()
	*r = tapRing{slots: make([]tapSlot, slots), data: make([]byte, dataBytes),
		snap: snap, mask: uint64(slots - 1), dmask: uint64(dataBytes - 1)}
	return r
}

// selects reports whether t takes packet j of b at point d, with rx port
// rx and tx port tx.
func (t *tap) selects(w *Worker, b *burst, j int, d TapDir, rx, tx uint16, reason Reason) bool {
	f := &t.f
	if f.Dirs&d == 0 {
		return false
	}
	if f.Port >= 0 {
		p := rx
		if d == TapTx {
			p = tx
		}
		if int(p) != f.Port {
			return false
		}
	}
	if d == TapDrop && f.Reasons != 0 && f.Reasons&(1<<reason) == 0 {
		return false
	}
	if f.roce() {
		r := &t.res
		if w.mode == ModeRoCE { // the classify pass has run (tapRx comes after it)
			r = &b.res[j]
		} else {
			roce.Classify(b.pkts[j].Data(), nil, false, r)
		}
		if !r.RoCE || f.QP >= 0 && int64(r.DestQP) != f.QP ||
			f.Classes != 0 && f.Classes&(1<<qpstats.ClassOf(r.Opcode)) == 0 {
			return false
		}
	}
	if f.BPF != nil && cbpf.Run(f.BPF, b.pkts[j].Data()) == 0 {
		return false
	}
	return true
}

// selectsAll reports whether t takes every packet received on port, with
// no filter to run per packet and no count to stop at.
func (t *tap) selectsAll(port uint16) bool {
	return t.f.Dirs&TapRx != 0 && t.selectsEvery(port, port, TapRx)
}

// selectsEvery reports whether t takes every packet it sees at the
// points dirs, received on port rx and sent on port tx: no filter to run
// per packet, no count to stop at.
func (t *tap) selectsEvery(rx, tx uint16, dirs TapDir) bool {
	f := &t.f
	if f.roce() || f.BPF != nil || f.Reasons != 0 || t.limit != 0 {
		return false
	}
	return f.Port < 0 || (dirs&(TapRx|TapDrop) == 0 || f.Port == int(rx)) && (dirs&TapTx == 0 || f.Port == int(tx))
}

// prefetch asks for the ring's lines the next n packets would take, to
// be written: the reader on another core read them last, and a store to
// each would otherwise wait for its line in turn. It asks for no more
// than the worker knows the reader has freed (a full ring stays with the
// reader), up to the end of the ring, and for the bytes of packets of up
// to 128 bytes.
func (t *tap) prefetch(n int) {
	r := t.ring
	i := int(t.pos & r.mask)
	k := min(n, int(r.mask+1-(t.pos-t.head)), len(r.slots)-i)
	if k <= 0 {
		return
	}
	prefetch.ForWrite(unsafe.Slice((*byte)(unsafe.Pointer(&r.slots[i])), k*int(unsafe.Sizeof(r.slots[0]))))
	o := int(t.dpos & r.dmask)
	if free := int(r.dmask + 1 - (t.dpos - t.dhead)); free > 0 {
		prefetch.ForWrite(r.data[o:min(len(r.data), o+k*128, o+free)])
	}
}

// take records the packets pkts, each with the fields of s0 (the ones
// the burst's packets share), and returns how many it took: the rest did
// not fit and are counted lost. The slots are checked once for the
// burst, the bytes a packet at a time (fill).
func (t *tap) take(pkts []*dpdk.Mbuf, s0 *tapSlot) int {
	r := t.ring
	n := uint64(len(pkts))
	t.taken += n
	if t.pos+n-t.head > r.mask+1 {
		t.reread()
	}
	pkts = pkts[:min(n, r.mask+1-(t.pos-t.head))]
	j := t.fill(pkts, s0)
	if j < len(pkts) && t.reread() { // the bytes ran out: once more with the reader's head as it is now
		j += t.fill(pkts[j:], s0)
	}
	t.lost += n - uint64(j)
	return j
}

// fill is take's loop: it records packets of pkts until one does not fit
// in the bytes the reader has freed as last read, and returns how many it
// took. A record is a copy of s0 with the three fields of its own set
// after. A frame of up to 128 bytes is copied as two 64-byte blocks, at
// its start and at its end (copyShort: the first reads past a shorter
// frame, within its mbuf's buffer, and writes past it into free space of
// the ring). fill calls nothing: a call, even one never made, would have
// the loop keep its values on the stack.
func (t *tap) fill(pkts []*dpdk.Mbuf, s0 *tapSlot) int {
	r := t.ring
	// The rings through pointers: their lengths are the masks plus one
	// (newTapRing), and bounds checks would take registers the loop has
	// too few of.
	slots, data := unsafe.Pointer(unsafe.SliceData(r.slots)), unsafe.Pointer(unsafe.SliceData(r.data))
	pos, dpos, free := t.pos, t.dpos, t.dhead+r.dmask+1
	j := 0
	for ; j < len(pkts); j++ {
		m := pkts[j]
		d := m.DataWithTail()
		c := min(len(d), r.snap)
		// w: the bytes written, 64 for a packet shorter (never past the
		// snaplen).
		w := c
		if c < 64 && r.snap >= 64 && cap(d) >= 64 {
			w = 64
		}
		at := dpos
		if o := at & r.dmask; o+uint64(w) > r.dmask+1 {
			at += r.dmask + 1 - o // it would wrap: it goes at the start
		}
		if at+uint64(w) > free {
			break
		}
		to := unsafe.Add(data, at&r.dmask)
		if uint(w-64) <= 64 {
			copyShort((*byte)(to), unsafe.SliceData(d), w)
		} else {
			copy(unsafe.Slice((*byte)(to), c), d[:c])
		}
		s := (*tapSlot)(unsafe.Add(slots, uintptr(pos&r.mask)*unsafe.Sizeof(tapSlot{})))
		*s = *s0
		s.Len = uint32(m.PktLen())
		dpos = at + uint64(c+7)&^7
		s.end, s.n = dpos, uint32(c)
		pos++
	}
	t.pos, t.dpos = pos, dpos
	return j
}

// reread reads the reader's head and dhead again, for take, when the
// ring looks full, and reports whether it did: once a burst (publish
// allows the next). The reader's lines move between the cores each time
// it writes them: the worker reads them only when it must.
func (t *tap) reread() bool {
	if t.looked {
		return false
	}
	t.head, t.dhead = t.ring.head.Load(), t.ring.dhead.Load()
	t.looked = true
	return true
}

// publish makes the burst's records visible to the reader.
func (t *tap) publish() {
	t.looked = false
	t.ring.tail.Store(t.pos)
	t.ring.took.Store(t.taken - t.lost)
	t.ring.lost.Store(t.lost)
}

// tapRx records the packets of b its taps select, as received.
func (w *Worker) tapRx(b *burst) {
	src := &w.rx[b.src]
	ns := w.clock.ns(w.step.TSC())
	for _, t := range w.taps {
		if t.f.Dirs&TapRx == 0 {
			continue
		}
		t.prefetch(len(b.pkts))
		s0 := tapSlot{NS: ns, Lcore: uint16(w.Lcore), RxPort: src.port, RxQueue: src.queue, Dir: TapRx}
		if t.selectsAll(src.port) {
			t.take(b.pkts, &s0)
		} else {
			n, most := 0, t.quota(len(b.pkts))
			for j, m := range b.pkts {
				if n < most && t.selects(w, b, j, TapRx, src.port, 0, 0) {
					t.sel[n] = m
					n++
				}
			}
			t.take(t.sel[:n], &s0)
		}
		t.publish()
	}
}

// quota is how many of n packets t may select before it reaches its
// count.
func (t *tap) quota(n int) int {
	if t.limit == 0 {
		return n
	}
	return int(min(uint64(n), t.limit-min(t.taken, t.limit)))
}

// tapOut records the packets of b its taps select as they leave or are
// dropped at the end of the burst: the forwarded and queued ones out of
// tx queue b.tx when out is set, the dropped ones when drops is. Those a
// tap selects are gathered and taken in one go, then their records get
// what is particular to each: direction, drop reason, rule IDs, flags.
func (w *Worker) tapOut(b *burst, out, drops bool) {
	src := &w.rx[b.src]
	txPort := w.step.Txq[b.tx].Port
	ns := w.clock.ns(w.step.TSC())
	for _, t := range w.taps {
		if t.f.Dirs&(TapTx|TapDrop) == 0 || t.f.Dirs&TapTx == 0 && (!drops || b.odd == 0) {
			continue // a drop capture looks at a burst only when it has drops
		}
		look := t.f.Dirs & (TapTx | TapDrop)
		if !out {
			look &^= TapTx
		}
		if !drops {
			look &^= TapDrop
		}
		t.prefetch(len(b.pkts))
		all := t.selectsEvery(src.port, txPort, look)
		// The packets the tap takes, and their places in the burst.
		sel, at := t.sel, t.at
		n := 0
		switch {
		case all && (look == TapTx|TapDrop || look == TapTx && b.odd == 0):
			sel, at, n = b.pkts, burstIndex[:], len(b.pkts) // every one
		case all && look == TapDrop: // a drop capture
			for j, f := range b.fate[:len(b.pkts)] {
				if f >= fateDrop {
					sel[n], at[n] = b.pkts[j], uint16(j)
					n++
				}
			}
		default:
			most := t.quota(len(b.pkts))
			for j, m := range b.pkts {
				d, reason := outDir(b.fate[j])
				if d&look == 0 || n == most || !all && !t.selects(w, b, j, d, src.port, txPort, reason) {
					continue
				}
				sel[n], at[n] = m, uint16(j)
				n++
			}
		}
		if n == 0 {
			continue
		}
		// What the records share; then what each has of its own.
		roceMode := w.mode == ModeRoCE
		pos := t.pos
		k := t.take(sel[:n], &tapSlot{NS: ns, Lcore: uint16(w.Lcore), RxPort: src.port, RxQueue: src.queue})
		slots, mask := t.ring.slots, t.ring.mask
		for i, j := range at[:k] {
			rec := &slots[(pos+uint64(i))&mask]
			// outDir's test, written out: the sent keep the record's
			// zero reason (10 instructions a packet fewer than through
			// outDir, in BenchmarkPoll's tap of every packet sent).
			if f := b.fate[j]; f >= fateDrop {
				rec.Dir, rec.Reason = TapDrop, Reason(f-fateDrop)
			} else {
				rec.Dir, rec.TxPort = TapTx, txPort
				if f == fateTaken {
					rec.flags |= tapQueued
				}
				if roceMode {
					rec.RxECN, rec.flags = b.res[j].ECN, rec.flags|tapHasRxECN
				}
				if w.qs != nil {
					if e := &w.qs.eg[b.tx]; e.rx != nil && e.rx.Paused(b.res[j].TC&7, w.now) {
						rec.flags |= tapPaused
					}
				}
			}
			if b.flowed {
				rec.FlowRule = b.flowHit[j]
			}
			if b.impaired && b.imp[j] != 0 {
				rec.Impair = int32(w.imp.eng.Set().ID(b.imp[j] - 1))
			}
		}
		t.publish()
	}
}

// burstIndex is 0, 1, 2...: the places of a burst's packets when a tap
// takes every one.
var burstIndex = func() (x [maxPoll]uint16) {
	for i := range x {
		x[i] = uint16(i)
	}
	return
}()

// outDir is how tapOut sees a packet of fate f: dropped, with its
// reason, or sent (forwarded, or taken by a stage: queued by QoS, or
// punted).
func outDir(f fate) (TapDir, Reason) {
	if f >= fateDrop {
		return TapDrop, Reason(f - fateDrop)
	}
	return TapTx, 0
}

// Tap is an armed tap, as the control plane holds it.
type Tap struct {
	p     *Pipeline
	rings []*tapRing // per worker
	taps  []*tap
	spec  TapSpec
	cur   TapRecord // the record Read passes
}

// Spec is what the tap was armed with.
func (t *Tap) Spec() TapSpec { return t.spec }

// ArmTap starts a tap on every worker.
func (p *Pipeline) ArmTap(spec TapSpec) (*Tap, error) {
	if !tapBuilt {
		return nil, errors.New("this roce-fwd is built without packet taps (-tags notap): no trace or capture")
	}
	if spec.Snaplen < 1 || spec.Snaplen > 65535 {
		return nil, fmt.Errorf("snaplen %d: want 1..65535", spec.Snaplen)
	}
	if spec.Slots < 2 || spec.Slots&(spec.Slots-1) != 0 {
		return nil, fmt.Errorf("%d ring slots: want a power of two", spec.Slots)
	}
	if spec.Filter.Dirs == 0 {
		spec.Filter.Dirs = TapAll
	}
	if spec.Filter.BPF != nil {
		if err := cbpf.Check(spec.Filter.BPF); err != nil {
			return nil, err
		}
	}
	t := &Tap{p: p, spec: spec}
	for range p.Workers {
		r := newTapRing(spec.Snaplen, spec.Slots, tapDataBytes(spec))
		wt := cacheline.New[tap]()
		*wt = tap{f: spec.Filter, ring: r, limit: spec.Count, sel: make([]*dpdk.Mbuf, maxPoll), at: make([]uint16, maxPoll)}
		t.rings = append(t.rings, r)
		t.taps = append(t.taps, wt)
	}
	for i, w := range p.Workers {
		wt := t.taps[i]
		taps := append(append([]*tap(nil), w.taps...), wt)
		if err := w.do("tap", func() bool { w.taps = taps; return true }); err != nil {
			t.Disarm()
			return nil, err
		}
	}
	return t, nil
}

// Disarm takes the tap off every worker. Records already in the rings
// stay readable.
func (t *Tap) Disarm() {
	for i, w := range t.p.Workers {
		var keep []*tap
		for _, x := range w.taps {
			if x != t.taps[i] {
				keep = append(keep, x)
			}
		}
		// A worker that does not answer keeps writing to a ring nobody
		// reads: harmless, and it stops at its count.
		w.do("tap removal", func() bool { w.taps = keep; return true })
	}
}

// Read passes each record the workers published since the last Read to
// fn, worker by worker, and frees their slots. rec.Data is valid only
// during fn.
func (t *Tap) Read(fn func(rec *TapRecord)) int {
	n := 0
	for _, r := range t.rings {
		head, tail := r.head.Load(), r.tail.Load()
		if head == tail {
			continue
		}
		for ; head != tail; head++ {
			s := &r.slots[head&r.mask]
			off := (s.end - uint64(s.n+7)&^7) & r.dmask
			t.cur = TapRecord{NS: s.NS, Lcore: s.Lcore, RxPort: s.RxPort, RxQueue: s.RxQueue, TxPort: s.TxPort,
				Dir: s.Dir, Reason: s.Reason, Queued: s.flags&tapQueued != 0, RxECN: s.RxECN,
				HasRxECN: s.flags&tapHasRxECN != 0, Paused: s.flags&tapPaused != 0, Impair: s.Impair,
				FlowRule: s.FlowRule, Len: s.Len, Data: r.data[off : off+uint64(s.n)]}
			fn(&t.cur)
			n++
		}
		r.dhead.Store(r.slots[(head-1)&r.mask].end) // the bytes up to the last record read are free
		r.head.Store(head)
	}
	return n
}

// Counts are the packets the tap selected: taken (written to its rings)
// and lost (the rings were full).
func (t *Tap) Counts() (taken, lost uint64) {
	for _, r := range t.rings {
		taken += r.took.Load()
		lost += r.lost.Load()
	}
	return
}

// Done reports whether the workers have selected the tap's count of
// packets between them (each stops at that count on its own, so together
// they may select more; a reader stops at the count).
func (t *Tap) Done() bool {
	taken, lost := t.Counts()
	return t.spec.Count != 0 && taken+lost >= t.spec.Count
}
