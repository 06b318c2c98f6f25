package qpstats

import (
	"net/netip"
	"testing"

	"roce-fwd/roce"
)

type pkt struct {
	src, dst string
	qp       uint32
	op       roce.Opcode
	psn      uint32
	ecn      uint8
	syn      roce.AETHSyndrome
}

func frame(t testing.TB, p pkt) ([]byte, roce.Result) {
	t.Helper()
	spec := roce.FrameSpec{
		IPv6:  netip.MustParseAddr(p.src).Is6(),
		SrcIP: netip.MustParseAddr(p.src), DstIP: netip.MustParseAddr(p.dst), ECN: p.ecn,
		BTH: roce.BTHFields{Opcode: p.op, DestQP: p.qp, PSN: p.psn, PKey: 0xffff},
		Ext: roce.ExtFields{Syndrome: p.syn, DMALength: 64},
	}
	if p.op == 0x81 {
		spec.Payload = make([]byte, 16)
	}
	f, err := spec.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	var r roce.Result
	m := roce.DefaultTCMap()
	roce.Classify(f, &m, true, &r)
	if !r.RoCE || r.Err != roce.ReasonNone {
		t.Fatalf("test frame not RoCE: %+v", r)
	}
	return f, r
}

func observe(t *testing.T, tab *Table, now int64, ps ...pkt) {
	t.Helper()
	for _, p := range ps {
		f, r := frame(t, p)
		tab.Observe(f, &r, len(f), now)
	}
}

const (
	sendOnly = roce.Opcode(0x04)
	writeOnl = roce.Opcode(0x0a)
	readReq  = roce.Opcode(0x0c)
	ack      = roce.Opcode(0x11)
	cnp      = roce.Opcode(0x81)
)

func only(t *testing.T, tab *Table) Flow {
	t.Helper()
	entries, _ := tab.CopyTo(nil)
	flows := Merge(entries)
	if len(flows) != 1 {
		t.Fatalf("%d flows, want 1", len(flows))
	}
	return flows[0]
}

func TestPSNContinuity(t *testing.T) {
	tab := New(64, 0)
	a, b := "10.0.0.1", "10.0.0.2"
	observe(t, tab, 1,
		pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 100},
		pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 101},
		pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 105}, // gap of 3 PSNs
		pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 103}, // behind: out of order
		pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 106}, // in order again
		pkt{src: a, dst: b, qp: 7, op: readReq, psn: 107},
		pkt{src: a, dst: b, qp: 7, op: writeOnl, psn: 140}, // after a READ: not a gap
	)
	f := only(t, tab)
	if f.Packets() != 7 || f.Gaps != 1 || f.GapPSNs != 3 || f.OutOfOrder != 1 {
		t.Errorf("packets %d gaps %d gap PSNs %d out of order %d", f.Packets(), f.Gaps, f.GapPSNs, f.OutOfOrder)
	}
	if f.ExpectedPSN != 141 {
		t.Errorf("expected PSN %d, want 141", f.ExpectedPSN)
	}
	if f.Mix[ClassSend] != 5 || f.Mix[ClassReadRequest] != 1 || f.Mix[ClassWrite] != 1 {
		t.Errorf("mix %v", f.Mix)
	}
	if f.SrcAddr().String() != a || f.DstAddr().String() != b || f.QP != 7 {
		t.Errorf("key %v %v %d", f.SrcAddr(), f.DstAddr(), f.QP)
	}
}

func TestPSNWraps(t *testing.T) {
	tab := New(16, 0)
	observe(t, tab, 1,
		pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 0xfffffe},
		pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 0xffffff},
		pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 0},
	)
	if f := only(t, tab); f.Gaps != 0 || f.OutOfOrder != 0 || f.ExpectedPSN != 1 {
		t.Errorf("wrap: %+v", f.Counters)
	}
}

