package dpdk

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"roce-fwd/internal/cacheline"
)

// Step is one worker's burst engine: its receive queues and arrays, and
// its transmit queues, all in DPDK memory on the worker's socket. Each Run
// is a single cgo call that transmits what the previous step queued and
// receives one burst from every receive queue.
type Step struct {
	c     *C.struct_rf_step
	rx    []*Mbuf // view of c.rx: nb_rxq bursts
	rxq   []C.struct_rf_rxq
	burst int     // slots per rx queue: burst * max bursts
	drop  []*Mbuf // view of c.drop
	ndrop int
	Txq   []TxQueue
}

// Capacity is how many packets one Run can receive (and so how many a
// poll may have to queue or drop).
func (s *Step) Capacity() int { return len(s.rx) }

// TxQueue collects packets for one (port, tx queue) until the next Run.
type TxQueue struct {
	c     *C.struct_rf_txq
	pkts  []uintptr // view of c.pkts; addresses, so that a push has no GC write barrier (mbufs are not Go memory)
	n     int
	Port  uint16
	Queue uint16
}

// Queue names a (port, queue) pair. A transmit queue with a Ring is not
// the port's: the step enqueues its packets on the ring, and a Pump
// transmits them.
type Queue struct {
	Port, Queue uint16
	Ring        *Ring
}

// SetRxEvery makes the step poll rx queue i once every n steps (n a
// power of two up to 32768; 1: every step), for a queue whose every poll
// is costly, such as a kernel TAP's (a system call each).
func (s *Step) SetRxEvery(i, n int) error {
	if n < 1 || n > 1<<15 || n&(n-1) != 0 || i < 0 || i >= len(s.rxq) {
		return fmt.Errorf("rx queue %d every %d steps: want a queue of the step and a power of two up to 32768", i, n)
	}
	s.rxq[i].skip = C.uint16_t(n - 1)
	return nil
}

// NewStep allocates a step that polls rxs and transmits to txs, with
// rx bursts of up to burst packets, on the given socket. A queue whose
// burst comes back full is read again, up to maxBursts times per step.
// txRetries is how many transmit calls that take nothing (a full ring)
// are tolerated before the rest is freed and counted as dropped.
func NewStep(burst, maxBursts, socket int, rxs, txs []Queue, txRetries int) (*Step, error) {
	if maxBursts < 1 {
		maxBursts = 1
	}
	if burst < 1 || burst*maxBursts*max(len(rxs), 1) > 65535 {
		return nil, fmt.Errorf("burst %d out of range", burst)
	}
	if len(rxs) == 0 {
		return nil, fmt.Errorf("a step needs at least one rx queue")
	}
	ptr := unsafe.Sizeof(uintptr(0))
	per := burst * maxBursts * len(rxs) // what one step can receive, and so queue or drop
	size := unsafe.Sizeof(C.struct_rf_step{}) +
		uintptr(len(rxs))*unsafe.Sizeof(C.struct_rf_rxq{}) +
		uintptr(len(txs))*unsafe.Sizeof(C.struct_rf_txq{}) +
		uintptr(per*(len(txs)+2))*ptr
	mem, err := Zmalloc("a burst step", size, socket)
	if err != nil {
		return nil, err
	}
	take := func(p *unsafe.Pointer, n uintptr) unsafe.Pointer {
		q := *p
		*p = unsafe.Add(*p, n)
		return q
	}
	p := unsafe.Add(mem, unsafe.Sizeof(C.struct_rf_step{}))
	c := (*C.struct_rf_step)(mem)
	c.rxq = (*C.struct_rf_rxq)(take(&p, uintptr(len(rxs))*unsafe.Sizeof(C.struct_rf_rxq{})))
	c.txq = (*C.struct_rf_txq)(take(&p, uintptr(len(txs))*unsafe.Sizeof(C.struct_rf_txq{})))
	c.rx = (**C.struct_rte_mbuf)(take(&p, uintptr(per)*ptr))
	c.drop = (**C.struct_rte_mbuf)(take(&p, uintptr(per)*ptr))
	c.burst = C.uint16_t(burst)
	c.max_bursts = C.uint16_t(maxBursts)
	c.nb_rxq = C.uint16_t(len(rxs))
	c.nb_txq = C.uint16_t(len(txs))
	c.tx_retries = C.uint16_t(txRetries)
	// The worker writes the Step and its Txq for every burst and packet.
	s := cacheline.New[Step]()
	*s = Step{c: c, burst: burst * maxBursts,
		rx:   unsafe.Slice((**Mbuf)(unsafe.Pointer(c.rx)), per),
		rxq:  unsafe.Slice(c.rxq, len(rxs)),
		drop: unsafe.Slice((**Mbuf)(unsafe.Pointer(c.drop)), per)}
	for i, q := range rxs {
		s.rxq[i].port = C.uint16_t(q.Port)
		s.rxq[i].queue = C.uint16_t(q.Queue)
	}
	cq := unsafe.Slice(c.txq, len(txs))
	s.Txq = cacheline.Alone[TxQueue](len(txs))
	for i, t := range txs {
		pk := take(&p, uintptr(per)*ptr)
		cq[i].pkts = (**C.struct_rte_mbuf)(pk)
		cq[i].port = C.uint16_t(t.Port)
		cq[i].queue = C.uint16_t(t.Queue)
		if t.Ring != nil {
			cq[i].ring = t.Ring.r
		}
		s.Txq[i] = TxQueue{c: &cq[i], pkts: unsafe.Slice((*uintptr)(pk), per), Port: t.Port, Queue: t.Queue}
	}
	return s, nil
}

