package flowrule

import (
	"math/bits"

	"roce-fwd/internal/cacheline"
	"roce-fwd/roce"
)

// DropReason says why Apply dropped a packet.
type DropReason uint8

const (
	DropNone  DropReason = iota
	DropRule             // a drop action
	DropMeter            // the meter's policy for the packet's colour
)

// Verdict is what Apply decided for a packet.
type Verdict struct {
	Drop   bool
	Reason DropReason
	Color  Color // ColorNone when no meter ran
	// Mark is the value of a mark action or a colour's mark policy.
	HasMark bool
	Mark    uint32
	Flag    bool
	// DSCPSet: the DSCP was rewritten to DSCP (ECN kept).
	DSCPSet bool
	DSCP    uint8
	// NotInSoftware has bit 1<<ActionType set for each action of the rule
	// that only means something on the NIC (queue, rss); the caller counts
	// them.
	NotInSoftware uint32
}

// Counter is one rule's hits on one lcore, with the meter's colours when
// the rule has a meter.
type Counter struct {
	Packets, Bytes     uint64
	Green, Yellow, Red uint64 // packets
}

// meterState is a meter's buckets in nano-bytes (bytes x 1e9): one byte
// per second of rate adds one nano-byte per nanosecond, exactly.
type meterState struct {
	c, e uint64 // srTCM: committed and excess; trTCM: committed and peak
	last int64
}

// State is one lcore's counters and meter buckets for a Table. It is not
// safe for concurrent use; each lcore has its own.
type State struct {
	t        *Table
	counters []Counter
	meters   []meterState
	params   []meterParams // the table's meters, or this lcore's share of them
}

const nano = 1_000_000_000

func newMeterParams(m *Meter) meterParams {
	return meterParams{
		alg: m.Algorithm, cir: m.CIR, pir: m.PIR,
		cbs: m.CBS * nano, ebs: m.EBS * nano, pbs: m.PBS * nano,
		green: m.Green, yellow: m.Yellow, red: m.Red,
	}
}

// NewState returns a State for t with zero counters and full buckets.
func NewState(t *Table) *State { return NewStateShare(t, 1) }

// NewStateShare is NewState for one of n lcores that run t on the same
// traffic: each meter gets 1/n of every rate and burst, so that the n
// lcores together hold the configured rate as one NIC meter would (with
// the traffic spread evenly over them, as RSS does).
func NewStateShare(t *Table, n int) *State {
	n = max(n, 1)
	// A worker writes the counters and meters for every packet a rule
	// matches.
	s := cacheline.New[State]()
	*s = State{t: t, counters: cacheline.Alone[Counter](len(t.cr)), meters: cacheline.Alone[meterState](len(t.meters)),
		params: append(cacheline.Alone[meterParams](len(t.meters))[:0], t.meters...)}
	for i := range s.params {
		p := &s.params[i]
		p.cir, p.pir = p.cir/uint64(n), p.pir/uint64(n)
		p.cbs, p.ebs, p.pbs = p.cbs/uint64(n), p.ebs/uint64(n), p.pbs/uint64(n)
	}
	for i := range s.meters {
		p := &s.params[i]
		s.meters[i].c = p.cbs
		if p.alg == SrTCM {
			s.meters[i].e = p.ebs
		} else {
			s.meters[i].e = p.pbs
		}
	}
	return s
}

// Counters returns rule idx's packets and bytes on this lcore.
func (s *State) Counters(idx int) (packets, bytes uint64) {
	c := &s.counters[idx]
	return c.Packets, c.Bytes
}

// Counter returns rule idx's counters on this lcore.
func (s *State) Counter(idx int) Counter { return s.counters[idx] }

// Snapshot copies the counters into dst (grown as needed). Like every
// State method it belongs to the owning lcore, or to anyone once the lcore
// is quiescent.
func (s *State) Snapshot(dst []Counter) []Counter {
	return append(dst[:0], s.counters...)
}

// AddCounters adds src into dst, element by element, growing dst to
// len(src): it merges the snapshots of several lcores.
func AddCounters(dst, src []Counter) []Counter {
	for len(dst) < len(src) {
		dst = append(dst, Counter{})
	}
	for i := range src {
		dst[i].Add(&src[i])
	}
	return dst
}

// Add adds o's counts to c.
func (c *Counter) Add(o *Counter) {
	c.Packets += o.Packets
	c.Bytes += o.Bytes
	c.Green += o.Green
	c.Yellow += o.Yellow
	c.Red += o.Red
}

// Merge sums the counters of quiescent States of one table.
func Merge(states ...*State) []Counter {
	var out []Counter
	for _, s := range states {
		out = AddCounters(out, s.counters)
	}
	return out
}

// Carry takes over, for each rule i of s's table with from[i] >= 0, the
// counters of rule from[i] from old, so that a rule surviving a
// recompilation keeps counting from where it was. Its meter's buckets are
// carried too when both meters have the same parameters; a changed meter
// starts full, as a new one would. Indices outside either table are
// skipped. It does not allocate; old must be quiescent or owned by the
// caller's lcore, like any State.
func (s *State) Carry(old *State, from []int) {
	if old == nil {
		return
	}
	for i := range min(len(from), len(s.counters)) {
		j := from[i]
		if j < 0 || j >= len(old.counters) {
			continue
		}
		s.counters[i] = old.counters[j]
		mi, mj := s.t.meterOf(i), old.t.meterOf(j)
		if mi >= 0 && mj >= 0 && s.params[mi] == old.params[mj] {
			s.meters[mi] = old.meters[mj]
		}
	}
}

