package pipeline

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"roce-fwd/dpdk"
	"roce-fwd/internal/testenv"
	"roce-fwd/ports"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// tapRun forwards frames through a pcap pair in mode with a tap armed
// before the start, and returns the records it took and the run.
func tapRun(t *testing.T, mode string, frames [][]byte, spec TapSpec) ([]TapRecord, *Tap, *pcapRun) {
	t.Helper()
	var tp *Tap
	dir := t.TempDir()
	r := &pcapRun{in: filepath.Join(dir, "in.pcap"), out: filepath.Join(dir, "out.pcap"), back: filepath.Join(dir, "back.pcap")}
	r.setup = func(p *Pipeline, _ *ports.Set) {
		var err error
		if tp, err = p.ArmTap(spec); err != nil {
			t.Fatal(err)
		}
	}
	r.run(t, mode, frames, nil, "net_pcap%d,rx_pcap="+r.in+",tx_pcap="+r.back, "net_pcap%d,tx_pcap="+r.out)
	var recs []TapRecord
	tp.Read(func(rec *TapRecord) {
		c := *rec
		c.Data = append([]byte(nil), rec.Data...)
		recs = append(recs, c)
	})
	return recs, tp, r
}

// Every packet is tapped as received, byte for byte, and as sent, with
// the port it left by; a runt is tapped as a drop with its reason.
func TestTapRxTxDrop(t *testing.T) {
	frames := testenv.Frames(40)
	frames = append(frames, make([]byte, 10)) // a runt: mac mode drops it
	recs, tp, r := tapRun(t, "mac", frames, TapSpec{Filter: TapFilter{Port: -1, QP: -1}, Snaplen: 2048, Slots: 256})
	defer r.finish(t)
	var rx, tx, drop []TapRecord
	for _, rec := range recs {
		switch rec.Dir {
		case TapRx:
			rx = append(rx, rec)
		case TapTx:
			tx = append(tx, rec)
		case TapDrop:
			drop = append(drop, rec)
		}
	}
	if len(rx) != len(frames) || len(tx) != len(frames)-1 || len(drop) != 1 {
		t.Fatalf("tapped %d rx, %d tx, %d drops; want %d, %d, 1", len(rx), len(tx), len(drop), len(frames), len(frames)-1)
	}
	inPort, outPort := uint16(r.set.Ports[0].ID), uint16(r.set.Ports[1].ID)
	for i, rec := range rx {
		if !bytes.Equal(rec.Data, frames[i]) || rec.RxPort != inPort || rec.Len != uint32(len(frames[i])) {
			t.Fatalf("rx record %d: port %d, %d of %d bytes, differs from the frame received", i, rec.RxPort, len(rec.Data), rec.Len)
		}
	}
	for i, rec := range tx {
		// mac mode rewrote the addresses: the record is the frame as sent.
		if !bytes.Equal(rec.Data[12:], frames[i][12:]) || bytes.Equal(rec.Data[:12], frames[i][:12]) || rec.TxPort != outPort {
			t.Fatalf("tx record %d: not the frame as sent out of port %d (port %d)", i, outPort, rec.TxPort)
		}
	}
	if drop[0].Reason != DropRunt || drop[0].Len != 10 {
		t.Errorf("drop record: %v, %d bytes; want runt, 10", drop[0].Reason, drop[0].Len)
	}
	if taken, lost := tp.Counts(); taken != uint64(len(recs)) || lost != 0 {
		t.Errorf("counts: %d taken, %d lost; %d records", taken, lost, len(recs))
	}
}

