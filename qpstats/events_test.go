package qpstats

import "testing"

// The table's PSN event totals step with each frame that makes a gap or
// arrives behind, on any flow, and add up to the flows' own counters.
func TestPSNEvents(t *testing.T) {
	tab := New(64, 0)
	a, b, c := "10.0.0.1", "10.0.0.2", "fd00::1"
	steps := []struct {
		p    pkt
		want PSNEvents
	}{
		{pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 100}, PSNEvents{}},
		{pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 104}, PSNEvents{Gaps: 1, GapPSNs: 3}},
		{pkt{src: c, dst: c, qp: 9, op: sendOnly, psn: 5}, PSNEvents{Gaps: 1, GapPSNs: 3}},
		{pkt{src: c, dst: c, qp: 9, op: sendOnly, psn: 4}, PSNEvents{Gaps: 1, GapPSNs: 3, OutOfOrder: 1}},
		{pkt{src: a, dst: b, qp: 7, op: sendOnly, psn: 102}, PSNEvents{Gaps: 1, GapPSNs: 3, OutOfOrder: 2}},
		{pkt{src: a, dst: b, qp: 7, op: ack, psn: 1}, PSNEvents{Gaps: 1, GapPSNs: 3, OutOfOrder: 2}},
		{pkt{src: c, dst: c, qp: 9, op: sendOnly, psn: 8}, PSNEvents{Gaps: 2, GapPSNs: 5, OutOfOrder: 2}},
	}
	for i, s := range steps {
		f, r := frame(t, s.p)
		tab.Observe(f, &r, len(f), 1)
		if got := tab.PSNEvents(); got != s.want {
			t.Fatalf("after frame %d: %+v, want %+v", i, got, s.want)
		}
		if k := KeyOf(f, &r); k.SrcAddr().String() != s.p.src || k.DstAddr().String() != s.p.dst || k.QP != s.p.qp {
			t.Errorf("frame %d: key %v %v %d", i, k.SrcAddr(), k.DstAddr(), k.QP)
		}
	}
	entries, _ := tab.CopyTo(nil)
	var sum PSNEvents
	for _, e := range entries {
		sum.Gaps += e.Gaps
		sum.GapPSNs += e.GapPSNs
		sum.OutOfOrder += e.OutOfOrder
	}
	if sum != tab.PSNEvents() {
		t.Errorf("flows add up to %+v, table says %+v", sum, tab.PSNEvents())
	}
	tab.Reset()
	if tab.PSNEvents() != (PSNEvents{}) {
		t.Error("Reset kept the PSN events")
	}
}
