package pipeline

import (
	"bytes"
	"path/filepath"
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