// meterOf is the index of rule idx's meter in t.meters, or -1.
func (t *Table) meterOf(idx int) int32 {
	for _, a := range t.cr[idx].acts {
		if a.typ == ActMeter {
			return a.meter
		}
	}
	return -1
}

// Apply runs rule idx's actions on a packet: frame with its Classify
// result r, pktLen bytes for counters and meters, at now nanoseconds on a
// monotonic clock. It counts the hit, rewrites the DSCP in frame (and
// r.DSCP) for set_ipv4_dscp/set_ipv6_dscp, runs the meter, and stops at a
// drop. idx < 0 gives the zero Verdict. Only this rule's actions run; see
// ApplyPath for rules reached through jumps. st must come from
// NewState(t).
func (t *Table) Apply(idx int, frame []byte, r *roce.Result, st *State, now int64, pktLen int) Verdict {
	var v Verdict
	if idx >= 0 {
		t.apply(idx, frame, r, st, now, pktLen, &v)
	}
	return v
}

// ApplyPath runs the actions of every rule of p in order, as the NIC does
// for the rules a packet jumps through, and stops at a drop.
func (t *Table) ApplyPath(p *Path, frame []byte, r *roce.Result, st *State, now int64, pktLen int) Verdict {
	var v Verdict
	for i := 0; i < p.N && i < MaxPath; i++ {
		if t.apply(int(p.Rules[i]), frame, r, st, now, pktLen, &v) {
			break
		}
	}
	return v
}

// apply reports whether the packet was dropped.
func (t *Table) apply(idx int, frame []byte, r *roce.Result, st *State, now int64, pktLen int, v *Verdict) bool {
	if t.cr[idx].offloaded {
		return false
	}
	c := &st.counters[idx]
	c.Packets++
	c.Bytes += uint64(pktLen)
	acts := t.cr[idx].acts
	for i := range acts {
		a := &acts[i]
		switch a.typ {
		case ActDrop:
			v.Drop, v.Reason = true, DropRule
			return true
		case ActQueue, ActRSS:
			v.NotInSoftware |= 1 << a.typ
		case ActMark:
			v.HasMark, v.Mark = true, a.id
		case ActFlag:
			v.Flag = true
		case ActSetIPv4DSCP:
			if l3 := int(r.L3); r.IPVersion == 4 && l3 != 0 && l3+roce.IPv4MinHeaderLen <= len(frame) {
				roce.IPv4(frame[l3:]).SetDSCP(a.dscp)
				r.DSCP = a.dscp
				v.DSCPSet, v.DSCP = true, a.dscp
			}
		case ActSetIPv6DSCP:
			if l3 := int(r.L3); r.IPVersion == 6 && l3 != 0 && l3+roce.IPv6HeaderLen <= len(frame) {
				roce.IPv6(frame[l3:]).SetDSCP(a.dscp)
				r.DSCP = a.dscp
				v.DSCPSet, v.DSCP = true, a.dscp
			}
		case ActMeter:
			p := &st.params[a.meter]
			col := st.meters[a.meter].color(p, now, uint64(pktLen)*nano)
			v.Color = col
			var ca ColorAction
			switch col {
			case Green:
				c.Green++
				ca = p.green
			case Yellow:
				c.Yellow++
				ca = p.yellow
			default:
				c.Red++
				ca = p.red
			}
			switch ca.Kind {
			case ColorDrop:
				v.Drop, v.Reason = true, DropMeter
				return true
			case ColorMark:
				v.HasMark, v.Mark = true, ca.Mark
			}
		}
	}
	return false
}

// addSat returns min(b+add, max) for b <= max.
func addSat(b, add, max uint64) (sum, over uint64) {
	if add > max-b {
		return max, add - (max - b)
	}
	return b + add, 0
}

// color refills the buckets for the time since the last packet and
// colours a packet of n nano-bytes (colour-blind mode).
func (m *meterState) color(p *meterParams, now int64, n uint64) Color {
	if now > m.last {
		dt := uint64(now - m.last)
		m.last = now
		if p.alg == SrTCM {
			// RFC 2697: tokens go to C, and to E once C is full.
			var over uint64
			m.c, over = addSat(m.c, mulSat(p.cir, dt), p.cbs)
			m.e, _ = addSat(m.e, over, p.ebs)
		} else {
			m.c, _ = addSat(m.c, mulSat(p.cir, dt), p.cbs)
			m.e, _ = addSat(m.e, mulSat(p.pir, dt), p.pbs)
		}
	}
	if p.alg == SrTCM {
		switch {
		case m.c >= n:
			m.c -= n
			return Green
		case m.e >= n:
			m.e -= n
			return Yellow
		}
		return Red
	}
	// RFC 2698: red unless the peak bucket holds the packet.
	switch {
	case m.e < n:
		return Red
	case m.c < n:
		m.e -= n
		return Yellow
	}
	m.e -= n
	m.c -= n
	return Green
}

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0)
	}
	return lo
}
