package capture

import (
	"math/bits"
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
// packet, for the capture writer, which writes millions a second. A
// received or dropped RoCE packet's verdict is then three copies and the
// digits of its QP and PSN (and of a rule, if one acted on it): where it
// was seen ("rx PORT queue Q lcore L", "drop REASON at STAGE (from ...):
// HELP"), the opcode ("; RoCEv2 OPCODE qp 0x"), the QP and PSN, and the
// tail " (CNP) aeth ...; dscp D tc T ecn E". A sent packet's verdict,
// which names its next hop and QoS state, is built each time. The where
// and tail caches are direct-mapped: a slot keeps the last key that
// hashed to it.
type verdictCache struct {
	wheres [256]cachedText    // by rx port, queue, lcore, direction and drop reason
	ops    [256][]byte        // by opcode
	tails  [1024]cachedText   // by CNP, AETH syndrome, DSCP, TC and ECN
	marks  [64 * 8 * 4][]byte // other IP packets' marks, by dscp, tc, ecn
	marked [64 * 8 * 4]bool
}

// cachedText is one slot of a direct-mapped cache of verdict parts; key
// 0 is an empty slot.
type cachedText struct {
	key  uint64
	text []byte
}

// slot is the slot of key in a direct-mapped cache of 1<<bits slots.
func slot(key uint64, bits uint) uint64 { return key * 0x9E3779B97F4A7C15 >> (64 - bits) }

// where returns the opening of a received or dropped packet's verdict.
func (vc *verdictCache) where(rec *pipeline.TapRecord, name func(uint16) string) []byte {
	k := (uint64(rec.RxPort)<<32|uint64(rec.RxQueue)<<16|uint64(rec.Lcore))<<9 | 1<<8
	if rec.Dir == pipeline.TapDrop {
		k |= 1<<7 | uint64(rec.Reason%pipeline.NumReasons)
	}
	e := &vc.wheres[slot(k, 8)]
	if e.key != k {
		e.text, e.key = appendWhere(e.text[:0], rec, name), k
	}
	return e.text
}

// appendRoCE appends what a RoCE packet r is, and its marks.
func (vc *verdictCache) appendRoCE(b []byte, r *roce.Result) []byte {
	op := &vc.ops[r.Opcode]
	if len(*op) == 0 {
		*op = appendOpcode(nil, r)
	}
	k := uint64(r.DSCP&63)<<16 | uint64(r.TC&7)<<13 | uint64(r.ECN&3)<<11 | 1<<10 | 2 // bit 10: no AETH
	if r.HasAETH {
		k ^= 1<<10 | uint64(r.AETH)<<2
	}
	if r.CNP {
		k |= 1
	}
	t := &vc.tails[slot(k, 10)]
	if t.key != k {
		t.text, t.key = appendMarks(appendRoCETail(t.text[:0], r), r), k
	}
	b = append(b, *op...)
	b = appendQPPSN(b, r)
	return append(b, t.text...)
}

// appendVerdict is AppendVerdict, taking repeated parts from vc when it
// is not nil.
func appendVerdict(b []byte, rec *pipeline.TapRecord, name func(uint16) string, m *roce.TCMap, vc *verdictCache) []byte {
	var r roce.Result
	roce.Classify(rec.Data, m, false, &r)
	if vc != nil && rec.Dir != pipeline.TapTx {
		b = appendRules(append(b, vc.where(rec, name)...), rec)
		if r.RoCE {
			return appendKept(vc.appendRoCE(b, &r), rec)
		}
		return appendWhat(b, rec, &r, vc)
	}
	if rec.Dir != pipeline.TapTx {
		b = appendWhere(b, rec, name)
	} else {
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
		b = append(appendFrom(b, rec, name), ')')
		switch {
		case rec.Queued && rec.Impair != 0:
			b = append(b, ", held back"...)
		case rec.Queued:
			b = append(b, ", queued by QoS"...)
		}
		if rec.Paused {
			b = append(b, ", its TC paused by PFC"...)
		}
	}
	return appendWhat(appendRules(b, rec), rec, &r, vc)
}

// appendWhere appends where a received or dropped packet was seen, and
// for a drop why.
func appendWhere(b []byte, rec *pipeline.TapRecord, name func(uint16) string) []byte {
	if rec.Dir == pipeline.TapRx {
		return appendRxFrom(b, rec, name)
	}
	info := pipeline.Reasons[rec.Reason%pipeline.NumReasons]
	b = append(b, "drop "...)
	b = append(b, info.Name...)
	b = append(b, " at "...)
	b = append(b, info.Stage...)
	b = append(b, " (from "...)
	b = append(appendFrom(b, rec, name), "): "...)
	return append(b, info.Help...)
}

// appendFrom appends the port, queue and lcore a packet came in by.
func appendFrom(b []byte, rec *pipeline.TapRecord, name func(uint16) string) []byte {
	b = append(b, name(rec.RxPort)...)
	b = append(b, " queue "...)
	b = strconv.AppendUint(b, uint64(rec.RxQueue), 10)
	b = append(b, ", lcore "...)
	return strconv.AppendUint(b, uint64(rec.Lcore), 10)
}

// appendRules appends the rules that acted on a packet.
func appendRules(b []byte, rec *pipeline.TapRecord) []byte {
	if rec.FlowRule != 0 {
		b = append(b, "; flow rule "...)
		b = strconv.AppendInt(b, int64(rec.FlowRule-1), 10)
	}
	if rec.Impair != 0 {
		b = append(b, "; impairment rule "...)
		b = strconv.AppendInt(b, int64(rec.Impair), 10)
	}
	return b
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

// appendWhat appends what the packet is, as the classifier read the
// bytes kept (r), and its marks.
func appendWhat(b []byte, rec *pipeline.TapRecord, r *roce.Result, vc *verdictCache) []byte {
	switch {
	case r.RoCE:
		b = appendQPPSN(appendOpcode(b, r), r)
		b = appendRoCETail(b, r)
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
				vc.marks[k], vc.marked[k] = appendMarks(nil, r), true
			}
			b = append(b, vc.marks[k]...)
		} else {
			b = appendMarks(b, r)
		}
		if rec.Dir == pipeline.TapTx && rec.HasRxECN && rec.RxECN != r.ECN {
			b = append(b, " (was "...)
			b = append(b, ecnNames[rec.RxECN&3]...)
			b = append(b, ": marked)"...)
		}
	}
	return appendKept(b, rec)
}

