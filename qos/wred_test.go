package qos

import (
	"bytes"
	"math"
	"testing"

	"roce-fwd/roce"
)

func TestWREDProbabilityShape(t *testing.T) {
	const (
		min, max = 100_000, 200_000
		pmax     = 0.2
		trials   = 200_000
	)
	w, err := NewWRED(ECN{Min: min, Max: max, Probability: pmax}, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	rate := func(depth uint64, ecn uint8, want Decision) float64 {
		hits := 0
		for range trials {
			if w.Decide(depth, ecn) == want {
				hits++
			}
		}
		return float64(hits) / trials
	}
	for _, d := range []uint64{0, 1, 50_000, min - 1} {
		if r := rate(d, roce.ECNECT0, EnqueueMarkCE); r != 0 {
			t.Errorf("depth %d below min: marking rate %v, want 0", d, r)
		}
	}
	// Linear between min and max; tolerance ~5σ of a binomial at p=0.2.
	for _, d := range []uint64{min, 110_000, 125_000, 150_000, 175_000, 190_000, max - 1} {
		want := pmax * float64(d-min) / float64(max-min)
		for _, ecn := range []uint8{roce.ECNECT0, roce.ECNECT1} {
			if r := rate(d, ecn, EnqueueMarkCE); math.Abs(r-want) > 0.005 {
				t.Errorf("depth %d ECN %d: marking rate %.4f, want %.4f ± 0.005", d, ecn, r, want)
			}
		}
		// Not-ECT on a lossy TC is dropped with the same probability.
		if r := rate(d, roce.ECNNotECT, DropWRED); math.Abs(r-want) > 0.005 {
			t.Errorf("depth %d Not-ECT: drop rate %.4f, want %.4f ± 0.005", d, r, want)
		}
	}
	for _, d := range []uint64{max, max + 1, 10 * max} {
		if r := rate(d, roce.ECNECT0, EnqueueMarkCE); r != 1 {
			t.Errorf("depth %d at/above max: ECT marking rate %v, want 1", d, r)
		}
		if r := rate(d, roce.ECNNotECT, DropWRED); r != 1 {
			t.Errorf("depth %d at/above max: Not-ECT drop rate on a lossy TC %v, want 1", d, r)
		}
	}
}

func TestWREDNeverMarksNotECT(t *testing.T) {
	for _, lossless := range []bool{false, true} {
		w, _ := NewWRED(ECN{Min: 1000, Max: 2000, Probability: 1}, lossless, 7)
		for d := uint64(0); d < 5000; d += 7 {
			got := w.Decide(d, roce.ECNNotECT)
			if got == EnqueueMarkCE {
				t.Fatalf("lossless=%v depth %d: Not-ECT marked", lossless, d)
			}
			if lossless && got != Enqueue {
				t.Fatalf("lossless depth %d: Not-ECT got %v, want enqueue", d, got)
			}
		}
		st := w.Stats()
		if st.Marked != 0 {
			t.Errorf("lossless=%v: Marked = %d for Not-ECT traffic", lossless, st.Marked)
		}
		if lossless && (st.Dropped != 0 || st.Spared == 0) {
			t.Errorf("lossless: Dropped %d Spared %d; want 0 and > 0", st.Dropped, st.Spared)
		}
		if !lossless && (st.Dropped == 0 || st.Spared != 0) {
			t.Errorf("lossy: Dropped %d Spared %d; want > 0 and 0", st.Dropped, st.Spared)
		}
	}
}

func TestWREDAlreadyCE(t *testing.T) {
	w, _ := NewWRED(ECN{Min: 1000, Max: 2000, Probability: 0.5}, false, 3)
	for range 100 {
		if d := w.Decide(5000, roce.ECNCE); d != Enqueue {
			t.Fatalf("CE packet above max: %v, want enqueue", d)
		}
	}
	if st := w.Stats(); st.AlreadyCE != 100 || st.Marked != 0 {
		t.Errorf("AlreadyCE %d Marked %d; want 100 and 0", st.AlreadyCE, st.Marked)
	}
	// Below min a CE packet is not "selected", so not counted.
	w.Decide(10, roce.ECNCE)
	if st := w.Stats(); st.AlreadyCE != 100 {
		t.Errorf("CE below min counted: AlreadyCE %d", st.AlreadyCE)
	}
}

func TestWREDDisabledAndStep(t *testing.T) {
	var off WRED
	if err := off.Init(ECN{}, false, 1); err != nil {
		t.Fatal(err)
	}
	if d := off.Decide(1<<40, roce.ECNNotECT); d != Enqueue {
		t.Errorf("disabled WRED: %v", d)
	}
	// Min == Max: a step, no randomness.
	w, _ := NewWRED(ECN{Min: 1000, Max: 1000, Probability: 0.01}, false, 1)
	if d := w.Decide(999, roce.ECNECT0); d != Enqueue {
		t.Errorf("step below: %v", d)
	}
	if d := w.Decide(1000, roce.ECNECT0); d != EnqueueMarkCE {
		t.Errorf("step at: %v", d)
	}
	for _, e := range []ECN{{Min: 2, Max: 1}, {Max: 1, Probability: 1.5}, {Max: 1, Probability: math.NaN()}, {Max: 1, Weight: 1}} {
		if err := e.Validate(); err == nil {
			t.Errorf("%+v accepted", e)
		}
	}
}

func TestWREDEWMA(t *testing.T) {
	w, _ := NewWRED(ECN{Min: 1000, Max: 2000, Probability: 1, Weight: 0.5}, false, 1)
	// One arrival at depth 4000 moves the average from 0 to 2000 (max).
	if d := w.Decide(4000, roce.ECNECT0); d != EnqueueMarkCE {
		t.Errorf("first: %v (avg %v)", d, w.Average())
	}
	for range 20 {
		w.Decide(0, roce.ECNECT0)
	}
	if w.Average() > 1 {
		t.Errorf("avg after 20 empty arrivals = %v, want ~0", w.Average())
	}
	if d := w.Decide(1800, roce.ECNECT0); d != Enqueue { // avg ~900: below min
		t.Errorf("burst against a low average: %v (avg %v)", d, w.Average())
	}
}

func TestWREDDeterministic(t *testing.T) {
	run := func(seed uint64) []Decision {
		w, _ := NewWRED(ECN{Min: 0, Max: 1000, Probability: 0.5}, false, seed)
		var out []Decision
		for i := range 1000 {
			out = append(out, w.Decide(uint64(i), roce.ECNECT0))
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	same := func(x, y []Decision) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed, different decisions")
	}
	if same(a, c) {
		t.Error("different seeds, same decisions")
	}
}

// frame builds a RoCEv2 frame and classifies it.
func frame(t testing.TB, v6 bool, tags int, dscp, ecn uint8) ([]byte, roce.Result) {
	t.Helper()
	s := roce.FrameSpec{
		Dst: roce.MAC{2, 0, 0, 0, 0, 2}, Src: roce.MAC{2, 0, 0, 0, 0, 1},
		IPv6: v6, DSCP: dscp, ECN: ecn, SrcPort: 49152, FlowLabel: 0x12345,
		BTH:     roce.BTHFields{Opcode: roce.OpRC | roce.OpSendOnly, PKey: 0xffff, DestQP: 0x11, PSN: 7},
		Payload: bytes.Repeat([]byte{0xa5}, 256),
	}
	for range tags {
		s.Tags = append(s.Tags, roce.VLANTag{PCP: 3, VID: 100})
	}
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	var r roce.Result
	roce.Classify(f, nil, true, &r)
	if r.Err != roce.ReasonNone || r.ICRC != roce.ICRCOK {
		t.Fatalf("test frame: %v %v", r.Err, r.ICRC)
	}
	return f, r
}

func TestMarkCEKeepsChecksumAndICRC(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for tags := range 3 {
			for _, dscp := range []uint8{0, 26, 48, 63} {
				for _, ecn := range []uint8{roce.ECNNotECT, roce.ECNECT1, roce.ECNECT0, roce.ECNCE} {
					f, r := frame(t, v6, tags, dscp, ecn)
					orig := bytes.Clone(f)
					got := MarkCE(f, int(r.L3), r.IPVersion)
					if ecn == roce.ECNNotECT {
						if got || !bytes.Equal(f, orig) {
							t.Errorf("v6=%v tags=%d dscp=%d: Not-ECT marked (%v) or changed", v6, tags, dscp, got)
						}
						continue
					}
					if !got {
						t.Errorf("v6=%v tags=%d dscp=%d ecn=%d: MarkCE false", v6, tags, dscp, ecn)
					}
					var after roce.Result
					roce.Classify(f, nil, true, &after)
					if after.ECN != roce.ECNCE || after.DSCP != dscp {
						t.Errorf("v6=%v tags=%d: after marking DSCP %d ECN %d, want %d CE", v6, tags, after.DSCP, after.ECN, dscp)
					}
					if after.ICRC != roce.ICRCOK || after.Err != roce.ReasonNone {
						t.Errorf("v6=%v tags=%d dscp=%d ecn=%d: ICRC %v err %v after marking", v6, tags, dscp, ecn, after.ICRC, after.Err)
					}
					if !v6 && !roce.IPv4(f[r.L3:]).ChecksumValid() {
						t.Errorf("tags=%d dscp=%d ecn=%d: IPv4 checksum invalid after marking", tags, dscp, ecn)
					}
					if ecn == roce.ECNCE && !bytes.Equal(f, orig) {
						t.Errorf("v6=%v: CE packet changed by MarkCE", v6)
					}
					// Only the ECN bits (and the IPv4 checksum) may change.
					for i := range f {
						if f[i] == orig[i] {
							continue
						}
						off := i - int(r.L3)
						ok := (!v6 && (off == 1 || off == 10 || off == 11)) || (v6 && off == 1)
						if !ok {
							t.Errorf("v6=%v: byte %d (L3+%d) changed", v6, i, off)
						}
					}
				}
			}
		}
	}
}

func TestMarkCEBounds(t *testing.T) {
	f, r := frame(t, false, 0, 26, roce.ECNECT0)
	for _, c := range []struct {
		l3 int
		v  uint8
	}{{-1, 4}, {len(f), 4}, {len(f) - 10, 4}, {int(r.L3), 6}, {int(r.L3), 5}} {
		if MarkCE(f, c.l3, c.v) {
			t.Errorf("MarkCE(l3=%d, v%d) = true", c.l3, c.v)
		}
	}
	if MarkCE(f[:int(r.L3)+19], int(r.L3), 4) {
		t.Error("truncated IPv4 header marked")
	}
}

func TestWREDAllocs(t *testing.T) {
	w, _ := NewWRED(ECN{Min: 100, Max: 200, Probability: 0.5, Weight: 0.1}, false, 1)
	f, r := frame(t, false, 0, 26, roce.ECNECT0)
	f6, r6 := frame(t, true, 1, 26, roce.ECNECT0)
	d := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		d = (d + 7) % 300
		w.Decide(d, uint8(d&3))
		roce.IPv4(f[r.L3:]).SetECN(roce.ECNECT0)
		MarkCE(f, int(r.L3), 4)
		roce.IPv6(f6[r6.L3:]).SetECN(roce.ECNECT1)
		MarkCE(f6, int(r6.L3), 6)
	}); n != 0 {
		t.Errorf("WRED decision + marking: %v allocs/op", n)
	}
}
