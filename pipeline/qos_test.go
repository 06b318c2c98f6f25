package pipeline

import (
	"path/filepath"
	"testing"
	"time"

	"roce-fwd/inspect"
	"roce-fwd/internal/testenv"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// withQoS turns the QoS stage on with cfg on every port, PFC timed at
// 10 Gbps, software PFC.
func withQoS(cfg qos.Config) func(*Spec) { return withQoSAt(cfg, 10e9) }

// withQoSAt is withQoS with PFC quanta timed at speed bits/s.
func withQoSAt(cfg qos.Config, speed uint64) func(*Spec) {
	return func(s *Spec) {
		q := &QoSSpec{Ports: map[uint16]QoSPort{}}
		for id := range s.Ports {
			q.Ports[id] = QoSPort{Config: cfg, Speed: speed, MAC: roce.MAC{2, 0, 0, 0, 0, byte(id)}, Mode: "software"}
		}
		s.QoS = q
	}
}

// decoded is what the tests need of a forwarded frame.
type decoded struct {
	qp, psn uint32
	ecn     uint8
}

func decode(t *testing.T, frames [][]byte) []decoded {
	t.Helper()
	var out []decoded
	var r roce.Result
	for i, f := range frames {
		roce.Classify(f, nil, false, &r)
		if !r.RoCE {
			t.Fatalf("frame %d out is not RoCEv2: %x", i, f)
		}
		out = append(out, decoded{r.DestQP, r.PSN, r.ECN})
	}
	return out
}

// The egress of a port shaped far below the input rate: queues build,
// WRED-ECN marks only ECT packets, the strict TC's CNPs all get through,
// the small lossy queue tail-drops, PFC pauses the sender of the lossless
// TC and resumes it once drained, and every RoCE frame out still has a
// valid ICRC.
func TestQoSShapedEgress(t *testing.T) {
	cfg := qos.NVIDIARoCE()
	cfg.Rate = 50e6 // 50 Mbit/s: the 1.1 MB below drains in about 180 ms
	cfg.TC[3].ECN = qos.ECN{Min: 20_000, Max: 200_000, Probability: 0.5}
	cfg.TC[0].Limit = 20_000
	cfg.PFC = qos.PFCConfig{Xoff: 300_000, Xon: 100_000}
	var frames [][]byte
	kinds := []uint32{testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPNotECT, testenv.QPNotECT, testenv.QPCNP, testenv.QPLossy}
	for i := range 1000 {
		frames = append(frames, testenv.QoSFrame(t, kinds[i%len(kinds)], uint32(i), 1024))
	}
	run := forwardPcap(t, "roce", frames, withQoS(cfg))
	p := run.p
	drops := p.Drops()
	tcs, pfc := p.QoS()
	flows, _ := p.QPFlows()
	outID := uint16(run.set.Ports[1].ID)
	inID := uint16(run.set.Ports[0].ID)
	got := run.finish(t)

	// The output pcap's RoCE frames all pass ICRC verification.
	sum, err := inspect.Summarize(run.out, inspect.Options{VerifyICRC: true, TCMap: cfg.TCMap})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counters.ICRCBad != 0 || sum.Counters.ICRCOK != uint64(len(got)) {
		t.Errorf("ICRC of the output: %d ok, %d bad, of %d frames", sum.Counters.ICRCOK, sum.Counters.ICRCBad, len(got))
	}
	var ce, cnps, lossy, tc3 int
	for _, d := range decode(t, got) {
		sent := frames[d.psn]
		if d.ecn == roce.ECNCE {
			ce++
			if d.qp != testenv.QPECT {
				t.Fatalf("QP %#x PSN %d (sent with ECN %d) came out CE", d.qp, d.psn, sent[15]&3)
			}
		}
		switch d.qp {
		case testenv.QPCNP:
			cnps++
		case testenv.QPLossy:
			lossy++
		default:
			tc3++
		}
	}
	if cnps != 100 {
		t.Errorf("%d of 100 CNPs came out", cnps)
	}
	if tc3 != 800 {
		t.Errorf("%d of 800 lossless TC3 frames came out", tc3)
	}
	if lossy == 100 || drops["qos_tail"] != uint64(100-lossy) {
		t.Errorf("%d of 100 lossy frames out, qos_tail drops %d: the 20 kB queue should have dropped the rest", lossy, drops["qos_tail"])
	}
	if ce == 0 {
		t.Error("no packet was marked CE though the queue grew past the ECN range")
	}
	tc := tcs[outID]
	if len(tc) != 8 {
		t.Fatalf("qos stats for port %d: %+v", outID, tcs)
	}
	if tc[3].ECNMarked != uint64(ce) || tc[3].TxPackets != 800 || tc[3].MaxDepthBytes < 200_000 {
		t.Errorf("TC3 stats %+v: want %d marked, 800 sent, depth past the ECN max", tc[3], ce)
	}
	if tc[6].TxPackets != 100 || tc[6].Dropped != (QoSDrops{}) {
		t.Errorf("TC6 (CNP) stats %+v", tc[6])
	}
	if tc[0].Dropped.Tail != drops["qos_tail"] {
		t.Errorf("TC0 tail drops %d, pipeline counted %d", tc[0].Dropped.Tail, drops["qos_tail"])
	}
	// The victims per QP: the marks all on the ECT QP, the tail drops all
	// on the lossy one.
	for _, f := range flows {
		want := qpstats.Counters{}
		switch f.QP {
		case testenv.QPECT:
			want.MarkedCE = uint64(ce)
		case testenv.QPLossy:
			want.QoSDropped = drops["qos_tail"]
		}
		if f.MarkedCE != want.MarkedCE || f.QoSDropped != want.QoSDropped {
			t.Errorf("QP %#x: %d marked, %d dropped by QoS; want %d, %d", f.QP, f.MarkedCE, f.QoSDropped, want.MarkedCE, want.QoSDropped)
		}
	}

	// PFC: the input port's partner got XOFF for priority 3 when TC3
	// held more than 300 kB, and XON after the drain.
	back := readBack(t, run.back)
	var xoff, xon int
	for _, f := range back {
		ceMask, q, ok := roce.ParsePFC(f)
		if !ok || ceMask != 1<<3 {
			t.Fatalf("sent back a frame that is not PFC for priority 3: %x", f)
		}
		if q[3] != 0 {
			xoff++
		} else {
			xon++
		}
	}
	if xoff == 0 || xon != 1 || len(back) == 0 || !isXON(back[len(back)-1]) {
		t.Errorf("PFC frames sent to the input port: %d XOFF, %d XON (want some XOFF then one XON last)", xoff, xon)
	}
	if pp := pfc[inID]; pp == nil || pp.TxXOFF[3] != uint64(xoff) || pp.TxXON[3] != 1 || pp.TxPausedNs[3] <= 0 {
		t.Errorf("PFC stats of the input port %+v, want %d XOFF and 1 XON on priority 3", pfc[inID], xoff)
	}
}

func isXON(f []byte) bool {
	_, q, ok := roce.ParsePFC(f)
	return ok && q[3] == 0
}

func readBack(t *testing.T, path string) [][]byte {
	t.Helper()
	return testenv.ReadPcap(t, path)
}

// A PFC frame received on the egress port pauses the matching TC for
// quanta × 512 bit times: the TC3 frames queued behind it wait while the
// strict TC's CNPs, which arrived after them, go first; the PFC frame is
// consumed, not forwarded.
func TestQoSInjectedPFCPausesTC(t *testing.T) {
	// At 1 Gbit/s the pause lasts 33.6 ms: long enough for the worker to
	// read all 61 frames within it on a loaded machine (3.4 ms, at 10
	// Gbit/s, was not always).
	const speed = 1e9
	cfg := qos.NVIDIARoCE()
	var frames [][]byte
	pfc := testenv.PFCFrame(t, 3, 0xFFFF)
	frames = append(frames, pfc)
	for i := range 50 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 256))
	}
	for i := range 10 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPCNP, uint32(100+i), 0))
	}
	// The frames come in on port 0 and leave on port 1: the pause must
	// reach port 1's egress, so the PFC frame is received on port 1. A
	// single pcap rx port feeds both here: port 1 forwards to itself.
	run := forwardLoop(t, frames, withQoSAt(cfg, speed))
	p := run.p
	drops := p.Drops()
	_, pfcStats := p.QoS()
	flows, _ := p.QPFlows()
	portID := uint16(run.set.Ports[0].ID)
	// The TC3 frames behind the pause were held by it; the CNPs were not.
	for _, f := range flows {
		if held := f.HeldPaused; f.QP == testenv.QPECT && held != 50 || f.QP != testenv.QPECT && held != 0 {
			t.Errorf("QP %#x: %d packets held by the pause", f.QP, held)
		}
	}
	time.Sleep(time.Duration(qos.PauseNanos(0xFFFF, speed))) // the pause runs out
	hist := p.PFCHistory(portID)
	_, ended := p.QoS()
	got := run.finish(t)
	// The pause is in the history, run out (no XON came), and counted in
	// the duration histogram once it ended.
	pause := qos.PauseNanos(0xFFFF, speed)
	if len(hist) != 1 || hist[0].Prio != 3 || hist[0].Frames != 1 || hist[0].XON || hist[0].Open || hist[0].To-hist[0].From != pause {
		t.Errorf("PFC history %+v, want one pause of priority 3 for %d ns, run out", hist, pause)
	}
	if e := ended[portID]; e == nil || e.Pauses[3][5] != 1 || e.PauseNs[3] != pause { // 33.6 ms: up to 100 ms
		t.Errorf("pause durations %+v", e)
	}
	if drops["mac_control"] != 1 {
		t.Errorf("mac_control drops %d, want the 1 PFC frame (drops %v)", drops["mac_control"], drops)
	}
	out := decode(t, got)
	if len(out) != 60 {
		t.Fatalf("%d frames out, want 60", len(out))
	}
	for i, d := range out[:10] {
		if d.qp != testenv.QPCNP {
			t.Fatalf("frame %d out is QP %#x: the CNPs should pass the paused TC3 frames", i, d.qp)
		}
	}
	st := pfcStats[portID]
	want := qos.PauseNanos(0xFFFF, speed)
	if st == nil || st.RxFrames[3] != 1 || st.RxXOFF[3] != 1 || st.PausedNs[3] != want {
		t.Errorf("PFC stats %+v: want 1 XOFF on priority 3 and %d ns paused", st, want)
	}
}

