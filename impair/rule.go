// Package impair is roce-fwd's RoCE impairment engine: rules that pick
// RoCEv2 packets the way a RoCE engineer names them (port and direction,
// addresses, traffic class, destination QP, opcode class, PSN; every Nth
// one or with a seeded probability) and do something to them (drop, mark
// CE, clear ECN, corrupt the ICRC or a payload byte, delay, reorder,
// rate-limit, duplicate). It turns the forwarder that sits in a RoCE path into the
// impairment box hardware RoCE otherwise needs: netem cannot touch
// traffic a NIC's RDMA engine sends.
//
// The package is pure Go over classified frames: Parse reads the console's
// and the config's rule lines, a Worker decides and applies the rules to
// one worker lcore's packets, and the pipeline's impair stage does what
// the decisions say with the mbufs (drop, hold back). A run with the same
// seed impairs exactly the same packets.
package impair

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// Dir is the side of a port a rule watches.
type Dir uint8

const (
	DirRx Dir = iota + 1 // packets received on the port
	DirTx                // packets about to be sent out of the port
)

func (d Dir) String() string {
	switch d {
	case DirRx:
		return "rx"
	case DirTx:
		return "tx"
	}
	return "any"
}

// Class is a set of RoCE opcode classes.
type Class uint16

const (
	ClassSend Class = 1 << iota
	ClassWrite
	ClassReadRequest
	ClassReadResponse
	ClassAck // an Acknowledge with an ACK syndrome
	ClassNAK // an Acknowledge (or READ response) with a NAK or RNR NAK syndrome
	ClassAtomic
	ClassCNP
	ClassOther
	numClasses = iota

	// ClassData is what carries the application's bytes.
	ClassData = ClassSend | ClassWrite | ClassReadResponse
)

var classNames = [numClasses]string{"send", "write", "read_request", "read_response", "ack", "nak", "atomic", "cnp", "other"}

