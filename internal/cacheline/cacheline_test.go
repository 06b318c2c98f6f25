package cacheline

import (
	"testing"
	"unsafe"
)

// Alone's Ts have a line of their own block's unused bytes on each side,
// so no other allocation reaches their lines, and start on a line when
// their size divides 64; whatever the element size, and from a few
// bytes to past the allocator's large-object limit.
func TestAloneOwnsItsLines(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 7, 16, 31, 32, 33, 100, 1000, 5000} {
		for range 10 {
			checkAlone[byte](t, n)
			checkAlone[uint64](t, n)
			checkAlone[[3]uint32](t, n)
			checkAlone[[]byte](t, n)
			checkAlone[[9]uint64](t, n)
			checkAlone[[6]uint64](t, n) // a 48-byte slot
		}
	}
	for range 10 {
		checkAlone[bigWithPointers](t, 1)
		if p := uintptr(unsafe.Pointer(New[uint64]())); p%64 != 0 {
			t.Errorf("New[uint64] at %#x: not on a line", p)
		}
	}
	// New puts a T larger than a line between a line of padding each side.
	var p padded[bigWithPointers]
	if before, after := unsafe.Offsetof(p.v), unsafe.Sizeof(p)-unsafe.Offsetof(p.v)-unsafe.Sizeof(p.v); before < 64 || after < 64 {
		t.Errorf("New of %d bytes: %d bytes before it, %d after, want a line each", unsafe.Sizeof(p.v), before, after)
	}
	if x := New[bigWithPointers](); x.p[0] != nil || x.x[999] != 0 {
		t.Error("New's T is not zero")
	}
}

func checkAlone[T any](t *testing.T, n int) {
	t.Helper()
	s, i := block[T](n)
	var z T
	size := int(unsafe.Sizeof(z))
	if before, after := i*size, (len(s)-i-n)*size; before < 64 || after < 64 {
		t.Fatalf("%T x %d: %d bytes of the block before, %d after: want a line each", z, n, before, after)
	}
	if a := uintptr(unsafe.Pointer(&s[i])); 64%size == 0 && a%64 != 0 {
		t.Errorf("%T x %d at %#x: not on a line", z, n, a)
	}
	if a := Alone[T](n); len(a) != n || cap(a) != n {
		t.Fatalf("%T x %d: len %d cap %d", z, n, len(a), cap(a))
	}
}

// bigWithPointers is a worker-sized struct with pointers, which Go
// allocates with a header in front.
type bigWithPointers struct {
	p [40]*int
	x [1000]byte
}
