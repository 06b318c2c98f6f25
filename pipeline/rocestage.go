package pipeline

import (
	"fmt"
	"time"
	"unsafe"

	"roce-fwd/dpdk"
	"roce-fwd/internal/cacheline"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
	"roce-fwd/rocestats"
)

// roceStage is the "roce" mode's per-worker state: the classifier's
// settings, RoCE counters per rx queue, and the per-QP table with its
// memory and its batch of lookups.
type roceStage struct {
	tcmap         roce.TCMap
	verifyICRC    bool
	dropBadICRC   bool
	dropMalformed bool
	ports         []rocestats.Counters // per rx queue, in the worker's order
	qp            *qpstats.Table
	qpMem         unsafe.Pointer // DPDK memory holding qp
	batch         *qpstats.Batch
	qpCopy        []qpstats.Entry // where a copy of qp is made, Slots long, in qpCopyMem
	qpCopyMem     unsafe.Pointer
}

// initRoCE makes the roce stage for rxQueues rx queues and bursts of up to
// burst packets. The QP table lives in DPDK memory on the worker's socket:
// hugepages spare its random accesses the TLB misses of 4 KB pages.
func (w *Worker) initRoCE(spec *RoCESpec, rxQueues, burst int) error {
	rs := cacheline.New[roceStage]()
	*rs = roceStage{
		tcmap:         spec.TCMap,
		verifyICRC:    spec.VerifyICRC,
		dropBadICRC:   spec.DropBadICRC,
		dropMalformed: spec.DropMalformed,
		ports:         cacheline.Alone[rocestats.Counters](rxQueues),
	}
	if spec.QPTable > 0 {
		mem, err := dpdk.Zmalloc("the QP table", uintptr(qpstats.Footprint(spec.QPTable)), w.Socket)
		if err != nil {
			return fmt.Errorf("%w (qp_table = %d slots of %d bytes)", err, spec.QPTable, qpstats.SlotBytes)
		}
		rs.qpMem = mem
		rs.qp = qpstats.NewAt(mem, spec.QPTable, spec.QPMaxAge.Nanoseconds())
		rs.batch = qpstats.NewBatch(burst)
		// The copy buffer is DPDK memory too: in the Go heap its megabytes
		// would set the collector's pace (the heap grows to twice its live
		// size before a collection), and the daemon's memory would swing by
		// that much under a control plane that allocates a little.
		slots := rs.qp.Stats().Slots
		cm, err := dpdk.Zmalloc("the QP table's copy", uintptr(qpstats.CopyFootprint(spec.QPTable)), w.Socket)
		if err != nil {
			dpdk.FreeMem(mem)
			return fmt.Errorf("%w (qp_table = %d slots: a copy for show roce qp)", err, spec.QPTable)
		}
		rs.qpCopyMem = cm
		rs.qpCopy = unsafe.Slice((*qpstats.Entry)(cm), slots)[:0]
	}
	w.rs = rs
	return nil
}

// free releases the QP table's memory.
func (rs *roceStage) free() {
	dpdk.FreeMem(rs.qpMem)
	dpdk.FreeMem(rs.qpCopyMem)
	rs.qpMem, rs.qp, rs.qpCopyMem, rs.qpCopy = nil, nil, nil, nil
}

// classifyPass classifies every packet of the burst and counts it per rx
// queue and in the per-QP table, but for the RoCEv2 packets whose QP
// lookup it stages (qpstats: hashed now, found and counted in the table
// by qpPass); a bad ICRC or a malformed frame is dropped if the config
// says so, and a PFC or PAUSE frame is consumed.
//
// A pass is a call of its own (noinline): inlined into handle, it left
// profile-guided inlining no budget for the classifier and the table's
// calls inside its loop, which cost more than a call per burst.
//
//go:noinline
func (w *Worker) classifyPass(b *burst) {
	rs := w.rs
	st := &rs.ports[b.src]
	qp, batch := rs.qp, rs.batch
	if qp != nil {
		qp.Begin(batch, w.now)
	}
	b.classified = true
	// The burst's arrays cut to its length: indexed by j, they need no
	// bounds checks.
	pkts := b.pkts
	frames, sizes, res, qslot := b.frame[:len(pkts)], b.size[:len(pkts)], b.res[:len(pkts)], b.qslot[:len(pkts)]
	for j, m := range pkts {
		frame := m.Data()
		n := m.PktLen()
		frames[j], sizes[j] = frame, uint32(n)
		r := &res[j]
		if roce.Classify(frame, &rs.tcmap, rs.verifyICRC, r) {
			if qp == nil {
				st.AddRoCE(r, n)
				continue
			}
			slot, k := qp.Hit(batch, frame, r)
			if qslot[j] = slot; slot >= 0 {
				qp.Count(slot, r, n)
			} else if qp.Add(batch, j, k, r); batch.Len()%stageLoads == 0 { // qpPass counts it
				qp.Prefetch(batch) // the buckets load while the burst's rest is classified
			}
			st.AddRoCE(r, n)
			continue
		}
		if qp != nil { // qslot is read only with a QP table
			qslot[j] = -1
			if r.Err == roce.ErrBadICRC {
				w.roceBadICRC(b, j, frame)
			}
		}
		w.roceOther(b, j, frame)
	}
}

// stageLoads is how many staged packets' buckets classifyPass has the CPU
// start loading at a time: early enough that they arrive while it
// classifies the rest of the burst, in few calls.
const stageLoads = 8

