package pipeline

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"roce-fwd/inspect"
	"roce-fwd/internal/testenv"
	"roce-fwd/pcapio"
	"roce-fwd/ports"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// roceInput is the demo mix, the real captures when present, a frame
// with a broken ICRC and a truncated one.
func roceInput(t *testing.T) (frames [][]byte, badICRC int) {
	frames = testenv.Frames(200)
	caps, _ := filepath.Glob("../../shared/testdata/captures/*.pcap")
	for _, c := range caps {
		f, err := pcapio.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f...)
	}
	bad := append([]byte(nil), frames[0]...)
	bad[len(bad)-1] ^= 0x55 // the demo's first frame ends with its ICRC
	truncated := append([]byte(nil), frames[0][:30]...)
	truncated = append(truncated, make([]byte, 30)...) // padded to 60: IPv4 total length lies
	return append(frames, bad, truncated), len(frames)
}

// In roce mode every frame but the one with a bad ICRC comes out
// unchanged, and the dataplane's counters equal inspect's on the input.
func TestRoCEModeForwardsAndCountsLikeInspect(t *testing.T) {
	frames, badIndex := roceInput(t)
	run := forwardPcap(t, "roce", frames)
	p, set := run.p, run.set
	if d := p.Drops(); d["bad_icrc"] != 1 || d["malformed"] != 0 || d["tx_full"] != 0 {
		t.Errorf("drops %v, want one bad_icrc", d)
	}

	want, err := inspect.Summarize(run.in, inspect.Options{VerifyICRC: true, TCMap: roce.DefaultTCMap()})
	if err != nil {
		t.Fatal(err)
	}
	got := p.RoCEByPort()[uint16(set.Ports[0].ID)]
	if got == nil || *got != want.Counters {
		t.Errorf("dataplane counters differ from inspect:\n got %+v\nwant %+v", got.Report(), want.Counters.Report())
	}
	if want.Counters.ICRCBad != 1 || want.Counters.MalformedTotal() != 1 {
		t.Errorf("input lacks its bad frames: %+v", want.Counters.Report())
	}
	flows, st := p.QPFlows()
	if len(flows) != len(want.Flows) || st.Evictions != 0 {
		t.Errorf("%d QP flows (stats %+v), inspect found %d", len(flows), st, len(want.Flows))
	}
	if st.Slots == 0 || st.Bytes != st.Slots*qpstats.SlotBytes {
		t.Errorf("QP tables of %d slots report %d bytes, want %d bytes a slot", st.Slots, st.Bytes, qpstats.SlotBytes)
	}
	// A report keeps its buffer from one second to the next: the same
	// flows again, and only the allocations of the worker's mailbox job
	// (its closure and the variables it shares with its caller: up to 4),
	// none for the tables or the merged flows.
	again, _ := p.QPFlowsInto(nil)
	allocs := testing.AllocsPerRun(20, func() { again, _ = p.QPFlowsInto(again) })
	if !slices.Equal(again, flows) || allocs > 4 {
		t.Errorf("QPFlowsInto again: %d flows (%d before), %v allocations, want the same flows and at most 4", len(again), len(flows), allocs)
	}
	gotTop, _ := qpstats.Top(flows, 0, "bytes")
	wantTop, _ := qpstats.Top(want.Flows, 0, "bytes")
	for i := range gotTop {
		g, w := gotTop[i], wantTop[i]
		if g.Key != w.Key || g.Packets() != w.Packets() || g.Bytes != w.Bytes || g.Gaps != w.Gaps ||
			g.OutOfOrder != w.OutOfOrder || g.CNPs() != w.CNPs() || g.Mix != w.Mix {
			t.Errorf("QP flow %d differs:\n got %+v\nwant %+v", i, g, w)
		}
	}

	gotFrames := run.finish(t)
	wantFrames := append(append([][]byte(nil), frames[:badIndex]...), frames[badIndex+1:]...)
	if len(gotFrames) != len(wantFrames) {
		t.Fatalf("%d frames out, want %d", len(gotFrames), len(wantFrames))
	}
	for i := range wantFrames {
		if !bytes.Equal(gotFrames[i], wantFrames[i]) {
			t.Fatalf("frame %d changed", i)
		}
	}
}

