package dpdk

/*
#include <stdlib.h>
#include "shim.h"
#include <rte_mbuf_pool_ops.h>

static const char *rf_mempool_ops_name(const struct rte_mempool *mp)
{
	return rte_mempool_get_ops(mp->ops_index)->name;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Mempool is a packet mbuf pool on one NUMA socket.
type Mempool struct {
	p      *C.struct_rte_mempool
	Name   string
	Socket int
	Size   int
}

// NewPktmbufPool creates a pool of n mbufs with dataRoom bytes each
// (headroom included) and a per-lcore cache, on the mempool driver ops
// ("": the platform's best, as rte_pktmbuf_pool_create chooses).
func NewPktmbufPool(name string, n, cache, dataRoom, socket int, ops string) (*Mempool, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p *C.struct_rte_mempool
	if ops == "" {
		p = C.rte_pktmbuf_pool_create(cname, C.uint(n), C.uint(cache), 0, C.uint16_t(dataRoom), C.int(socket))
	} else {
		cops := C.CString(ops)
		defer C.free(unsafe.Pointer(cops))
		p = C.rte_pktmbuf_pool_create_by_ops(cname, C.uint(n), C.uint(cache), 0, C.uint16_t(dataRoom), C.int(socket), cops)
	}
	if p == nil {
		on := ""
		if ops != "" {
			on = ", driver " + ops
		}
		return nil, &Error{Op: fmt.Sprintf("mempool %s (%d mbufs of %d B on socket %d%s)", name, n, dataRoom, socket, on), Errno: int(C.rf_errno())}
	}
	return &Mempool{p: p, Name: name, Socket: socket, Size: n}, nil
}

// Avail is the number of free mbufs, per-lcore caches included.
func (m *Mempool) Avail() int { return int(C.rte_mempool_avail_count(m.p)) }

// InUse is the number of mbufs currently allocated.
func (m *Mempool) InUse() int { return int(C.rte_mempool_in_use_count(m.p)) }

// Free releases the pool. Every mbuf must have been returned.
func (m *Mempool) Free() {
	if m.p != nil {
		C.rte_mempool_free(m.p)
		m.p = nil
	}
}

// Alloc takes one mbuf from the pool (control plane and tests; the data
// path receives mbufs from the PMD). Nil when the pool is empty.
func (m *Mempool) Alloc() *Mbuf { return (*Mbuf)(unsafe.Pointer(C.rf_mbuf_alloc(m.p))) }

// AllocBulk fills ms with mbufs from the pool in one call, all or none
// (false: the pool has fewer). ms must be DPDK memory (MbufArray), which
// C may write: the data path passes no Go-heap array to C.
func (m *Mempool) AllocBulk(ms []*Mbuf) bool {
	if len(ms) == 0 {
		return true
	}
	return C.rf_mbuf_alloc_bulk(m.p, (**C.struct_rte_mbuf)(unsafe.Pointer(&ms[0])), C.unsigned(len(ms))) == 0
}

// MbufArray is an array of n mbuf pointers in DPDK memory on socket, for
// AllocBulk; FreeMem(unsafe.Pointer(&a[0])) releases it.
func MbufArray(n, socket int) ([]*Mbuf, error) {
	p, err := Zmalloc("an mbuf array", uintptr(n)*unsafe.Sizeof((*Mbuf)(nil)), socket)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((**Mbuf)(p), n), nil
}

// SetData sets the packet to a copy of b in a single segment. It fails when
// b does not fit in the buffer after the headroom.
func (mb *Mbuf) SetData(b []byte) error {
	bufLen := int(*(*uint16)(mb.at(offBufLen)))
	off := int(*(*uint16)(mb.at(offDataOff)))
	if off+len(b) > bufLen {
		return fmt.Errorf("packet of %d bytes does not fit an mbuf with %d bytes of room", len(b), bufLen-off)
	}
	base := *(*unsafe.Pointer)(mb.at(offBufAddr))
	copy(unsafe.Slice((*byte)(unsafe.Add(base, off)), len(b)), b)
	*(*uint16)(mb.at(offDataLen)) = uint16(len(b))
	*(*uint32)(mb.at(offPktLen)) = uint32(len(b))
	return nil
}

// FreeMbufs returns mbufs to their pools (control plane and tests).
func FreeMbufs(ms []*Mbuf) {
	for _, m := range ms {
		C.rte_pktmbuf_free((*C.struct_rte_mbuf)(unsafe.Pointer(m)))
	}
}

// Ops is the name of the pool's mempool driver.
func (m *Mempool) Ops() string { return C.GoString(C.rf_mempool_ops_name(m.p)) }

// BestMempoolOps is the mempool driver DPDK picks for packet pools on
// this platform (rte_mbuf_best_mempool_ops): "ring_mp_mc" unless a
// hardware pool or an EAL option says otherwise.
func BestMempoolOps() string { return C.GoString(C.rte_mbuf_best_mempool_ops()) }
