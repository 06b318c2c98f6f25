package qpstats

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"roce-fwd/internal/roceframe"
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
	return roceframe.Build(t, spec)
}

func observe(t *testing.T, tab *Table, now int64, ps ...pkt) {
	t.Helper()
	for _, p := range ps {
		f, r := frame(t, p)
		tab.Observe(f, &r, len(f), now)
	}
}

// stage is the data path's calls for one packet: Hit, then Count for a
// flow the memo holds, else Add. It returns the slot of a packet counted
// at once, else -1.
func stage(tab *Table, b *Batch, j int, f []byte, r *roce.Result) int32 {
	slot, k := tab.Hit(b, f, r)
	if slot >= 0 {
		tab.Count(slot, r, len(f))
		return slot
	}
	tab.Add(b, j, k, r)
	return -1
}

const (
	sendOnly     = roce.Opcode(0x04)
	writeOnl     = roce.Opcode(0x0a)
	readReq      = roce.Opcode(0x0c)
	readRespOnly = roce.Opcode(0x10)
	ack          = roce.Opcode(0x11)
	cnp          = roce.Opcode(0x81)
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
	const ms = int64(1e6)
	tab := New(16, 100*ms)
	// More flows than slots: live ones are evicted, each counted.
	for qp := uint32(0); qp < 40; qp++ {
		observe(t, tab, int64(qp)*ms, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1})
	}
	st := tab.Stats()
	if st.Inserts != 40 || st.Used != st.Slots || st.Evictions != 40-16 || st.Aged != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Used != int(st.Inserts-st.Evictions-st.Aged) {
		t.Errorf("used %d != inserts %d - evictions %d - aged %d", st.Used, st.Inserts, st.Evictions, st.Aged)
	}
	// Much later every entry is idle: new flows reuse slots as aged.
	before := tab.Stats()
	for qp := uint32(100); qp < 104; qp++ {
		observe(t, tab, 10_000*ms, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1})
	}
	after := tab.Stats()
	if after.Evictions != before.Evictions || after.Aged-before.Aged != 4 || after.Used != after.Slots {
		t.Errorf("aging: before %+v after %+v", before, after)
	}
}

// A new flow goes to the emptier of its two buckets; when both are full
// it takes the way of the flow seen least recently, whichever way of
// either bucket that is, and the others keep their counts.
func TestEvictionTakesLeastRecentlySeen(t *testing.T) {
	const ms = int64(1e6)
	tab := New(16, 0) // two buckets of eight
	// Flows whose two buckets differ: sixteen fill the table exactly.
	var flows []pkt
	for qp := uint32(0); len(flows) < 2*ways+1; qp++ {
		p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1}
		f, r := frame(t, p)
		b := NewBatch(1)
		stage(tab, b, 0, f, &r)
		if b.items[0].bkt != b.items[0].alt {
			flows = append(flows, p)
		}
	}
	for i, p := range flows[:2*ways] {
		observe(t, tab, int64(10+i)*ms, p)
	}
	if st := tab.Stats(); st.Used != 2*ways || st.Evictions != 0 {
		t.Fatalf("sixteen flows in sixteen slots: %+v", st)
	}
	for i, p := range flows[:2*ways] {
		if i != 2 {
			observe(t, tab, 30*ms, p) // seen again: flow 2 is now the oldest
		}
	}
	observe(t, tab, 40*ms, flows[2*ways])
	entries, st := tab.CopyTo(nil)
	if st.Evictions != 1 || st.Used != 2*ways || len(entries) != 2*ways {
		t.Fatalf("stats %+v, %d entries", st, len(entries))
	}
	for _, e := range entries {
		if e.QP == flows[2].qp {
			t.Errorf("QP %d, the least recently seen, was kept", e.QP)
		}
		want := uint64(2)
		if e.QP == flows[2*ways].qp {
			want = 1
		}
		if e.Packets() != want {
			t.Errorf("QP %d: %d packets, want %d", e.QP, e.Packets(), want)
		}
	}
}

