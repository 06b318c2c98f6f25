//go:build goexperiment.simd && amd64.v3 && go1.27

package pipeline

import (
	"simd/archsimd"
	"unsafe"
)

// copyShort copies w bytes (64 <= w <= 128) from src to dst as two
// 64-byte blocks, the first and the last, which overlap when w < 128:
// four 32-byte loads and four stores, small enough to be inlined, with
// no branch on the length (memmove's call would spill the caller's loop).
// The caller has checked that both hold w bytes. Builds without AVX2 or
// Go's SIMD experiment copy with memmove (tapcopy_words.go).
//
// VZEROUPPER at the end: Go does not emit it, and with the upper halves
// of the YMM registers left dirty the SSE code after (Go's 16-byte moves,
// DPDK's C) ran BenchmarkPoll's tap of every packet 2.5 times slower.
func copyShort(dst, src *byte, w int) {
	e := uintptr(w - 64)
	s, d := unsafe.Pointer(src), unsafe.Pointer(dst)
	a := archsimd.LoadUint8x32Array((*[32]uint8)(s))
	b := archsimd.LoadUint8x32Array((*[32]uint8)(unsafe.Add(s, 32)))
	c := archsimd.LoadUint8x32Array((*[32]uint8)(unsafe.Add(s, e)))
	f := archsimd.LoadUint8x32Array((*[32]uint8)(unsafe.Add(s, e+32)))
	a.StoreArray((*[32]uint8)(d))
	b.StoreArray((*[32]uint8)(unsafe.Add(d, 32)))
	c.StoreArray((*[32]uint8)(unsafe.Add(d, e)))
	f.StoreArray((*[32]uint8)(unsafe.Add(d, e+32)))
	archsimd.ClearAVXUpperBits()
}
