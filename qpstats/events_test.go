package qpstats

import (
	"math/rand/v2"
	"testing"

	"roce-fwd/roce"
)

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

// A flow's PSN events follow the model of count's comment over random
// streams in every class: in order, gaps (not counted after a READ, whose
// responses take PSNs), PSNs behind (a retransmission: counted out of
// order, the expectation kept, a READ's reservation forgotten unless the
// packet is a READ), and ACKs and CNPs, which carry no PSN to track.
func TestPSNModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for run := range 200 {
		tab := New(16, 0)
		var known, afterRead bool
		var exp uint32
		var want PSNEvents
		psn := rng.Uint32() & psnMask
		for i := range 64 {
			op := []roce.Opcode{sendOnly, writeOnl, readReq, ack, cnp}[rng.IntN(5)]
			switch rng.IntN(6) {
			case 0:
				psn += uint32(2 + rng.IntN(5)) // a gap
			case 1:
				psn -= uint32(1 + rng.IntN(5)) // behind
			case 2:
				psn -= 1 << 23 // exactly half the space away: behind
			default:
				psn++
			}
			psn &= psnMask
			if op != ack && op != cnp {
				isRead := op == readReq
				d := (psn - exp) & psnMask
				switch {
				case !known || d == 0:
					exp, afterRead = (psn+1)&psnMask, isRead
				case d < 1<<23:
					if !afterRead {
						want.Gaps++
						want.GapPSNs += uint64(d)
					}
					exp, afterRead = (psn+1)&psnMask, isRead
				default:
					want.OutOfOrder++
					afterRead = isRead
				}
				known = true
			}
			f, r := frame(t, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 5, op: op, psn: psn})
			tab.Observe(f, &r, len(f), 1)
			if got := tab.PSNEvents(); got != want {
				t.Fatalf("run %d, packet %d (opcode %#x, PSN %d): %+v, want %+v", run, i, op, psn, got, want)
			}
		}
	}
}
