package qos

import (
	"strings"
	"testing"
)

// Reconfigure keeps what is queued, applies the new ECN thresholds and
// weights at once, and refuses to turn a TC lossless under traffic.
func TestSchedulerReconfigure(t *testing.T) {
	c := NVIDIARoCE()
	c.TC[3].ECN = ECN{Min: 100_000, Max: 200_000, Probability: 1}
	s := mustScheduler(t, &c, 1024, nil)
	for range 50 {
		if _, r := s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2); r != ReasonNone {
			t.Fatal(r)
		}
	}
	// 50 KB queued: under the old minimum, nothing is marked.
	if mark, _ := s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2); mark {
		t.Fatal("marked below min")
	}
	n := c
	n.TC[3].ECN = ECN{Min: 10_000, Max: 20_000, Probability: 1}
	n.TC[0].Weight, n.TC[3].Weight = 10, 90
	if err := s.Reconfigure(&n, 0); err != nil {
		t.Fatal(err)
	}
	if got := s.Queue(3).Packets(); got != 51 {
		t.Fatalf("queued %d after reconfigure, want 51", got)
	}
	// 51 KB is above the new max: every ECT packet is marked now.
	if mark, r := s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2); !mark || r != ReasonNone {
		t.Fatalf("after reconfigure: mark %v reason %v", mark, r)
	}
	if s.tc[3].quantum != 90*DefaultQuantum || s.tc[0].quantum != 10*DefaultQuantum {
		t.Errorf("quanta %d %d", s.tc[3].quantum, s.tc[0].quantum)
	}

	bad := n
	bad.TC[1].Lossless = true
	if err := s.Reconfigure(&bad, 0); err == nil || !strings.Contains(err.Error(), "TC1") {
		t.Errorf("lossless change: %v", err)
	}
	inval := n
	inval.TC[3].ECN = ECN{Min: 30_000, Max: 20_000, Probability: 1}
	if err := s.Reconfigure(&inval, 0); err == nil {
		t.Error("min above max accepted")
	}
	// The refused configurations changed nothing.
	if s.tc[3].wred.min != 10_000 {
		t.Errorf("WRED min %d after refused reconfigures", s.tc[3].wred.min)
	}
}

// Turning the watchdog off for a TC in a storm restores it at once; a
// per-TC action applies to the next storm.
func TestWatchdogReconfigure(t *testing.T) {
	r := newStormRig(t, ActionDrop)
	evs := r.advance(0, 400*ms, 1000*ms)
	if len(evs) != 1 || evs[0].Kind != StormDetected {
		t.Fatalf("events %+v", evs)
	}
	off := r.c
	off.Watchdog.Off = 1 << 3
	if err := r.w.Reconfigure(&off); err != nil {
		t.Fatal(err)
	}
	if r.w.InStorm() != 0 || r.s.PauseOverride() != 0 || r.w.Stats(3).Restored != 1 {
		t.Fatalf("storm not ended: in storm %b override %b stats %+v", r.w.InStorm(), r.s.PauseOverride(), r.w.Stats(3))
	}
	if evs := r.advance(400*ms, 800*ms, 1000*ms); len(evs) != 0 {
		t.Fatalf("unwatched TC fired: %+v", evs)
	}
	alert := r.c
	alert.Watchdog.TCActionSet, alert.Watchdog.TCAction[3] = 1<<3, ActionAlert
	if err := r.w.Reconfigure(&alert); err != nil {
		t.Fatal(err)
	}
	evs = r.advance(800*ms, 1200*ms, 2000*ms)
	if len(evs) != 1 || evs[0].Action != ActionAlert || r.s.PauseOverride() != 0 {
		t.Fatalf("per-TC alert: events %+v override %b", evs, r.s.PauseOverride())
	}
	bad := r.c
	bad.Watchdog.TCActionSet, bad.Watchdog.TCAction[2] = 1<<2, 9
	if err := r.w.Reconfigure(&bad); err == nil {
		t.Error("unknown per-TC action accepted")
	}
}

// New thresholds apply to the bytes already held.
func TestPFCTxReconfigure(t *testing.T) {
	c := PFCTxConfig{Enable: 1 << 3, Xoff: 2000, Xon: 1000, Speed: 25e9}
	tx, err := NewPFCTx(c)
	if err != nil {
		t.Fatal(err)
	}
	tx.Add(3, 1500)
	if _, send := tx.Check(0); send {
		t.Fatal("XOFF below threshold")
	}
	c.Xoff, c.Xon = 1200, 600
	if err := tx.Reconfigure(c); err != nil {
		t.Fatal(err)
	}
	f, send := tx.Check(1)
	if !send || f.ClassEnable != 1<<3 || f.Quanta[3] == 0 {
		t.Fatalf("no XOFF after lowering the threshold: %+v %v", f, send)
	}
	if tx.Bytes(3) != 1500 {
		t.Errorf("held %d", tx.Bytes(3))
	}
	c.Xon = 5000
	if err := tx.Reconfigure(c); err == nil {
		t.Error("xon above xoff accepted")
	}
}
