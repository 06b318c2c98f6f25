package capture

import (
	"strconv"

	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

var ecnNames = [4]string{"Not-ECT", "ECT1", "ECT0", "CE"}

// Verdict says what happened to a tapped packet, for a pcapng comment and
// a trace: where it was seen, what it is (RoCEv2 opcode, QP, PSN, TC, ECN
// as the classifier reads the bytes kept), and what became of it.
func Verdict(rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap) string {
	return string(AppendVerdict(nil, rec, name, m))
}

// AppendVerdict is Verdict appended to b: the capture writer's form,
// which allocates nothing once b has room.
func AppendVerdict(b []byte, rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap) []byte {
	from := func(b []byte) []byte {
		b = append(b, name(rec.RxPort)...)
		b = append(b, " queue "...)
		b = strconv.AppendUint(b, uint64(rec.RxQueue), 10)
		b = append(b, ", lcore "...)
		return strconv.AppendUint(b, uint64(rec.Lcore), 10)
	}
	switch rec.Dir {
	case pipeline.TapRx:
		b = append(b, "rx "...)
		b = append(b, name(rec.RxPort)...)
		b = append(b, " queue "...)
		b = strconv.AppendUint(b, uint64(rec.RxQueue), 10)
		b = append(b, " lcore "...)
		b = strconv.AppendUint(b, uint64(rec.Lcore), 10)
	case pipeline.TapTx:
		b = append(b, "tx "...)
		b = append(b, name(rec.TxPort)...)
		if len(rec.Data) >= 6 { // the next hop, in a routed config
			b = append(b, " to "...)
			for i, x := range rec.Data[:6] {
				if i > 0 {
					b = append(b, ':')
				}
				b = appendHex(b, uint64(x), 2)
			}
		}
		b = append(b, " (from "...)
		b = append(from(b), ')')
		switch {
		case rec.Queued && rec.Impair != 0:
			b = append(b, ", held back"...)
		case rec.Queued:
			b = append(b, ", queued by QoS"...)
		}
		if rec.Paused {
			b = append(b, ", its TC paused by PFC"...)
		}
	case pipeline.TapDrop:
		info := pipeline.Reasons[rec.Reason%pipeline.NumReasons]
		b = append(b, "drop "...)
		b = append(b, info.Name...)
		b = append(b, " at "...)
		b = append(b, info.Stage...)
		b = append(b, " (from "...)
		b = append(from(b), "): "...)
		b = append(b, info.Help...)
	}
	if rec.FlowRule != 0 {
		b = append(b, "; flow rule "...)
		b = strconv.AppendInt(b, int64(rec.FlowRule-1), 10)
	}
	if rec.Impair != 0 {
		b = append(b, "; impairment rule "...)
		b = strconv.AppendInt(b, int64(rec.Impair), 10)
	}
	var r roce.Result
	roce.Classify(rec.Data, m, false, &r)
	switch {
	case r.RoCE:
		b = append(b, "; RoCEv2 "...)
		b = append(b, r.Transport.String()...)
		b = append(b, ' ')
		b = append(b, r.Opcode.String()...)
		b = append(b, " qp 0x"...)
		b = appendHex6(b, r.DestQP)
		b = append(b, " psn "...)
		b = strconv.AppendUint(b, uint64(r.PSN), 10)
		if r.CNP {
			b = append(b, " (CNP)"...)
		}
		if r.HasAETH {
			b = append(b, " aeth "...)
			b = append(b, r.AETH.String()...)
		}
	case r.IPVersion != 0:
		b = append(b, "; IPv"...)
		b = strconv.AppendUint(b, uint64(r.IPVersion), 10)
		b = append(b, " protocol "...)
		b = strconv.AppendUint(b, uint64(r.L4Proto), 10)
	default:
		b = append(b, "; ethertype 0x"...)
		b = appendHex(b, uint64(r.EtherType), 4)
	}
	if r.IPVersion != 0 {
		b = append(b, "; dscp "...)
		b = strconv.AppendUint(b, uint64(r.DSCP), 10)
		b = append(b, " tc "...)
		b = strconv.AppendUint(b, uint64(r.TC), 10)
		b = append(b, " ecn "...)
		b = append(b, ecnNames[r.ECN&3]...)
		if rec.Dir == pipeline.TapTx && rec.HasRxECN && rec.RxECN != r.ECN {
			b = append(b, " (was "...)
			b = append(b, ecnNames[rec.RxECN&3]...)
			b = append(b, ": marked)"...)
		}
	}
	if int(rec.Len) > len(rec.Data) {
		b = append(b, "; "...)
		b = strconv.AppendUint(b, uint64(len(rec.Data)), 10)
		b = append(b, " of "...)
		b = strconv.AppendUint(b, uint64(rec.Len), 10)
		b = append(b, " bytes kept"...)
	}
	return b
}

func appendHex6(b []byte, v uint32) []byte { return appendHex(b, uint64(v), 6) }

// appendHex appends v in hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	const digits = "0123456789abcdef"
	var buf [16]byte
	i := len(buf)
	for v != 0 || len(buf)-i < width {
		i--
		buf[i] = digits[v&15]
		v >>= 4
	}
	return append(b, buf[i:]...)
}