// IsRing reports whether the queue feeds an rte_ring (an exception
// path's TAP, transmitted off the workers) rather than a port.
func (t *TxQueue) IsRing() bool { return t.c.ring != nil }

// Free releases the step's DPDK memory. Packets still queued are freed.
func (s *Step) Free() {
	if s.c == nil {
		return
	}
	for i := range s.Txq {
		t := &s.Txq[i]
		FreeMbufs(unsafe.Slice((**Mbuf)(unsafe.Pointer(&t.pkts[0])), t.n))
		t.n = 0
	}
	FreeMbufs(s.drop[:s.ndrop])
	s.ndrop = 0
	FreeMem(unsafe.Pointer(s.c))
	s.c = nil
}

// Run flushes every transmit queue and receives one burst from each
// receive queue; it returns the number received. Rx(i) gives queue i's
// packets, valid until the next Run.
func (s *Step) Run() int {
	for i := range s.Txq {
		t := &s.Txq[i]
		t.c.n = C.uint16_t(t.n)
		t.n = 0
	}
	s.c.nb_drop = C.uint16_t(s.ndrop)
	s.ndrop = 0
	return int(C.rf_step_run(C.uintptr_t(uintptr(unsafe.Pointer(s.c)))))
}

// Rx is what rx queue i (in NewStep's order) received in the last Run.
func (s *Step) Rx(i int) []*Mbuf {
	off := i * s.burst
	return s.rx[off : off+int(s.rxq[i].n)]
}

// Flush transmits and frees what is queued without receiving.
func (s *Step) Flush() {
	burst := s.c.burst
	s.c.burst = 0
	s.Run()
	s.c.burst = burst
	for i := range s.rxq {
		s.rxq[i].n = 0
	}
}

// Drop frees m at the next Run. The caller counts it under its reason.
func (s *Step) Drop(m *Mbuf) {
	s.drop[s.ndrop] = m
	s.ndrop++
}

// TSC is the timestamp counter read at the start of the last Run.
func (s *Step) TSC() uint64 { return uint64(s.c.tsc) }

// Push queues m for transmission at the next Run. A queue holds what one
// Run can receive; the caller never queues more packets than it received.
func (t *TxQueue) Push(m *Mbuf) {
	t.pkts[t.n] = uintptr(unsafe.Pointer(m))
	t.n++
}

// PushAll queues every packet of ms, in order, in one copy. Like Push,
// it panics rather than lose packets past the queue's capacity.
func (t *TxQueue) PushAll(ms []*Mbuf) {
	if len(ms) == 0 {
		return
	}
	copy(t.pkts[t.n:t.n+len(ms)], unsafe.Slice((*uintptr)(unsafe.Pointer(&ms[0])), len(ms)))
	t.n += len(ms)
}

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
