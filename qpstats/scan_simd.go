//go:build goexperiment.simd && amd64.v3 && go1.27

package qpstats

import (
	"math/bits"
	"simd/archsimd"
)

// The bucket scans in AVX2, for builds that may assume it (GOAMD64=v3,
// which the Go runtime checks at start) with Go's SIMD experiment
// (GOEXPERIMENT=simd, as the Makefile builds): eight ways are compared in
// one instruction, and find is small enough to be inlined into Find's
// loop. Other builds use the word-at-a-time scans, findWords and
// oldestTree, which give the same answers (TestBucketFind, TestOldest).
// Each ends with VZEROUPPER (ClearAVXUpperBits), which Go does not emit:
// the upper halves of the YMM registers left dirty can slow the SSE code
// after them (Go's 16-byte moves, DPDK's C); a tap's AVX2 copy left so
// made a poll 2.5 times as slow (pipeline/tapcopy_simd.go).

// BucketScan names the bucket scans this build has, for `roce-fwd version`.
const BucketScan = "avx2"

// find returns the first way holding sig, or ways if none does.
func (bk *bucket) find(sig uint32) int {
	m := archsimd.LoadUint32x8Array(&bk.sig).Equal(archsimd.BroadcastUint32x8(sig)).ToBits()
	archsimd.ClearAVXUpperBits()
	return bits.TrailingZeros8(m)
}

// oldest returns the way idle longest at time age among the ways of two
// buckets' ages a and c (c's ways numbered from ways on; the lowest
// number among equals), and how long it has been idle: the idle times of
// all sixteen ways at once, their maximum by halving, and the first way
// that has it.
func oldest(age uint32, a, c *[ways]uint32) (int, uint32) {
	now := archsimd.BroadcastUint32x8(age)
	ia := now.Sub(archsimd.LoadUint32x8Array(a)) // idle times, modulo 2^32
	ic := now.Sub(archsimd.LoadUint32x8Array(c))
	m := ia.Max(ic)
	h := m.GetLo().Max(m.GetHi())
	h = h.Max(h.PermuteScalars(2, 3, 0, 1))
	h = h.Max(h.PermuteScalars(1, 0, 3, 2))
	idle := h.GetElem(0)
	top := archsimd.BroadcastUint32x8(idle)
	w := uint16(ia.Equal(top).ToBits()) | uint16(ic.Equal(top).ToBits())<<ways
	archsimd.ClearAVXUpperBits()
	return bits.TrailingZeros16(w), idle
}
