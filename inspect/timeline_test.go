package inspect

import (
	"path/filepath"
	"testing"

	"roce-fwd/internal/testenv"
	"roce-fwd/roce"
)

func sum(v []uint64) uint64 {
	var n uint64
	for _, x := range v {
		n += x
	}
	return n
}

// The timeline's bins add up to the summary's totals, whatever the
// capture: every frame lands in one bin, and the PSN events per bin are
// the per-flow counts, spread over time.
func TestTimelineAddsUp(t *testing.T) {
	frames := testenv.Frames(3000)
	for psn := range uint32(40) {
		if psn == 20 {
			continue // a gap
		}
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, psn, 256))
	}
	frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, 3, 256), // behind
		testenv.QoSFrame(t, testenv.QPCNP, 0, 0), testenv.PFCFrame(t, 3, 0xffff), testenv.PFCFrame(t, 3, 0))
	synthetic := filepath.Join(t.TempDir(), "mix.pcap")
	testenv.WritePcap(t, synthetic, frames)
	paths := []string{synthetic}
	if real, _ := filepath.Glob("../../shared/testdata/captures/*.pcap"); len(real) > 0 {
		paths = append(paths, real...)
	}
	opt := Options{VerifyICRC: true, TCMap: roce.DefaultTCMap()}
	for _, path := range paths {
		s, err := Summarize(path, opt)
		if err != nil {
			t.Fatal(err)
		}
		tl, err := BuildTimeline(path, opt, s, 3, 50)
		if err != nil {
			t.Fatal(err)
		}
		c := &s.Counters
		if tl.Bins.N > 50 || tl.Bins.Start != s.First || tl.Bins.Start+tl.Bins.Span() <= s.Last {
			t.Errorf("%s: bins %+v for frames from %d to %d", path, tl.Bins, s.First, s.Last)
		}
		var gaps, ooo, naks, ce uint64
		for _, f := range s.Flows {
			gaps += f.Gaps
			ooo += f.OutOfOrder
			naks += f.NAKTotal()
			ce += f.CE
		}
		bytes := sum(tl.OtherBytes)
		for i, f := range tl.QPs {
			if got := sum(tl.QPBytes[i]); got != f.Bytes {
				t.Errorf("%s: flow %d: %d bytes over the bins, %d in the summary", path, i, got, f.Bytes)
			}
			bytes += sum(tl.QPBytes[i])
		}
		var pfc uint64
		for p := range tl.PFCFrames {
			pfc = max(pfc, tl.PFCFrames[p])
		}
		for _, x := range []struct {
			what      string
			got, want uint64
		}{
			{"RoCEv2 bytes", bytes, c.RoCEBytes},
			{"CE", sum(tl.CE), c.ECN[roce.ECNCE]},
			{"CE by flow", sum(tl.CE), ce},
			{"CNPs", sum(tl.CNPs), c.CNPs()},
			{"PSN gaps", sum(tl.Gaps), gaps},
			{"out of order", sum(tl.OutOfOrder), ooo},
			{"NAKs", sum(tl.NAKs), naks},
			{"Not-ECT", sum(tl.ECN[0]), c.ECN[0]},
			{"ECT(1)", sum(tl.ECN[1]), c.ECN[1]},
			{"ECT(0)", sum(tl.ECN[2]), c.ECN[2]},
			{"PAUSE frames", tl.PauseCount, c.Pause},
			{"other flows", uint64(tl.OtherQPs + len(tl.QPs)), uint64(len(s.Flows))},
		} {
			if x.got != x.want {
				t.Errorf("%s: %s: %d over the bins, %d in the summary", path, x.what, x.got, x.want)
			}
		}
		if c.PFC > 0 && pfc == 0 {
			t.Errorf("%s: %d PFC frames, none in the timeline", path, c.PFC)
		}
		if path == synthetic {
			if gaps == 0 || ooo == 0 || c.CNPs() == 0 || c.PFC != 2 || sum(tl.PFCQuanta[3]) != 0xffff || tl.PFCFrames[3] != 2 {
				t.Errorf("the synthetic capture lacks its events: gaps %d ooo %d CNPs %d PFC %d quanta %d",
					gaps, ooo, c.CNPs(), c.PFC, sum(tl.PFCQuanta[3]))
			}
			// The report of it: every block, and the table's rows.
			sec := ReportSection(s, tl, 5, 0)
			if len(sec.Blocks) != 9 || len(sec.Facts) == 0 {
				t.Errorf("section: %d blocks, %d facts", len(sec.Blocks), len(sec.Facts))
			}
		}
	}
}
