package qpstats

import "roce-fwd/roce"

// PSNEvents count PSN continuity events over every flow a table has
// counted, evicted ones included. An offline reader that observes one
// frame at a time takes the difference around Observe to learn what that
// frame did (a gap, a retransmission), which per-flow totals cannot tell.
type PSNEvents struct {
	Gaps       uint64 // times a flow's PSN jumped forward
	GapPSNs    uint64 // PSNs skipped over by those jumps
	OutOfOrder uint64 // PSNs behind the expected one: retransmitted or reordered
}

// PSNEvents returns the table's PSN event totals since New or Reset.
func (t *Table) PSNEvents() PSNEvents { return t.psn }

// KeyOf is the flow key of a frame Classify found to be RoCEv2.
func KeyOf(frame []byte, r *roce.Result) Key {
	var w Addrs
	if r.IPVersion == 4 {
		w = v4Words(frame, int(r.L3))
	} else {
		w = addrWords6(frame, r)
	}
	return Key{Src: [2]uint64{w.s0, w.s1}, Dst: [2]uint64{w.d0, w.d1}, QP: r.DestQP}
}
