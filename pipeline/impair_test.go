package pipeline

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// A PFC storm leaves the port it is started on at its pace, with its
// priorities and quanta, and ends on time; a PAUSE storm stopped early
// ends at once.
func TestImpairStorm(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	testenv.WritePcap(t, in, [][]byte{testenv.QoSFrame(t, testenv.QPECT, 1, 64)})
	cfg, set := openPorts(t, "roce", "net_pcap%d,rx_pcap="+in, "net_pcap%d,tx_pcap="+out)
	p := newPipeline(t, cfg, set, func(s *Spec) { s.Impair = &ImpairSpec{Pools: set.Pools} })
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			p.Stop()
			p.Free()
			stopped = true
		}
	}
	t.Cleanup(stop)
	onPort := func(id uint16) func(string) (uint16, error) { return func(string) (uint16, error) { return id, nil } }
	inID, outID := uint16(set.Ports[0].ID), uint16(set.Ports[1].ID)
	s, _ := impair.ParseStorm(strings.Fields("port 0 pfc 3 for 1s"), onPort(inID))
	if err := p.StartStorm(s); err == nil || !strings.Contains(err.Error(), "no worker transmits") {
		t.Errorf("a storm on a port nothing is forwarded to: %v", err)
	}
	s, err := impair.ParseStorm(strings.Fields("port 1 pfc 3,5 quanta 1000 every 2ms for 40ms"), onPort(outID))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.StartStorm(s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	pfcStorm := p.Storms()
	if len(pfcStorm) != 1 || pfcStorm[0].Active || pfcStorm[0].Failed != 0 || pfcStorm[0].Sent != 20 {
		t.Fatalf("PFC storm of 40 ms, a frame every 2 ms: %+v", pfcStorm)
	}
	pause, _ := impair.ParseStorm(strings.Fields("port 1 pause every 1ms for 1h"), onPort(outID))
	if err := p.StartStorm(pause); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := p.StopStorm(-1); err != nil {
		t.Fatal(err)
	}
	pauseStorm := p.Storms()
	time.Sleep(10 * time.Millisecond)
	if again := p.Storms(); len(pauseStorm) != 1 || pauseStorm[0].Active || pauseStorm[0].Sent < 20 || again[0].Sent != pauseStorm[0].Sent {
		t.Fatalf("PAUSE storm stopped after 50 ms: %+v, then %+v", pauseStorm, again)
	}
	stop()
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	var pfc, pauses int
	for _, f := range testenv.ReadPcap(t, out) {
		if en, q, ok := roce.ParsePFC(f); ok {
			pfc++
			if en != 0x28 || q[3] != 1000 || q[5] != 1000 || q[0] != 0 {
				t.Errorf("PFC frame: enable %#x quanta %v", en, q)
			}
		}
		if q, ok := roce.ParsePause(f); ok && q == 0xffff {
			pauses++
		}
	}
	if uint64(pfc) != pfcStorm[0].Sent || uint64(pauses) != pauseStorm[0].Sent {
		t.Errorf("%d PFC and %d PAUSE frames out of port 1; the storms say %d and %d", pfc, pauses, pfcStorm[0].Sent, pauseStorm[0].Sent)
	}
}

// A duplicated packet is sent twice, the copy after its burst; without
// mbufs for copies, the rule counts its failures and the original goes.
func TestImpairDuplicate(t *testing.T) {
	var frames [][]byte
	for i := range 100 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 128))
	}
	dir := t.TempDir()
	run := &pcapRun{in: filepath.Join(dir, "in.pcap"), out: filepath.Join(dir, "out.pcap")}
	testenv.WritePcap(t, run.in, frames)
	cfg, set := openPorts(t, "roce", "net_pcap%d,rx_pcap="+run.in, "net_pcap%d,tx_pcap="+run.out)
	rules := withImpair(t, "psn 10-19 every 5 action duplicate", "psn 50 action duplicate")
	run.set, run.p = set, newPipeline(t, cfg, set, func(s *Spec) { rules(s); s.Impair.Pools = set.Pools })
	if err := run.p.Start(); err != nil {
		t.Fatal(err)
	}
	waitPackets(t, run.p, uint64(len(frames)))
	run.p.Stop()
	checkAccounting(t, run.p)
	stats, _ := run.p.ImpairStats()
	got := run.finish(t)
	var psns []uint32
	for _, d := range decode(t, got) {
		psns = append(psns, d.psn)
	}
	if len(psns) != 103 || stats[0].Acted != 2 || stats[0].Failed != 0 || stats[1].Acted != 1 {
		t.Fatalf("%d frames out, rules %+v", len(psns), stats)
	}
	for _, p := range []uint32{14, 19, 50} {
		n := 0
		for _, q := range psns {
			if q == p {
				n++
			}
		}
		if n != 2 {
			t.Errorf("PSN %d came out %d times: %v", p, n, psns)
		}
	}
	// No pool: the copies cannot be made, the originals go.
	fail := forwardPcap(t, "roce", frames, withImpair(t, "psn 10-19 action duplicate"))
	stats, _ = fail.p.ImpairStats()
	if got := fail.finish(t); len(got) != 100 || stats[0].Acted != 10 || stats[0].Failed != 10 {
		t.Errorf("without a pool: %d frames out, rule %+v", len(got), stats)
	}
}