// A flow the memo found counts as seen for the choice of a victim even
// within the burst that found it: a new flow of that burst evicts the one
// flow that was not seen again.
func TestEvictionSeesMemoHitsOfItsBurst(t *testing.T) {
	const ms = int64(1e6)
	tab := New(16, 0) // two buckets of eight
	// Flows whose two buckets differ, each in a memo entry of its own.
	var flows []pkt
	memo := map[uint32]bool{}
	for qp := uint32(0); len(flows) < 2*ways+1; qp++ {
		p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1}
		f, r := frame(t, p)
		b := NewBatch(1)
		stage(New(16, 0), b, 0, f, &r)
		if it := b.items[0]; it.bkt != it.alt && !memo[memoIndex(it.key, it.qp)] {
			memo[memoIndex(it.key, it.qp)] = true
			flows = append(flows, p)
		}
	}
	for i, p := range flows[:2*ways] {
		runBurst(t, tab, int64(10+i)*ms, p)
	}
	// One burst, later: every flow but the one seen last, then a new flow.
	// The flows seen again are found in the memo, the new one is staged.
	last := flows[2*ways-1]
	ps := append(slices.Clone(flows[:2*ways-1]), flows[2*ways])
	staged := runBurst(t, tab, 100*ms, ps...)
	if want := append(make([]bool, 2*ways-1), true); !slices.Equal(staged, want) {
		t.Fatalf("staged %v, want %v", staged, want)
	}
	entries, st := tab.CopyTo(nil)
	if st.Evictions != 1 || len(entries) != 2*ways {
		t.Fatalf("stats %+v, %d entries", st, len(entries))
	}
	for _, e := range entries {
		if e.QP == last.qp {
			t.Errorf("QP %d, not seen since 25 ms, was kept: a flow seen at 100 ms was evicted", e.QP)
		}
	}
}

// At half load, two choices of bucket leave no flow without a slot: a
// single bucket per key would overflow about one bucket in twenty.
func TestHalfLoadNeverEvicts(t *testing.T) {
	tab := New(1<<15, 0)
	b := NewBatch(1)
	for i := 0; i < 1<<14; i++ {
		f, r := frame(t, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: uint32(i) * 7919, op: sendOnly, psn: 1})
		b.Reset()
		stage(tab, b, 0, f, &r)
		tab.Find(b, 1)
		tab.Update(b, 0, &r, len(f), 1)
	}
	if st := tab.Stats(); st.Evictions != 0 || st.Used != 1<<14 {
		t.Errorf("stats %+v", st)
	}
}

// A burst staged, found and updated as a batch ends in exactly the state
// the same packets leave one at a time: new flows repeated within a
// burst, flows evicting each other within a burst, PSNs and NAKs.
func TestBatchEqualsOneAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type input struct {
		f []byte
		r roce.Result
	}
	var in []input
	psn := map[uint32]uint32{}
	for i := 0; i < 5000; i++ {
		qp := uint32(rng.IntN(200)) // more flows than the table's 64 slots
		op := []roce.Opcode{sendOnly, writeOnl, readReq, ack, cnp}[rng.IntN(5)]
		p := pkt{src: "10.0.0.1", dst: "2.2.2.2", qp: qp, op: op, psn: psn[qp], ecn: uint8(rng.IntN(4))}
		if rng.IntN(2) == 0 {
			p.src, p.dst = "2001:db8::1", "2001:db8::2"
		}
		if op == ack && rng.IntN(4) == 0 {
			p.syn = roce.SyndromeNAK(roce.NAKPSNSequenceError)
		}
		psn[qp] += uint32(1 + rng.IntN(2)) // sometimes a gap
		if rng.IntN(20) == 0 {
			psn[qp] -= 5 // sometimes behind
		}
		f, r := frame(t, p)
		in = append(in, input{f, r})
	}
	const ms = int64(1e6)
	one, batched := New(64, 50*ms), New(64, 50*ms)
	b := NewBatch(64)
	for i := 0; i < len(in); {
		n := min(1+rng.IntN(64), len(in)-i)
		now := int64(i) * ms / 10
		batched.Begin(b, now)
		for j, p := range in[i : i+n] {
			one.Observe(p.f, &p.r, len(p.f), now)
			stage(batched, b, j, p.f, &p.r)
		}
		batched.Find(b, now)
		for k := range b.Len() {
			p := in[i+b.Pkt(k)]
			batched.Update(b, k, &p.r, len(p.f), now)
		}
		i += n
	}
	e1, s1 := one.CopyTo(nil)
	e2, s2 := batched.CopyTo(nil)
	if s1 != s2 || s1.Evictions == 0 {
		t.Errorf("stats one at a time %+v, batched %+v", s1, s2)
	}
	if !batched.crowded { // so both buckets of each key were staged
		t.Error("a table with more flows than slots is not crowded")
	}
	if !slices.Equal(e1, e2) {
		t.Errorf("tables differ:\n%+v\n%+v", e1, e2)
	}
}

