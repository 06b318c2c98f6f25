package flowrule

import (
	"testing"

	"roce-fwd/roce"
)

// A recompiled table keeps the counters of the rules it shares with the
// old one, whatever their new index; a meter keeps its buckets only when
// its parameters did not change.
func TestCarry(t *testing.T) {
	const (
		ruleA = "flow create 0 ingress pattern eth / ipv4 / udp src is 1 / end actions count / end"
		ruleB = "flow create 0 ingress pattern eth / ipv4 / udp src is 2 / end actions meter srtcm cir 0 cbs 100 ebs 100 / end"
		ruleC = "flow create 0 ingress pattern eth / ipv4 / udp src is 3 / end actions meter srtcm cir 0 cbs 100 ebs 0 / end"
		// C with a larger committed burst: another meter.
		ruleC2 = "flow create 0 ingress pattern eth / ipv4 / udp src is 3 / end actions meter srtcm cir 0 cbs 200 ebs 0 / end"
		ruleD  = "flow create 0 ingress pattern eth / ipv4 / udp src is 4 / end actions count / end"
	)
	old, err := Compile(mustParseRules(t, ruleA, ruleB, ruleC))
	if err != nil {
		t.Fatal(err)
	}
	frame := func(port uint16) ([]byte, *roce.Result) {
		f := roceFrame(t, roce.FrameSpec{SrcPort: port, BTH: roce.BTHFields{Opcode: 0x04}})
		return f, classify(f)
	}
	run := func(tab *Table, st *State, port uint16) Verdict {
		f, r := frame(port)
		return tab.Apply(tab.Match(f, r), f, r, st, 1e9, 100)
	}
	ost := NewState(old)
	for range 3 {
		run(old, ost, 1)
	}
	// B: green then yellow empties both buckets (no refill at cir 0).
	if c1, c2 := run(old, ost, 2).Color, run(old, ost, 2).Color; c1 != Green || c2 != Yellow {
		t.Fatalf("rule B coloured %v, %v", c1, c2)
	}
	if c := run(old, ost, 3).Color; c != Green {
		t.Fatalf("rule C coloured %v", c)
	}

	// Rules move: D is new, A goes last, C's meter changes.
	nt, err := Compile(mustParseRules(t, ruleD, ruleB, ruleC2, ruleA))
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(nt)
	from := []int{-1, 1, 2, 0}
	if n := testing.AllocsPerRun(10, func() { st.Carry(ost, from) }); n != 0 {
		t.Errorf("Carry allocates %v times", n)
	}
	want := []Counter{{}, ost.Counter(1), ost.Counter(2), ost.Counter(0)}
	if want[3].Packets != 3 || want[1].Yellow != 1 || want[2].Green != 1 {
		t.Fatalf("old counters %+v", ost.Snapshot(nil))
	}
	for i, w := range want {
		if got := st.Counter(i); got != w {
			t.Errorf("rule %d: counters %+v, want %+v", i, got, w)
		}
	}
	// B's buckets came along empty; C's new meter starts full.
	if c := run(nt, st, 2).Color; c != Red {
		t.Errorf("carried meter B coloured %v, want red (its buckets were empty)", c)
	}
	if c := run(nt, st, 3).Color; c != Green {
		t.Errorf("changed meter C coloured %v, want green (a new meter starts full)", c)
	}
	run(nt, st, 1)
	if got := st.Counter(3).Packets; got != 4 {
		t.Errorf("rule A counts %d packets after one more, want 4", got)
	}
	if got := st.Counter(1); got.Packets != 3 || got.Red != 1 {
		t.Errorf("rule B counters %+v, want 3 packets with 1 red", got)
	}

	// Out of range indices are skipped, a nil old State is a no-op.
	st2 := NewState(nt)
	st2.Carry(ost, []int{7, -1, 1, 0, 0, 0})
	if got := st2.Counter(0); got != (Counter{}) {
		t.Errorf("rule 0 took counters %+v from an index beyond the old table", got)
	}
	if got := st2.Counter(3); got != ost.Counter(0) {
		t.Errorf("rule 3 counters %+v, want %+v", got, ost.Counter(0))
	}
	st2.Carry(nil, from)
}
