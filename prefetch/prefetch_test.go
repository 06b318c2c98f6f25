package prefetch

import (
	"testing"
	"unsafe"
)

// Prefetching real, unmapped and nil addresses changes nothing and never
// faults; an empty list is a no-op.
func TestLinesIsHarmless(t *testing.T) {
	buf := make([]uint64, 1024)
	for i := range buf {
		buf[i] = uint64(i)
	}
	addrs := []uintptr{0, 8, ^uintptr(0) &^ 63, 0xdead0000}
	for i := 0; i < len(buf); i += 8 {
		addrs = append(addrs, uintptr(unsafe.Pointer(&buf[i])))
	}
	Lines(addrs)
	Lines(nil)
	for i := range buf {
		if buf[i] != uint64(i) {
			t.Fatalf("word %d changed to %d", i, buf[i])
		}
	}
	if n := testing.AllocsPerRun(100, func() { Lines(addrs) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkLines32(b *testing.B) {
	buf := make([]byte, 32*64)
	addrs := make([]uintptr, 32)
	for i := range addrs {
		addrs[i] = uintptr(unsafe.Pointer(&buf[i*64]))
	}
	for b.Loop() {
		Lines(addrs)
	}
}

// Prefetching a range for writing changes none of its bytes, whatever its
// alignment and length, and allocates nothing.
func TestForWriteIsHarmless(t *testing.T) {
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, r := range [][2]int{{0, 1}, {1, 63}, {63, 2}, {5, 4000}, {4095, 1}, {0, 4096}} {
		ForWrite(buf[r[0] : r[0]+r[1]])
	}
	ForWrite(nil)
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
	if n := testing.AllocsPerRun(100, func() { ForWrite(buf) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
