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
// more and so fewer fit), and for at least two of the largest.
func tapDataBytes(spec TapSpec) int {
	n := max(spec.Slots*min(spec.Snaplen, 2048), 2*spec.Snaplen)
	p := 1
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
	f     TapFilter
	ring  *tapRing
	limit uint64
	pos   uint64 // next slot to write; published to ring.tail per burst
	dpos  uint64 // where the next packet's bytes go (before wrapping)
	head  uint64 // ring.head and dhead as last read: read again only when
	dhead uint64 // the ring looks full,
	full  bool   // and then once a burst
	taken uint64
	lost  uint64
	res   roce.Result // scratch for filters on RoCE fields outside roce mode
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
	if f.Dirs&d == 0 || t.limit != 0 && t.taken >= t.limit {
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

// room reports whether the ring has a free slot and room for the first
// n bytes of a packet (at most the snaplen), counting the selected packet
// taken, and lost when it has not. It returns where the bytes go. The
// reader's line is read only when the ring looks full, and then once a
// burst: it moves between the cores each time the reader writes it.
func (t *tap) room(n int) (uint64, bool) {
	r := t.ring
	t.taken++
	n = min(n, r.snap)
	at := t.dpos
	if o := at & r.dmask; o+uint64(n) > r.dmask+1 {
		at += r.dmask + 1 - o // it would wrap: it goes at the start
	}
	if t.pos-t.head > r.mask || at+uint64(n)-t.dhead > r.dmask+1 {
		if !t.full {
			t.head, t.dhead = r.head.Load(), r.dhead.Load()
		}
		if t.full = t.pos-t.head > r.mask || at+uint64(n)-t.dhead > r.dmask+1; t.full {
			t.lost++
			return 0, false
		}
	}
	return at, true
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

// next returns the ring slot the next record goes in, with the fields
// every record has set and the others zero, for the caller to add to and
// record to finish. A record is written in place a field at a time: one
// built aside and copied in would be read back in wide loads, which the
// CPU cannot serve from the narrow stores just made, and each record
// would wait for them to reach the cache (41% of the drop capture's
// samples in tapOut were that copy).
func (t *tap) next(ns int64, lcore uint16, src *rxSource, d TapDir, reason Reason) *tapSlot {
	s := &t.ring.slots[t.pos&t.ring.mask]
	s.NS, s.Len, s.Lcore, s.RxPort, s.RxQueue, s.TxPort = ns, 0, lcore, src.port, src.queue, 0
	s.Dir, s.Reason, s.flags, s.RxECN, s.Impair, s.FlowRule = d, reason, 0, 0, 0, 0
	return s
}

// record finishes slot s, from next, with packet m's length and its
// first bytes at at, where room found space for them.
func (t *tap) record(s *tapSlot, m *dpdk.Mbuf, at uint64) {
	s.Len = uint32(m.PktLen())
	t.recordBytes(s, m.Data(), at)
}

func (t *tap) recordBytes(s *tapSlot, d []byte, at uint64) {
	r := t.ring
	o := at & r.dmask
	n := copy(r.data[o:o+uint64(min(len(d), r.snap))], d)
	t.dpos = at + uint64(n+7)&^7 // the next packet's bytes 8-byte aligned
	s.end, s.n = t.dpos, uint32(n)
	t.pos++
}

// publish makes the burst's records visible to the reader.
func (t *tap) publish() {
	t.full = false
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
		all := t.selectsAll(src.port)
		for j, m := range b.pkts {
			if !all && !t.selects(w, b, j, TapRx, src.port, 0, 0) {
				continue
			}
			at, ok := t.room(int(m.DataLen()))
			if !ok {
				if all { // the rest of the burst is lost too
					rest := uint64(len(b.pkts) - j - 1)
					t.taken += rest
					t.lost += rest
					break
				}
				continue
			}
			t.record(t.next(ns, uint16(w.Lcore), src, TapRx, 0), m, at)
		}
		t.publish()
	}
}

// tapOut records the packets of b its taps select as they leave or are
// dropped at the end of the burst: the forwarded and queued ones out of
// tx queue b.tx when out is set, the dropped ones when drops is.
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
		for j, m := range b.pkts {
			var d TapDir
			var reason Reason
			switch f := b.fate[j]; {
			case f >= fateDrop && drops:
				d, reason = TapDrop, Reason(f-fateDrop)
			case f < fateDrop && out:
				d = TapTx
			default:
				continue
			}
			if d&look == 0 || !all && !t.selects(w, b, j, d, src.port, txPort, reason) {
				continue
			}
			at, ok := t.room(int(m.DataLen()))
			if !ok {
				if all { // so is every packet after it that the tap looks at
					rest := uint64(0)
					for _, f := range b.fate[j+1 : len(b.pkts)] {
						if f >= fateDrop && look&TapDrop != 0 || f < fateDrop && look&TapTx != 0 {
							rest++
						}
					}
					t.taken += rest
					t.lost += rest
					break
				}
				continue
			}
			// The details only for a packet the tap takes.
			rec := t.next(ns, uint16(w.Lcore), src, d, reason)
			if b.flowed {
				rec.FlowRule = b.flowHit[j]
			}
			if b.impaired && b.imp[j] != 0 {
				rec.Impair = int32(w.imp.eng.Set().ID(b.imp[j] - 1))
			}
			if d == TapTx {
				rec.TxPort = txPort
				if b.fate[j] == fateTaken {
					rec.flags |= tapQueued
				}
				if w.mode == ModeRoCE {
					rec.RxECN, rec.flags = b.res[j].ECN, rec.flags|tapHasRxECN
				}
				if w.qs != nil {
					if e := &w.qs.eg[b.tx]; e.rx != nil && e.rx.Paused(b.res[j].TC&7, w.now) {
						rec.flags |= tapPaused
					}
				}
			}
			t.record(rec, m, at)
		}
		t.publish()
	}
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
		*wt = tap{f: spec.Filter, ring: r, limit: spec.Count}
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