// A packet of a flow found in an earlier burst is counted at once (Add
// returns false), a flow and its reverse on the same QP are told apart,
// a flow whose slot went to another flow is staged again, and after the
// first staged packet of a burst the rest is staged too.
func TestMemo(t *testing.T) {
	tab := New(16, 0) // two buckets of eight
	fwd := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 7, op: sendOnly, psn: 1}
	rev := pkt{src: "10.0.0.2", dst: "10.0.0.1", qp: 7, op: cnp}
	add := func(now int64, ps ...pkt) []bool { return runBurst(t, tab, now, ps...) }
	if got := add(1, fwd, rev); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("first burst: staged %v, want both", got)
	}
	fwd.psn++
	if got := add(2, fwd, rev); !slices.Equal(got, []bool{false, false}) {
		t.Fatalf("second burst: staged %v, want neither", got)
	}
	newFlow := pkt{src: "10.0.0.9", dst: "10.0.0.2", qp: 99, op: sendOnly, psn: 1}
	fwd.psn++
	if got := add(3, newFlow, fwd); !slices.Equal(got, []bool{true, true}) {
		t.Fatalf("after a new flow: staged %v, want both", got)
	}
	entries, st := tab.CopyTo(nil)
	for _, e := range entries {
		want := map[uint32]uint64{7: 0, 99: 1}[e.QP]
		if e.QP == 7 && e.Src == [2]uint64{0, v4mapped | 0x0a000001} {
			want = 3
		} else if e.QP == 7 {
			want = 2
		}
		if e.Packets() != want || e.Gaps != 0 || e.OutOfOrder != 0 {
			t.Errorf("QP %d from %v: %d packets, %d gaps, %d out of order; want %d, 0, 0", e.QP, e.SrcAddr(), e.Packets(), e.Gaps, e.OutOfOrder, want)
		}
	}
	if st.Used != 3 || st.Inserts != 3 {
		t.Errorf("stats %+v", st)
	}
	// Fill the table with other flows until fwd's slot is taken: fwd is
	// then staged again and starts over.
	for qp := uint32(1000); qp < 1040; qp++ {
		add(int64(qp)<<ageShift, pkt{src: "10.0.0.5", dst: "10.0.0.6", qp: qp, op: sendOnly, psn: 1})
	}
	fwd.psn++
	if got := add(2000<<ageShift, fwd); !slices.Equal(got, []bool{true}) {
		t.Fatalf("after its eviction: staged %v, want it staged", got)
	}
	entries, _ = tab.CopyTo(nil)
	found := false
	for _, e := range entries {
		if e.QP == 7 && e.Src == [2]uint64{0, v4mapped | 0x0a000001} {
			found = true
			if e.Packets() != 1 {
				t.Errorf("re-inserted flow: %d packets, want 1", e.Packets())
			}
		}
	}
	if !found {
		t.Error("flow not re-inserted")
	}
}

// runBurst counts packets ps seen at now as one burst, the way the data
// path does, and reports which of them were staged (not found in the memo).
func runBurst(t *testing.T, tab *Table, now int64, ps ...pkt) (staged []bool) {
	t.Helper()
	b := NewBatch(len(ps))
	tab.Begin(b, now)
	frames := make([][]byte, len(ps))
	results := make([]roce.Result, len(ps))
	for j, p := range ps {
		frames[j], results[j] = frame(t, p)
		staged = append(staged, stage(tab, b, j, frames[j], &results[j]) < 0)
	}
	tab.Find(b, now)
	for k := range b.Len() {
		j := b.Pkt(k)
		tab.Update(b, k, &results[j], len(frames[j]), now)
	}
	return staged
}

// countTwo finds and counts the two packets staged in b, x and y, at now,
// and returns the table's flows, which must be two.
func countTwo(t *testing.T, tab *Table, b *Batch, now int64, fx, fy []byte, rx, ry *roce.Result) []Entry {
	t.Helper()
	tab.Find(b, now)
	tab.Update(b, 0, rx, len(fx), now)
	tab.Update(b, 1, ry, len(fy), now)
	entries, st := tab.CopyTo(nil)
	if len(entries) != 2 || st.Used != 2 {
		t.Fatalf("%d entries, stats %+v", len(entries), st)
	}
	return entries
}