// appendOpcode appends the opening of a RoCE packet's description, up to
// its QP's digits. The opcode's name says its transport.
func appendOpcode(b []byte, r *roce.Result) []byte {
	b = append(b, "; RoCEv2 "...)
	b = append(b, r.Opcode.String()...)
	return append(b, " qp 0x"...)
}

// appendQPPSN appends a RoCE packet's QP (six hex digits: it has 24 bits)
// and " psn " and its PSN in decimal, built on the stack and appended in
// one copy: the PSN's eight digits go to the end of t, then the QP and
// " psn " over its leading zeros.
func appendQPPSN(b []byte, r *roce.Result) []byte {
	const hex = "0123456789abcdef"
	var t [19]byte // 6 hex digits, " psn ", up to 8 decimal digits (24 bits)
	v := r.PSN & 0xffffff
	hi, lo := v/10000, v%10000
	copy(t[11:13], digitPairs[2*(hi/100):])
	copy(t[13:15], digitPairs[2*(hi%100):])
	copy(t[15:17], digitPairs[2*(lo/100):])
	copy(t[17:19], digitPairs[2*(lo%100):])
	i := 8 - decimalDigits(v)
	q := r.DestQP
	u := t[i : i+11]
	u[0], u[1], u[2] = hex[q>>20&15], hex[q>>16&15], hex[q>>12&15]
	u[3], u[4], u[5] = hex[q>>8&15], hex[q>>4&15], hex[q&15]
	u[6], u[7], u[8], u[9], u[10] = ' ', 'p', 's', 'n', ' '
	return append(b, t[i:]...)
}

// digitPairs are the two-digit numbers 00 to 99, written out.
const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// decimalDigits is how many digits v takes in decimal: from its bit
// length, log10(2) ~ 1233/4096 gives the digits or one too many.
func decimalDigits(v uint32) int {
	v |= 1 // 0 takes a digit, as 1 does
	t := bits.Len32(v) * 1233 >> 12
	if v < pow10[t] {
		return t
	}
	return t + 1
}

var pow10 = [...]uint32{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000}

// appendRoCETail appends what follows a RoCE packet's PSN: whether it is
// a CNP, and its AETH.
func appendRoCETail(b []byte, r *roce.Result) []byte {
	if r.CNP {
		b = append(b, " (CNP)"...)
	}
	if r.HasAETH {
		b = append(b, " aeth "...)
		b = append(b, r.AETH.String()...)
	}
	return b
}

// appendKept appends how much of a packet cut by the snaplen was kept.
func appendKept(b []byte, rec *pipeline.TapRecord) []byte {
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
