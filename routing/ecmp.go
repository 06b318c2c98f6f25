package routing

// Resilient ECMP: a group is a fixed table of buckets, each naming a
// member; a flow hashes to a bucket. Adding or removing a member moves
// only the buckets it gains or loses, so only those flows change path (as
// Linux's resilient next-hop groups, SONiC and VPP do), where a modulo
// over the member count would move nearly every flow.

// fill assigns n buckets to members in proportion to weights, keeping
// each bucket's previous member (prev, member indices into weights; -1 or
// out of range: none) where that member is still due buckets. It returns
// one member index per bucket.
func fill(n int, weights []int, prev []int) []int {
	total := 0
	for _, w := range weights {
		total += w
	}
	out := make([]int, n)
	if total == 0 {
		for i := range out {
			out[i] = -1
		}
		return out
	}
	// Each member's due share, by largest remainder.
	due := make([]int, len(weights))
	given := 0
	type rem struct{ m, r int }
	rems := make([]rem, len(weights))
	for m, w := range weights {
		due[m] = n * w / total
		given += due[m]
		rems[m] = rem{m, n * w % total}
	}
	for given < n {
		best := -1
		for i, r := range rems {
			if r.r >= 0 && (best < 0 || r.r > rems[best].r) {
				best = i
			}
		}
		due[rems[best].m]++
		rems[best].r = -1
		given++
	}
	// Keep what may be kept, then hand the rest out round robin over the
	// members still owed, so a member's buckets are spread over the table.
	for i := range out {
		out[i] = -1
		if i < len(prev) {
			if m := prev[i]; m >= 0 && m < len(weights) && due[m] > 0 {
				out[i] = m
				due[m]--
			}
		}
	}
	m := 0
	for i := range out {
		if out[i] >= 0 {
			continue
		}
		for due[m%len(due)] == 0 {
			m++
		}
		out[i] = m % len(due)
		due[m%len(due)]--
		m++
	}
	return out
}
