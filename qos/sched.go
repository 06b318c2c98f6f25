package qos

import (
	"errors"
	"fmt"
	"math/bits"
)

// TCStats are one TC's counters.
type TCStats struct {
	Queue     QueueStats // DeqPackets/DeqBytes are what the TC transmitted
	WRED      WREDStats
	DropPFCWD uint64 // arrivals dropped while the watchdog (action drop) held the TC
	Flushed   uint64 // packets removed by Flush
}

type tcState struct {
	q       Queue
	wred    WRED
	shaper  TokenBucket
	deficit int64 // DWRR bytes the TC may still send this round
	quantum int64
	dropWD  uint64
	flushed uint64
}

// Scheduler is one egress port: eight TC queues with WRED-ECN, strict
// priority and DWRR (ETS) scheduling, a port shaper and optional per-TC
// shapers, honouring the PFC pause state of the port's link partner.
//
// Selection, per packet: among TCs that have packets, are not paused (or
// are paused but the watchdog overrides it) and whose own shaper has
// tokens, the highest-numbered strict TC goes first; failing that DWRR
// (Shreedhar and Varghese's deficit round robin, by bytes) picks among
// the DWRR TCs, each earning Quantum × weight bytes per round. A TC whose
// queue empties forfeits its deficit, so idle TCs give their share to the
// busy ones rather than saving it up. A paused or shaped-out TC keeps its
// deficit but earns no more until it is eligible again.
type Scheduler struct {
	tc          [NumTC]tcState
	strict      uint8 // TCs in Strict mode
	dwrr        uint8 // TCs in DWRR mode
	shaped      uint8 // TCs with a MaxRate
	blocked     uint8 // shaped TCs whose bucket is empty
	ignorePause uint8 // TCs the watchdog lets ignore PFC
	wdDrop      uint8 // TCs whose arrivals the watchdog drops
	rr          uint8 // DWRR pointer
	granted     bool  // the TC at rr has had this round's quantum
	port        TokenBucket
	rx          *PFCRx
}

var errNoRing = errors.New("qos: every TC needs a slot ring of at least one slot")

// NewScheduler builds a port from c, with rings[tc] as each TC's queue
// storage (MakeRings for Go memory). rx is the port's PFC receive state,
// nil when PFC is off. seed seeds the per-queue WRED generators.
func NewScheduler(c *Config, rings *[NumTC][]Slot, rx *PFCRx, seed uint64) (*Scheduler, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{rx: rx}
	for i := range s.tc {
		if len(rings[i]) == 0 || uint64(len(rings[i])) > 1<<32-1 {
			return nil, errNoRing
		}
		s.tc[i].q.Init(rings[i], c.TC[i].Limit)
		if err := s.tc[i].wred.Init(c.TC[i].ECN, c.TC[i].Lossless, seed+uint64(i)*0x9e3779b97f4a7c15); err != nil {
			return nil, err
		}
	}
	if err := s.configure(c, 0); err != nil {
		return nil, err
	}
	return s, nil
}

// Reconfigure applies c to a running scheduler at time now, keeping every
// queued packet and counter: scheduling modes and weights, queue limits
// (a queue above its new limit drains; nothing is dropped), WRED-ECN
// profiles (each keeping its random sequence) and the shapers, which start
// full at the new rate. c's lossless TCs must be the scheduler's: what
// is lossless decides PFC accounting of the packets already queued.
func (s *Scheduler) Reconfigure(c *Config, now int64) error {
	if err := c.Validate(); err != nil {
		return err
	}
	for i := range s.tc {
		if c.TC[i].Lossless != s.tc[i].wred.lossless {
			return fmt.Errorf("qos: TC%d would change between lossy and lossless, which needs a restart", i)
		}
	}
	// Validate covered what configure can refuse (ECN profiles, rate and
	// burst bounds): nothing below fails halfway.
	for i := range s.tc {
		t := &s.tc[i]
		t.q.limit = c.TC[i].Limit
		t.wred.Reconfigure(c.TC[i].ECN)
	}
	return s.configure(c, now)
}

// configure sets what NewScheduler and Reconfigure share: the port
// shaper, each TC's shaper, mode and quantum.
func (s *Scheduler) configure(c *Config, now int64) error {
	if err := s.port.Init(c.Rate, c.Burst, WireOverhead, now); err != nil {
		return err
	}
	quantum := int64(c.Quantum)
	if quantum == 0 {
		quantum = DefaultQuantum
	}
	s.strict, s.dwrr, s.shaped, s.blocked = 0, 0, 0, 0
	for i := range s.tc {
		tc := &c.TC[i]
		t := &s.tc[i]
		t.shaper = TokenBucket{}
		if tc.MaxRate != 0 {
			if err := t.shaper.Init(tc.MaxRate, tc.MaxBurst, WireOverhead, now); err != nil {
				return err
			}
			s.shaped |= 1 << i
		}
		bit := uint8(1) << i
		t.quantum = 0
		if tc.Mode == Strict {
			s.strict |= bit
		} else {
			s.dwrr |= bit
			t.quantum = quantum * int64(tc.Weight)
		}
	}
	return nil
}

