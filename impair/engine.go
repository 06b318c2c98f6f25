package impair

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"

	"roce-fwd/internal/cacheline"
	"roce-fwd/qos"
	"roce-fwd/roce"
)

// Set is a compiled list of rules, read-only once made: every worker
// shares it and keeps its own State.
type Set struct {
	rules []compiled
	// The rules a packet can match at all, as bits (rule i is bit i), by
	// the low bits of its QP and by its class: most packets meet no rule
	// after two loads and an AND, however many rules there are.
	byQP    [qpBuckets]uint64
	byClass [numClasses]uint64
}

// MaxRules is how many rules a set holds.
const MaxRules = 64

// qpBuckets is how many groups of QPs the prefilter tells apart.
const qpBuckets = 64

// match is what the data path tests of a rule first, in 32 bytes: a
// packet no rule takes costs a few compares per rule, in one line per two
// rules. A range's span is Hi-Lo, so one unsigned compare tests both ends;
// "any" is the whole range.
type match struct {
	qpLo, qpSpan   uint32
	psnLo, psnSpan uint32
	classes        Class // every class when the rule names none
	port           int16 // -1: any
	dir            Dir
	tc             int8 // -1: any
	dscp           int8 // -1: any
	slow           bool // addresses or ECN/payload conditions: see compiled.matches
	_              [14]byte
}

// compiled is a rule in the form the data path tests.
type compiled struct {
	Rule
	line          string // Rule.String(): a rule carries its state only to itself
	m             match
	src, dst      prefix
	prob          uint64 // probThreshold(Prob); 0: always
	delay, jitter int64  // ns
	forNS         int64
	needECT       bool // set_ce: only ECT packets are eligible
	needECN       bool // clear_ecn: only packets with an ECN codepoint
	needPayload   bool // corrupt_payload: only packets with a payload
	seed          uint64
	ratePerWorker int64 // packets per second, this worker's share
	bucket        int64 // tokens (packets x 1e9) a worker's bucket holds
}

// prefix is an address prefix as words: IPv4 in the low 32 bits of w[1].
type prefix struct {
	set  bool
	v6   bool
	w, m [2]uint64
}

func compilePrefix(p netip.Prefix) prefix {
	if !p.IsValid() {
		return prefix{}
	}
	a := p.Addr()
	if a.Is4() {
		v := binary.BigEndian.Uint32(a.AsSlice())
		mask := uint64(^uint32(0) << (32 - p.Bits()))
		if p.Bits() == 0 {
			mask = 0
		}
		return prefix{set: true, w: [2]uint64{0, uint64(v) & mask}, m: [2]uint64{0, mask}}
	}
	b := a.As16()
	var m [2]uint64
	for i := 0; i < p.Bits(); i++ {
		m[i/64] |= 1 << (63 - i%64)
	}
	w := [2]uint64{binary.BigEndian.Uint64(b[:8]) & m[0], binary.BigEndian.Uint64(b[8:]) & m[1]}
	return prefix{set: true, v6: true, w: w, m: m}
}

// matches reports whether the address at ip (4 or 16 bytes) is in p.
func (p *prefix) matches(ip []byte, v6 bool) bool {
	if !p.set {
		return true
	}
	if v6 != p.v6 {
		return false
	}
	if !v6 {
		return uint64(binary.BigEndian.Uint32(ip))&p.m[1] == p.w[1]
	}
	return binary.BigEndian.Uint64(ip)&p.m[0] == p.w[0] && binary.BigEndian.Uint64(ip[8:])&p.m[1] == p.w[1]
}