// A PFC storm: the link partner keeps TC3 paused while its queue holds
// packets. The watchdog (action drop) declares the storm after the
// detection time, flushes the queue and drops what arrives, and the
// control plane hears of it as an event.
func TestQoSWatchdogDropsDuringStorm(t *testing.T) {
	cfg := qos.NVIDIARoCE()
	cfg.Watchdog.DetectionTime = 50 * time.Millisecond
	pfc := testenv.PFCFrame(t, 3, 0xFFFF)
	// Mostly pause frames: the queue must not take every mbuf, or the
	// storm's own frames could not be received.
	var frames [][]byte
	for range 64 {
		frames = append(frames, pfc)
	}
	frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, 1, 256))
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	testenv.WritePcap(t, in, frames)
	cfgFile, set := openPorts(t, "roce", "net_pcap%d,rx_pcap="+in+",infinite_rx=1,tx_pcap="+out)
	portID := uint16(set.Ports[0].ID)
	// At 100 Mbit/s a pause lasts 335 ms: longer than any stall of a
	// worker on a loaded test machine, so the storm never lapses between
	// two frames (the watchdog rightly ignores a pause that does).
	p := newPipeline(t, cfgFile, set, withQoSAt(cfg, 100e6))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var events []Event
	for time.Now().Before(deadline) {
		ev, _ := p.Events()
		events = append(events, ev...)
		if len(events) > 0 && p.Drops()["pfc_watchdog"] > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	checkAccounting(t, p)
	tcStats, pfcStats := p.QoS()
	if tc := tcStats[portID][3]; tc.Dropped.Watchdog != p.Drops()["pfc_watchdog"] {
		t.Errorf("TC3 watchdog drops %d, pipeline counted %d", tc.Dropped.Watchdog, p.Drops()["pfc_watchdog"])
	}
	if len(events) == 0 || events[0].Kind != EventStormDetected || events[0].TC != 3 || events[0].Port != portID {
		t.Errorf("events %+v: want a storm detected on TC3 of port %d", events, portID)
	}
	wd := pfcStats[portID].Watchdog[3]
	if wd.StormsDetected != 1 || !wd.InStorm || wd.Dropped == 0 || wd.Dropped != p.Drops()["pfc_watchdog"] {
		t.Errorf("watchdog stats %+v, pfc_watchdog drops %d", wd, p.Drops()["pfc_watchdog"])
	}
	p.Free()
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
}

// An idle port cuts every packet through, also when each poll fills the
// worker's tx queue to the brim (32 frames looped on a ring, bursts of
// 32): a full tx queue is empty again after the next Run, so it must not
// send the next poll's packets through the queues.
func TestQoSCutThroughWithFullTxQueue(t *testing.T) {
	noICRC := func(s *Spec) { s.RoCE.VerifyICRC = false }
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set, noICRC, withQoS(qos.NVIDIARoCE()))
	w := primeRing(t, p, set)
	if room := w.step.Txq[0].Room() + 32; room != 32 {
		t.Fatalf("tx queue holds %d packets, want one burst of 32 for this test", room)
	}
	polled := 0
	for range 100 {
		polled += w.Poll()
	}
	tcs, _ := p.QoS()
	var tx uint64
	for _, tc := range tcs[uint16(set.Ports[0].ID)] {
		tx += tc.TxPackets
		if tc.MaxDepthBytes != 0 {
			t.Errorf("TC %d queued up to %d bytes: packets of an idle port waited", tc.TC, tc.MaxDepthBytes)
		}
	}
	if polled < 100*32 || tx < uint64(polled) {
		t.Errorf("polled %d packets, %d transmitted by QoS", polled, tx)
	}
	closeRing(t, p, set)
}
