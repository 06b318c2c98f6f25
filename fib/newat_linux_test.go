package fib

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

// TestNewAt places a table in memory outside the Go heap (as DPDK's is),
// filled with garbage first, and checks it against the reference.
func TestNewAt(t *testing.T) {
	c := Config{FirstBits: 16, Groups: 512}
	mem, err := syscall.Mmap(-1, 0, Footprint(c), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Munmap(mem)
	for i := range mem {
		mem[i] = 0xff
	}
	tab := NewAt(unsafe.Pointer(&mem[0]), c, V4)
	r := rand.New(rand.NewPCG(8, 8))
	rf := &ref{}
	for range 2000 {
		p, nh := gen4(r), 1+r.Uint32N(100)
		if err := tab.Add(p, nh); err == nil {
			rf.add(p, nh)
		}
		if len(rf.routes) > 0 && r.IntN(3) == 0 {
			x := rf.routes[r.IntN(len(rf.routes))]
			if err := tab.Delete(x.p); err != nil {
				t.Fatal(err)
			}
			rf.del(x.p)
		}
	}
	checkLookups(t, tab, rf, probes(r, rf, gen4, 2000))
	checkStructure(t, tab, rf, false)
	if &tab.mem[len(tab.mem)-1] != (*uint32)(unsafe.Pointer(&mem[len(mem)-4])) {
		t.Fatal("table not at the memory given")
	}

	defer func() {
		if recover() == nil {
			t.Error("NewAt with misaligned memory did not panic")
		}
	}()
	NewAt(unsafe.Pointer(&mem[1]), c, V4)
}

// newBenchTable makes a benchmark's table in anonymous memory advised
// to use transparent huge pages, like the hugepage memory NewAt gets in
// production, when huge is set; else in the Go heap (4 KiB pages).
func newBenchTable(tb testing.TB, c Config, family Family, huge bool) *Table {
	if !huge {
		return New(c, family)
	}
	size := (Footprint(c) + 2<<20 - 1) &^ (2<<20 - 1)
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		tb.Skip(err)
	}
	if err := syscall.Madvise(mem, syscall.MADV_HUGEPAGE); err != nil {
		tb.Logf("madvise: %v", err)
	}
	// Never unmapped: the benchmarks cache their tables for the process.
	return NewAt(unsafe.Pointer(&mem[0]), c, family)
}
