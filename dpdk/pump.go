package dpdk

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Ring is an rte_ring of mbufs with any number of producers (workers)
// and one consumer (a Pump).
type Ring struct {
	r    *C.struct_rte_ring
	name string
}

// NewRing makes a ring of size slots (a power of two) on socket.
func NewRing(name string, size, socket int) (*Ring, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	r := C.rte_ring_create(cs, C.uint(size), C.int(socket), C.RING_F_SC_DEQ)
	if r == nil {
		return nil, &Error{Op: fmt.Sprintf("ring %s (%d slots on socket %d)", name, size, socket), Errno: int(C.rf_errno())}
	}
	return &Ring{r: r, name: name}, nil
}

// Free releases the ring, freeing the mbufs still on it.
func (r *Ring) Free() {
	if r == nil || r.r == nil {
		return
	}
	var b [64]*C.struct_rte_mbuf
	for {
		n := C.rte_ring_sc_dequeue_burst(r.r, (*unsafe.Pointer)(unsafe.Pointer(&b[0])), 64, nil)
		if n == 0 {
			break
		}
		C.rte_pktmbuf_free_bulk(&b[0], C.uint(n))
	}
	C.rte_ring_free(r.r)
	r.r = nil
}

// PumpQueue is a ring and the (port, tx queue) its packets go out of.
type PumpQueue struct {
	Ring        *Ring
	Port, Queue uint16
}

// Pump moves packets from rings to tx queues, on whatever thread calls
// Run: the transmit of a slow port (a kernel TAP's: a system call per
// packet) kept off the workers' lcores.
type Pump struct {
	c *C.struct_rf_pump
	q []C.struct_rf_pump_q
}

// NewPump makes a pump over qs.
func NewPump(qs []PumpQueue, socket int) (*Pump, error) {
	size := unsafe.Sizeof(C.struct_rf_pump{}) + uintptr(len(qs))*unsafe.Sizeof(C.struct_rf_pump_q{})
	mem, err := Zmalloc("a pump", size, socket)
	if err != nil {
		return nil, err
	}
	c := (*C.struct_rf_pump)(mem)
	c.n = C.uint16_t(len(qs))
	c.q = (*C.struct_rf_pump_q)(unsafe.Add(mem, unsafe.Sizeof(C.struct_rf_pump{})))
	p := &Pump{c: c, q: unsafe.Slice(c.q, len(qs))}
	for i, q := range qs {
		p.q[i].ring, p.q[i].port, p.q[i].queue = q.Ring.r, C.uint16_t(q.Port), C.uint16_t(q.Queue)
	}
	return p, nil
}

// PumpBurst is the most a Run takes from one ring.
const PumpBurst = C.RF_PUMP_BURST

// Run drains every ring once, up to PumpBurst packets each, in one cgo
// call, and returns the packets moved.
func (p *Pump) Run() int { return int(C.rf_pump_run(C.uintptr_t(uintptr(unsafe.Pointer(p.c))))) }

// Counts are what queue i transmitted and dropped (its port refused them).
func (p *Pump) Counts(i int) (sent, dropped uint64) {
	return uint64(p.q[i].sent), uint64(p.q[i].dropped)
}

// Free releases the pump (not its rings).
func (p *Pump) Free() {
	if p.c != nil {
		FreeMem(unsafe.Pointer(p.c))
		p.c = nil
	}
}

// RegisterThread makes the calling thread, which the caller has locked
// (runtime.LockOSThread), an EAL thread with an lcore id of its own, so
// that the mbufs it frees go through a mempool cache of its own instead
// of one by one into the pool's shared ring, the ring the workers refill
// their caches from. UnregisterThread gives the id back.
func RegisterThread() error {
	if C.rte_thread_register() != 0 {
		return &Error{Op: "registering a thread with EAL", Errno: int(C.rf_errno())}
	}
	return nil
}

// UnregisterThread undoes RegisterThread on the calling thread.
func UnregisterThread() { C.rte_thread_unregister() }