// Two keys with the same bucket and signature are told apart by the key
// itself: each gets its own slot and counts.
func TestSignatureCollision(t *testing.T) {
	tab := New(64, 0)
	fx, rx := frame(t, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 1})
	fy, ry := frame(t, pkt{src: "10.0.0.3", dst: "10.0.0.4", qp: 2, op: sendOnly, psn: 7})
	tab.Observe(fx, &rx, len(fx), 1)
	b := NewBatch(2)
	tab.clearMemo() // fx is staged, not counted at once
	stage(tab, b, 0, fx, &rx)
	stage(tab, b, 1, fy, &ry)
	b.items[1].bkt, b.items[1].sig = b.items[0].bkt, b.items[0].sig // force the collision
	for _, e := range countTwo(t, tab, b, 2, fx, fy, &rx, &ry) {
		if want := uint64(3 - e.QP); e.Packets() != want { // QP 1 twice, QP 2 once
			t.Errorf("QP %d: %d packets, want %d", e.QP, e.Packets(), want)
		}
	}
}

// A packet shares the lookup of the packet before it only if their keys
// are the same, not just their signatures: two flows of one address pair
// whose QPs hash to the same signature, staged one after the other, get a
// slot each.
func TestRunNeedsTheSameKey(t *testing.T) {
	const src, dst = "10.0.0.1", "10.0.0.2"
	probe, pr := frame(t, pkt{src: src, dst: dst, qp: 1, op: sendOnly})
	k := v4Words(probe, int(pr.L3)) // the addresses as the table keys them
	var qx, qy uint32
	seen := map[uint32]uint32{}
	for qp := uint32(1); qp < 1<<24 && qy == 0; qp++ {
		_, _, sig := hash(k, qp)
		if q, ok := seen[sig]; ok {
			qx, qy = q, qp
		}
		seen[sig] = qp
	}
	if qy == 0 {
		t.Fatal("no two QPs with the same signature")
	}
	tab := New(64, 0)
	fx, rx := frame(t, pkt{src: src, dst: dst, qp: qx, op: sendOnly, psn: 1})
	fy, ry := frame(t, pkt{src: src, dst: dst, qp: qy, op: sendOnly, psn: 9})
	b := NewBatch(2)
	tab.Begin(b, 1)
	stage(tab, b, 0, fx, &rx)
	stage(tab, b, 1, fy, &ry)
	if b.items[0].sig != b.items[1].sig || b.items[1].again {
		t.Fatalf("signatures %#x and %#x, the second packet staged as a run of the first: %v", b.items[0].sig, b.items[1].sig, b.items[1].again)
	}
	for _, e := range countTwo(t, tab, b, 1, fx, fy, &rx, &ry) {
		if e.Packets() != 1 || e.ExpectedPSN != map[uint32]uint32{qx: 2, qy: 10}[e.QP] {
			t.Errorf("QP %#x: %d packets, expected PSN %d", e.QP, e.Packets(), e.ExpectedPSN)
		}
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

// BenchmarkObserve: "run" is one QP's run of packets; "miss" cycles
// through 64 QPs; "8k" and "64k" visit that many QPs in a shuffled order
// with a table that holds them all (entries far out of the caches). Each
// is measured one packet at a time (Observe) and a burst of 32 at a time
// (Begin, Hit and Count or Add, Find, Update), as the data path does. The packets themselves
// are 32 frames whose destination QP is rewritten before each use, so
// they are in the cache, as a burst just received is.
func BenchmarkObserve(b *testing.B) {
	for _, c := range []struct {
		name string
		qps  int
	}{{"run", 1}, {"miss", 64}, {"8k", 8192}, {"64k", 65536}} {
		tab := New(2*c.qps, 0)
		var frames [32][]byte
		var results [32]roce.Result
		for i := range frames {
			frames[i], results[i] = frame(b, pkt{src: "10.0.0.1", dst: "10.0.0.2", op: sendOnly, psn: uint32(i)})
		}
		qps := rand.New(rand.NewPCG(3, 4)).Perm(c.qps)
		mask := c.qps - 1 // qps is a power of two
		// next readies frame k as the packet of the i-th QP.
		next := func(i, k int) ([]byte, *roce.Result) {
			f, r := frames[k], &results[k]
			qp := uint32(qps[i&mask])
			binary.BigEndian.PutUint32(f[r.BTH+4:], qp)
			r.DestQP = qp
			return f, r
		}
		b.Run(c.name+"/one", func(b *testing.B) {
			i := 0
			for b.Loop() {
				f, r := next(i, i&31)
				tab.Observe(f, r, len(f), int64(i))
				i++
			}
		})
		b.Run(c.name+"/burst", func(b *testing.B) {
			batch := NewBatch(32)
			i := 0
			for b.Loop() {
				tab.Begin(batch, int64(i))
				for k := range frames {
					f, r := next(i+k, k)
					stage(tab, batch, k, f, r)
				}
				tab.Find(batch, int64(i))
				for k := range batch.Len() {
					j := batch.Pkt(k)
					tab.Update(batch, k, &results[j], len(frames[j]), int64(i))
				}
				i += 32
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/packet")
		})
	}
}

// BenchmarkResponderMix is one flow as a requester receives it: READ
// responses in PSN order among ACKs and CNPs (which carry no PSN to
// track), in a random order of classes, as a port's traffic has them.
// Unlike the benchmark's replayed captures, whose PSNs are all behind,
// the in-order packets here make the PSN check meet d == 0.
func BenchmarkResponderMix(b *testing.B) {
	const n = 4096
	rng := rand.New(rand.NewPCG(5, 6))
	frames := make([][]byte, n)
	results := make([]roce.Result, n)
	psn := uint32(0)
	for i := range frames {
		p := pkt{src: "10.0.0.2", dst: "10.0.0.1", qp: 17, op: readRespOnly, psn: psn}
		switch rng.IntN(3) {
		case 0:
			p.op, p.psn, p.syn = ack, rng.Uint32N(1<<24), roce.SyndromeACK(31)
		case 1:
			p.op, p.psn = cnp, 0
		default:
			psn++
		}
		frames[i], results[i] = frame(b, p)
	}
	tab := New(64, 0)
	i := 0
	for b.Loop() {
		k := i & (n - 1)
		tab.Observe(frames[k], &results[k], len(frames[k]), int64(i))
		i++
	}
}

// Counters kept in 16 or 32 bits in the hot line carry into the cold
// part: the opcode mix past 2^16, bytes and out-of-order PSNs past 2^32.
func TestCountersCarry(t *testing.T) {
	tab := New(16, 0)
	p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 5, op: sendOnly, psn: 10}
	observe(t, tab, 1, p)
	f, _ := frame(t, p)
	var s *slot
	for i := range tab.slots {
		if tab.slots[i].qp == 5 {
			s = &tab.slots[i]
		}
	}
	s.mix[ClassSend] = 1<<16 - 2
	s.bytes = -uint32(len(f)) // 2^32 - len(f)
	s.ooo = ^uint32(0)
	p.psn = 11
	observe(t, tab, 2, p) // in order: mix 2^16-1, bytes wrap
	p.psn = 3
	observe(t, tab, 3, p) // behind: mix wraps, out of order wraps
	got := only(t, tab)
	if got.Mix[ClassSend] != 1<<16 || got.Packets() != 1<<16 {
		t.Errorf("send count %d (packets %d), want %d", got.Mix[ClassSend], got.Packets(), 1<<16)
	}
	if want := uint64(1)<<32 + uint64(len(f)); got.Bytes != want {
		t.Errorf("bytes %d, want %d", got.Bytes, want)
	}
	if got.OutOfOrder != 1<<32 {
		t.Errorf("out of order %d, want %d", got.OutOfOrder, uint64(1)<<32)
	}
}

// A flow's last-seen time comes from its bucket's coarse clock: within a
// tick of the real one, never before its first packet.
func TestLastSeen(t *testing.T) {
	const ms = int64(1e6)
	base := int64(1_700_000_000_000) * ms // a 2023 date in ns: the clock has wrapped its 32 bits many times
	tab := New(16, 0)
	p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 5, op: sendOnly, psn: 10}
	observe(t, tab, base, p)
	p.psn++
	observe(t, tab, base+250*ms, p)
	got := only(t, tab)
	if d := base + 250*ms - got.LastSeen; d < 0 || d >= 1<<ageShift || got.FirstSeen != base {
		t.Errorf("first seen %d last seen %d, want %d and within %d ns before %d", got.FirstSeen, got.LastSeen, base, 1<<ageShift, base+250*ms)
	}
}

// What the QoS stage does to a flow's packets is counted in the flow's
// slot, as Hit and Update return it, merged over tables and sorted on.
func TestVictims(t *testing.T) {
	tab := New(64, 0)
	a := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 1, op: sendOnly, psn: 1}
	bq := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: 2, op: sendOnly, psn: 1}
	b := NewBatch(2)
	slotOf := func(p pkt) int32 {
		f, r := frame(t, p)
		tab.Begin(b, 1)
		if s := stage(tab, b, 0, f, &r); s >= 0 {
			return s
		}
		tab.Find(b, 1)
		return tab.Update(b, 0, &r, len(f), 1)
	}
	sa, sb := slotOf(a), slotOf(bq)
	a.psn++
	if again := slotOf(a); again != sa { // a memo hit this time: the same slot
		t.Fatalf("slot %d, then %d", sa, again)
	}
	tab.Victim(sa, VictimMarked)
	tab.Victim(sa, VictimMarked)
	tab.Victim(sb, VictimHeld)
	tab.Victim(sb, VictimDropped)
	e, _ := tab.CopyTo(nil)
	flows := Merge(e, e)
	top, _ := Top(flows, 1, "marked")
	held, _ := Top(flows, 1, "held")
	if top[0].QP != 1 || top[0].MarkedCE != 4 || held[0].QP != 2 || held[0].HeldPaused != 2 || held[0].QoSDropped != 2 {
		t.Errorf("by marked %+v, by held %+v", top[0].Counters, held[0].Counters)
	}
}