func TestAcksNAKsCNPsAndCE(t *testing.T) {
	tab := New(16, 0)
	r, q := "2001:db8::2", "2001:db8::1"
	observe(t, tab, 1,
		pkt{src: r, dst: q, qp: 9, op: ack, psn: 10, syn: roce.SyndromeACK(31)},
		pkt{src: r, dst: q, qp: 9, op: ack, psn: 5, syn: roce.SyndromeNAK(roce.NAKPSNSequenceError)},
		pkt{src: r, dst: q, qp: 9, op: ack, psn: 5, syn: roce.SyndromeNAK(roce.NAKRemoteAccessError)},
		pkt{src: r, dst: q, qp: 9, op: ack, psn: 5, syn: roce.SyndromeRNRNAK(12)},
		pkt{src: r, dst: q, qp: 9, op: cnp, ecn: 3},
	)
	f := only(t, tab)
	if f.NAKs[NAKPSNSequence] != 1 || f.NAKs[NAKRemoteAccess] != 1 || f.NAKTotal() != 2 || f.RNRNAKs != 1 {
		t.Errorf("NAKs %v RNR %d", f.NAKs, f.RNRNAKs)
	}
	if f.CNPs() != 1 || f.CE != 1 || f.Mix[ClassAck] != 4 || f.Mix[ClassCNP] != 1 {
		t.Errorf("cnp %d ce %d mix %v", f.CNPs(), f.CE, f.Mix)
	}
	if f.Gaps != 0 || f.OutOfOrder != 0 {
		t.Errorf("ACK PSNs must not count as gaps: %+v", f.Counters)
	}
	if !f.SrcAddr().Is6() || f.SrcAddr().String() != r {
		t.Errorf("IPv6 key %v", f.SrcAddr())
	}
}

func TestEvictionAndAging(t *testing.T) {
	tab := New(16, 100)
	// More flows than slots: live ones are evicted, each counted.
	for qp := uint32(0); qp < 40; qp++ {
		observe(t, tab, int64(qp), pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1})
	}
	st := tab.Stats()
	if st.Inserts != 40 || st.Used > st.Slots || st.Evictions+st.Aged == 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Used != int(st.Inserts-st.Evictions-st.Aged) {
		t.Errorf("used %d != inserts %d - evictions %d - aged %d", st.Used, st.Inserts, st.Evictions, st.Aged)
	}
	// Much later every entry is idle: new flows reuse slots as aged.
	before := tab.Stats()
	for qp := uint32(100); qp < 104; qp++ {
		observe(t, tab, 10_000, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1})
	}
	after := tab.Stats()
	if after.Evictions != before.Evictions || after.Aged-before.Aged == 0 {
		t.Errorf("aging: before %+v after %+v", before, after)
	}
}

func TestTopAndMerge(t *testing.T) {
	t1, t2 := New(16, 0), New(16, 0)
	observe(t, t1, 1, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 1})
	observe(t, t2, 2, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 2},
		pkt{src: "10.0.0.3", dst: "10.0.0.4", qp: 2, op: cnp})
	e1, _ := t1.CopyTo(nil)
	e2, _ := t2.CopyTo(nil)
	flows := Merge(e1, e2)
	if len(flows) != 2 {
		t.Fatalf("%d flows", len(flows))
	}
	top, err := Top(flows, 1, "packets")
	if err != nil || len(top) != 1 || top[0].QP != 1 || top[0].Packets() != 2 || top[0].FirstSeen != 1 || top[0].LastSeen != 2 {
		t.Errorf("top by packets %+v %v", top, err)
	}
	top, _ = Top(flows, 0, "cnp")
	if top[0].QP != 2 {
		t.Errorf("top by cnp %+v", top)
	}
	if _, err := Top(flows, 1, "color"); err == nil {
		t.Error("unknown order accepted")
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	tab := New(1024, 1000)
	f, r := frame(t, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 3, op: sendOnly, psn: 1})
	buf := make([]Entry, 0, 1024)
	allocs := testing.AllocsPerRun(1000, func() {
		tab.Observe(f, &r, len(f), 5)
		buf, _ = tab.CopyTo(buf)
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}

// BenchmarkObserve: "miss" cycles through 64 QPs, so every packet looks
// its flow up in the table; "run" is one QP's run of packets, which the
// previous packet's entry serves.
func BenchmarkObserve(b *testing.B) {
	for _, c := range []struct {
		name string
		qps  int
	}{{"miss", 64}, {"run", 1}} {
		b.Run(c.name, func(b *testing.B) {
			tab := New(4096, 0)
			frames := make([][]byte, c.qps)
			results := make([]roce.Result, c.qps)
			for i := range frames {
				frames[i], results[i] = frame(b, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: uint32(i), op: sendOnly, psn: uint32(i)})
			}
			i := 0
			for b.Loop() {
				j := i & (c.qps - 1) // qps is a power of two
				tab.Observe(frames[j], &results[j], len(frames[j]), int64(i))
				i++
			}
		})
	}
}