// Filters: one QP, one direction and snap length; a BPF program; a count.
func TestTapFilters(t *testing.T) {
	frames := testenv.Frames(60)
	var qp uint32
	var wantQP int
	for _, f := range frames {
		var res roce.Result
		roce.Classify(f, nil, false, &res)
		if res.RoCE && qp == 0 {
			qp = res.DestQP
		}
		if res.RoCE && res.DestQP == qp {
			wantQP++
		}
	}
	recs, _, r := tapRun(t, "roce", frames, TapSpec{Filter: TapFilter{Dirs: TapTx, Port: -1, QP: int64(qp)}, Snaplen: 64, Slots: 256})
	r.finish(t)
	if len(recs) != wantQP {
		t.Errorf("QP %#x: %d records, want %d", qp, len(recs), wantQP)
	}
	for _, rec := range recs {
		if rec.Dir != TapTx || len(rec.Data) != 64 || !rec.HasRxECN {
			t.Fatalf("record %+v: want tx, 64 bytes, the ECN as received", rec)
		}
	}

	bpf, err := dpdk.CompileBPF("not udp dst port 4791", 262144)
	if err != nil {
		t.Fatal(err)
	}
	var notRoCE int
	for _, f := range frames {
		var res roce.Result
		roce.Classify(f, nil, false, &res)
		if !res.RoCE {
			notRoCE++
		}
	}
	recs, _, r = tapRun(t, "io", frames, TapSpec{Filter: TapFilter{Dirs: TapRx, Port: -1, QP: -1, BPF: bpf}, Snaplen: 128, Slots: 256})
	r.finish(t)
	if len(recs) != notRoCE || notRoCE == 0 {
		t.Errorf("BPF not udp dst port 4791: %d records, want %d", len(recs), notRoCE)
	}

	acks := uint8(1 << qpstats.ClassAck)
	recs, tp, r := tapRun(t, "io", frames, TapSpec{Filter: TapFilter{Dirs: TapRx, Port: -1, QP: -1, Classes: acks}, Count: 3, Snaplen: 128, Slots: 256})
	r.finish(t)
	if len(recs) != 3 || !tp.Done() {
		t.Errorf("count 3 of the ACKs: %d records, done %v", len(recs), tp.Done())
	}
}

// A ring nobody reads fills: what does not fit is counted lost, the
// packets are forwarded all the same.
func TestTapRingFullCountsLost(t *testing.T) {
	frames := testenv.Frames(100)
	recs, tp, r := tapRun(t, "io", frames, TapSpec{Filter: TapFilter{Dirs: TapRx, Port: -1, QP: -1}, Snaplen: 64, Slots: 16})
	got := r.finish(t)
	taken, lost := tp.Counts()
	if len(recs) != 16 || taken != 16 || lost != 84 {
		t.Errorf("%d records, %d taken, %d lost; want 16, 16, 84", len(recs), taken, lost)
	}
	if len(got) != len(frames) {
		t.Errorf("%d frames forwarded, want %d", len(got), len(frames))
	}
}

// A drop capture whose ring fills counts the rest of the drops lost,
// and only the drops: of 60 runts among 40 good frames, 16 are taken and
// 44 lost, and the good frames are forwarded.
func TestTapDropRingFullCountsLost(t *testing.T) {
	var frames [][]byte
	for i, f := range testenv.Frames(40) {
		frames = append(frames, f, make([]byte, 10+i%4)) // mac mode drops a runt (under 14 bytes)
		if i%2 == 0 {
			frames = append(frames, make([]byte, 11))
		}
	}
	recs, tp, r := tapRun(t, "mac", frames, TapSpec{Filter: TapFilter{Dirs: TapDrop, Port: -1, QP: -1}, Snaplen: 64, Slots: 16})
	got := r.finish(t)
	taken, lost := tp.Counts()
	if len(recs) != 16 || taken != 16 || lost != 44 {
		t.Errorf("%d records, %d taken, %d lost; want 16, 16, 44", len(recs), taken, lost)
	}
	for _, rec := range recs {
		if rec.Dir != TapDrop || rec.Reason != DropRunt {
			t.Errorf("a record of %v %v, want runt drops only", rec.Dir, rec.Reason)
		}
	}
	if len(got) != 40 {
		t.Errorf("%d frames forwarded, want 40", len(got))
	}
}

// A worker with a tap armed allocates nothing per poll.
func TestTapPollDoesNotAllocate(t *testing.T) {
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set)
	bpf, err := dpdk.CompileBPF("udp", 262144)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := p.ArmTap(TapSpec{Filter: TapFilter{Port: -1, QP: -1, BPF: bpf}, Snaplen: 128, Slots: 1 << 12})
	if err != nil {
		t.Fatal(err)
	}
	w := primeRing(t, p, set)
	allocs := testing.AllocsPerRun(2000, func() {
		w.Poll()
		tp.Read(func(*TapRecord) {})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per poll with a tap", allocs)
	}
	if taken, _ := tp.Counts(); taken < 2000*32 {
		t.Errorf("only %d packets tapped", taken)
	}
	tp.Disarm()
	closeRing(t, p, set)
}

