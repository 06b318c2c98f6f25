package qpstats

import (
	"cmp"
	"fmt"
	"slices"
)

// Flow is one QP flow merged over every worker's table.
type Flow struct {
	Key
	Counters
}

// Merge sums entries with the same key (a QP seen on two lcores, which RSS
// avoids but a reconfiguration can cause).
func Merge(tables ...[]Entry) []Flow { return MergeInto(nil, tables...) }

// MergeInto is Merge into dst's memory, grown as needed.
func MergeInto(dst []Flow, tables ...[]Entry) []Flow {
	// Sized once: a report merges every flow each second, and growing
	// the slice and the map made garbage of several times their size.
	total := 0
	for _, tab := range tables {
		total += len(tab)
	}
	out := slices.Grow(dst[:0], total)
	if len(tables) == 1 { // one worker: its keys are unique already
		for i := range tables[0] {
			e := &tables[0][i]
			out = append(out, Flow{Key: e.Key, Counters: e.Counters})
		}
		return out
	}
	byKey := make(map[Key]int, total)
	for _, tab := range tables {
		for i := range tab {
			e := &tab[i]
			j, ok := byKey[e.Key]
			if !ok {
				byKey[e.Key] = len(out)
				out = append(out, Flow{Key: e.Key, Counters: e.Counters})
				continue
			}
			add(&out[j].Counters, &e.Counters)
		}
	}
	return out
}

func add(a, b *Counters) {
	if b.LastSeen > a.LastSeen {
		a.ExpectedPSN, a.PSNKnown = b.ExpectedPSN, b.PSNKnown
	}
	a.Bytes += b.Bytes
	a.FirstSeen = min(a.FirstSeen, b.FirstSeen)
	a.LastSeen = max(a.LastSeen, b.LastSeen)
	for i := range a.Mix {
		a.Mix[i] += b.Mix[i]
	}
	a.OutOfOrder += b.OutOfOrder
	a.Gaps += b.Gaps
	a.GapPSNs += b.GapPSNs
	for i := range a.NAKs {
		a.NAKs[i] += b.NAKs[i]
	}
	a.RNRNAKs += b.RNRNAKs
	a.CE += b.CE
	a.MarkedCE += b.MarkedCE
	a.HeldPaused += b.HeldPaused
	a.QoSDropped += b.QoSDropped
}

// SortKeys are the orders Top understands.
var SortKeys = []string{"bytes", "packets", "naks", "cnp", "gaps", "marked", "held", "qos_drops"}

// Top sorts flows by the named counter, largest first, and keeps n
// (n <= 0 keeps all). Ties go by bytes, then by key, so output is stable.
func Top(flows []Flow, n int, by string) ([]Flow, error) {
	var metric func(*Flow) uint64
	switch by {
	case "bytes", "":
		metric = func(f *Flow) uint64 { return f.Bytes }
	case "packets":
		metric = func(f *Flow) uint64 { return f.Packets() }
	case "naks":
		metric = func(f *Flow) uint64 { return f.NAKTotal() + f.RNRNAKs }
	case "cnp":
		metric = func(f *Flow) uint64 { return f.CNPs() }
	case "gaps":
		metric = func(f *Flow) uint64 { return f.Gaps + f.OutOfOrder }
	case "marked":
		metric = func(f *Flow) uint64 { return f.MarkedCE }
	case "held":
		metric = func(f *Flow) uint64 { return f.HeldPaused }
	case "qos_drops":
		metric = func(f *Flow) uint64 { return f.QoSDropped }
	default:
		return nil, fmt.Errorf("unknown order %q (valid: %v)", by, SortKeys)
	}
	// Sort the metrics with pointers to their flows, not the flows: a
	// comparison of two Flows by value made both escape (the metric takes
	// their address), an allocation per comparison, about 90 MB a second
	// for a report of 20k flows, and a garbage collection every 200 ms.
	type ranked struct {
		m uint64
		f *Flow
	}
	r := make([]ranked, len(flows))
	for i := range flows {
		r[i] = ranked{metric(&flows[i]), &flows[i]}
	}
	slices.SortFunc(r, func(x, y ranked) int {
		if c := cmp.Compare(y.m, x.m); c != 0 {
			return c
		}
		a, b := x.f, y.f
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		if c := slices.Compare(a.Src[:], b.Src[:]); c != 0 {
			return c
		}
		if c := slices.Compare(a.Dst[:], b.Dst[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.QP, b.QP)
	})
	if n > 0 && len(r) > n {
		r = r[:n]
	}
	out := make([]Flow, len(r))
	for i, x := range r {
		out[i] = *x.f
	}
	return out, nil
}