func (c Class) String() string {
	if c == 0 {
		return "any"
	}
	var out []string
	if c&ClassData == ClassData {
		out, c = append(out, "data"), c&^ClassData
	}
	for i, n := range classNames {
		if c&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// classOfOpcode maps qpstats' opcode classes to impair's.
var classOfOpcode = [qpstats.NumClasses]Class{
	qpstats.ClassSend: ClassSend, qpstats.ClassWrite: ClassWrite, qpstats.ClassReadRequest: ClassReadRequest,
	qpstats.ClassReadResponse: ClassReadResponse, qpstats.ClassAck: ClassAck, qpstats.ClassAtomic: ClassAtomic,
	qpstats.ClassCNP: ClassCNP, qpstats.ClassOther: ClassOther,
}

// ClassOf is a classified RoCE packet's class: a NAK is told from an ACK
// by its AETH syndrome.
func ClassOf(r *roce.Result) Class {
	if r.HasAETH && (r.AETH.IsNAK() || r.AETH.IsRNRNAK()) {
		return ClassNAK
	}
	return classOfOpcode[qpstats.ClassOf(r.Opcode)]
}

// Action is what a rule does to the packets it selects.
type Action uint8

const (
	ActDrop           Action = iota + 1 // drop (counted as impair_drop)
	ActSetCE                            // set ECN to CE on an ECT packet (the ICRC masks ECN: it stays valid)
	ActClearECN                         // set ECN to Not-ECT
	ActCorruptICRC                      // flip the ICRC's bits: the receiver's NIC drops it
	ActCorruptPayload                   // flip the first payload byte (the ICRC no longer matches)
	ActDelay                            // hold back for a time (plus jitter)
	ActReorder                          // hold back until Depth later packets to the same port went by
	ActRateLimit                        // drop what exceeds Rate packets per second (impair_rate)
	ActDuplicate                        // send it, and a copy of it after its burst
	numActions
)

var actionNames = [numActions]string{"", "drop", "set_ce", "clear_ecn", "corrupt_icrc", "corrupt_payload", "delay", "reorder", "rate_limit", "duplicate"}

func (a Action) String() string {
	if a < numActions && a != 0 {
		return actionNames[a]
	}
	return "none"
}

// holds reports whether the action keeps the packet for later.
func (a Action) holds() bool { return a == ActDelay || a == ActReorder }

// Range is an inclusive range of numbers (QPs, PSNs).
type Range struct {
	Lo uint32 `json:"lo"`
	Hi uint32 `json:"hi"`
}

func (r *Range) has(v uint32) bool { return r == nil || v-r.Lo <= r.Hi-r.Lo }

func (r Range) String() string {
	if r.Lo == r.Hi {
		return "0x" + strconv.FormatUint(uint64(r.Lo), 16)
	}
	return fmt.Sprintf("0x%x-0x%x", r.Lo, r.Hi)
}

// Rule is one impairment rule. The zero values of the match fields match
// everything; Port -1 is any port.
type Rule struct {
	ID      int           `json:"id"`
	Port    int           `json:"port"` // -1: any
	Dir     Dir           `json:"-"`
	Src     netip.Prefix  `json:"-"`
	Dst     netip.Prefix  `json:"-"`
	TC      int           `json:"tc"`   // -1: any
	DSCP    int           `json:"dscp"` // -1: any
	QP      *Range        `json:"qp,omitempty"`
	PSN     *Range        `json:"psn,omitempty"`
	Classes Class         `json:"-"`
	Every   uint64        `json:"every,omitempty"` // select every Nth matching packet (0 and 1: each)
	Prob    float64       `json:"probability,omitempty"`
	Action  Action        `json:"-"`
	Burst   uint64        `json:"burst,omitempty"` // once selected, act on this many consecutive matching packets
	Delay   time.Duration `json:"-"`
	Jitter  time.Duration `json:"-"`
	Depth   uint32        `json:"depth,omitempty"` // reorder: later packets to let by
	Rate    uint64        `json:"rate_pps,omitempty"`
	Count   uint64        `json:"count,omitempty"` // expire after this many actions
	For     time.Duration `json:"-"`
	Seed    uint64        `json:"seed"`
}

// MarshalJSON writes the rule with its fields named and its line.
func (r Rule) MarshalJSON() ([]byte, error) {
	type plain Rule // without this method
	j := struct {
		plain
		Dir     string `json:"dir"`
		Src     string `json:"src,omitempty"`
		Dst     string `json:"dst,omitempty"`
		Classes string `json:"class"`
		Action  string `json:"action"`
		Delay   string `json:"delay,omitempty"`
		Jitter  string `json:"jitter,omitempty"`
		For     string `json:"for,omitempty"`
		Line    string `json:"line"`
	}{plain: plain(r), Dir: r.Dir.String(), Classes: r.Classes.String(), Action: r.Action.String(), Line: r.String()}
	if r.Src.IsValid() {
		j.Src = r.Src.String()
	}
	if r.Dst.IsValid() {
		j.Dst = r.Dst.String()
	}
	if r.Delay != 0 {
		j.Delay = r.Delay.String()
	}
	if r.Jitter != 0 {
		j.Jitter = r.Jitter.String()
	}
	if r.For != 0 {
		j.For = r.For.String()
	}
	return json.Marshal(j)
}

// String is the rule as a line Parse reads back (port as a number).
func (r Rule) String() string {
	var b strings.Builder
	w := func(f string, a ...any) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, f, a...)
	}
	if r.Port >= 0 {
		w("port %d", r.Port)
	}
	if r.Dir != 0 {
		w("%s", r.Dir)
	}
	if r.Src.IsValid() {
		w("src %s", r.Src)
	}
	if r.Dst.IsValid() {
		w("dst %s", r.Dst)
	}
	if r.TC >= 0 {
		w("tc %d", r.TC)
	}
	if r.DSCP >= 0 {
		w("dscp %d", r.DSCP)
	}
	if r.QP != nil {
		w("qp %s", r.QP)
	}
	if r.Classes != 0 {
		w("class %s", r.Classes)
	}
	if r.PSN != nil {
		if r.PSN.Lo == r.PSN.Hi {
			w("psn %d", r.PSN.Lo)
		} else {
			w("psn %d-%d", r.PSN.Lo, r.PSN.Hi)
		}
	}
	if r.Every > 1 {
		w("every %d", r.Every)
	}
	if r.Prob > 0 {
		w("probability %s", strconv.FormatFloat(r.Prob, 'g', -1, 64))
	}
	w("action %s", r.Action)
	switch r.Action {
	case ActDelay:
		w("%s", r.Delay)
		if r.Jitter > 0 {
			w("jitter %s", r.Jitter)
		}
	case ActReorder:
		w("%d", r.Depth)
	case ActRateLimit:
		w("%d", r.Rate)
	}
	if r.Burst > 1 {
		w("burst %d", r.Burst)
	}
	if r.Count > 0 {
		w("count %d", r.Count)
	}
	if r.For > 0 {
		w("for %s", r.For)
	}
	if r.Seed != 0 {
		w("seed %d", r.Seed)
	}
	return b.String()
}

