package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Zmalloc allocates size zeroed bytes of DPDK memory on socket, aligned
// to a cache line. The memory is not Go memory: it may hold mbuf
// addresses and be read by C, and must be released with FreeMem.
func Zmalloc(what string, size uintptr, socket int) (unsafe.Pointer, error) {
	p := C.rte_zmalloc_socket(nil, C.size_t(size), C.RTE_CACHE_LINE_SIZE, C.int(socket))
	if p == nil {
		return nil, fmt.Errorf("allocating %s (%d bytes) on socket %d: out of DPDK memory", what, size, socket)
	}
	return p, nil
}

// FreeMem releases memory from Zmalloc.
func FreeMem(p unsafe.Pointer) {
	if p != nil {
		C.rte_free(p)
	}
}

// Handle is m as an integer, to keep in queues that hold no Go pointers.
func (m *Mbuf) Handle() uintptr { return uintptr(unsafe.Pointer(m)) }

// MbufOf turns a Handle back into the mbuf. Mbufs live in DPDK memory,
// which the Go garbage collector neither moves nor frees.
func MbufOf(h uintptr) *Mbuf { return *(**Mbuf)(unsafe.Pointer(&h)) }

// Room is how many more packets the queue takes before the next Run.
func (t *TxQueue) Room() int { return len(t.pkts) - t.n }

// DropRoom is how many more packets Drop takes before the next Run.
func (s *Step) DropRoom() int { return len(s.drop) - s.ndrop }
