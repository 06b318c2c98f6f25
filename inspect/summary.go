package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

func pct(n, of uint64) string {
	if of == 0 {
		return "0.0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// WriteText prints the summary for an operator.
func (s *Summary) WriteText(w io.Writer, topN int) {
	c := &s.Counters
	fmt.Fprintf(w, "%s\n", s.File)
	fmt.Fprintf(w, "  frames %d (%d bytes); RoCEv2 %d (%s; IPv4 %d, IPv6 %d); other %d; malformed %d\n",
		c.Frames(), c.Bytes(), c.RoCE(), pct(c.RoCE(), c.Frames()), c.IPv4(), c.IPv6, c.Other, c.MalformedTotal())
	if c.RoCE() > 0 {
		fmt.Fprintf(w, "  ICRC: %d ok, %d bad\n", c.ICRCOK, c.ICRCBad)
		fmt.Fprintf(w, "  ECN: not-ECT %d, ECT(1) %d, ECT(0) %d, CE %d (CE ratio %s)\n",
			c.ECN[0], c.ECN[1], c.ECN[2], c.ECN[3], pct(c.ECN[3], c.RoCE()))
		fmt.Fprintf(w, "  CNPs: %d\n", c.CNPs())
		fmt.Fprintf(w, "  opcodes:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for t := roce.Transport(0); t < 8; t++ {
			for op := 0; op < 256; op++ {
				o := roce.Opcode(op)
				if c.Opcodes[op] == 0 || o.Transport() != t {
					continue
				}
				fmt.Fprintf(tw, "    0x%02x\t%s\t%d\n", op, o, c.Opcodes[op])
			}
		}
		tw.Flush()
	}
	if c.PFC+c.Pause+c.MACCtlOther > 0 {
		fmt.Fprintf(w, "  MAC control (0x8808): PFC %d, PAUSE %d, other opcodes or too short %d\n", c.PFC, c.Pause, c.MACCtlOther)
	}
	if n := c.MalformedTotal(); n > 0 {
		fmt.Fprintf(w, "  malformed by reason:\n")
		for r := range c.Malformed {
			if c.Malformed[r] != 0 {
				fmt.Fprintf(w, "    %-24s %d\n", roce.Reason(r), c.Malformed[r])
			}
		}
	}
	if c.PFC+c.Pause > 0 {
		fmt.Fprintf(w, "  MAC control: PFC %d, PAUSE %d\n", c.PFC, c.Pause)
	}
	var tcs []string
	for tc, n := range c.TC {
		if n != 0 {
			tcs = append(tcs, fmt.Sprintf("TC%d %d", tc, n))
		}
	}
	fmt.Fprintf(w, "  traffic classes: %s\n", strings.Join(tcs, ", "))
	if len(s.Flows) == 0 {
		return
	}
	top, _ := qpstats.Top(s.Flows, topN, "bytes")
	fmt.Fprintf(w, "  top %d of %d QP flows by bytes:\n", len(top), len(s.Flows))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "    SRC\tDST\tQP\tPACKETS\tBYTES\tGAPS\tOUT-OF-ORDER\tNAKS\tRNR\tCNPS\tCE\n")
	for _, f := range top {
		fmt.Fprintf(tw, "    %s\t%s\t0x%06x\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", f.SrcAddr(), f.DstAddr(), f.QP,
			f.Packets(), f.Bytes, f.Gaps, f.OutOfOrder, f.NAKTotal(), f.RNRNAKs, f.CNPs(), f.CE)
	}
	tw.Flush()
}
