// Package prefetch asks the CPU to start loading cache lines the data path
// is about to touch. Go has no prefetch builtin, and a function call per
// line costs about what a hidden miss saves, so Lines takes a whole
// burst's addresses in one call: the loads of 32 packets' table slots then
// overlap instead of stalling one after another.
//
// Prefetching is a hint: an address that is not mapped is ignored, never
// faults, and on architectures without an implementation Lines does
// nothing.
package prefetch

// Lines prefetches the cache line at each address into every cache level.
func Lines(addrs []uintptr) {
	if len(addrs) > 0 {
		lines(&addrs[0], len(addrs))
	}
}

// ForWrite prefetches the cache lines of b for writing (PREFETCHW on
// amd64, PRFM PSTL1KEEP on arm64): a ring the data path is about to fill,
// whose lines another core last read, arrives owned, so the stores that
// follow do not each wait for it.
func ForWrite(b []byte) {
	if len(b) > 0 {
		forWrite(&b[0], len(b))
	}
}
