package qos

import (
	"errors"
	"fmt"
	"math/bits"

	"roce-fwd/roce"
)

// NumTC is the number of traffic classes per port, and of PFC priorities.
const NumTC = 8

// DefaultQuanta is the pause time an XOFF asks for when none is
// configured: the maximum, as switch ASICs send, refreshed well before it
// runs out so that a lost XON costs at most one pause time.
const DefaultQuanta = 0xFFFF

// PauseNanos is how long quanta pause quanta last on a link of speed bits
// per second: quanta × 512 bit times, rounded up so a pause never ends
// early (0xFFFF at 25 Gbps is 1342157 ns).
func PauseNanos(quanta uint16, speed uint64) int64 {
	if speed == 0 {
		return 0
	}
	bitsNs := uint64(quanta) * 512 * 1e9
	return int64((bitsNs + speed - 1) / speed)
}

// IdentityPrioToTC maps PFC priority n to TC n, as SONiC's AZURE
// MAP_PFC_PRIORITY_TO_QUEUE and the mlx5 default do.
var IdentityPrioToTC = [NumTC]uint8{0, 1, 2, 3, 4, 5, 6, 7}

// PFCRxStats count received flow-control frames and the pauses they made.
type PFCRxStats struct {
	Frames [NumTC]uint64 // PFC frames with the priority's class-enable bit set
	XOFF   [NumTC]uint64 // of those, quanta > 0
	XON    [NumTC]uint64 // of those, quanta 0
	Pause  uint64        // 802.3x PAUSE frames (they pause every priority)
	// Pauses counts each priority's ended pauses by duration: bucket i
	// holds those up to PauseBuckets[i] (the last, longer ones); PauseNs
	// is their total time.
	Pauses  [NumTC][len(PauseBuckets) + 1]uint64
	PauseNs [NumTC]int64
}