// find and findWords (which compares the signatures two to a word)
// answer as a scan of the ways would: buckets with repeated, free and
// near-miss signatures (ones differing in the lowest or the top bit,
// which the lanes' borrows could confuse).
func TestBucketFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := []uint32{0, 1, 3, 0x80000001, 0xffffffff, 0xfffffffe, 2}
	for range 200000 {
		var bk bucket
		for w := range bk.sig {
			if rng.IntN(3) == 0 {
				bk.sig[w] = rng.Uint32()
			} else {
				bk.sig[w] = vals[rng.IntN(len(vals))]
			}
		}
		sig := vals[rng.IntN(len(vals))]
		if rng.IntN(4) == 0 {
			sig = bk.sig[rng.IntN(ways)]
		}
		want := ways
		for w, s := range bk.sig {
			if s == sig {
				want = w
				break
			}
		}
		if got := bk.find(sig); got != want {
			t.Fatalf("find(%#x) in %#x: %d, want %d", sig, bk.sig, got, want)
		}
		if got := bk.findWords(sig); got != want {
			t.Fatalf("findWords(%#x) in %#x: %d, want %d", sig, bk.sig, got, want)
		}
	}
}

// oldest picks what a scan of both buckets way by way picks: the way
// idle longest (ages compared modulo 2^32), the first among equals.
func TestOldest(t *testing.T) {
	impls := []func(uint32, *[ways]uint32, *[ways]uint32) (int, uint32){oldest, oldestTree}
	names := []string{"oldest", "oldestTree"}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 200000 {
		var a, c [ways]uint32
		age := rng.Uint32()
		for w := range ways {
			a[w], c[w] = age-uint32(rng.IntN(6)), age-uint32(rng.IntN(6)) // many equals
			if i%3 == 0 {
				a[w], c[w] = rng.Uint32(), rng.Uint32()
			}
		}
		if i%5 == 0 {
			c = a // a key whose two buckets are one
		}
		want, wantIdle := 0, age-a[0]
		for n, ages := range [2]*[ways]uint32{&a, &c} {
			for w := range ways {
				if d := age - ages[w]; d > wantIdle {
					want, wantIdle = n*ways+w, d
				}
			}
		}
		for k, f := range impls {
			if got, idle := f(age, &a, &c); got != want || idle != wantIdle {
				t.Fatalf("%s: age %d, ages %v %v: way %d idle %d, want way %d idle %d", names[k], age, a, c, got, idle, want, wantIdle)
			}
		}
	}
}

