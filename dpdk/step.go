package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Step is one worker's burst engine: a receive array and its transmit
// queues, all in DPDK memory on the worker's socket. Each Run is a single
// cgo call that transmits what the previous burst queued and receives the
// next burst.
type Step struct {
	c     *C.struct_rf_step
	rx    []*Mbuf // view of c.rx
	drop  []*Mbuf // view of c.drop
	ndrop int
	Txq   []TxQueue
}

// TxQueue collects packets for one (port, tx queue) until the next Run.
type TxQueue struct {
	c     *C.struct_rf_txq
	pkts  []*Mbuf // view of c.pkts
	n     int
	Port  uint16
	Queue uint16
}

// TxTarget names a transmit queue a Step feeds.
type TxTarget struct{ Port, Queue uint16 }

// NewStep allocates a step for bursts of up to burst packets, transmitting
// to txs, on the given socket. txRetries is how many more times a partly
// sent burst is offered to the PMD before the rest is freed and counted.
func NewStep(burst, socket int, txs []TxTarget, txRetries int) (*Step, error) {
	if burst < 1 || burst > 65535 {
		return nil, fmt.Errorf("burst %d out of range", burst)
	}
	ptr := unsafe.Sizeof(uintptr(0))
	size := unsafe.Sizeof(C.struct_rf_step{}) + uintptr(len(txs))*unsafe.Sizeof(C.struct_rf_txq{}) + uintptr(burst*(len(txs)+2))*ptr
	mem := C.rte_zmalloc_socket(nil, C.size_t(size), C.RTE_CACHE_LINE_SIZE, C.int(socket))
	if mem == nil {
		return nil, fmt.Errorf("allocating a burst step of %d bytes on socket %d: out of DPDK memory", size, socket)
	}
	c := (*C.struct_rf_step)(mem)
	p := unsafe.Add(mem, unsafe.Sizeof(C.struct_rf_step{}))
	c.txq = (*C.struct_rf_txq)(p)
	p = unsafe.Add(p, uintptr(len(txs))*unsafe.Sizeof(C.struct_rf_txq{}))
	c.rx = (**C.struct_rte_mbuf)(p)
	p = unsafe.Add(p, uintptr(burst)*ptr)
	c.drop = (**C.struct_rte_mbuf)(p)
	p = unsafe.Add(p, uintptr(burst)*ptr)
	c.burst = C.uint16_t(burst)
	c.nb_txq = C.uint16_t(len(txs))
	c.tx_retries = C.uint16_t(txRetries)
	s := &Step{c: c,
		rx:   unsafe.Slice((**Mbuf)(unsafe.Pointer(c.rx)), burst),
		drop: unsafe.Slice((**Mbuf)(unsafe.Pointer(c.drop)), burst)}
	cq := unsafe.Slice(c.txq, len(txs))
	s.Txq = make([]TxQueue, len(txs))
	for i, t := range txs {
		cq[i].pkts = (**C.struct_rte_mbuf)(p)
		cq[i].port = C.uint16_t(t.Port)
		cq[i].queue = C.uint16_t(t.Queue)
		s.Txq[i] = TxQueue{c: &cq[i], pkts: unsafe.Slice((**Mbuf)(p), burst), Port: t.Port, Queue: t.Queue}
		p = unsafe.Add(p, uintptr(burst)*ptr)
	}
	return s, nil
}

// Free releases the step's DPDK memory. Packets still queued are freed.
func (s *Step) Free() {
	if s.c == nil {
		return
	}
	for i := range s.Txq {
		t := &s.Txq[i]
		FreeMbufs(t.pkts[:t.n])
		t.n = 0
	}
	FreeMbufs(s.drop[:s.ndrop])
	s.ndrop = 0
	C.rte_free(unsafe.Pointer(s.c))
	s.c = nil
}

// SetRx selects the (port, queue) the next Run receives from.
func (s *Step) SetRx(port, queue uint16) {
	s.c.rx_port = C.uint16_t(port)
	s.c.rx_queue = C.uint16_t(queue)
}

// Run flushes every transmit queue and receives one burst; it returns the
// received packets, valid until the next Run.
func (s *Step) Run() []*Mbuf {
	for i := range s.Txq {
		t := &s.Txq[i]
		t.c.n = C.uint16_t(t.n)
		t.n = 0
	}
	s.c.nb_drop = C.uint16_t(s.ndrop)
	s.ndrop = 0
	n := C.rf_step_run(s.c)
	return s.rx[:n]
}

// Drop frees m at the next Run. The caller counts it under its reason.
func (s *Step) Drop(m *Mbuf) {
	s.drop[s.ndrop] = m
	s.ndrop++
}

// Flush transmits and frees what is queued without receiving.
func (s *Step) Flush() {
	burst := s.c.burst
	s.c.burst = 0
	s.Run()
	s.c.burst = burst
}

// TSC is the timestamp counter read at the start of the last Run.
func (s *Step) TSC() uint64 { return uint64(s.c.tsc) }

// Push queues m for transmission at the next Run. The queue holds one
// burst; the caller never queues more packets than it received.
func (t *TxQueue) Push(m *Mbuf) {
	t.pkts[t.n] = m
	t.n++
}

// Pending is the number of packets queued since the last Run.
func (t *TxQueue) Pending() int { return t.n }

// Sent and Dropped are cumulative counts kept by C; safe to read from any
// goroutine while the worker runs.
func (t *TxQueue) Sent() uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&t.c.sent))) }

// Dropped counts packets the PMD would not take after all retries; they
// were freed.
func (t *TxQueue) Dropped() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&t.c.dropped)))
}

// RDTSC reads the timestamp counter (one cgo call; control plane only).
func RDTSC() uint64 { return uint64(C.rf_rdtsc()) }
