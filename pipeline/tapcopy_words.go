//go:build !(goexperiment.simd && amd64.v3 && go1.27)

package pipeline

import "unsafe"

// copyShort copies w bytes (64 <= w <= 128) from src to dst, which the
// caller has checked hold them; the AVX2 build does it without a call
// (tapcopy_simd.go).
func copyShort(dst, src *byte, w int) { copy(unsafe.Slice(dst, w), unsafe.Slice(src, w)) }