// A slot taken from an evicted flow starts the new flow's counts at zero,
// though fill leaves the cold part past its first line as it was (rest
// zeroes it at the new flow's first write there, and a copy reads it as
// zero before that).
func TestSlotReuseStartsFromZero(t *testing.T) {
	const ms = int64(1e6)
	tab := New(16, 0)
	b := NewBatch(1)
	slotOf := func(p pkt, now int64) int32 {
		f, r := frame(t, p)
		tab.Begin(b, now)
		if s := stage(tab, b, 0, f, &r); s >= 0 {
			return s
		}
		tab.Find(b, now)
		return tab.Update(b, 0, &r, len(f), now)
	}
	// Sixteen flows with every cold count: NAKs, RNR NAKs, what QoS did,
	// and a carry of the SEND counter.
	for qp := uint32(0); qp < 16; qp++ {
		p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: ack, syn: roce.SyndromeNAK(roce.NAKPSNSequenceError)}
		s := slotOf(p, 1)
		p.syn = roce.SyndromeRNRNAK(3)
		slotOf(p, 1)
		for k := range numVictims {
			tab.Victim(s, k)
		}
		f, r := frame(t, pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly})
		for range 1 << 16 {
			tab.Count(s, &r, len(f))
		}
	}
	// Newer flows evict them (and then each other), one SEND each; half
	// get a NAK and a QoS mark, their first writes past the cold part's
	// first line.
	for qp := uint32(100); qp < 140; qp++ {
		now := int64(qp) * ms
		s := slotOf(pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly}, now)
		if qp%2 == 0 {
			slotOf(pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: ack, syn: roce.SyndromeNAK(roce.NAKPSNSequenceError)}, now)
			tab.Victim(s, VictimMarked)
		}
	}
	entries, st := tab.CopyTo(nil)
	if st.Evictions < 40 || len(entries) < 8 {
		t.Fatalf("%d entries, %+v", len(entries), st)
	}
	for _, e := range entries {
		c := e.Counters
		var naks, marked uint64
		if e.Key.QP%2 == 0 {
			naks, marked = 1, 1
		}
		var sum uint64
		for _, n := range c.NAKs {
			sum += n
		}
		if e.Key.QP < 100 || sum != naks || c.RNRNAKs != 0 || c.MarkedCE != marked || c.HeldPaused != 0 ||
			c.QoSDropped != 0 || c.Mix[ClassOf(sendOnly)] != 1 {
			t.Errorf("qp %d: %+v", e.Key.QP, c)
		}
	}
}