// Compile makes a Set of rules (at most MaxRules) for workers workers.
// seed is the default of rules without their own.
func Compile(rules []Rule, seed uint64, workers int) (*Set, error) {
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%d impairment rules: at most %d", len(rules), MaxRules)
	}
	s := &Set{rules: make([]compiled, len(rules))}
	workers = max(workers, 1)
	for i, r := range rules {
		c := compiled{Rule: r, line: r.String(), src: compilePrefix(r.Src), dst: compilePrefix(r.Dst),
			delay: r.Delay.Nanoseconds(), jitter: r.Jitter.Nanoseconds(), forNS: r.For.Nanoseconds(),
			needECT: r.Action == ActSetCE, needECN: r.Action == ActClearECN, needPayload: r.Action == ActCorruptPayload,
			seed: r.Seed}
		if c.seed == 0 {
			c.seed = seed
		}
		c.m = match{qpSpan: ^uint32(0), psnSpan: ^uint32(0), classes: ^Class(0), port: int16(r.Port), dir: r.Dir, tc: int8(r.TC), dscp: int8(r.DSCP),
			slow: c.src.set || c.dst.set || c.needECT || c.needECN || c.needPayload}
		if r.QP != nil {
			c.m.qpLo, c.m.qpSpan = r.QP.Lo, r.QP.Hi-r.QP.Lo
		}
		if r.PSN != nil {
			c.m.psnLo, c.m.psnSpan = r.PSN.Lo, r.PSN.Hi-r.PSN.Lo
		}
		if r.Classes != 0 {
			c.m.classes = r.Classes
		}
		if r.Prob > 0 {
			c.prob = probThreshold(r.Prob)
		}
		if r.Action == ActRateLimit {
			// Each worker polices its share; together they hold the rate.
			c.ratePerWorker = max(int64(r.Rate)/int64(workers), 1)
			// A millisecond's worth of packets, at least one, may pass at once.
			c.bucket = max(c.ratePerWorker/1000, 1) * 1e9
		}
		s.rules[i] = c
		bit := uint64(1) << i
		for q := range s.byQP {
			if r.QP == nil || r.QP.Hi-r.QP.Lo >= qpBuckets-1 || (uint32(q)-r.QP.Lo)&(qpBuckets-1) <= r.QP.Hi-r.QP.Lo {
				s.byQP[q] |= bit
			}
		}
		for k := range s.byClass {
			if c.m.classes&(1<<k) != 0 {
				s.byClass[k] |= bit
			}
		}
	}
	return s, nil
}

// Rules returns the rules the set was compiled from.
func (s *Set) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i := range s.rules {
		out[i] = s.rules[i].Rule
	}
	return out
}

// ID is the ID of rule i.
func (s *Set) ID(i int32) int { return s.rules[i].ID }

// Len is the number of rules.
func (s *Set) Len() int { return len(s.rules) }

// state is one rule's state on one worker.
type state struct {
	matched uint64   // packets the rule's match took (eligible for its action)
	acted   uint64   // packets it acted on
	failed  uint64   // of those, actions the pipeline could not carry out
	n       uint64   // matches to go until Every selects one
	left    uint64   // actions left in the current burst
	rng     qos.Rand // the rule's random stream on this worker
	tokens  int64    // rate_limit: packets x 1e9
	last    int64    // rate_limit: when tokens were last added
	start   int64    // the first match, for For (0: not yet)
}

// Counter is a rule's counters on one worker, or summed over workers.
type Counter struct {
	Matched uint64 `json:"matched"`
	Acted   uint64 `json:"acted"`
	Failed  uint64 `json:"failed,omitempty"` // duplicates not made: no mbuf, or no room to hold them
	Expired bool   `json:"expired"`
}

// Worker is one worker lcore's view of a Set: the rules and their state.
// Only its worker calls Apply.
type Worker struct {
	set  *Set
	live uint64            // the rules not expired here, as bits
	byQP [qpBuckets]uint64 // the set's byQP, less the expired rules
	m    []match           // the rules' matches
	st   []state
}

// expire takes rule i out of the worker's rules.
func (w *Worker) expire(i int32) {
	w.live &^= 1 << i
	for q := range w.byQP {
		w.byQP[q] = w.set.byQP[q] & w.live
	}
}

// NewWorker makes worker index's state for set, every rule fresh.
func NewWorker(set *Set, index int) *Worker {
	// The worker writes st and its Worker for every packet a rule matches.
	w := cacheline.New[Worker]()
	*w = Worker{set: set, m: cacheline.Alone[match](len(set.rules)), st: cacheline.Alone[state](len(set.rules))}
	for i := range set.rules {
		c := &set.rules[i]
		w.m[i] = c.m
		w.live |= 1 << i
		w.st[i] = state{rng: qos.NewRand(c.seed ^ uint64(c.ID)<<32 ^ uint64(index)*0x9e3779b97f4a7c15),
			tokens: c.bucket, n: max(c.Every, 1)}
	}
	w.byQP = set.byQP
	return w
}

