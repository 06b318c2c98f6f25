package capture

import (
	"slices"
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

// AppendVerdict is Verdict appended to b, allocating nothing once b has
// room.
func AppendVerdict(b []byte, rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap) []byte {
	return appendVerdict(b, rec, name, m, nil)
}

// verdictCache keeps the parts of verdicts that repeat from packet to
// packet, for the capture writer, which writes millions a second: the
// opening of the last rx verdict (port, queue, lcore) and the closing
// "; dscp D tc T ecn E" of each codepoint.
type verdictCache struct {
	rxKey  uint64 // port, queue and lcore of rx, plus one; 0: none yet
	rx     []byte
	marks  [64 * 8 * 4][]byte // by dscp, tc, ecn
	marked [64 * 8 * 4]bool
}

// appendVerdict is AppendVerdict, taking repeated parts from vc when it
// is not nil.
func appendVerdict(b []byte, rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap, vc *verdictCache) []byte {
	from := func(b []byte) []byte {
		b = append(b, name(rec.RxPort)...)
		b = append(b, " queue "...)
		b = strconv.AppendUint(b, uint64(rec.RxQueue), 10)
		b = append(b, ", lcore "...)
		return strconv.AppendUint(b, uint64(rec.Lcore), 10)
	}
	switch rec.Dir {
	case pipeline.TapRx:
		if vc == nil {
			b = appendRxFrom(b, rec, name)
			break
		}
		key := uint64(rec.RxPort)<<32 | uint64(rec.RxQueue)<<16 | uint64(rec.Lcore) + 1
		if vc.rxKey != key {
			vc.rx, vc.rxKey = appendRxFrom(vc.rx[:0], rec, name), key
		}
		b = append(b, vc.rx...)
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
	return appendWhat(b, rec, m, vc)
}

// appendRxFrom appends where a received packet was seen.
func appendRxFrom(b []byte, rec *pipeline.TapRecord, name func(uint16) string) []byte {
	b = append(b, "rx "...)
	b = append(b, name(rec.RxPort)...)
	b = append(b, " queue "...)
	b = strconv.AppendUint(b, uint64(rec.RxQueue), 10)
	b = append(b, " lcore "...)
	return strconv.AppendUint(b, uint64(rec.Lcore), 10)
}

// appendWhat appends what the packet is, as the classifier reads the
// bytes kept, and its marks.
func appendWhat(b []byte, rec *pipeline.TapRecord, m *roce.TCMap, vc *verdictCache) []byte {
	var r roce.Result
	roce.Classify(rec.Data, m, false, &r)
	switch {
	case r.RoCE:
		b = append(b, "; RoCEv2 "...) // the opcode's name says its transport
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
		if vc != nil {
			k := int(r.DSCP&63)<<5 | int(r.TC&7)<<2 | int(r.ECN&3)
			if !vc.marked[k] {
				vc.marks[k], vc.marked[k] = appendMarks(nil, &r), true
			}
			b = append(b, vc.marks[k]...)
		} else {
			b = appendMarks(b, &r)
		}
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

// appendMarks appends a packet's DSCP, TC and ECN codepoint.
func appendMarks(b []byte, r *roce.Result) []byte {
	b = append(b, "; dscp "...)
	b = strconv.AppendUint(b, uint64(r.DSCP), 10)
	b = append(b, " tc "...)
	b = strconv.AppendUint(b, uint64(r.TC), 10)
	b = append(b, " ecn "...)
	return append(b, ecnNames[r.ECN&3]...)
}

func appendHex6(b []byte, v uint32) []byte { return appendHex(b, uint64(v), 6) }

// appendHex appends v in hex, zero-padded to width digits, in place.
func appendHex(b []byte, v uint64, width int) []byte {
	const digits = "0123456789abcdef"
	n := width
	for x := v >> (4 * uint(width)); x != 0; x >>= 4 {
		n++
	}
	l := len(b)
	b = slices.Grow(b, n)[:l+n]
	for i := l + n - 1; i >= l; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return b
}