// TestTableStatsAdd sets every field of two stats to distinct values:
// their sum must have each field summed, so that a field added to
// TableStats and not to Add fails here.
func TestTableStatsAdd(t *testing.T) {
	var a, b TableStats
	va, vb := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
	for i := range va.NumField() {
		switch va.Field(i).Kind() {
		case reflect.Int:
			va.Field(i).SetInt(int64(i + 1))
			vb.Field(i).SetInt(int64(10 * (i + 1)))
		case reflect.Uint64:
			va.Field(i).SetUint(uint64(i + 1))
			vb.Field(i).SetUint(uint64(10 * (i + 1)))
		default:
			t.Fatalf("field %s: kind %s not covered", va.Type().Field(i).Name, va.Field(i).Kind())
		}
	}
	a.Add(b)
	for i := range va.NumField() {
		f := va.Field(i)
		got := uint64(0)
		if f.Kind() == reflect.Int {
			got = uint64(f.Int())
		} else {
			got = f.Uint()
		}
		if got != uint64(11*(i+1)) {
			t.Errorf("%s: %d after Add, want %d", va.Type().Field(i).Name, got, 11*(i+1))
		}
	}
}

// Count (the memo's flows, branching) and CountStaged (the staged ones,
// selecting) leave a slot, its cold part and the table's PSN events
// alike, from any PSN state, for any class and any PSN: in order, ahead
// (a gap, or after a READ), behind, the first of a flow.
func TestCountPathsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ops := []roce.Opcode{sendOnly, writeOnl, readReq, readRespOnly, ack, cnp, 0x06, 0x12}
	for n := 0; n < 20000; n++ {
		a, b := New(16, 0), New(16, 0)
		st := uint32(0)
		if rng.IntN(5) != 0 {
			st = psnKnown | rng.Uint32()&(psnMask|psnAfterRead)
		}
		r := roce.Result{Opcode: ops[rng.IntN(len(ops))], ECN: uint8(rng.IntN(4))}
		switch rng.IntN(4) {
		case 0:
			r.PSN = st & psnMask // in order
		case 1:
			r.PSN = (st + 1 + uint32(rng.IntN(5))) & psnMask // ahead
		case 2:
			r.PSN = (st - 1 - uint32(rng.IntN(5))) & psnMask // behind
		default:
			r.PSN = rng.Uint32() & psnMask
		}
		if r.Opcode == ack {
			r.HasAETH = true
			r.AETH = roce.AETHSyndrome(rng.IntN(256))
		}
		i := uint32(rng.IntN(16))
		for _, tab := range []*Table{a, b} {
			tab.slots[i].psn = st
			tab.slots[i].ooo = rng.Uint32() | 0xfffffff0 // near a carry
		}
		b.slots[i].ooo = a.slots[i].ooo
		a.Count(int32(i), &r, 100)
		b.CountStaged(int32(i), &r, 100)
		if a.slots[i] != b.slots[i] || a.cold[i] != b.cold[i] || a.psn != b.psn {
			t.Fatalf("state %#x, %+v: Count left %+v %+v %+v, CountStaged %+v %+v %+v",
				st, r, a.slots[i], a.cold[i], a.psn, b.slots[i], b.cold[i], b.psn)
		}
	}
}