// Carry takes over from old (the worker's previous rules, or nil) the
// state of each rule with the same ID and line: its counters, its place
// in its Every/burst/rate cycles and its random stream. It allocates
// nothing, so the worker itself can run it when it swaps the rules.
func (w *Worker) Carry(old *Worker) {
	if old == nil {
		return
	}
	for i := range w.set.rules {
		if j := old.find(&w.set.rules[i]); j >= 0 {
			w.st[i] = old.st[j]
			if old.live&(1<<j) == 0 {
				w.expire(int32(i))
			}
		}
	}
}

func (w *Worker) find(c *compiled) int {
	for i := range w.set.rules {
		if o := &w.set.rules[i]; o.ID == c.ID && o.line == c.line {
			return i
		}
	}
	return -1
}

// Failed counts an action of rule i (the Verdict's Rule less one) that
// the caller could not carry out.
func (w *Worker) Failed(i int32) { w.st[i].failed++ }

// Set is the rule set the worker applies.
func (w *Worker) Set() *Set { return w.set }

// Counters copies the worker's counters into out (len Set().Len()).
func (w *Worker) Counters(out []Counter) {
	for i := range w.st {
		out[i] = Counter{Matched: w.st[i].matched, Acted: w.st[i].acted, Failed: w.st[i].failed, Expired: w.live&(1<<i) == 0}
	}
}

// Verdict is what the rules decided for a packet.
type Verdict struct {
	// Act is ActDrop or ActRateLimit (drop it), ActDelay or ActReorder
	// (hold it), ActDuplicate (forward it and a copy), or 0: forward it,
	// perhaps changed by the rule in Rule.
	Act Action
	// Rule is the index plus one of the rule that decided Act, or of the
	// last rule that changed the packet; 0: none acted.
	Rule int32
	// Until is when a held packet leaves: unix ns for a delay; for a
	// reorder, how many later packets to the same port go first.
	Until uint64
}

// Apply runs the rules, in order, over one classified packet received on
// rxPort and bound for txPort at now (unix ns). Rules that change the
// packet (set_ce, clear_ecn, corrupt_*) change frame and r, and the next
// rules see it changed; a rule that drops or holds the packet ends the
// evaluation. Only well-formed RoCEv2 packets (and ones with a bad ICRC)
// are candidates.
func (w *Worker) Apply(rxPort, txPort uint16, frame []byte, r *roce.Result, now int64) Verdict {
	// Small enough to inline into the caller's loop: a packet of a QP no
	// rule names costs a few loads.
	if w.byQP[r.DestQP&(qpBuckets-1)] == 0 {
		return Verdict{}
	}
	return w.apply(rxPort, txPort, frame, r, now)
}

func (w *Worker) apply(rxPort, txPort uint16, frame []byte, r *roce.Result, now int64) Verdict {
	if !r.RoCE || r.Err != roce.ReasonNone && r.Err != roce.ErrBadICRC {
		return Verdict{}
	}
	cls := ClassOf(r)
	acted := int32(0)
	for c := w.byQP[r.DestQP&(qpBuckets-1)] & w.set.byClass[bits.TrailingZeros16(uint16(cls))]; c != 0; c &= c - 1 {
		i := bits.TrailingZeros64(c)
		m := &w.m[i]
		if m.classes&cls == 0 || r.DestQP-m.qpLo > m.qpSpan || r.PSN-m.psnLo > m.psnSpan ||
			m.tc >= 0 && uint8(m.tc) != r.TC || m.dscp >= 0 && uint8(m.dscp) != r.DSCP || m.port >= 0 && !m.onPort(rxPort, txPort) {
			continue
		}
		if m.slow && !w.set.rules[i].matches(frame, r) {
			continue
		}
		v, ok := w.act(int32(i), frame, r, now)
		if !ok {
			continue
		}
		if v.Act != 0 {
			return v
		}
		acted = v.Rule
	}
	return Verdict{Rule: acted}
}

