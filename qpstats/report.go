package qpstats

import "time"

// FlowReport is a Flow in the shape of the stats JSON and the console.
type FlowReport struct {
	Src         string            `json:"src"`
	Dst         string            `json:"dst"`
	QP          uint32            `json:"qp"`
	Packets     uint64            `json:"packets"`
	Bytes       uint64            `json:"bytes"`
	FirstSeen   time.Time         `json:"first_seen"`
	LastSeen    time.Time         `json:"last_seen"`
	Mix         map[string]uint64 `json:"opcode_mix"`
	ExpectedPSN *uint32           `json:"expected_psn"`
	Gaps        uint64            `json:"psn_gaps"`
	GapPSNs     uint64            `json:"psn_gap_psns"`
	OutOfOrder  uint64            `json:"psn_out_of_order"`
	NAKs        map[string]uint64 `json:"naks"`
	RNRNAKs     uint64            `json:"rnr_naks"`
	CNPs        uint64            `json:"cnp"`
	CE          uint64            `json:"ce"`
	MarkedCE    uint64            `json:"marked_ce"`   // by roce-fwd's WRED-ECN
	HeldPaused  uint64            `json:"held_paused"` // queued while the TC was paused by PFC
	QoSDropped  uint64            `json:"qos_dropped"`
}

// Report converts a flow; zero opcode classes and NAK kinds are left out.
func (f *Flow) Report() FlowReport {
	r := FlowReport{Src: f.SrcAddr().String(), Dst: f.DstAddr().String(), QP: f.QP, Packets: f.Packets(), Bytes: f.Bytes,
		FirstSeen: time.Unix(0, f.FirstSeen).UTC(), LastSeen: time.Unix(0, f.LastSeen).UTC(),
		Gaps: f.Gaps, GapPSNs: f.GapPSNs, OutOfOrder: f.OutOfOrder, RNRNAKs: f.RNRNAKs, CNPs: f.CNPs(), CE: f.CE,
		MarkedCE: f.MarkedCE, HeldPaused: f.HeldPaused, QoSDropped: f.QoSDropped,
		Mix: map[string]uint64{}, NAKs: map[string]uint64{}}
	if f.PSNKnown {
		psn := f.ExpectedPSN
		r.ExpectedPSN = &psn
	}
	for i, n := range f.Mix {
		if n != 0 {
			r.Mix[ClassNames[i]] = n
		}
	}
	for i, n := range f.NAKs {
		if n != 0 {
			r.NAKs[NAKNames[i]] = n
		}
	}
	return r
}
