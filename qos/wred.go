package qos

import (
	"fmt"

	"roce-fwd/roce"
)

// ECN configures WRED with ECN marking on one queue, the DCQCN congestion
// point. Max == 0 turns it off.
type ECN struct {
	Min, Max    uint64  // bytes of (averaged) queue depth
	Probability float64 // marking/drop probability reached at Max, 0..1
	Weight      float64 // EWMA weight of the depth average, 0..1; 0 = instantaneous depth
}

// Enabled reports whether the profile does anything.
func (e ECN) Enabled() bool { return e.Max != 0 }

// Validate checks the profile's ranges.
func (e ECN) Validate() error {
	if err := e.check(); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	return nil
}

// check is Validate without the package's prefix, for Config.Validate's
// FieldError.
func (e ECN) check() error {
	switch {
	case !e.Enabled():
		return nil
	case e.Min > e.Max:
		return fmt.Errorf("ECN min %s is above max %s; lower min or raise max", FormatSize(e.Min), FormatSize(e.Max))
	case !(e.Probability >= 0 && e.Probability <= 1):
		return fmt.Errorf("ECN probability %v is outside 0..1", e.Probability)
	case !(e.Weight >= 0 && e.Weight < 1):
		return fmt.Errorf("ECN weight %v is outside [0, 1)", e.Weight)
	}
	return nil
}

// Decision is what WRED says to do with an arriving packet.
type Decision uint8

const (
	Enqueue       Decision = iota // queue it unchanged
	EnqueueMarkCE                 // set CE (MarkCE), then queue it
	DropWRED                      // drop it (Not-ECT on a lossy TC)
)

var decisionNames = [...]string{"enqueue", "enqueue-mark-ce", "drop-wred"}

func (d Decision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return "decision-?"
}

// WREDStats count WRED's verdicts.
type WREDStats struct {
	Marked    uint64 // ECT packets this queue set to CE
	AlreadyCE uint64 // selected for marking but already CE: left alone, not counted as Marked
	Dropped   uint64 // Not-ECT packets dropped (lossy TC)
	Spared    uint64 // Not-ECT packets selected but kept because the TC is lossless
}

// WRED decides, per arriving packet, between enqueueing, marking CE and
// dropping, from the queue depth as in RFC 2309 RED with RFC 3168 ECN:
//
//   - average depth below Min: enqueue;
//   - between Min and Max: the packet is selected with probability rising
//     linearly from 0 at Min to Probability at Max;
//   - at or above Max: every packet is selected.
//
// A selected ECT(0)/ECT(1) packet is marked CE; a selected Not-ECT packet
// is dropped on a lossy TC and enqueued on a lossless one (dropping there
// would defeat PFC; the byte limit and PFC bound that queue instead); a
// selected CE packet is enqueued and counted as AlreadyCE. Not-ECT is
// never marked (RFC 3168 §6.1.1.1).
//
// With Weight > 0 the depth is an exponentially weighted average updated
// at each arrival, without RED's idle-time correction: NVIDIA and SONiC
// RoCE profiles mark on the instantaneous depth (Weight 0), which DCQCN's
// reaction time assumes.
type WRED struct {
	min, max uint64
	slope    float64 // probability per byte above min
	weight   float64
	avg      float64
	on       bool
	lossless bool
	rng      Rand
	st       WREDStats
}

// Init configures w for profile e on a lossless or lossy TC, with its own
// random sequence from seed.
func (w *WRED) Init(e ECN, lossless bool, seed uint64) error {
	if err := e.Validate(); err != nil {
		return err
	}
	*w = WRED{min: e.Min, max: e.Max, weight: e.Weight, on: e.Enabled(), lossless: lossless, rng: NewRand(seed)}
	if e.Max > e.Min {
		w.slope = e.Probability / float64(e.Max-e.Min)
	}
	return nil
}

// Reconfigure changes w's profile to e (already validated), keeping its
// random sequence, its depth average and its counters.
func (w *WRED) Reconfigure(e ECN) {
	w.min, w.max, w.weight, w.on, w.slope = e.Min, e.Max, e.Weight, e.Enabled(), 0
	if e.Max > e.Min {
		w.slope = e.Probability / float64(e.Max-e.Min)
	}
}

// NewWRED is Init on a new WRED.
func NewWRED(e ECN, lossless bool, seed uint64) (*WRED, error) {
	w := new(WRED)
	if err := w.Init(e, lossless, seed); err != nil {
		return nil, err
	}
	return w, nil
}

// Decide returns the verdict for a packet with IP ECN field ecn arriving
// at a queue currently holding depth bytes (before the packet).
func (w *WRED) Decide(depth uint64, ecn uint8) Decision {
	if !w.on {
		return Enqueue
	}
	d := depth
	if w.weight != 0 {
		w.avg += w.weight * (float64(depth) - w.avg)
		d = uint64(w.avg)
	}
	if d < w.min {
		return Enqueue
	}
	if d < w.max && w.rng.Float64() >= w.slope*float64(d-w.min) {
		return Enqueue
	}
	switch ecn & 3 {
	case roce.ECNNotECT:
		if w.lossless {
			w.st.Spared++
			return Enqueue
		}
		w.st.Dropped++
		return DropWRED
	case roce.ECNCE:
		w.st.AlreadyCE++
		return Enqueue
	}
	w.st.Marked++
	return EnqueueMarkCE
}

// Average is the EWMA depth in bytes (always 0 when Weight is 0).
func (w *WRED) Average() float64 { return w.avg }

// Stats returns the counters.
func (w *WRED) Stats() WREDStats { return w.st }

// MarkCE sets CE in the IP header at frame[l3:] (ipVersion 4 or 6) and
// reports whether the packet now carries CE. Not-ECT packets are left
// alone (false); CE packets stay CE (true). IPv4's header checksum is
// patched incrementally (RFC 1624) by the roce views, and the RoCEv2 ICRC
// masks the ECN bits, so the frame stays valid without recomputing either.
func MarkCE(frame []byte, l3 int, ipVersion uint8) bool {
	if l3 < 0 || l3 >= len(frame) || frame[l3]>>4 != ipVersion {
		return false
	}
	switch ipVersion {
	case 4:
		if len(frame)-l3 < roce.IPv4MinHeaderLen {
			return false
		}
		return roce.IPv4(frame[l3:]).MarkCE()
	case 6:
		if len(frame)-l3 < roce.IPv6HeaderLen {
			return false
		}
		return roce.IPv6(frame[l3:]).MarkCE()
	}
	return false
}
