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

// The packed ring of packet bytes: over many laps, with packets of every
// size up to the snaplen, the reader gets each packet's bytes (cut at the
// snaplen) in order; when the reader stalls, packets are lost once the
// bytes, not only the slots, run out, and never overwrite unread ones.
func TestTapDataRing(t *testing.T) {
	spec := TapSpec{Snaplen: 300, Slots: 8}
	r := newTapRing(spec.Snaplen, spec.Slots, tapDataBytes(spec)) // 4096 bytes
	tp := &tap{ring: r}
	reader := &Tap{rings: []*tapRing{r}, spec: spec}
	pkt := func(k int) []byte {
		b := make([]byte, k%400+1)
		for i := range b {
			b[i] = byte(k + i)
		}
		return b
	}
	written, read := 0, 0
	check := func() {
		reader.Read(func(rec *TapRecord) {
			want := pkt(int(rec.NS))
			want = want[:min(len(want), spec.Snaplen)]
			if int(rec.NS) != read || !bytes.Equal(rec.Data, want) || rec.Len != uint32(int(rec.NS)%400+1) {
				t.Fatalf("record %d: packet %d, %d bytes of %d", read, rec.NS, len(rec.Data), rec.Len)
			}
			read++
		})
	}
	for k := 0; k < 5000; k++ {
		d := pkt(written)
		at, ok := tp.room(len(d))
		if !ok {
			t.Fatalf("packet %d: no room with the reader keeping up", written)
		}
		putSlot(tp, d, at, tapSlot{NS: int64(written), Len: uint32(len(d))})
		written++
		tp.publish()
		if k%3 == 2 {
			check()
		}
	}
	check()
	if read != written {
		t.Fatalf("read %d of %d", read, written)
	}
	// A stalled reader: with a snaplen of 3000, 4 slots have 8192 bytes,
	// so the bytes run out first: two packets fit, the rest are lost,
	// and once read, two more fit, the first of them wrapping to the start.
	spec = TapSpec{Snaplen: 3000, Slots: 4}
	r = newTapRing(spec.Snaplen, spec.Slots, tapDataBytes(spec))
	tp, reader = &tap{ring: r}, &Tap{rings: []*tapRing{r}, spec: spec}
	for round := 0; round < 2; round++ {
		taken := 0
		for k := 0; k < 10; k++ {
			d := bytes.Repeat([]byte{byte(round*10 + k)}, 3000)
			if at, ok := tp.room(len(d)); ok {
				putSlot(tp, d, at, tapSlot{NS: int64(k), Len: 3000})
				taken++
			}
		}
		tp.publish()
		if lost := r.lost.Load(); taken != 2 || lost != uint64(8*(round+1)) {
			t.Errorf("round %d: %d taken, %d lost in all of 10 packets of 3000 bytes into 8192", round, taken, lost)
		}
		var got []int64
		reader.Read(func(rec *TapRecord) {
			if !bytes.Equal(rec.Data, bytes.Repeat([]byte{byte(round*10 + int(rec.NS))}, 3000)) {
				t.Errorf("round %d: packet %d's bytes overwritten", round, rec.NS)
			}
			got = append(got, rec.NS)
		})
		if len(got) != 2 || got[0] != 0 || got[1] != 1 {
			t.Errorf("round %d: read %v, want packets 0 and 1", round, got)
		}
	}
}

// Every field of a record comes out of the ring as the worker put it in,
// each flag on its own.
func TestTapSlotFields(t *testing.T) {
	spec := TapSpec{Snaplen: 128, Slots: 16}
	r := newTapRing(spec.Snaplen, spec.Slots, tapDataBytes(spec))
	tp := &tap{ring: r}
	reader := &Tap{rings: []*tapRing{r}, spec: spec}
	var want []TapRecord
	for k := 0; k < 8; k++ {
		d := bytes.Repeat([]byte{byte(k)}, 60+k)
		s := tapSlot{NS: int64(1e18) + int64(k), Len: uint32(1000 + k), Impair: int32(k - 4), FlowRule: int32(k * 3),
			Lcore: uint16(k + 1), RxPort: uint16(k + 2), RxQueue: uint16(k + 3), TxPort: uint16(k + 4),
			Dir: TapDir(1 << (k % 3)), Reason: Reason(k), flags: uint8(k), RxECN: uint8(k % 4)}
		want = append(want, TapRecord{NS: s.NS, Lcore: s.Lcore, RxPort: s.RxPort, RxQueue: s.RxQueue, TxPort: s.TxPort,
			Dir: s.Dir, Reason: s.Reason, Queued: k&1 != 0, RxECN: s.RxECN, HasRxECN: k&2 != 0, Paused: k&4 != 0,
			Impair: s.Impair, FlowRule: s.FlowRule, Len: s.Len, Data: d})
		at, ok := tp.room(len(d))
		if !ok {
			t.Fatal("no room")
		}
		putSlot(tp, d, at, s)
	}
	tp.publish()
	got := readRecords(reader, nil)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
	// Two more laps of records with only the fields every record has: a
	// slot used before keeps nothing of its last record.
	got, want = got[:0], want[:0]
	for k := 0; k < 32; k++ {
		d := []byte{byte(k)}
		at, ok := tp.room(len(d))
		if !ok {
			t.Fatal("no room")
		}
		tp.recordBytes(tp.next(int64(k), 7, &rxSource{port: 1, queue: 2}, TapDrop, Reason(k%3)), d, at)
		want = append(want, TapRecord{NS: int64(k), Lcore: 7, RxPort: 1, RxQueue: 2, Dir: TapDrop, Reason: Reason(k % 3), Data: d})
		if k%8 == 7 {
			tp.publish()
			got = readRecords(reader, got)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reused slots read back\n%+v\nwant\n%+v", got, want)
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

// putSlot records d at at with the fields of rec, as the taps do: the
// fields into the slot next returns, then the bytes.
func putSlot(tp *tap, d []byte, at uint64, rec tapSlot) {
	s := tp.next(rec.NS, rec.Lcore, &rxSource{port: rec.RxPort, queue: rec.RxQueue}, rec.Dir, rec.Reason)
	s.Len, s.Impair, s.FlowRule, s.TxPort, s.flags, s.RxECN = rec.Len, rec.Impair, rec.FlowRule, rec.TxPort, rec.flags, rec.RxECN
	tp.recordBytes(s, d, at)
}