// MakeRings allocates per-TC rings of n slots each in Go memory.
func MakeRings(n int) *[NumTC][]Slot {
	var r [NumTC][]Slot
	all := make([]Slot, n*NumTC)
	for i := range r {
		r[i] = all[i*n : (i+1)*n : (i+1)*n]
	}
	return &r
}

// Enqueue offers a packet with IP ECN field ecn (0 for non-IP) to TC tc.
// It returns the drop reason, or ReasonNone with markCE telling the
// caller to set CE on the frame (MarkCE) before it can be dequeued.
// Order: watchdog drop, then the queue's tail-drop bounds, then WRED, so
// a packet is never marked and then refused.
func (s *Scheduler) Enqueue(tc uint8, sl Slot, ecn uint8) (markCE bool, r Reason) {
	i := tc & 7
	bit := uint8(1) << i
	t := &s.tc[i]
	if s.wdDrop&bit != 0 {
		t.dropWD++
		return false, ReasonPFCWD
	}
	if r = t.q.Fits(sl.Len); r != ReasonNone {
		if r == ReasonQueueSlots {
			t.q.st.DropSlots++
		} else {
			t.q.st.DropFull++
		}
		return false, r
	}
	d := Enqueue
	if t.wred.on {
		d = t.wred.Decide(t.q.bytes, ecn)
	}
	if d == DropWRED {
		return false, ReasonWRED
	}
	t.q.push(sl)
	return d == EnqueueMarkCE, ReasonNone
}

// CutThrough counts a packet of n bytes that went straight to the wire
// through TC tc because the port was idle: as enqueued and transmitted,
// with no wait. The caller decides when that is allowed: every queue
// empty, nothing paused, no shaper, no storm (Idle says so).
func (s *Scheduler) CutThrough(tc uint8, n uint32) {
	q := &s.tc[tc&7].q
	q.st.EnqPackets++
	q.st.EnqBytes += uint64(n)
	q.st.DeqPackets++
	q.st.DeqBytes += uint64(n)
}

// Idle reports whether a packet arriving now could leave at once without
// changing any scheduling decision: no queue holds packets, there is no
// port or TC shaper, no TC is paused at now, and the watchdog holds none.
func (s *Scheduler) Idle(now int64) bool {
	if s.port.rate != 0 || s.shaped != 0 || s.wdDrop != 0 {
		return false
	}
	for i := range s.tc {
		if s.tc[i].q.n != 0 {
			return false
		}
	}
	return s.rx == nil || s.rx.PausedMask(now) == 0
}

// Dequeue fills out with up to len(out) packets to transmit at time now,
// at most budget bytes of them (0 = no byte budget; a head packet larger
// than what is left of the budget waits for the next call), and returns
// how many. It stops early when the port shaper runs dry or every
// backlogged TC is paused or shaped out.
func (s *Scheduler) Dequeue(now int64, out []Slot, budget uint64) int {
	if len(out) == 0 {
		return 0
	}
	// Read the backlog from the queues rather than tracking it, so a
	// caller touching a Queue directly cannot desynchronise the two.
	var backlog uint8
	for i := range s.tc {
		if s.tc[i].q.n != 0 {
			backlog |= 1 << i
		} else {
			s.tc[i].deficit = 0
		}
	}
	if backlog == 0 {
		return 0
	}
	portShaped := s.port.rate != 0
	if portShaped {
		s.port.Refill(now)
	}
	for m := s.shaped; m != 0; m &= m - 1 {
		i := bits.TrailingZeros8(m)
		sh := &s.tc[i].shaper
		sh.Refill(now)
		if sh.tokens > 0 {
			s.blocked &^= 1 << i
		} else {
			s.blocked |= 1 << i
		}
	}
	var paused uint8
	if s.rx != nil {
		paused = s.rx.PausedMask(now) &^ s.ignorePause
	}
	n := 0
	var sent uint64
	for n < len(out) {
		if portShaped && s.port.tokens <= 0 {
			break
		}
		elig := backlog &^ paused &^ s.blocked
		var i int
		if m := elig & s.strict; m != 0 {
			i = bits.Len8(m) - 1
		} else if m := elig & s.dwrr; m != 0 {
			if i = s.pickDWRR(m); i < 0 {
				break
			}
		} else {
			break
		}
		t := &s.tc[i]
		l := t.q.ring[t.q.head].Len
		if budget != 0 && sent+uint64(l) > budget {
			break
		}
		out[n] = t.q.pop()
		n++
		sent += uint64(l)
		t.q.st.DeqPackets++
		t.q.st.DeqBytes += uint64(l)
		bit := uint8(1) << i
		if s.dwrr&bit != 0 {
			t.deficit -= int64(l)
		}
		if t.q.n == 0 {
			backlog &^= bit
			s.idle(i)
		}
		if portShaped {
			s.port.Consume(l)
		}
		if s.shaped&bit != 0 {
			t.shaper.Consume(l)
			if t.shaper.tokens <= 0 {
				s.blocked |= bit
			}
		}
	}
	return n
}

