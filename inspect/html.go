package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"roce-fwd/qpstats"
	"roce-fwd/report"
	"roce-fwd/roce"
)

// HTML report parameters: enough bins to see bursts at a page's width,
// and no more lines than one can tell apart by colour.
const (
	ReportBins = 200
	ReportQPs  = 8
)

// ReportSection lays out one capture as a section of the HTML report:
// the summary's figures, the timeline's charts, and the topRows flows
// with the most bytes. idx makes the section's IDs unique on the page.
func ReportSection(s *Summary, tl *Timeline, topRows, idx int) report.Section {
	c := &s.Counters
	id := func(name string) string { return fmt.Sprintf("%s-%d", name, idx) }
	sec := report.Section{Title: s.File}
	roceFrames := c.RoCE()
	var ce, gaps, ooo, naks uint64
	for _, f := range s.Flows {
		ce += f.CE
		gaps += f.Gaps
		ooo += f.OutOfOrder
		naks += f.NAKTotal()
	}
	span := s.Last - s.First
	fact := func(name, value string) { sec.Facts = append(sec.Facts, report.Fact{Name: name, Value: value}) }
	if c.Frames() > 0 {
		fact("first frame", time.Unix(0, s.First).UTC().Format("2006-01-02 15:04:05.000000 UTC"))
	}
	fact("duration", report.FormatDuration(span))
	fact("frames", report.FormatCount(c.Frames()))
	fact("bytes", report.FormatSI(float64(c.Bytes()), "B"))
	if span > 0 {
		fact("mean rate", report.FormatSI(float64(c.Bytes())*8/(float64(span)/1e9), "bit/s"))
	}
	fact("RoCEv2 frames", report.FormatCount(roceFrames)+" ("+pct(roceFrames, c.Frames())+")")
	fact("QP flows", report.FormatCount(uint64(len(s.Flows))))
	fact("CE-marked", report.FormatCount(c.ECN[roce.ECNCE])+" ("+pct(c.ECN[roce.ECNCE], roceFrames)+")")
	fact("CNPs", report.FormatCount(c.CNPs()))
	fact("PSN gaps", report.FormatCount(gaps))
	fact("out-of-order PSNs", report.FormatCount(ooo))
	fact("NAKs", report.FormatCount(naks))
	fact("PFC / PAUSE frames", report.FormatCount(c.PFC)+" / "+report.FormatCount(c.Pause))
	if c.ICRCBad > 0 {
		fact("bad ICRC", report.FormatCount(c.ICRCBad))
	}
	if n := c.MalformedTotal(); n > 0 {
		fact("malformed", report.FormatCount(n))
	}

	secs := float64(tl.Bins.Width) / 1e9
	rate := func(v []uint64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x) * 8 / secs
		}
		return out
	}
	// The top flows on their own scale, where the rest (often thousands
	// of flows) would flatten them; then all of it stacked, for the total
	// and each top flow's share.
	title, stackTitle := "RoCEv2 throughput per QP flow", "RoCEv2 throughput, stacked by QP flow"
	if tl.OtherQPs > 0 {
		title = fmt.Sprintf("RoCEv2 throughput of the top %d QP flows by bytes", len(tl.QPs))
		stackTitle = "RoCEv2 throughput, stacked: top flows and the rest"
	}
	tput := &report.LineChart{ID: id("tput"), Title: title,
		YName: "throughput (bit/s)", Unit: "bit/s", Wide: true, Bins: tl.Bins, Empty: "no RoCEv2 frames",
		Note: "Whole frames as captured, averaged over each bin. A flow is (source, destination, destination QP): a QP's requests and the responses to it are two flows."}
	stack := &report.LineChart{ID: id("total"), Title: stackTitle, Stacked: true,
		YName: "throughput (bit/s)", Unit: "bit/s", Wide: true, Bins: tl.Bins, Empty: "no RoCEv2 frames"}
	for i, f := range tl.QPs {
		sr := report.Series{Name: flowName(&f), Color: report.Palette[i%len(report.Palette)], Values: rate(tl.QPBytes[i])}
		tput.Series = append(tput.Series, sr)
		stack.Series = append(stack.Series, sr)
	}
	if tl.OtherQPs > 0 {
		stack.Series = append(stack.Series, report.Series{Name: fmt.Sprintf("other %s flows", report.FormatCount(uint64(tl.OtherQPs))),
			Color: report.OtherColor, Values: rate(tl.OtherBytes)})
	}

	cong := &report.LineChart{ID: id("cong"), Title: "Congestion: CE marks and CNPs", YName: "frames per bin", Unit: "frames", Integer: true,
		Bins: tl.Bins, Empty: "no CE marks or CNPs", Series: []report.Series{
			{Name: "CE-marked frames", Color: "#e15759", Values: floats(tl.CE)},
			{Name: "CNPs", Color: "#f28e2b", Values: floats(tl.CNPs)}},
		Note: "CE: RoCEv2 frames whose ECN field is CE (a switch marked them); CNP: congestion notification packets (opcode 0x81) sent back to the marked flow's sender."}
	psn := &report.LineChart{ID: id("psn"), Title: "PSN gaps, retransmissions and NAKs", YName: "events per bin", Unit: "events", Integer: true,
		Bins: tl.Bins, Empty: "no PSN gaps, out-of-order PSNs or NAKs", Series: []report.Series{
			{Name: "PSN gaps", Color: "#b07aa1", Values: floats(tl.Gaps)},
			{Name: "out-of-order / duplicate PSNs", Color: "#9c755f", Values: floats(tl.OutOfOrder)},
			{Name: "NAKs", Color: "#e15759", Values: floats(tl.NAKs)}},
		Note: "A gap is a PSN past the next expected one (frames lost before the capture point); out of order is a PSN behind it (a go-back-N retransmission or reordering). ACKs and CNPs carry no PSN sequence."}
	ecn := &report.LineChart{ID: id("ecn"), Title: "ECN codepoints of RoCEv2 frames", YName: "frames per bin", Unit: "frames", Integer: true,
		Bins: tl.Bins, Empty: "no RoCEv2 frames", Series: []report.Series{
			{Name: "Not-ECT", Color: report.OtherColor, Values: floats(tl.ECN[roce.ECNNotECT])},
			{Name: "ECT(0)", Color: "#4e79a7", Values: floats(tl.ECN[roce.ECNECT0])},
			{Name: "ECT(1)", Color: "#76b7b2", Values: floats(tl.ECN[roce.ECNECT1])},
			{Name: "CE", Color: "#e15759", Values: floats(tl.ECN[roce.ECNCE])}}}
	pfc := &report.LineChart{ID: id("pfc"), Title: "PFC and PAUSE quanta", YName: "pause quanta per bin", Unit: "quanta", Integer: true,
		Bins: tl.Bins, Empty: "no PFC or PAUSE frames",
		Note: "Quanta asked for by 802.1Qbb PFC frames, per priority they enable, and by 802.3x PAUSE frames; a quantum is 512 bit times (5.12 ns at 100 Gb/s), and quanta 0 is XON."}
	for p := range 8 {
		if tl.PFCFrames[p] > 0 {
			pfc.Series = append(pfc.Series, report.Series{Name: fmt.Sprintf("priority %d (%s)", p, nFrames(tl.PFCFrames[p])),
				Color: report.Palette[p], Values: floats(tl.PFCQuanta[p])})
		}
	}
	if tl.PauseCount > 0 {
		pfc.Series = append(pfc.Series, report.Series{Name: fmt.Sprintf("802.3x PAUSE (%s)", nFrames(tl.PauseCount)),
			Color: "#333333", Values: floats(tl.Pause)})
	}

	ops := &report.BarChart{ID: id("ops"), Title: "Opcode mix", XName: "RoCEv2 frames", Unit: "frames", Empty: "no RoCEv2 frames"}
	var opcodes []int
	for op, n := range c.Opcodes {
		if n > 0 {
			opcodes = append(opcodes, op)
		}
	}
	slices.SortStableFunc(opcodes, func(a, b int) int { return cmp.Compare(c.Opcodes[b], c.Opcodes[a]) })
	for _, op := range opcodes {
		ops.Bars = append(ops.Bars, report.Bar{Label: fmt.Sprintf("%s (0x%02x)", roce.Opcode(op), op), Value: float64(c.Opcodes[op])})
	}
	tc := &report.BarChart{ID: id("tc"), Title: "Traffic-class mix", XName: "frames", Unit: "frames",
		Note: "Every frame's traffic class, from its " + trustName(tl.Trust) + " through the TC map."}
	for i, n := range c.TC {
		tc.Bars = append(tc.Bars, report.Bar{Label: fmt.Sprintf("TC%d", i), Value: float64(n)})
	}

	top, _ := qpstats.Top(s.Flows, topRows, "bytes")
	tab := &report.Table{ID: id("qps"), Title: fmt.Sprintf("Top %d of %d QP flows by bytes", len(top), len(s.Flows)),
		Columns: []report.Column{{Name: "source"}, {Name: "destination"}, {Name: "dest QP"}, {Name: "packets", Numeric: true},
			{Name: "bytes", Numeric: true}, {Name: "CE", Numeric: true}, {Name: "CNPs", Numeric: true}, {Name: "PSN gaps", Numeric: true},
			{Name: "out of order", Numeric: true}, {Name: "NAKs", Numeric: true}, {Name: "RNR NAKs", Numeric: true}},
		Note: "A swatch marks the flows plotted above, in their line's colour."}
	for i, f := range top {
		row := report.Row{Cells: []string{f.SrcAddr().String(), f.DstAddr().String(), fmt.Sprintf("0x%06x", f.QP),
			report.FormatCount(f.Packets()), report.FormatCount(f.Bytes), report.FormatCount(f.CE), report.FormatCount(f.CNPs()),
			report.FormatCount(f.Gaps), report.FormatCount(f.OutOfOrder), report.FormatCount(f.NAKTotal()), report.FormatCount(f.RNRNAKs)}}
		if i < len(tl.QPs) {
			row.Color = report.Palette[i%len(report.Palette)]
		}
		tab.Rows = append(tab.Rows, row)
	}
	sec.Blocks = []report.Block{tput, stack, cong, psn, ecn, pfc, ops, tc, tab}
	return sec
}

func flowName(f *qpstats.Flow) string {
	return fmt.Sprintf("QP 0x%06x %s→%s", f.QP, f.SrcAddr(), f.DstAddr())
}

func nFrames(n uint64) string {
	if n == 1 {
		return "1 frame"
	}
	return report.FormatCount(n) + " frames"
}

func floats(v []uint64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func trustName(t roce.Trust) string {
	switch t {
	case roce.TrustDSCP:
		return "DSCP (else a VLAN tag's PCP)"
	case roce.TrustPCP:
		return "VLAN tag's PCP"
	}
	return "marking (none trusted: all TC0)"
}