// Syntax is the rule grammar, for help texts.
const Syntax = "[port <port>] [rx|tx] [src <prefix>] [dst <prefix>] [tc <n>] [dscp <n>] [qp <n>[-<m>]] " +
	"[class <c>[,<c>...]] [psn <n>[-<m>]] [every <n>] [probability <p>] " +
	"action drop|set_ce|clear_ecn|corrupt_icrc|corrupt_payload|delay <d> [jitter <d>]|reorder <k>|rate_limit <pps>|duplicate " +
	"[burst <k>] [count <n>] [for <d>] [seed <s>]"

// MaxHold bounds a delay: a held packet is an mbuf the NIC's rx ring
// does not get back until it leaves.
const MaxHold = time.Second

// Parse reads a rule from its words (Syntax). port resolves a port name or
// number.
func Parse(words []string, port func(string) (uint16, error)) (Rule, error) {
	r := Rule{Port: -1, TC: -1, DSCP: -1}
	val := func(i int) (string, error) {
		if i+1 >= len(words) {
			return "", fmt.Errorf("%s needs a value", words[i])
		}
		return words[i+1], nil
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch w {
		case "rx", "tx":
			if r.Dir != 0 {
				return r, fmt.Errorf("%s: the direction is already %s", w, r.Dir)
			}
			r.Dir = map[string]Dir{"rx": DirRx, "tx": DirTx}[w]
			continue
		}
		v, err := val(i)
		if err != nil {
			return r, err
		}
		i++
		switch w {
		case "port":
			id, err := port(v)
			if err != nil {
				return r, err
			}
			r.Port = int(id)
		case "src", "dst":
			p, err := parsePrefix(v)
			if err != nil {
				return r, fmt.Errorf("%s %q: %v", w, v, err)
			}
			if w == "src" {
				r.Src = p
			} else {
				r.Dst = p
			}
		case "tc":
			n, err := strconv.ParseUint(v, 0, 8)
			if err != nil || n > 7 {
				return r, fmt.Errorf("tc %q: want 0-7", v)
			}
			r.TC = int(n)
		case "dscp":
			n, err := strconv.ParseUint(v, 0, 8)
			if err != nil || n > 63 {
				return r, fmt.Errorf("dscp %q: want 0-63", v)
			}
			r.DSCP = int(n)
		case "qp":
			q, err := parseRange(v, 1<<24-1)
			if err != nil {
				return r, fmt.Errorf("qp %q: %v", v, err)
			}
			r.QP = &q
		case "psn":
			q, err := parseRange(v, 1<<24-1)
			if err != nil {
				return r, fmt.Errorf("psn %q: %v", v, err)
			}
			r.PSN = &q
		case "class":
			for _, n := range strings.Split(v, ",") {
				c, ok := classNamed(n)
				if !ok {
					return r, fmt.Errorf("class %q: want data, %s", n, strings.Join(classNames[:], ", "))
				}
				r.Classes |= c
			}
		case "every":
			if r.Every, err = positive(w, v); err != nil {
				return r, err
			}
		case "probability":
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || !(p > 0 && p <= 1) {
				return r, fmt.Errorf("probability %q: want a number in (0, 1]", v)
			}
			r.Prob = p
		case "action":
			if r.Action != 0 {
				return r, fmt.Errorf("action %s: the rule has action %s", v, r.Action)
			}
			a, ok := actionNamed(v)
			if !ok {
				return r, fmt.Errorf("action %q: want %s", v, strings.Join(actionNames[1:], ", "))
			}
			r.Action = a
			if i, err = r.actionArgs(words, i); err != nil {
				return r, err
			}
		case "burst":
			if r.Burst, err = positive(w, v); err != nil {
				return r, err
			}
		case "count":
			if r.Count, err = positive(w, v); err != nil {
				return r, err
			}
		case "for":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return r, fmt.Errorf("for %q: want a duration such as 300ms or 5m", v)
			}
			r.For = d
		case "seed":
			if r.Seed, err = strconv.ParseUint(v, 0, 64); err != nil {
				return r, fmt.Errorf("seed %q: want an unsigned integer", v)
			}
		default:
			return r, fmt.Errorf("unknown word %q (%s)", w, Syntax)
		}
	}
	if r.Action == 0 {
		return r, fmt.Errorf("no action: %s", Syntax)
	}
	// "every 1" and "burst 1" are what no word says: one form for each rule.
	if r.Every == 1 {
		r.Every = 0
	}
	if r.Burst == 1 {
		r.Burst = 0
	}
	return r, nil
}

