package pipeline

import (
	"strings"
	"testing"
	"time"

	"roce-fwd/internal/testenv"
	"roce-fwd/qos"
)

// tcEnqueued is what TC tc of port id has taken in so far.
func tcEnqueued(p *Pipeline, id uint16, tc int) uint64 {
	tcs, _ := p.QoS()
	return tcs[id][tc].EnqueuedPackets
}

// Tables change under running workers: RoCE frames move to the TC the
// new DSCP map gives them, the new ECN profile is what the stats report,
// packets keep flowing, and none is dropped. Changes that need a restart
// are refused and change nothing.
func TestUpdateWhileForwarding(t *testing.T) {
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set, withQoS(qos.NVIDIARoCE()))
	id := uint16(set.Ports[0].ID)
	w := p.Workers[0]
	for i := range 32 {
		sendFrame(t, w, set, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 512))
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitPackets(t, p, 10_000)
	if tcEnqueued(p, id, 3) == 0 || tcEnqueued(p, id, 5) != 0 {
		t.Fatalf("before: TC3 %d TC5 %d", tcEnqueued(p, id, 3), tcEnqueued(p, id, 5))
	}

	tb := p.Tables()
	tb.RoCE.TCMap.DSCP[26] = 5
	c := tb.QoS[id]
	c.TC[3].ECN = qos.ECN{Min: 1000, Max: 2000, Probability: 0.5}
	tb.QoS[id] = c
	if err := p.Update(tb); err != nil {
		t.Fatal(err)
	}
	before3, before5 := tcEnqueued(p, id, 3), tcEnqueued(p, id, 5)
	deadline := time.Now().Add(10 * time.Second)
	for tcEnqueued(p, id, 5) < before5+10_000 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := tcEnqueued(p, id, 5); got < before5+10_000 {
		t.Fatalf("TC5 took %d packets after the update", got-before5)
	}
	if got := tcEnqueued(p, id, 3); got != before3 {
		t.Errorf("TC3 still took %d packets after the update", got-before3)
	}
	if got := p.Spec.QoS.Ports[id].Config.TC[3].ECN; got.Min != 1000 || got.Max != 2000 {
		t.Errorf("spec ECN after update %+v", got)
	}
	if got := p.Spec.RoCE.TCMap.DSCP[26]; got != 5 {
		t.Errorf("spec TC map DSCP 26 → %d", got)
	}

	bad := p.Tables()
	bc := bad.QoS[id]
	bc.TC[1].Lossless = true
	bad.QoS[id] = bc
	if err := p.Update(bad); err == nil || !strings.Contains(err.Error(), "lossless TCs would change from 3 to 1,3") {
		t.Errorf("lossless change: %v", err)
	}
	bad = p.Tables()
	bad.RoCE.TCMap.DSCP[26] = 1
	bad.RoCE.QPTable = 7
	if err := p.Update(bad); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Errorf("QP table change: %v", err)
	}
	if p.Spec.RoCE.TCMap.DSCP[26] != 5 {
		t.Error("a refused update changed the TC map")
	}
	for _, s := range p.Stats() {
		for r, v := range s.Drops {
			if v != 0 {
				t.Errorf("%d packets dropped as %s", v, Reason(r))
			}
		}
	}
	if w.tableErrors.Load() != 0 {
		t.Errorf("%d table errors", w.tableErrors.Load())
	}
	closeRing(t, p, set)
}

// "set fwd roce" on a stopped io pipeline classifies from the next start;
// emptying the QP tables under a running worker leaves them empty until
// packets arrive again.
func TestSetModeAndResetQP(t *testing.T) {
	cfg, set := openPorts(t, "io", "net_ring%d")
	p := newPipeline(t, cfg, set)
	w := primeRing(t, p, set)
	id := uint16(set.Ports[0].ID)
	if err := p.SetMode(ModeRoCE); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMode(ModeIO); err == nil {
		t.Error("mode changed while forwarding")
	}
	waitPackets(t, p, 10_000)
	if c := p.RoCEByPort()[id]; c == nil || c.RoCE() == 0 {
		t.Fatalf("roce mode counted %+v", c)
	}
	if flows, _ := p.QPFlows(); len(flows) == 0 {
		t.Fatal("no QP flows")
	}
	// Running: the flow starts counting again from zero.
	atReset := w.Stats().Packets
	p.ResetQPTables()
	flows, _ := p.QPFlows()
	var sum uint64
	for _, f := range flows {
		sum += f.Packets()
	}
	after := w.Stats().Packets
	if len(flows) == 0 || sum > after-atReset {
		t.Errorf("reset at %d packets, %d now, yet the flows hold %d", atReset, after, sum)
	}
	p.Stop()
	p.ResetQPTables()
	if flows, st := p.QPFlows(); len(flows) != 0 || st.Used != 0 {
		t.Errorf("after reset: %d flows, %d used", len(flows), st.Used)
	}
	closeRing(t, p, set)
}