// idle forfeits an emptied DWRR TC's deficit and, if it held the
// round-robin pointer, moves the pointer on.
func (s *Scheduler) idle(i int) {
	if s.dwrr&(1<<i) == 0 {
		return
	}
	s.tc[i].deficit = 0
	if int(s.rr) == i {
		s.rr = (s.rr + 1) & 7
		s.granted = false
	}
}

// pickDWRR returns the DWRR TC (a member of elig, all backlogged) allowed
// to send its head packet next. The pointer visits the eligible TCs in
// turn (jumping over the others with a bit rotation); each earns its
// quantum once per visit and sends while its deficit covers its head
// packet. When a whole round passes with nobody able to send (quanta
// smaller than the packets), the rounds that would pass the same way are
// skipped in one step: the result is exactly DRR's, in bounded time.
func (s *Scheduler) pickDWRR(elig uint8) int {
	visits := bits.OnesCount8(elig)
	for pass := 0; pass < 3; pass++ {
		for range visits {
			if k := uint8(bits.TrailingZeros8(bits.RotateLeft8(elig, -int(s.rr)))); k != 0 {
				s.rr = (s.rr + k) & 7
				s.granted = false
			}
			i := s.rr
			t := &s.tc[i]
			if !s.granted {
				t.deficit += t.quantum
				s.granted = true
			}
			if int64(t.q.ring[t.q.head].Len) <= t.deficit {
				return int(i)
			}
			s.rr = (i + 1) & 7
			s.granted = false
		}
		if pass == 0 {
			s.skipRounds(elig)
		}
	}
	return -1
}

// skipRounds gives every TC in elig the quanta of the k-1 rounds in which
// none of them could send, where k is the fewest rounds after which one can.
func (s *Scheduler) skipRounds(elig uint8) {
	k := int64(-1)
	for m := elig; m != 0; m &= m - 1 {
		t := &s.tc[bits.TrailingZeros8(m)]
		need := int64(t.q.ring[t.q.head].Len) - t.deficit
		r := (need + t.quantum - 1) / t.quantum
		if k < 0 || r < k {
			k = r
		}
	}
	if k <= 1 {
		return
	}
	for m := elig; m != 0; m &= m - 1 {
		t := &s.tc[bits.TrailingZeros8(m)]
		t.deficit += (k - 1) * t.quantum
	}
}

// Flush removes up to len(out) packets of TC tc into out, for the caller
// to free and count (the watchdog's drop action, a port going down), and
// returns how many. Call it until it returns 0 to empty the queue.
func (s *Scheduler) Flush(tc uint8, out []Slot) int {
	i := int(tc & 7)
	t := &s.tc[i]
	k := t.q.Drain(out)
	t.flushed += uint64(k)
	if t.q.n == 0 {
		s.idle(i)
	}
	return k
}

// Queue is TC tc's queue, for reading depths and counters. Packets go in
// and out through the Scheduler (Enqueue, Dequeue, Flush), which keeps
// WRED, DWRR and the watchdog's view consistent.
func (s *Scheduler) Queue(tc uint8) *Queue { return &s.tc[tc&7].q }

// Stats returns TC tc's counters.
func (s *Scheduler) Stats(tc uint8) TCStats {
	t := &s.tc[tc&7]
	return TCStats{Queue: t.q.st, WRED: t.wred.st, DropPFCWD: t.dropWD, Flushed: t.flushed}
}

// Backlog is what the port holds, over all TCs.
func (s *Scheduler) Backlog() (bytes uint64, packets int) {
	for i := range s.tc {
		bytes += s.tc[i].q.bytes
		packets += int(s.tc[i].q.n)
	}
	return bytes, packets
}

// PFC is the port's PFC receive state (nil when PFC is off).
func (s *Scheduler) PFC() *PFCRx { return s.rx }

// PauseOverride has bit n set while the watchdog lets TC n ignore PFC.
func (s *Scheduler) PauseOverride() uint8 { return s.ignorePause }
