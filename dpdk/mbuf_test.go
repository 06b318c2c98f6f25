package dpdk

import "testing"

// A mark set in software reads back as a PMD's would, travels with the
// mbuf through a port, and is gone when the mbuf is reallocated (which
// clears ol_flags: the accessors use the real field).
func TestMbufMark(t *testing.T) {
	pool, err := NewPktmbufPool("t_mark", 1023, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	p := ringPort(t, "net_ring_t2", pool)
	step, err := NewStep(32, 1, -1, []Queue{{Port: uint16(p)}}, []Queue{{Port: uint16(p)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer step.Free()

	var ms [3]*Mbuf
	for i := range ms {
		ms[i] = pool.Alloc()
		if err := ms[i].SetData(make([]byte, 60)); err != nil {
			t.Fatal(err)
		}
		if id, ok := ms[i].Mark(); ok || id != 0 || ms[i].Flagged() {
			t.Fatalf("fresh mbuf: mark %d %v, flagged %v", id, ok, ms[i].Flagged())
		}
	}
	ms[0].SetMark(0xdeadbeef)
	ms[1].SetFlag()
	if id, ok := ms[0].Mark(); !ok || id != 0xdeadbeef || !ms[0].Flagged() {
		t.Errorf("marked mbuf: mark %#x %v, flagged %v", id, ok, ms[0].Flagged())
	}
	if _, ok := ms[1].Mark(); ok || !ms[1].Flagged() {
		t.Errorf("flagged mbuf: has a mark %v, flagged %v", ok, ms[1].Flagged())
	}
	if ms[0].PktLen() != 60 || ms[0].DataLen() != 60 || ms[0].Port() != ms[1].Port() {
		t.Error("the mark overwrote another field")
	}
	for _, m := range ms {
		step.Txq[0].Push(m)
	}
	if n := step.Run(); n != 3 {
		t.Fatalf("received %d, want 3", n)
	}
	rx := step.Rx(0)
	if id, ok := rx[0].Mark(); !ok || id != 0xdeadbeef {
		t.Errorf("after the port: mark %#x %v", id, ok)
	}
	if _, ok := rx[1].Mark(); ok || !rx[1].Flagged() {
		t.Error("after the port: the flag was lost or became a mark")
	}
	if _, ok := rx[2].Mark(); ok || rx[2].Flagged() {
		t.Error("after the port: an unmarked packet carries a mark")
	}
	marked := rx[0]
	FreeMbufs(rx)
	// Take the whole pool to get the marked mbuf back.
	var all []*Mbuf
	defer func() { FreeMbufs(all) }()
	for m := pool.Alloc(); m != nil; m = pool.Alloc() {
		all = append(all, m)
		if m == marked {
			if _, ok := m.Mark(); ok || m.Flagged() {
				t.Error("a reallocated mbuf still carries a mark: SetMark missed ol_flags")
			}
			return
		}
	}
	t.Fatal("the marked mbuf did not come back from the pool")
}