// The roce mode's per-burst step must not allocate either, with or
// without the QoS stage (nvidia-roce: WRED on TC3, strict TC6, PFC).
func TestRoCEPollDoesNotAllocate(t *testing.T) {
	t.Run("classify", func(t *testing.T) { testRoCEPollAllocs(t) })
	t.Run("qos", func(t *testing.T) { testRoCEPollAllocs(t, withQoS(qos.NVIDIARoCE())) })
	// A shaper makes every packet go through the queues and the scheduler.
	shaped := qos.NVIDIARoCE()
	shaped.Rate = 400e9
	t.Run("qos-shaped", func(t *testing.T) { testRoCEPollAllocs(t, withQoS(shaped)) })
	// Rules that change packets and hold them back (the ring loop gets
	// them back), and one that never matches.
	t.Run("impair", func(t *testing.T) {
		testRoCEPollAllocs(t, withImpair(t, "every 2 action set_ce", "every 3 action clear_ecn",
			"every 50 action delay 1us jitter 1us", "every 101 action reorder 2", "qp 0x999 action drop"))
	})
	// 512 flows looped, polls of up to 128 packets: every lookup staged,
	// the slots loaded ahead of the count (qpstats.Table.Ahead).
	t.Run("512-flows", func(t *testing.T) {
		cfg, set := openPorts(t, "roce", "net_ring%d")
		p := newPipeline(t, cfg, set, func(s *Spec) { s.RoCE.QPTable = 4096 })
		w := primeRingFlows(t, p, set, 512)
		allocs := testing.AllocsPerRun(500, func() {
			w.Poll()
			w.serveMailbox()
		})
		if allocs != 0 {
			t.Errorf("%v allocations per poll", allocs)
		}
		p.Stop()
		if flows, st := p.QPFlows(); len(flows) < 512*3/4 || st.Evictions != 0 {
			t.Errorf("%d flows in the QP table, %+v: not the flows primed", len(flows), st)
		}
		closeRing(t, p, set)
	})
}

// sixteenRules are impairment rules as a busy drill has them: fifteen on
// QPs the demo traffic does not use, one on its QP 291 acting on every
// thousandth packet.
func sixteenRules(t testing.TB) func(*Spec) {
	lines := []string{"qp 291 every 1000 action set_ce"}
	for i := range 15 {
		lines = append(lines, fmt.Sprintf("qp %d class data every 100 action drop", 0x1000+i*37))
	}
	return withImpair(t, lines...)
}

func testRoCEPollAllocs(t *testing.T, tune ...func(*Spec)) {
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set, tune...)
	w := primeRing(t, p, set)
	allocs := testing.AllocsPerRun(2000, func() {
		w.Poll()
		w.serveMailbox()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per poll", allocs)
	}
	if c := p.RoCEByPort()[uint16(set.Ports[0].ID)]; c == nil || c.RoCE() < 2000*32*8/10 {
		t.Errorf("RoCE frames counted: %+v", c)
	}
	closeRing(t, p, set)
}

// BenchmarkPoll is the worker's cost per packet without a PMD worth the
// name: a net_ring port that loops 32 demo frames back to itself, so a
// poll is one cgo call and the mode's Go work. `make bench` runs it; the
// PMDs' share is in the testpmd comparison. ICRC verification is off, as
// by default. roce-noqp has no QP table: against roce, the table's cost
// for a few busy QPs.
func BenchmarkPoll(b *testing.B) {
	noICRC := func(s *Spec) { s.RoCE.VerifyICRC = false }
	// A tap that selects nothing (a QP no packet has) costs its checks;
	// one that copies every packet as received, or as sent, costs the
	// copy too (the ring read after each poll, as a capture's writer
	// would).
	nothing := TapSpec{Filter: TapFilter{Dirs: TapRx, Port: -1, QP: 0xfffffe}, Snaplen: 128, Slots: 1 << 12}
	every := TapSpec{Filter: TapFilter{Dirs: TapRx, Port: -1, QP: -1}, Snaplen: 128, Slots: 1 << 12}
	everyOut := TapSpec{Filter: TapFilter{Dirs: TapTx, Port: -1, QP: -1}, Snaplen: 128, Slots: 1 << 12}
	for _, c := range []struct {
		name, mode string
		tune       []func(*Spec)
		tap        *TapSpec
		flows      int // RoCEv2 flows looped through the ring; 0: the demo frames' few
	}{
		{"io", "io", nil, nil, 0},
		{"roce", "roce", []func(*Spec){noICRC}, nil, 0},
		{"roce-noqp", "roce", []func(*Spec){noICRC, func(s *Spec) { s.RoCE.QPTable = 0 }}, nil, 0},
		{"roce-qos", "roce", []func(*Spec){noICRC, withQoS(qos.NVIDIARoCE())}, nil, 0},
		{"roce-tap-selecting-nothing", "roce", []func(*Spec){noICRC}, &nothing, 0},
		{"roce-tap-copying-all", "roce", []func(*Spec){noICRC}, &every, 0},
		{"roce-tap-copying-all-sent", "roce", []func(*Spec){noICRC}, &everyOut, 0},
		{"roce-impair-16-rules", "roce", []func(*Spec){noICRC, sixteenRules(b)}, nil, 0},
		{"roce-512qp", "roce", []func(*Spec){noICRC, func(s *Spec) { s.RoCE.QPTable = 4096 }}, nil, 512},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg, set := openPorts(b, c.mode, "net_ring%d")
			p := newPipeline(b, cfg, set, c.tune...)
			var tp *Tap
			if c.tap != nil {
				var err error
				if tp, err = p.ArmTap(*c.tap); err != nil {
					b.Fatal(err)
				}
			}
			var w *Worker
			if c.flows > 0 {
				w = primeRingFlows(b, p, set, c.flows)
			} else {
				w = primeRing(b, p, set)
			}
			b.ResetTimer()
			var n int
			for b.Loop() {
				n += w.Poll()
				if tp != nil {
					tp.Read(func(*TapRecord) {})
				}
			}
			b.StopTimer()
			if n == 0 {
				b.Fatal("no packets polled")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/packet")
			if c.flows > 0 {
				p.Stop() // the table's copy is made by the caller once the worker stops
				if flows, st := p.QPFlows(); len(flows) < c.flows*3/4 || st.Evictions != 0 {
					b.Fatalf("%d flows in the QP table, %+v: not the flows primed", len(flows), st)
				}
			}
			closeRing(b, p, set)
		})
	}
}