// actionArgs reads the action's own arguments after words[i], its name,
// and returns the index of the last word it read.
func (r *Rule) actionArgs(words []string, i int) (int, error) {
	arg := func(what string) (string, error) {
		if i+1 >= len(words) {
			return "", fmt.Errorf("action %s needs %s", r.Action, what)
		}
		i++
		return words[i], nil
	}
	switch r.Action {
	case ActDelay:
		v, err := arg("a duration, e.g. delay 200us")
		if err != nil {
			return i, err
		}
		if r.Delay, err = time.ParseDuration(v); err != nil || r.Delay <= 0 || r.Delay > MaxHold {
			return i, fmt.Errorf("delay %q: want a duration above 0 and up to %s", v, MaxHold)
		}
		if i+2 < len(words) && words[i+1] == "jitter" {
			v := words[i+2]
			i += 2
			if r.Jitter, err = time.ParseDuration(v); err != nil || r.Jitter < 0 || r.Delay+r.Jitter > MaxHold {
				return i, fmt.Errorf("jitter %q: want a duration, with the delay up to %s", v, MaxHold)
			}
		}
	case ActReorder:
		v, err := arg("a depth, e.g. reorder 3")
		if err != nil {
			return i, err
		}
		n, err := strconv.ParseUint(v, 0, 16)
		if err != nil || n == 0 {
			return i, fmt.Errorf("reorder %q: want the number of later packets (1-65535) to let by", v)
		}
		r.Depth = uint32(n)
	case ActRateLimit:
		v, err := arg("packets per second, e.g. rate_limit 1000")
		if err != nil {
			return i, err
		}
		if r.Rate, err = positive("rate_limit", v); err != nil {
			return i, err
		}
	}
	return i, nil
}

func positive(what, v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 0, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s %q: want a whole number above 0", what, v)
	}
	return n, nil
}

func parsePrefix(v string) (netip.Prefix, error) {
	if !strings.Contains(v, "/") {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(v)
	return p.Masked(), err
}

func parseRange(v string, max uint64) (Range, error) {
	lo, hi, isRange := strings.Cut(v, "-")
	a, err := strconv.ParseUint(lo, 0, 32)
	if err != nil || a > max {
		return Range{}, fmt.Errorf("want a number up to %d, or a range n-m", max)
	}
	b := a
	if isRange {
		if b, err = strconv.ParseUint(hi, 0, 32); err != nil || b > max || b < a {
			return Range{}, fmt.Errorf("want a range n-m with n <= m <= %d", max)
		}
	}
	return Range{uint32(a), uint32(b)}, nil
}

func classNamed(n string) (Class, bool) {
	if n == "data" {
		return ClassData, true
	}
	for i, c := range classNames {
		if c == n {
			return 1 << i, true
		}
	}
	return 0, false
}

func actionNamed(n string) (Action, bool) {
	for i, a := range actionNames {
		if a == n && i != 0 {
			return Action(i), true
		}
	}
	return 0, false
}

// probThreshold turns a probability into a threshold for 64-bit random
// numbers: below it, a packet is selected.
func probThreshold(p float64) uint64 {
	if p >= 1 {
		return math.MaxUint64
	}
	return uint64(p * (1 << 64))
}
