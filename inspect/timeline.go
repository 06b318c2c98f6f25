package inspect

import (
	"roce-fwd/qpstats"
	"roce-fwd/report"
	"roce-fwd/roce"
)

// Timeline is a capture's activity over time, what the HTML report plots.
// Its size depends on the bins and the QPs plotted, never on the frames:
// a capture of any length is read as a stream.
type Timeline struct {
	Bins       report.Bins
	QPs        []qpstats.Flow // the flows plotted, most bytes first
	QPBytes    [][]uint64     // per plotted flow, per bin: whole frames
	OtherBytes []uint64       // every other RoCEv2 flow's
	OtherQPs   int            // the flows OtherBytes adds up
	CE         []uint64       // RoCEv2 frames that arrived CE-marked
	CNPs       []uint64
	Gaps       []uint64 // a flow's PSN jumped forward (qpstats' rules)
	OutOfOrder []uint64 // a PSN behind the expected one: a retransmission or reordering
	NAKs       []uint64 // NAKs of any kind but RNR
	ECN        [4][]uint64
	PFCQuanta  [8][]uint64 // 802.1Qbb quanta asked for, per priority the frame enables
	PFCFrames  [8]uint64   // PFC frames enabling each priority
	Pause      []uint64    // 802.3x PAUSE quanta asked for
	PauseCount uint64      // 802.3x PAUSE frames
	Trust      roce.Trust  // what the traffic classes were taken from
}

// BuildTimeline reads the capture at path a second time, after Summarize
// gave s: its span sets at most maxBins bins, and its qps flows with the
// most bytes get a throughput series each, the rest one together. PSN
// events come from a QP table of its own fed the same frames, so they
// agree with the summary's per-flow counts.
func BuildTimeline(path string, opt Options, s *Summary, qps, maxBins int) (*Timeline, error) {
	b := report.NewBins(s.First, s.Last, maxBins)
	bins := func() []uint64 { return make([]uint64, b.N) }
	tl := &Timeline{Bins: b, OtherBytes: bins(), CE: bins(), CNPs: bins(), Gaps: bins(), OutOfOrder: bins(),
		NAKs: bins(), Pause: bins(), Trust: opt.TCMap.Trust}
	for i := range tl.ECN {
		tl.ECN[i] = bins()
	}
	for i := range tl.PFCQuanta {
		tl.PFCQuanta[i] = bins()
	}
	tl.QPs, _ = qpstats.Top(s.Flows, qps, "bytes")
	tl.OtherQPs = len(s.Flows) - len(tl.QPs)
	plotted := make(map[qpstats.Key]int, len(tl.QPs))
	for i, f := range tl.QPs {
		plotted[f.Key] = i
		tl.QPBytes = append(tl.QPBytes, bins())
	}
	tab := qpstats.New(flowSlots, 0)
	// The summary has checked the ICRCs; a bad one does not change what
	// is plotted.
	opt.VerifyICRC = false
	err := Each(path, opt, func(_ int, frame []byte, r *roce.Result, ts int64) error {
		k := b.Index(ts)
		switch {
		case r.RoCE && (r.Err == roce.ReasonNone || r.Err == roce.ErrBadICRC):
			tl.ECN[r.ECN&3][k]++
			if r.ECN == roce.ECNCE {
				tl.CE[k]++
			}
			if r.Opcode == roce.OpCNP {
				tl.CNPs[k]++
			}
			if r.HasAETH && r.AETH.IsNAK() {
				tl.NAKs[k]++
			}
			before := tab.PSNEvents()
			tab.Observe(frame, r, len(frame), ts)
			after := tab.PSNEvents()
			tl.Gaps[k] += after.Gaps - before.Gaps
			tl.OutOfOrder[k] += after.OutOfOrder - before.OutOfOrder
			if j, ok := plotted[qpstats.KeyOf(frame, r)]; ok {
				tl.QPBytes[j][k] += uint64(len(frame))
			} else {
				tl.OtherBytes[k] += uint64(len(frame))
			}
		case r.Err == roce.ReasonNone && (r.MACCtl == roce.MACCtlPFC || r.MACCtl == roce.MACCtlPause):
			req, ok := roce.ParseMACControl(frame, r)
			if !ok {
				return nil
			}
			if r.MACCtl == roce.MACCtlPause {
				tl.Pause[k] += uint64(req.Quanta[0])
				tl.PauseCount++
				return nil
			}
			for p := range 8 {
				if req.ClassEnable&(1<<p) != 0 {
					tl.PFCQuanta[p][k] += uint64(req.Quanta[p])
					tl.PFCFrames[p]++
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tl, nil
}
