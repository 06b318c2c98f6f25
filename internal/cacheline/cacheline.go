// Package cacheline allocates state a worker lcore writes for every packet
// so that it shares no cache line with other Go allocations.
package cacheline

import "unsafe"

// Alone makes n zero Ts on cache lines that no other Go allocation
// touches. A worker writes its burst arrays, stage state and tap state
// for every packet. A small allocation that happened to land on a line
// with something the control plane writes (a tap reader's record, a
// counter of another goroutine) would make each of those stores wait for
// the other core, and whether it did would depend on where the allocator
// placed the two: a cost that came and went between runs.
//
// The Ts sit inside a larger block, with at least a line of the block's
// own unused bytes before and after them, and start on a line where the
// block's place allows it.
func Alone[T any](n int) []T {
	s, i := block[T](n)
	return s[i : i+n : i+n]
}

// New is Alone for a single T. A T larger than a line gets a line of
// padding on each side of it, not copies of itself.
func New[T any]() *T {
	var z T
	if unsafe.Sizeof(z) <= 64 {
		return &Alone[T](1)[0]
	}
	return &new(padded[T]).v
}

type padded[T any] struct {
	_ [64]byte
	v T
	_ [64]byte
}

// block is Alone's block and where its n Ts start in it: a line's worth
// of Ts on each side, and as many again to move the start onto a line
// where the size of T allows one.
func block[T any](n int) ([]T, int) {
	var z T
	size := max(int(unsafe.Sizeof(z)), 1)
	k := (64 + size - 1) / size // Ts that cover a line
	slack := 0
	if 64%size == 0 {
		slack = k
	}
	s := make([]T, n+2*k+slack)
	for i := k; i <= k+slack; i++ {
		if uintptr(unsafe.Pointer(&s[i]))%64 == 0 {
			return s, i
		}
	}
	return s, k
}
