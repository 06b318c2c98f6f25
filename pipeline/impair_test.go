package pipeline

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"roce-fwd/impair"
	"roce-fwd/internal/testenv"
	"roce-fwd/roce"
)

// withImpair installs rule lines (ports by number) before the start.
func withImpair(t testing.TB, lines ...string) func(*Spec) {
	t.Helper()
	var rules []impair.Rule
	for i, l := range lines {
		r, err := impair.Parse(strings.Fields(l), func(string) (uint16, error) { return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		r.ID = i + 1
		rules = append(rules, r)
	}
	return func(s *Spec) { s.Impair = &ImpairSpec{Rules: rules, Seed: 1} }
}

// Every impaired packet is accounted for: the dropped ones under
// impair_drop, the marked ones come out CE with a valid ICRC, a delayed
// one comes out last, a reordered one after the three that follow it,
// and the rules' counters say how often each acted.
func TestImpairDropsMarksAndHoldsBack(t *testing.T) {
	const n = 2000
	var frames [][]byte
	for i := range n {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 256))
	}
	qp := "qp " + strconv.Itoa(int(testenv.QPECT))
	run := forwardPcap(t, "roce", frames, withImpair(t,
		qp+" every 100 action drop",
		"psn 500-509 action set_ce",
		"psn 1000 action delay 20ms",
		"psn 1500 action reorder 3",
		"psn 1700-1799 action drop count 5",
	))
	drops := run.p.Drops()
	stats, held := run.p.ImpairStats()
	got := run.finish(t)

	if drops["impair_drop"] != 25 || held != 0 {
		t.Errorf("impair_drop %d (want 20 + 5), %d held after the stop", drops["impair_drop"], held)
	}
	want := []impair.Counter{{Matched: n, Acted: 20}, {Matched: 10, Acted: 10}, {Matched: 1, Acted: 1}, {Matched: 1, Acted: 1}, {Matched: 5, Acted: 5, Expired: true}}
	if !slices.Equal(stats, want) {
		t.Errorf("rule counters %+v, want %+v", stats, want)
	}
	var psns []uint32
	for _, d := range decode(t, got) {
		psns = append(psns, d.psn)
		if marked := d.psn >= 500 && d.psn <= 509; marked != (d.ecn == roce.ECNCE) {
			t.Errorf("PSN %d: ECN %d", d.psn, d.ecn)
		}
	}
	if len(psns) != n-25 {
		t.Fatalf("%d frames out, want %d", len(psns), n-25)
	}
	if psns[len(psns)-1] != 1000 {
		t.Errorf("the delayed PSN 1000 is not last: ... %v", psns[len(psns)-5:])
	}
	i := slices.Index(psns, 1500)
	if i < 3 || !slices.Equal(psns[i-3:i+1], []uint32{1501, 1502, 1503, 1500}) {
		t.Errorf("around the reordered PSN 1500: %v", psns[max(i-4, 0):min(i+3, len(psns))])
	}
	for _, p := range psns {
		if p%100 == 99 || p >= 1700 && p <= 1704 {
			t.Errorf("PSN %d was to be dropped", p)
		}
	}
	// The marked frames' ICRCs are still valid: ECN is masked out of it.
	var r roce.Result
	for _, f := range got {
		if roce.Classify(f, nil, true, &r); r.Err != roce.ReasonNone {
			t.Fatalf("frame out classified %v", r.Err)
		}
	}
}

// A full hold drops what it cannot hold under impair_hold_full; rules
// changed later keep the counters of the rules that stay.
func TestImpairHoldFullAndRuleChange(t *testing.T) {
	var frames [][]byte
	for i := range 300 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 64))
	}
	tune := withImpair(t, "every 3 action delay 500ms", "every 2 action set_ce")
	run := forwardPcap(t, "roce", frames, tune, func(s *Spec) { s.Impair.Hold = 50 })
	if d := run.p.Drops(); d["impair_hold_full"] != 50 {
		t.Errorf("impair_hold_full %d, want 50", d["impair_hold_full"])
	}
	before, _ := run.p.ImpairStats()
	want := []impair.Counter{{Matched: 300, Acted: 100}, {Matched: 200, Acted: 100}}
	if !slices.Equal(before, want) {
		t.Errorf("counters %+v, want %+v", before, want)
	}
	rules := run.p.ImpairRules()
	if err := run.p.SetImpair(rules[1:], 1); err != nil {
		t.Fatal(err)
	}
	if after, _ := run.p.ImpairStats(); !slices.Equal(after, want[1:]) {
		t.Errorf("after removing rule 1: %+v, want %+v", after, want[1:])
	}
	if got := run.finish(t); len(got) != 250 {
		t.Errorf("%d frames out, want 250 (50 held back, then sent at the stop)", len(got))
	}
}