// onPort reports whether a rule with a port takes a packet received on rx
// and bound for tx.
func (m *match) onPort(rx, tx uint16) bool {
	p := uint16(m.port)
	switch m.dir {
	case DirRx:
		return p == rx
	case DirTx:
		return p == tx
	}
	return p == rx || p == tx
}

// act runs rule i on a packet its match took: it reports whether the rule
// acted, and what it decided.
func (w *Worker) act(i int32, frame []byte, r *roce.Result, now int64) (Verdict, bool) {
	c, st := &w.set.rules[i], &w.st[i]
	if c.forNS > 0 {
		if st.start == 0 {
			st.start = now
		} else if now-st.start >= c.forNS {
			w.expire(i)
			return Verdict{}, false
		}
	}
	st.matched++
	if !st.selects(c) || c.Action == ActRateLimit && st.conforms(c, now) {
		return Verdict{}, false
	}
	st.acted++
	if c.Count > 0 && st.acted >= c.Count {
		w.expire(i)
	}
	v := Verdict{Rule: i + 1}
	switch c.Action {
	case ActDrop, ActRateLimit, ActDuplicate:
		v.Act = c.Action
	case ActDelay:
		d := c.delay
		if c.jitter > 0 {
			d += int64(st.rng.Uint64() % uint64(c.jitter+1))
		}
		v.Act, v.Until = ActDelay, uint64(now+d)
	case ActReorder:
		v.Act, v.Until = ActReorder, uint64(c.Depth)
	case ActSetCE:
		setECN(frame, r, roce.ECNCE)
	case ActClearECN:
		setECN(frame, r, roce.ECNNotECT)
	case ActCorruptICRC:
		frame[r.ICRCOff] ^= 0xff
	case ActCorruptPayload:
		frame[r.PayloadOff] ^= 0xff
	}
	return v, true
}

// matches tests what the rule's match left out: addresses, and whether
// its action applies to the packet at all.
func (c *compiled) matches(frame []byte, r *roce.Result) bool {
	switch {
	case c.needECT && (r.ECN == roce.ECNNotECT || r.ECN == roce.ECNCE),
		c.needECN && r.ECN == roce.ECNNotECT,
		c.needPayload && r.PayloadLen == 0:
		return false
	}
	if c.src.set || c.dst.set {
		l3, v6 := int(r.L3), r.IPVersion == 6
		src, dst := l3+roce.IPv4SrcOffset, l3+roce.IPv4DstOffset
		if v6 {
			src, dst = l3+roce.IPv6SrcOffset, l3+roce.IPv6DstOffset
		}
		if !c.src.matches(frame[src:], v6) || !c.dst.matches(frame[dst:], v6) {
			return false
		}
	}
	return true
}

// selects applies Every, Probability and Burst to a matching packet.
func (st *state) selects(c *compiled) bool {
	// A burst's packets count toward Every too: bursts start every Nth
	// packet. A countdown, not a division per packet.
	if st.n--; st.n == 0 {
		st.n = max(c.Every, 1)
	} else if st.left == 0 {
		return false
	}
	if st.left > 0 {
		st.left--
		return true
	}
	if c.prob != 0 && st.rng.Uint64() >= c.prob {
		return false
	}
	if c.Burst > 1 {
		st.left = c.Burst - 1
	}
	return true
}

// conforms takes a token from the rule's bucket for a packet at now and
// reports whether there was one (the packet is within the rate).
func (st *state) conforms(c *compiled, now int64) bool {
	if st.last == 0 {
		st.last = now
	}
	if dt := now - st.last; dt > 0 {
		st.tokens = min(st.tokens+dt*c.ratePerWorker, c.bucket)
		st.last = now
	}
	if st.tokens >= 1e9 {
		st.tokens -= 1e9
		return true
	}
	return false
}

// setECN rewrites the packet's ECN codepoint (the IPv4 checksum fixed up;
// ECN is masked out of the ICRC, which stays valid).
func setECN(frame []byte, r *roce.Result, ecn uint8) {
	l3 := frame[r.L3:]
	if r.IPVersion == 4 {
		roce.IPv4(l3).SetECN(ecn)
	} else {
		roce.IPv6(l3).SetECN(ecn)
	}
	r.ECN = ecn
}
