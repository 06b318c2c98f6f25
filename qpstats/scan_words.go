//go:build !(goexperiment.simd && amd64.v3 && go1.27)

package qpstats

// Without AVX2 assumed, or Go's SIMD experiment (scan_simd.go), the
// bucket scans read words.

// BucketScan names the bucket scans this build has, for `roce-fwd version`.
const BucketScan = "words"

// find returns the first way holding sig, or ways if none does.
func (bk *bucket) find(sig uint32) int { return bk.findWords(sig) }

// oldest returns the way idle longest at time age among the ways of two
// buckets' ages a and c (c's ways numbered from ways on; the lowest
// number among equals), and how long it has been idle.
func oldest(age uint32, a, c *[ways]uint32) (int, uint32) { return oldestTree(age, a, c) }