// Every field of a record comes out of the ring as the worker put it in,
// each flag on its own, over laps of the ring.
func TestTapSlotFields(t *testing.T) {
	spec := TapSpec{Snaplen: 128, Slots: 16}
	r := newTapRing(spec.Snaplen, spec.Slots, tapDataBytes(spec))
	tp := &tap{ring: r}
	reader := &Tap{rings: []*tapRing{r}, spec: spec}
	var got, want []TapRecord
	for k := 0; k < 40; k++ {
		d := bytes.Repeat([]byte{byte(k)}, 60+k)
		s := tapSlot{NS: int64(1e18) + int64(k), Len: uint32(1000 + k), Impair: int32(k - 4), FlowRule: int32(k * 3),
			Lcore: uint16(k + 1), RxPort: uint16(k + 2), RxQueue: uint16(k + 3), TxPort: uint16(k + 4),
			Dir: TapDir(1 << (k % 3)), Reason: Reason(k), flags: uint8(k % 8), RxECN: uint8(k % 4)}
		want = append(want, TapRecord{NS: s.NS, Lcore: s.Lcore, RxPort: s.RxPort, RxQueue: s.RxQueue, TxPort: s.TxPort,
			Dir: s.Dir, Reason: s.Reason, Queued: k&1 != 0, RxECN: s.RxECN, HasRxECN: k&2 != 0, Paused: k&4 != 0,
			Impair: s.Impair, FlowRule: s.FlowRule, Len: s.Len, Data: d})
		putSlot(tp, d, s)
		if k%8 == 7 {
			tp.publish()
			got = readRecords(reader, got)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
}

// readRecords appends to got a copy of each record the reader has.
func readRecords(reader *Tap, got []TapRecord) []TapRecord {
	reader.Read(func(rec *TapRecord) {
		c := *rec
		c.Data = append([]byte(nil), rec.Data...)
		got = append(got, c)
	})
	return got
}

// putSlot writes record rec with bytes d into tp's ring as take does
// (8-byte aligned, none wrapping), for tests of what Read makes of it.
func putSlot(tp *tap, d []byte, rec tapSlot) {
	r := tp.ring
	at := tp.dpos
	if o := at & r.dmask; o+uint64(len(d)) > r.dmask+1 {
		at += r.dmask + 1 - o
	}
	copy(r.data[at&r.dmask:], d)
	tp.dpos = at + uint64(len(d)+7)&^7
	rec.end, rec.n = tp.dpos, uint32(len(d))
	r.slots[tp.pos&r.mask] = rec
	tp.pos++
}

// The packed ring of packet bytes, as take writes it, over mbufs of
// every size up to past the snaplen: below 64 bytes (copied 64 wide, past
// the packet), 64 to 128 (two overlapping blocks) and longer (memmove).
// With the reader keeping up nothing is lost and each record holds its
// packet's bytes, cut at the snaplen, and length, in order, over many laps
// of the ring; with the reader stalled, a burst is taken up to the first
// packet that does not fit, the rest counted lost, and nothing unread is
// overwritten.
func TestTapDataRing(t *testing.T) {
	cfg, set := openPorts(t, "io", "net_ring%d")
	p := newPipeline(t, cfg, set)
	defer closeRing(t, p, set)
	w := p.Workers[0]
	pkt := func(k int) []byte {
		b := make([]byte, k*37%400+1)
		for i := range b {
			b[i] = byte(k*7 + i)
		}
		return b
	}
	const snap = 300
	// 64 slots and 4 KiB: the bytes run out before the slots, and the
	// worker's copy of the reader's position in them goes stale.
	spec := TapSpec{Snaplen: snap, Slots: 64}
	r := newTapRing(spec.Snaplen, spec.Slots, 4096)
	tp := &tap{ring: r}
	reader := &Tap{rings: []*tapRing{r}, spec: spec}
	type taken struct {
		k  int
		s0 tapSlot
	}
	var queue []taken // the packets taken, not yet read
	k, read := 0, 0
	// burst takes n packets from k on and returns how many were taken.
	burst := func(n int) int {
		ms := make([]*dpdk.Mbuf, n)
		for i := range ms {
			ms[i] = set.Ports[0].Pool.Alloc()
			if err := ms[i].SetData(pkt(k + i)); err != nil {
				t.Fatal(err)
			}
		}
		// Every other burst's records have every field set: a slot
		// keeps nothing of the record it held before.
		s0 := tapSlot{NS: int64(k), Lcore: 3, RxPort: 1, RxQueue: 2, Dir: TapRx}
		if k%2 == 1 {
			s0.Impair, s0.FlowRule, s0.TxPort, s0.Reason, s0.flags, s0.RxECN = 5, 6, 7, DropRunt, tapQueued|tapHasRxECN|tapPaused, 3
		}
		took := tp.take(ms, &s0)
		tp.publish()
		for i := range took {
			queue = append(queue, taken{k + i, s0})
		}
		k += n
		for _, m := range ms {
			w.step.Drop(m)
		}
		w.step.Flush()
		return took
	}
	check := func() {
		reader.Read(func(rec *TapRecord) {
			if len(queue) == 0 {
				t.Fatalf("record %d: more records than packets taken", read)
			}
			q := queue[0]
			want := pkt(q.k)
			s := q.s0
			if !bytes.Equal(rec.Data, want[:min(len(want), snap)]) || rec.Len != uint32(len(want)) ||
				rec.NS != s.NS || rec.Lcore != 3 || rec.RxPort != 1 || rec.RxQueue != 2 || rec.Dir != TapRx ||
				rec.Impair != s.Impair || rec.FlowRule != s.FlowRule || rec.TxPort != s.TxPort || rec.Reason != s.Reason ||
				rec.Queued != (s.flags&tapQueued != 0) || rec.HasRxECN != (s.flags&tapHasRxECN != 0) ||
				rec.Paused != (s.flags&tapPaused != 0) || rec.RxECN != s.RxECN {
				t.Fatalf("record %d: %+v, want packet %d of %d bytes with %+v", read, *rec, q.k, len(want), s)
			}
			queue = queue[1:]
			read++
		})
	}
	for b := 0; b < 2000; b++ {
		if n := b%8 + 1; burst(n) != n {
			t.Fatalf("burst %d: packets lost with the reader keeping up", b)
		}
		check()
	}
	if len(queue) != 0 || tp.lost != 0 || tp.taken != uint64(k) {
		t.Fatalf("%d records unread, %d lost, %d taken of %d", len(queue), tp.lost, tp.taken, k)
	}
	// A stalled reader: packets are taken until their bytes run out
	// (about 24 of them), the rest lost; what is read is what was taken.
	took := 0
	for range 10 {
		took += burst(8)
	}
	if took < 8 || took > 32 || tp.lost != uint64(80-took) {
		t.Errorf("stalled reader: %d taken, %d lost of 80", took, tp.lost)
	}
	check()
	if len(queue) != 0 || read != 2000/8*36+took {
		t.Errorf("read %d, %d unread", read, len(queue))
	}
}

// A packet under 64 bytes is written 64 wide: take leaves it out
// when the 64 bytes would reach bytes the reader has not read, though
// the packet alone would fit, and what the reader reads is intact. With
// a snaplen under 64, nothing past the snaplen is written.
func TestTapShortNearTheReader(t *testing.T) {
	cfg, set := openPorts(t, "io", "net_ring%d")
	p := newPipeline(t, cfg, set)
	defer closeRing(t, p, set)
	w := p.Workers[0]
	r := newTapRing(300, 64, 4096)
	tp := &tap{ring: r}
	reader := &Tap{rings: []*tapRing{r}, spec: TapSpec{Snaplen: 300, Slots: 64}}
	take := func(sizes ...int) (lost uint64) {
		ms := make([]*dpdk.Mbuf, len(sizes))
		for i, n := range sizes {
			ms[i] = set.Ports[0].Pool.Alloc()
			if err := ms[i].SetData(bytes.Repeat([]byte{byte(n)}, n)); err != nil {
				t.Fatal(err)
			}
		}
		before := tp.lost
		tp.take(ms, &tapSlot{Dir: TapRx})
		tp.publish()
		for _, m := range ms {
			w.step.Drop(m)
		}
		w.step.Flush()
		return tp.lost - before
	}
	sizes := []int{}
	for range 13 {
		sizes = append(sizes, 304) // 300 bytes each (the snaplen), 304 with the padding
	}
	if lost := take(sizes...); lost != 0 { // 3952 bytes of 4096
		t.Fatalf("%d of 13 lost in an empty ring", lost)
	}
	// The reader has read two records: their 608 bytes are free.
	r.head.Store(2)
	r.dhead.Store(r.slots[1].end)
	// One more wraps to the start (0-304), the next takes 304-576: 32
	// bytes are left before the first unread one, at 608. A 20-byte
	// packet would fit; its 64-byte copy would not.
	if lost := take(304, 270); lost != 0 {
		t.Fatalf("%d of 2 lost with 608 bytes freed", lost)
	}
	if lost := take(20); lost != 1 {
		t.Fatalf("a 20-byte packet 32 bytes before unread ones: %d lost, want it lost", lost)
	}
	// A snaplen under 64: no byte past it is copied, even into the
	// ring's free space.
	r16 := newTapRing(16, 64, 4096)
	tp16 := &tap{ring: r16}
	m := set.Ports[0].Pool.Alloc()
	if err := m.SetData(bytes.Repeat([]byte{0xab}, 100)); err != nil {
		t.Fatal(err)
	}
	if took := tp16.take([]*dpdk.Mbuf{m}, &tapSlot{Dir: TapRx}); took != 1 || !bytes.Equal(r16.data[:64], append(bytes.Repeat([]byte{0xab}, 16), make([]byte, 48)...)) {
		t.Errorf("snaplen 16: %d taken, ring bytes % x", took, r16.data[:64])
	}
	w.step.Drop(m)
	w.step.Flush()
	var got []int
	reader.Read(func(rec *TapRecord) {
		want := int(rec.Len)
		if len(rec.Data) != min(want, 300) || !bytes.Equal(rec.Data, bytes.Repeat([]byte{byte(want)}, len(rec.Data))) {
			t.Errorf("record %d, of a packet of %d bytes: overwritten", len(got), want)
		}
		got = append(got, want)
	})
	if len(got) != 13 || got[10] != 304 || got[11] != 304 || got[12] != 270 {
		t.Errorf("read packets of %v bytes, want eleven of 304, one of 304, one of 270", got)
	}
}

// A tap on every packet sent, in roce mode: a burst with nothing dropped
// is taken whole. Each record is the frame as it left, with its tx port
// and the ECN codepoint it arrived with.
func TestTapEverySent(t *testing.T) {
	frames := testenv.Frames(60)
	recs, tp, r := tapRun(t, "roce", frames, TapSpec{Filter: TapFilter{Dirs: TapTx, Port: -1, QP: -1}, Snaplen: 2048, Slots: 256})
	outPort := uint16(r.set.Ports[1].ID)
	got := r.finish(t)
	if len(recs) != len(got) || len(got) == 0 {
		t.Fatalf("%d records of %d frames sent", len(recs), len(got))
	}
	for i, rec := range recs {
		var res roce.Result
		roce.Classify(got[i], nil, false, &res)
		if rec.Dir != TapTx || rec.TxPort != outPort || !bytes.Equal(rec.Data, got[i]) || rec.Len != uint32(len(got[i])) ||
			!rec.HasRxECN || res.RoCE && rec.RxECN != res.ECN {
			t.Fatalf("record %d: %+v, not frame %d as sent out of port %d", i, rec, i, outPort)
		}
	}
	if taken, lost := tp.Counts(); taken != uint64(len(got)) || lost != 0 {
		t.Errorf("counts: %d taken, %d lost, of %d sent", taken, lost, len(got))
	}
}