// TestTopOrderAndAllocations checks Top over many flows against a plain
// sort of copies: the same order (metric, then bytes, then key), the
// input untouched, and two allocations whatever the number of flows (the
// ranking and the result), not one per comparison. A report sorts every
// flow each second; per-comparison garbage made the collector run five
// times a second, each run stopping the workers.
func TestTopOrderAndAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	flows := make([]Flow, 5000)
	for i := range flows {
		f := &flows[i]
		f.Src = [2]uint64{0, uint64(r.IntN(4))}
		f.Dst = [2]uint64{0, uint64(r.IntN(4))}
		f.QP = uint32(r.IntN(64))
		f.Bytes = uint64(r.IntN(8)) // many ties
		f.MarkedCE = uint64(r.IntN(3))
	}
	before := slices.Clone(flows)
	// The expected order, stated another way: each flow's rank as one
	// tuple (larger counters first, by complement), compared as words.
	rank := func(f *Flow) [7]uint64 {
		return [7]uint64{^f.MarkedCE, ^f.Bytes, f.Src[0], f.Src[1], f.Dst[0], f.Dst[1], uint64(f.QP)}
	}
	want := slices.Clone(flows)
	slices.SortStableFunc(want, func(a, b Flow) int {
		ra, rb := rank(&a), rank(&b)
		return slices.Compare(ra[:], rb[:])
	})
	got, err := Top(flows, 100, "marked")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("%d flows, want 100", len(got))
	}
	for i := range got {
		if got[i].Key != want[i].Key || got[i].MarkedCE != want[i].MarkedCE || got[i].Bytes != want[i].Bytes {
			t.Fatalf("flow %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !slices.Equal(flows, before) {
		t.Error("Top changed its input")
	}
	if a := testing.AllocsPerRun(5, func() { _, _ = Top(flows, 10, "bytes") }); a > 2 {
		t.Errorf("Top of %d flows: %v allocations, want 2", len(flows), a)
	}
}

// The lines Ahead has the CPU load are those the count of each staged
// packet touches: its slot's first line (once for a run of packets of one
// flow), and its cold part's first line for a new flow or a CE mark, in
// order, for the range asked, capped at the batch's end.
func TestAheadLines(t *testing.T) {
	tab := New(1024, 0)
	b := NewBatch(64)
	known := map[uint32]bool{}
	for _, first := range []uint32{1000, 1001} {
		// The first packet of each burst is of a new flow: the memo knows
		// none, so every packet is staged.
		qps := []uint32{first}
		for i := range 39 {
			qps = append(qps, uint32(i/2)) // runs of two packets of a flow
		}
		tab.Begin(b, 1)
		var rs []roce.Result
		var fs [][]byte
		for j, qp := range qps {
			p := pkt{src: "10.0.0.1", dst: "10.0.0.2", qp: qp, op: sendOnly, psn: 1}
			if j%5 == 0 {
				p.ecn = 3
			}
			f, r := frame(t, p)
			fs, rs = append(fs, f), append(rs, r)
			if stage(tab, b, j, f, &rs[j]) >= 0 {
				t.Fatalf("packet %d was counted, not staged", j)
			}
		}
		tab.Find(b, 1)
		ranges := [][2]int{{0, slotLead}, {16, 24}, {32, 48}, {40, 48}, {48, 56}}
		got := make([][]uintptr, len(ranges))
		for i, rg := range ranges {
			got[i] = slices.Clone(tab.aheadLines(b, rg[0], rg[1]))
		}
		slots := make([]int32, len(qps))
		for k := range b.Len() {
			slots[k] = tab.Update(b, k, &rs[k], len(fs[k]), 1)
		}
		for i, rg := range ranges {
			var want []uintptr
			for k := rg[0]; k < min(rg[1], len(qps)); k++ {
				again := k > 0 && qps[k] == qps[k-1]
				ce := rs[k].ECN == 3
				fresh := !known[qps[k]] && !again
				if !again || ce {
					want = append(want, uintptr(unsafe.Pointer(&tab.slots[slots[k]])))
				}
				if fresh || ce {
					want = append(want, uintptr(unsafe.Pointer(&tab.cold[slots[k]])))
				}
			}
			if !slices.Equal(got[i], want) {
				t.Errorf("first QP %d, packets %d-%d: lines %x, want %x", first, rg[0], rg[1], got[i], want)
			}
		}
		for _, qp := range qps {
			known[qp] = true
		}
	}
}