// PauseBuckets are the upper bounds, in ns, of the pause-duration
// histogram: a decade each from 1 µs to 1 s.
var PauseBuckets = [...]int64{1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// PauseEpisode is one pause of a priority: from the XOFF that began it to
// the XON that ended it, or to when its last XOFF's quanta ran out.
type PauseEpisode struct {
	Prio   uint8 `json:"priority"`
	TC     uint8 `json:"tc"`      // the traffic class (egress queue) it held
	From   int64 `json:"from_ns"` // unix ns
	To     int64 `json:"to_ns"`   // the end, or now while it lasts
	Frames int   `json:"xoff_frames"`
	XON    bool  `json:"ended_by_xon"`
	Open   bool  `json:"ongoing"`
}

// historyLen is how many ended pauses a PFCRx remembers.
const historyLen = 256

// PFCRx tracks the pause state a port's link partner imposes on it with
// 802.1Qbb PFC and 802.3x PAUSE frames. A new frame restarts a priority's
// timer at its quanta (it does not extend it); quanta 0 resumes at once.
type PFCRx struct {
	speed    uint64
	prioToTC [NumTC]uint8
	until    [NumTC]int64 // per priority: paused while now < until
	from     [NumTC]int64 // start of the open pause interval
	open     uint8        // priorities with an interval not yet added to pausedNs
	pausedNs [NumTC]int64
	tcUntil  [NumTC]int64 // per TC: latest until of its priorities
	seen     uint8        // priorities that ever received a frame
	st       PFCRxStats
	frames   [NumTC]int // XOFF frames of the open pause
	hist     [historyLen]PauseEpisode
	histN    uint64 // pauses ever recorded; the last historyLen are in hist
}

var errSpeed = errors.New("qos: port speed must be set (bits per second) for PFC timing")

// NewPFCRx returns the receive state for a port of speed bits/s.
// prioToTC maps priorities to TCs; nil means IdentityPrioToTC.
func NewPFCRx(speed uint64, prioToTC *[NumTC]uint8) (*PFCRx, error) {
	r := new(PFCRx)
	if err := r.Init(speed, prioToTC); err != nil {
		return nil, err
	}
	return r, nil
}

// Init resets r to no pause, counters cleared.
func (r *PFCRx) Init(speed uint64, prioToTC *[NumTC]uint8) error {
	if speed == 0 {
		return errSpeed
	}
	m := IdentityPrioToTC
	if prioToTC != nil {
		m = *prioToTC
	}
	for p, tc := range m {
		if tc >= NumTC {
			return fmt.Errorf("qos: priority %d maps to TC %d; TCs are 0-7", p, tc)
		}
	}
	*r = PFCRx{speed: speed, prioToTC: m}
	return nil
}

// Receive consumes frame if it is a PFC or PAUSE frame and reports
// whether it was one. Such frames are for the MAC: callers free them
// instead of forwarding.
func (r *PFCRx) Receive(now int64, frame []byte) bool {
	if ce, q, ok := roce.ParsePFC(frame); ok {
		r.ReceivePFC(now, ce, &q)
		return true
	}
	if q, ok := roce.ParsePause(frame); ok {
		r.ReceivePause(now, q)
		return true
	}
	return false
}

// ReceivePFC applies a decoded PFC frame: each priority in classEnable
// pauses for quanta[p] × 512 bit times from now, or resumes if 0.
func (r *PFCRx) ReceivePFC(now int64, classEnable uint8, quanta *[NumTC]uint16) {
	for m := classEnable; m != 0; m &= m - 1 {
		p := bits.TrailingZeros8(m)
		r.st.Frames[p]++
		if quanta[p] == 0 {
			r.st.XON[p]++
		} else {
			r.st.XOFF[p]++
		}
		r.apply(now, p, quanta[p])
	}
	r.retally()
}

// ReceivePause applies an 802.3x PAUSE frame, which pauses the whole
// link: every priority.
func (r *PFCRx) ReceivePause(now int64, quanta uint16) {
	r.st.Pause++
	for p := range NumTC {
		r.apply(now, p, quanta)
	}
	r.retally()
}

func (r *PFCRx) apply(now int64, p int, quanta uint16) {
	until := now
	if quanta != 0 {
		until = now + PauseNanos(quanta, r.speed)
	}
	r.setUntil(now, p, until)
}

// Mirror applies a frame another receiver already decoded: priority prio
// was named by a frame at time at and is paused until until (until <= at
// is an XON). A port whose frames arrive on one worker lcore and whose
// egress queues live on others keeps one PFCRx per egress and mirrors the
// receiving one's decisions into them. Frame counters are not touched.
func (r *PFCRx) Mirror(at int64, prio uint8, until int64) {
	r.setUntil(at, int(prio&7), max(until, at))
	r.retally()
}

// Until is when priority prio's pause ends (at or before the last frame
// time when it is not paused).
func (r *PFCRx) Until(prio uint8) int64 { return r.until[prio&7] }

func (r *PFCRx) setUntil(now int64, p int, until int64) {
	bit := uint8(1) << p
	r.seen |= bit
	if r.open&bit != 0 && r.until[p] <= now {
		// The previous pause ran out on its own.
		r.end(p, r.until[p], false)
	}
	if until <= now {
		if r.open&bit != 0 {
			r.end(p, now, true)
			r.until[p] = now
		}
		// An XON while not paused changes nothing: the pause ended
		// earlier, and ResumedAt keeps saying when.
		return
	}
	if r.open&bit == 0 {
		r.from[p] = now
		r.open |= bit
		r.frames[p] = 0
	}
	r.frames[p]++
	r.until[p] = until
}

// end closes priority p's open pause at to: counted, and remembered.
func (r *PFCRx) end(p int, to int64, xon bool) {
	d := to - r.from[p]
	r.pausedNs[p] += d
	r.open &^= 1 << p
	b := 0
	for b < len(PauseBuckets) && d > PauseBuckets[b] {
		b++
	}
	r.st.Pauses[p][b]++
	r.st.PauseNs[p] += d
	r.hist[r.histN%historyLen] = PauseEpisode{Prio: uint8(p), TC: r.prioToTC[p], From: r.from[p], To: to, Frames: r.frames[p], XON: xon}
	r.histN++
}

// Settle ends, at their end, the pauses that ran out before now with no
// frame since: they are counted and remembered without waiting for the
// priority's next frame.
func (r *PFCRx) Settle(now int64) {
	for m := r.open; m != 0; m &= m - 1 {
		if p := bits.TrailingZeros8(m); r.until[p] <= now {
			r.end(p, r.until[p], false)
		}
	}
}

// History appends to out the last ended pauses (up to 256), oldest first,
// then the pauses still open at now (ongoing, or run out since the last
// frame: ended, though not yet counted).
func (r *PFCRx) History(now int64, out []PauseEpisode) []PauseEpisode {
	first := uint64(0)
	if r.histN > historyLen {
		first = r.histN - historyLen
	}
	for i := first; i < r.histN; i++ {
		out = append(out, r.hist[i%historyLen])
	}
	for m := r.open; m != 0; m &= m - 1 {
		p := bits.TrailingZeros8(m)
		e := PauseEpisode{Prio: uint8(p), TC: r.prioToTC[p], From: r.from[p], To: min(now, r.until[p]), Frames: r.frames[p], Open: r.until[p] > now}
		out = append(out, e)
	}
	return out
}

// HistoryCap is the room History needs in out.
const HistoryCap = historyLen + NumTC

// retally recomputes the per-TC view; frames are rare, so 8 steps each
// keep Paused, the per-packet query, to one comparison.
func (r *PFCRx) retally() {
	var u [NumTC]int64
	for p, tc := range r.prioToTC {
		u[tc] = max(u[tc], r.until[p])
	}
	r.tcUntil = u
}

// Paused reports whether TC tc may not transmit at time now.
func (r *PFCRx) Paused(tc uint8, now int64) bool {
	return r.seen != 0 && r.tcUntil[tc&7] > now
}

// PausedMask has bit n set when TC n is paused at now.
func (r *PFCRx) PausedMask(now int64) uint8 {
	if r.seen == 0 {
		return 0
	}
	var m uint8
	for tc, u := range r.tcUntil {
		if u > now {
			m |= 1 << tc
		}
	}
	return m
}

// PausedNanos is the total time priority prio has spent paused up to now.
func (r *PFCRx) PausedNanos(prio uint8, now int64) int64 {
	p := prio & 7
	t := r.pausedNs[p]
	if r.open&(1<<p) != 0 {
		t += min(now, r.until[p]) - r.from[p]
	}
	return t
}

// tcPausedNanos is PausedNanos of TC tc: the most any of its priorities
// has been paused (exact under the identity map).
func (r *PFCRx) tcPausedNanos(tc uint8, now int64) int64 {
	var t int64
	for p, c := range r.prioToTC {
		if c == tc {
			t = max(t, r.PausedNanos(uint8(p), now))
		}
	}
	return t
}

// PausedSince reports whether TC tc is paused at now and, if so, since
// when without a break: the start of the earliest pause still running of
// its priorities (a refresh before the quanta run out continues a pause).
func (r *PFCRx) PausedSince(tc uint8, now int64) (since int64, paused bool) {
	for p, c := range r.prioToTC {
		if c != tc&7 || r.until[p] <= now || r.open&(1<<p) == 0 {
			continue
		}
		if !paused || r.from[p] < since {
			since, paused = r.from[p], true
		}
	}
	return since, paused
}

// ResumedAt is when TC tc's last pause ended (at or before now while it
// is not paused; 0 if it was never paused).
func (r *PFCRx) ResumedAt(tc uint8) int64 { return r.tcUntil[tc&7] }

// Stats returns the counters.
func (r *PFCRx) Stats() PFCRxStats { return r.st }

// PFCFrame is a PFC frame to send: build it with Build (roce.BuildPFC).
// Priorities in ClassEnable with Quanta 0 are XON.
type PFCFrame struct {
	ClassEnable uint8
	Quanta      [NumTC]uint16
}

// Build writes the 60-byte frame (no FCS) from source MAC src into buf.
func (f *PFCFrame) Build(buf []byte, src roce.MAC) (int, error) {
	return roce.BuildPFC(buf, src, f.ClassEnable, f.Quanta)
}

// PFCTxConfig configures PFC generation for one ingress port.
type PFCTxConfig struct {
	Enable uint8  // priorities with PFC (the lossless ones), bit n = priority n
	Xoff   uint64 // bytes held in egress queues at which XOFF is sent
	Xon    uint64 // bytes at or below which XON is sent; < Xoff
	Quanta uint16 // XOFF pause time; 0 = DefaultQuanta
	Speed  uint64 // bits/s of this port's link, which the frames go out of
}

// PFCTxStats count generated flow-control messages per priority. A frame
// can carry several priorities; Frames counts frames.
type PFCTxStats struct {
	XOFF    [NumTC]uint64 // XOFF sent, refreshes included
	Refresh [NumTC]uint64 // of those, refreshes
	XON     [NumTC]uint64
	Frames  uint64
	// PausedNs is the time each priority spent paused by us, from the
	// XOFF that began a pause to the XON that ended it (PausedNanos adds
	// the pause under way).
	PausedNs [NumTC]int64
}

// PFCTx decides when an ingress port must pause its link partner. The
// dataplane sets what each priority of the ingress port holds in the
// egress queues (Set: the sum over every worker lcore's queues; Add and
// Sub for a single owner) and calls Check once per burst:
//
//   - at or above Xoff: XOFF with Quanta;
//   - while still above Xon: XOFF again every half pause time, so the
//     partner never resumes on its own while we are congested;
//   - at or below Xon: one XON (quanta 0).
type PFCTx struct {
	enable  uint8
	xoffSet uint8 // priorities currently paused by us
	quanta  uint16
	xoff    uint64
	xon     uint64
	refresh int64
	bytes   [NumTC]uint64
	sentAt  [NumTC]int64
	from    [NumTC]int64 // when the pause under way began
	st      PFCTxStats
}

// NewPFCTx returns the transmit-side PFC state for one ingress port.
func NewPFCTx(c PFCTxConfig) (*PFCTx, error) {
	t := new(PFCTx)
	if err := t.Init(c); err != nil {
		return nil, err
	}
	return t, nil
}

// Init resets t to c, nothing held, no priority paused.
func (t *PFCTx) Init(c PFCTxConfig) error {
	if c.Quanta == 0 {
		c.Quanta = DefaultQuanta
	}
	switch {
	case c.Speed == 0:
		return errSpeed
	case c.Enable != 0 && c.Xoff == 0:
		return errors.New("qos: PFC xoff threshold must be set")
	case c.Enable != 0 && c.Xon >= c.Xoff:
		return fmt.Errorf("qos: PFC xon %s must be below xoff %s", FormatSize(c.Xon), FormatSize(c.Xoff))
	}
	*t = PFCTx{enable: c.Enable, quanta: c.Quanta, xoff: c.Xoff, xon: c.Xon,
		refresh: PauseNanos(c.Quanta, c.Speed) / 2}
	return nil
}

// Reconfigure changes t's thresholds and pause time to c's, keeping the
// bytes held, the priorities paused and the counters. A priority that is
// no longer enabled gets no more frames; its partner resumes when its
// last pause expires.
func (t *PFCTx) Reconfigure(c PFCTxConfig) error {
	var n PFCTx
	if err := n.Init(c); err != nil {
		return err
	}
	t.enable, t.quanta, t.xoff, t.xon, t.refresh = n.enable, n.quanta, n.xoff, n.xon, n.refresh
	t.xoffSet &= t.enable
	return nil
}

// Add accounts n bytes of priority prio entering an egress queue.
func (t *PFCTx) Add(prio uint8, n uint32) { t.bytes[prio&7] += uint64(n) }

// Sub accounts n bytes of priority prio leaving (sent or dropped).
func (t *PFCTx) Sub(prio uint8, n uint32) {
	p := prio & 7
	if uint64(n) > t.bytes[p] {
		t.bytes[p] = 0 // unbalanced caller; never wrap to "congested forever"
		return
	}
	t.bytes[p] -= uint64(n)
}

// Set replaces what priority prio holds, for a caller that sums the
// bytes of several worker lcores itself.
func (t *PFCTx) Set(prio uint8, n uint64) { t.bytes[prio&7] = n }

// Enabled has bit n set for each priority PFC is generated for.
func (t *PFCTx) Enabled() uint8 { return t.enable }

// Bytes is what priority prio currently holds in egress queues.
func (t *PFCTx) Bytes(prio uint8) uint64 { return t.bytes[prio&7] }

// XOFFMask has bit n set while priority n is paused by us.
func (t *PFCTx) XOFFMask() uint8 { return t.xoffSet }

// Check returns the PFC frame to send now, if any.
func (t *PFCTx) Check(now int64) (f PFCFrame, send bool) {
	for m := t.enable; m != 0; m &= m - 1 {
		p := bits.TrailingZeros8(m)
		bit := uint8(1) << p
		b := t.bytes[p]
		switch {
		case t.xoffSet&bit == 0:
			if b >= t.xoff {
				t.xoffSet |= bit
				t.from[p] = now
				t.sendXOFF(&f, p, now)
			}
		case b <= t.xon:
			t.xoffSet &^= bit
			t.st.PausedNs[p] += now - t.from[p]
			f.ClassEnable |= bit
			f.Quanta[p] = 0
			t.st.XON[p]++
		case now-t.sentAt[p] >= t.refresh:
			t.st.Refresh[p]++
			t.sendXOFF(&f, p, now)
		}
	}
	if f.ClassEnable == 0 {
		return f, false
	}
	t.st.Frames++
	return f, true
}

func (t *PFCTx) sendXOFF(f *PFCFrame, p int, now int64) {
	f.ClassEnable |= 1 << p
	f.Quanta[p] = t.quanta
	t.sentAt[p] = now
	t.st.XOFF[p]++
}

// Stats returns the counters.
func (t *PFCTx) Stats() PFCTxStats { return t.st }

// PausedNanos is the time priority prio has spent paused by us up to now.
func (t *PFCTx) PausedNanos(prio uint8, now int64) int64 {
	p := prio & 7
	n := t.st.PausedNs[p]
	if t.xoffSet&(1<<p) != 0 {
		n += now - t.from[p]
	}
	return n
}
