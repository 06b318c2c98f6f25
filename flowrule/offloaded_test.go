package flowrule

import (
	"testing"

	"roce-fwd/roce"
)

// A packet hitting an offloaded rule that jumps to a software rule gets
// only the software rule's actions and count; one hitting an offloaded
// rule of higher priority than a software rule gets nothing in software.
func TestCompileOffloadedSkipsNICRules(t *testing.T) {
	lines := []string{
		"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / jump group 1 / end",
		"flow create 0 group 1 ingress pattern eth / ipv4 / end actions mark id 7 / count / end",
		"flow create 0 priority 0 ingress pattern eth / ipv4 / udp dst is 9 / end actions drop / end",
		"flow create 0 priority 1 ingress pattern eth / ipv4 / udp / end actions mark id 9 / end",
	}
	rules := mustParseRules(t, lines...)
	for i := range rules {
		rules[i].ID = uint32(i)
	}
	if _, err := CompileOffloaded(rules, []bool{true}); err == nil {
		t.Fatal("a flag list of the wrong length was accepted")
	}
	tbl, err := CompileOffloaded(rules, []bool{true, false, true, false})
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(tbl)
	run := func(dport uint16) Verdict {
		frame := roceFrame(t, roce.FrameSpec{DstPort: dport, BTH: roce.BTHFields{Opcode: 0x04, DestQP: 7}})
		r := classify(frame)
		var p Path
		tbl.MatchPath(frame, r, &p)
		return tbl.ApplyPath(&p, frame, r, st, 0, len(frame))
	}
	if v := run(4791); !v.HasMark || v.Mark != 7 || v.Drop {
		t.Errorf("udp 4791: %+v, want the software rule's mark 7 after the NIC's jump", v)
	}
	if v := run(9); v.Drop || v.HasMark {
		t.Errorf("udp 9: %+v, want nothing in software (the NIC's drop rule wins over mark 9)", v)
	}
	if v := run(10); !v.HasMark || v.Mark != 9 {
		t.Errorf("udp 10: %+v, want mark 9", v)
	}
	got := Merge(st)
	if got[0].Packets != 0 || got[2].Packets != 0 {
		t.Errorf("offloaded rules counted in software: %+v", got)
	}
	if got[1].Packets != 1 || got[3].Packets != 1 {
		t.Errorf("software rules' counts %d, %d, want 1, 1", got[1].Packets, got[3].Packets)
	}
}
