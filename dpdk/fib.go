package dpdk

/*
#include <stdlib.h>
#include "shim.h"
#include "fib.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// DPDK's own longest-prefix-match tables, rte_fib (IPv4, DIR24_8) and
// rte_fib6 (IPv6, TRIE), both with 4-byte next hops and 0 as the next hop
// of an address no route covers. They are here to be measured against
// roce-fwd's own tables; the lookups take their arrays in DPDK memory, as
// the data path's burst arrays are, and each is one cgo call.

// FIB6AddrSize is the size of an IPv6 address in rte_fib6's arrays.
const FIB6AddrSize = C.RTE_FIB6_IPV6_ADDR_SIZE

var errNoEAL = errors.New("EAL is not initialised")

// heapBytes is the allocated bytes of socket's malloc heap, -1 if unknown.
func heapBytes(socket int) int64 { return int64(C.rf_heap_alloc_bytes(C.int(socket))) }

// RteFIB is an IPv4 rte_fib: DIR24_8 with 4-byte next hops (at most
// 2^31-1) and default next hop 0. Its first level is 2^24 entries (64 MiB),
// each route longer than /24 under a /24 without one needs one of the
// Tbl8 groups of 256 entries (1 KiB each), and its RIB (the control
// plane's copy of the routes) has 2*MaxRoutes nodes in a mempool. Add and
// Free are control plane calls, one writer at a time; lookups may run on
// any thread.
type RteFIB struct {
	f         *C.struct_rte_fib
	Name      string
	Socket    int
	MaxRoutes int
	Tbl8      int
	// Bytes is how much the socket's malloc heap grew across
	// rte_fib_create (tables and RIB node pool), 0 if it could not be
	// read (socket < 0). It is exact when nothing else allocates on that
	// socket at the same time.
	Bytes int64
}

// NewRteFIB creates an IPv4 FIB on socket (an external heap's socket
// too: Heap.Socket) for at most maxRoutes routes, with tbl8 groups for
// routes longer than /24. The name is at most MaxFIBName bytes and unique
// among the process's FIBs of both families and its mempools: the RIB's
// mempool is "MP_"+name. (A create that fails inside DPDK 22.11's mempool
// code leaves a few hundred bytes of the socket's heap allocated.)
func NewRteFIB(name string, socket int, maxRoutes, tbl8 int) (*RteFIB, error) {
	if err := checkFIB("rte_fib", name, maxRoutes, tbl8); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	before := heapBytes(socket)
	var errno C.int
	f := C.rf_fib_create(cname, C.int(socket), C.int(maxRoutes), C.uint32_t(tbl8), &errno)
	if f == nil {
		return nil, &Error{Op: fmt.Sprintf("rte_fib_create %s (DIR24_8, %d routes, %d tbl8, socket %d)", name, maxRoutes, tbl8, socket),
			Errno: errnoOr(int(errno), int(syscall.ENOMEM))}
	}
	fib := &RteFIB{f: f, Name: name, Socket: socket, MaxRoutes: maxRoutes, Tbl8: tbl8}
	if after := heapBytes(socket); before >= 0 && after >= 0 {
		fib.Bytes = after - before
	}
	return fib, nil
}

// MaxFIBName is the longest name NewRteFIB and NewRteFIB6 take: DPDK
// derives the names of the RIB's mempool, ring and memzones from it, the
// longest "MP_MP_"+name+"_<n>" in 31 bytes.
const MaxFIBName = 20

func checkFIB(kind, name string, maxRoutes, tbl8 int) error {
	switch {
	case !Running():
		return errNoEAL
	case name == "" || len(name) > MaxFIBName:
		return fmt.Errorf("%s %q: name of %d bytes, want 1..%d", kind, name, len(name), MaxFIBName)
	case maxRoutes <= 0 || maxRoutes > 1<<30 || tbl8 <= 0 || tbl8 > 1<<31-1:
		return fmt.Errorf("%s %s: maxRoutes %d or tbl8 %d out of range", kind, name, maxRoutes, tbl8)
	}
	return nil
}

// errnoOr is errno, or def when DPDK set none.
func errnoOr(errno, def int) int {
	if errno == 0 {
		return def
	}
	return errno
}

// Add adds or replaces the route ip/depth (ip as a host-order integer,
// 10.0.0.0 is 0x0a000000; bits past depth are ignored), depth 0..32,
// next hop nh (1..2^31-1; 0 is "no route"). It fails with ENOSPC when
// the RIB or the tbl8 groups are full.
func (f *RteFIB) Add(ip uint32, depth uint8, nh uint64) error {
	rc := C.rte_fib_add(f.f, C.uint32_t(ip), C.uint8_t(depth), C.uint64_t(nh))
	return errRC(fmt.Sprintf("rte_fib_add %s %d.%d.%d.%d/%d", f.Name, ip>>24, ip>>16&255, ip>>8&255, ip&255, depth), rc)
}

// LookupBulk looks up the n addresses at ips (host order) into nhs with
// one rte_fib_lookup_bulk call: one cgo call. Both arrays hold n entries
// and must be DPDK memory (Zmalloc) or other memory outside the Go heap.
func (f *RteFIB) LookupBulk(ips *uint32, nhs *uint64, n int) {
	C.rf_fib_lookup(C.uintptr_t(uintptr(unsafe.Pointer(f.f))), C.uintptr_t(uintptr(unsafe.Pointer(ips))),
		C.uintptr_t(uintptr(unsafe.Pointer(nhs))), C.int(n))
}

// LookupBursts looks up the n addresses at ips into nhs as consecutive
// rte_fib_lookup_bulk calls of burst addresses each (the last may be
// shorter), all in one cgo call: per burst it costs what a C data path
// pays. Arrays as for LookupBulk; burst <= 0 means one call of n.
func (f *RteFIB) LookupBursts(ips *uint32, nhs *uint64, n, burst int) {
	C.rf_fib_lookup_bursts(C.uintptr_t(uintptr(unsafe.Pointer(f.f))), C.uintptr_t(uintptr(unsafe.Pointer(ips))),
		C.uintptr_t(uintptr(unsafe.Pointer(nhs))), C.uint32_t(n), C.uint32_t(max(burst, 0)))
}

// Tbl8Use reports the tbl8 groups the FIB has reserved (an Add that
// would take reserved past Tbl8 fails with ENOSPC) and those it uses:
// DIR24_8 reserves one for a route longer than /24 when no other route
// lies in its /24, so the two are equal after adds. It reads DPDK 22.11's
// private data plane structure; -1, -1 if that does not hold the
// configured count where expected (another DPDK version).
func (f *RteFIB) Tbl8Use() (reserved, used int) {
	// DIR24_8 rounds the count up to its bitmap's 64-bit slabs.
	dp := C.uintptr_t(uintptr(C.rte_fib_get_dp(f.f)))
	var u C.struct_rf_tbl8_use
	if dp != 0 {
		C.rf_fib_tbl8_use(dp, &u)
	}
	return tbl8Use(&u, (f.Tbl8+63)&^63)
}

func tbl8Use(u *C.struct_rf_tbl8_use, number int) (reserved, used int) {
	if int(u.number) != number || u.reserved > u.number || u.used > u.number {
		return -1, -1
	}
	return int(u.reserved), int(u.used)
}

// Free releases the FIB and its RIB. No lookup may be running.
func (f *RteFIB) Free() {
	if f.f != nil {
		C.rte_fib_free(f.f)
		f.f = nil
	}
}

// RteFIB6 is an IPv6 rte_fib6: TRIE with 4-byte next hops and default
// next hop 0. Like RteFIB it has a 2^24-entry first level (64 MiB)
// indexed by the top 24 bits, then a tbl8 group of 256 entries per
// further byte a route needs, and a RIB of 2*MaxRoutes nodes.
type RteFIB6 struct {
	f         *C.struct_rte_fib6
	Name      string
	Socket    int
	MaxRoutes int
	Tbl8      int
	Bytes     int64 // as RteFIB.Bytes
}

// NewRteFIB6 creates an IPv6 FIB; arguments as for NewRteFIB.
func NewRteFIB6(name string, socket int, maxRoutes, tbl8 int) (*RteFIB6, error) {
	if err := checkFIB("rte_fib6", name, maxRoutes, tbl8); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	before := heapBytes(socket)
	var errno C.int
	f := C.rf_fib6_create(cname, C.int(socket), C.int(maxRoutes), C.uint32_t(tbl8), &errno)
	if f == nil {
		return nil, &Error{Op: fmt.Sprintf("rte_fib6_create %s (TRIE, %d routes, %d tbl8, socket %d)", name, maxRoutes, tbl8, socket),
			Errno: errnoOr(int(errno), int(syscall.ENOMEM))}
	}
	fib := &RteFIB6{f: f, Name: name, Socket: socket, MaxRoutes: maxRoutes, Tbl8: tbl8}
	if after := heapBytes(socket); before >= 0 && after >= 0 {
		fib.Bytes = after - before
	}
	return fib, nil
}

// Add adds or replaces the route ip/depth (ip in network byte order; bits
// past depth are ignored), depth 0..128, next hop nh (1..2^31-1).
func (f *RteFIB6) Add(ip [16]byte, depth uint8, nh uint64) error {
	var cip [FIB6AddrSize]C.uint8_t
	for i, b := range ip {
		cip[i] = C.uint8_t(b)
	}
	rc := C.rte_fib6_add(f.f, &cip[0], C.uint8_t(depth), C.uint64_t(nh))
	return errRC(fmt.Sprintf("rte_fib6_add %s %x/%d", f.Name, ip, depth), rc)
}

// LookupBulk looks up the n addresses at ips into nhs with one
// rte_fib6_lookup_bulk call: one cgo call. Arrays as for RteFIB.LookupBulk.
func (f *RteFIB6) LookupBulk(ips *[FIB6AddrSize]byte, nhs *uint64, n int) {
	C.rf_fib6_lookup(C.uintptr_t(uintptr(unsafe.Pointer(f.f))), C.uintptr_t(uintptr(unsafe.Pointer(ips))),
		C.uintptr_t(uintptr(unsafe.Pointer(nhs))), C.int(n))
}

// LookupBursts is RteFIB.LookupBursts for IPv6.
func (f *RteFIB6) LookupBursts(ips *[FIB6AddrSize]byte, nhs *uint64, n, burst int) {
	C.rf_fib6_lookup_bursts(C.uintptr_t(uintptr(unsafe.Pointer(f.f))), C.uintptr_t(uintptr(unsafe.Pointer(ips))),
		C.uintptr_t(uintptr(unsafe.Pointer(nhs))), C.uint32_t(n), C.uint32_t(max(burst, 0)))
}

// Tbl8Use is RteFIB.Tbl8Use for IPv6. TRIE reserves for a route longer
// than /24, unless another route already lies within its prefix cut to a
// byte boundary, one group per byte between its covering route (or /24)
// and its own length, whether or not routes nearby share those groups: it
// needs more groups configured than it uses.
func (f *RteFIB6) Tbl8Use() (reserved, used int) {
	dp := C.uintptr_t(uintptr(C.rte_fib6_get_dp(f.f)))
	var u C.struct_rf_tbl8_use
	if dp != 0 {
		C.rf_fib6_tbl8_use(dp, &u)
	}
	return tbl8Use(&u, f.Tbl8)
}

// Free releases the FIB and its RIB. No lookup may be running.
func (f *RteFIB6) Free() {
	if f.f != nil {
		C.rte_fib6_free(f.f)
		f.f = nil
	}
}

// Heap is a DPDK malloc heap of its own (rte_malloc_heap_create) over
// anonymous memory the process maps itself and adds to it
// (rte_malloc_heap_memory_add): on 4 KiB pages (advised against
// transparent huge pages), or on 2 MiB hugetlb pages, which leaves no file
// in hugetlbfs. DPDK allocates from it by its socket id, Socket: tables
// larger than the memory EAL was given (tests run EAL without hugepages
// and with little memory) can be created there, and on the page size the
// caller chooses. Its memory has no IOVA: it is not for devices.
type Heap struct {
	Name     string
	Socket   int
	PageSize int
	mem      []byte
}

// NewHeap maps size bytes (rounded up to the page size), all of them
// populated up front, and makes a heap of them named name (at most 31
// bytes, unique in the process).
func NewHeap(name string, size int, huge bool) (*Heap, error) {
	if !Running() {
		return nil, errNoEAL
	}
	const mapHuge2MB = 21 << 26 // MAP_HUGE_2MB: log2(page size) << MAP_HUGE_SHIFT
	page, flags := 4<<10, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE
	if huge {
		page, flags = 2<<20, flags|syscall.MAP_HUGETLB|mapHuge2MB
	}
	size = (size + page - 1) &^ (page - 1)
	if size <= 0 {
		return nil, fmt.Errorf("heap %s: size %d", name, size)
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, flags)
	if err != nil {
		return nil, fmt.Errorf("heap %s: mapping %d MiB of %d KiB pages: %w", name, size>>20, page>>10, err)
	}
	if !huge {
		if err := syscall.Madvise(mem, syscall.MADV_NOHUGEPAGE); err != nil {
			syscall.Munmap(mem)
			return nil, fmt.Errorf("heap %s: madvise: %w", name, err)
		}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if rc := C.rte_malloc_heap_create(cname); rc != 0 {
		syscall.Munmap(mem)
		return nil, errRC("rte_malloc_heap_create "+name, rc)
	}
	rc := C.rte_malloc_heap_memory_add(cname, unsafe.Pointer(&mem[0]), C.size_t(size), nil, C.uint(size/page), C.size_t(page))
	if rc != 0 {
		err := errRC(fmt.Sprintf("rte_malloc_heap_memory_add %s (%d MiB)", name, size>>20), rc)
		C.rte_malloc_heap_destroy(cname)
		syscall.Munmap(mem)
		return nil, err
	}
	socket := C.rte_malloc_heap_get_socket(cname)
	if socket < 0 {
		err := errRC("rte_malloc_heap_get_socket "+name, socket)
		C.rte_malloc_heap_memory_remove(cname, unsafe.Pointer(&mem[0]), C.size_t(size))
		C.rte_malloc_heap_destroy(cname)
		syscall.Munmap(mem)
		return nil, err
	}
	return &Heap{Name: name, Socket: int(socket), PageSize: page, mem: mem}, nil
}

// Size is the heap's memory in bytes.
func (h *Heap) Size() int { return len(h.mem) }

// Allocated is the bytes allocated from the heap now.
func (h *Heap) Allocated() int64 { return heapBytes(h.Socket) }

// Free destroys the heap and unmaps its memory. Everything allocated from
// it must have been freed (else it fails with EBUSY and keeps the heap).
func (h *Heap) Free() error {
	if h.mem == nil {
		return nil
	}
	cname := C.CString(h.Name)
	defer C.free(unsafe.Pointer(cname))
	if rc := C.rte_malloc_heap_memory_remove(cname, unsafe.Pointer(&h.mem[0]), C.size_t(len(h.mem))); rc != 0 {
		return errRC("rte_malloc_heap_memory_remove "+h.Name, rc)
	}
	if rc := C.rte_malloc_heap_destroy(cname); rc != 0 {
		return errRC("rte_malloc_heap_destroy "+h.Name, rc)
	}
	err := syscall.Munmap(h.mem)
	h.mem = nil
	return err
}
