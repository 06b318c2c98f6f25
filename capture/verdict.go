package capture

import (
	"fmt"
	"strings"

	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

var ecnNames = [4]string{"Not-ECT", "ECT1", "ECT0", "CE"}

// Verdict says what happened to a tapped packet, for a pcapng comment and
// a trace: where it was seen, what it is (RoCEv2 opcode, QP, PSN, TC, ECN
// as the classifier reads the bytes kept), and what became of it.
func Verdict(rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap) string {
	var b strings.Builder
	switch rec.Dir {
	case pipeline.TapRx:
		fmt.Fprintf(&b, "rx %s queue %d lcore %d", name(rec.RxPort), rec.RxQueue, rec.Lcore)
	case pipeline.TapTx:
		fmt.Fprintf(&b, "tx %s (from %s queue %d, lcore %d)", name(rec.TxPort), name(rec.RxPort), rec.RxQueue, rec.Lcore)
		if rec.Queued {
			b.WriteString(", queued by QoS")
		}
	case pipeline.TapDrop:
		info := pipeline.Reasons[rec.Reason%pipeline.NumReasons]
		fmt.Fprintf(&b, "drop %s at %s (from %s queue %d, lcore %d): %s", info.Name, info.Stage, name(rec.RxPort), rec.RxQueue, rec.Lcore, info.Help)
	}
	var r roce.Result
	roce.Classify(rec.Data, m, false, &r)
	switch {
	case r.RoCE:
		fmt.Fprintf(&b, "; RoCEv2 %s %s qp 0x%06x psn %d", r.Transport, r.Opcode, r.DestQP, r.PSN)
		if r.CNP {
			b.WriteString(" (CNP)")
		}
		if r.HasAETH {
			fmt.Fprintf(&b, " aeth %s", r.AETH)
		}
	case r.IPVersion != 0:
		fmt.Fprintf(&b, "; IPv%d protocol %d", r.IPVersion, r.L4Proto)
	default:
		fmt.Fprintf(&b, "; ethertype 0x%04x", r.EtherType)
	}
	if r.IPVersion != 0 {
		fmt.Fprintf(&b, "; dscp %d tc %d ecn %s", r.DSCP, r.TC, ecnNames[r.ECN&3])
		if rec.Dir == pipeline.TapTx && rec.HasRxECN && rec.RxECN != r.ECN {
			fmt.Fprintf(&b, " (was %s: marked)", ecnNames[rec.RxECN&3])
		}
	}
	if int(rec.Len) > len(rec.Data) {
		fmt.Fprintf(&b, "; %d of %d bytes kept", len(rec.Data), rec.Len)
	}
	return b.String()
}