// primeRingFlows loops n demo frames through w's ring port, each RoCEv2
// one of its own QP: a poll then sees 32 flows of the n in turn, more
// than the QP table's memo keeps, so their lookups are staged, as with a
// port's thousands of QPs (the table holding them all).
func primeRingFlows(t testing.TB, p *Pipeline, set *ports.Set, n int) *Worker {
	t.Helper()
	w := p.Workers[0]
	frames := testenv.Frames(n)
	for i, f := range frames {
		var r roce.Result
		if roce.Classify(f, nil, false, &r); r.RoCE && r.Err == roce.ReasonNone {
			binary.BigEndian.PutUint32(f[r.BTH+4:], 0x100000|uint32(i)) // reserved byte 0, QP 0x100000+i
			if err := roce.SetICRC(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < n; i += 32 {
		for _, f := range frames[i:min(i+32, n)] {
			sendFrame(t, w, set, f)
		}
		w.step.Flush() // into the ring, none taken out yet
	}
	if st := w.Stats(); st.Drops[DropTxFull] != 0 {
		t.Fatalf("%d of %d frames did not fit in the ring", st.Drops[DropTxFull], n)
	}
	return w
}

// Every frame is counted once per rx queue, whether the QP table's memo
// counted its flow at once (a few busy QPs: the demo frames) or its lookup
// was staged and counted by qpPass (32 QPs, a new one each frame).
func TestRoCECountsEachFrameOnce(t *testing.T) {
	for _, distinct := range []bool{false, true} {
		t.Run(fmt.Sprint("distinct QPs ", distinct), func(t *testing.T) {
			cfg, set := openPorts(t, "roce", "net_ring%d")
			p := newPipeline(t, cfg, set)
			w := p.Workers[0]
			frames := testenv.Frames(32)
			nRoCE := 0
			for i, f := range frames {
				var r roce.Result
				roce.Classify(f, nil, false, &r)
				if !r.RoCE || r.Err != roce.ReasonNone {
					continue
				}
				nRoCE++
				if distinct {
					f[r.BTH+5], f[r.BTH+6], f[r.BTH+7] = 0x10, byte(i), 0x01
					if err := roce.SetICRC(f); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, f := range frames {
				sendFrame(t, w, set, f)
			}
			for range 100 {
				w.Poll()
			}
			st := w.Stats()
			c := p.RoCEByPort()[uint16(set.Ports[0].ID)]
			if st.Packets%32 != 0 || st.Packets < 32*90 || c == nil {
				t.Fatalf("%d packets polled, counters %+v", st.Packets, c)
			}
			if c.Frames() != st.Packets || c.RoCE() != st.Packets/32*uint64(nRoCE) {
				t.Errorf("counted %d frames, %d RoCEv2, of %d packets (%d of each 32 RoCEv2)", c.Frames(), c.RoCE(), st.Packets, nRoCE)
			}
			closeRing(t, p, set)
		})
	}
}