// qpPass counts the packets classifyPass staged into the per-QP table:
// every slot is found (their buckets loading since classifyPass), and each
// packet is counted into its slot, the slots of the packets a few ahead
// loading meanwhile (qpstats.Table.Ahead).
//
//go:noinline
func (w *Worker) qpPass(b *burst) {
	qp, batch := w.rs.qp, w.rs.batch
	if qp == nil || batch.Len() == 0 {
		return
	}
	qp.Find(batch, w.now)
	for k := range batch.Len() {
		qp.Ahead(batch, k)
		j := batch.Pkt(k)
		slot := qp.Settle(batch, k, w.now)
		b.qslot[j] = slot
		qp.CountStaged(slot, &b.res[j], int(b.size[j]))
	}
}

// roceBadICRC looks packet j of b, a RoCEv2 frame whose ICRC is bad, up
// in the QP table, which counts it like any other of the flow.
func (w *Worker) roceBadICRC(b *burst, j int, frame []byte) {
	qp, r := w.rs.qp, &b.res[j]
	slot, k := qp.Hit(w.rs.batch, frame, r)
	if b.qslot[j] = slot; slot >= 0 {
		qp.Count(slot, r, int(b.size[j]))
	} else {
		qp.Add(w.rs.batch, j, k, r)
	}
}

// roceOther counts packet j of b, a frame that is not well-formed RoCEv2,
// and decides its fate: a bad ICRC or a malformed frame is dropped if the
// config says so, and a PFC or PAUSE frame is consumed. Tagged 0x8808
// frames are forwarded, as in io and mac modes: MAC control frames are
// never tagged.
func (w *Worker) roceOther(b *burst, j int, frame []byte) {
	rs := w.rs
	r := &b.res[j]
	rs.ports[b.src].Add(frame, r, int(b.size[j]))
	switch {
	case r.Err == roce.ErrBadICRC:
		if rs.dropBadICRC {
			b.drop(j, DropBadICRC)
		}
	case r.Err != roce.ReasonNone:
		if rs.dropMalformed {
			b.drop(j, DropMalformed)
		}
	case r.MACCtl != roce.MACCtlNone: // untagged 0x8808
		w.consumeMAC(b, j, frame)
	}
}

// tscClock turns TSC readings into wall-clock nanoseconds, so the worker
// timestamps QP activity once per poll without a system call.
type tscClock struct {
	baseTSC   uint64
	baseNS    int64
	nsPerTick float64
}

func newTSCClock() tscClock {
	return tscClock{baseTSC: dpdk.RDTSC(), baseNS: time.Now().UnixNano(), nsPerTick: 1e9 / float64(dpdk.TSCHz())}
}

func (c *tscClock) ns(tsc uint64) int64 {
	return c.baseNS + int64(float64(tsc-c.baseTSC)*c.nsPerTick)
}

// duration is n TSC cycles as a duration; cycles is the other way.
func (c *tscClock) duration(n uint64) time.Duration {
	return time.Duration(float64(n) * c.nsPerTick)
}

func (c *tscClock) cycles(d time.Duration) uint64 {
	return uint64(float64(d) / c.nsPerTick)
}

// qpChunk is how many slots a worker copies per poll (about a
// microsecond): a whole table (megabytes) at once would stall the worker
// long enough for a NIC's rx ring to overflow.
const qpChunk = 256

// qpEntries copies the worker's QP table into its copy buffer (DPDK
// memory) and returns the copy, valid until the next call (QPFlowsInto,
// the only caller, makes them one at a time), with the table's stats.
func (w *Worker) qpEntries() ([]qpstats.Entry, qpstats.TableStats) {
	rs := w.rs
	if rs == nil || rs.qp == nil {
		return nil, qpstats.TableStats{}
	}
	var st qpstats.TableStats
	buf, pos := rs.qpCopy[:0], 0
	err := w.do("QP table copy", func() bool {
		buf, pos = rs.qp.CopyChunk(buf, pos, qpChunk)
		if pos < rs.qp.Stats().Slots {
			return false
		}
		st = rs.qp.Stats()
		return true
	})
	if err != nil {
		return nil, st
	}
	return buf, st
}

// RoCEByPort merges every worker's RoCE counters by rx port.
func (p *Pipeline) RoCEByPort() map[uint16]*rocestats.Counters {
	out := map[uint16]*rocestats.Counters{}
	for _, w := range p.Workers {
		if w.rs == nil {
			continue
		}
		rc := make([]rocestats.Counters, len(w.rx))
		w.counters(rc)
		for i, src := range w.rx {
			c, ok := out[src.port]
			if !ok {
				c = &rocestats.Counters{}
				out[src.port] = c
			}
			c.Merge(&rc[i])
		}
	}
	return out
}

// QPFlows merges every worker's QP table, with the tables' own stats.
func (p *Pipeline) QPFlows() ([]qpstats.Flow, qpstats.TableStats) {
	return p.QPFlowsInto(nil)
}

// QPFlowsInto is QPFlows into dst's memory (grown as needed). The tables
// are merged from the workers' own copy buffers, so a caller that keeps
// dst (the periodic report) makes no garbage: megabytes a second of it
// made the collector stop the workers.
func (p *Pipeline) QPFlowsInto(dst []qpstats.Flow) ([]qpstats.Flow, qpstats.TableStats) {
	p.qpMu.Lock() // one caller at a time in the copy buffers
	defer p.qpMu.Unlock()
	if len(p.qpTables) != len(p.Workers) {
		p.qpTables = make([][]qpstats.Entry, len(p.Workers))
	}
	var total qpstats.TableStats
	for i, w := range p.Workers {
		var st qpstats.TableStats
		p.qpTables[i], st = w.qpEntries()
		total.Add(st)
	}
	return qpstats.MergeInto(dst, p.qpTables...), total
}
