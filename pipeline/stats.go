package pipeline

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"roce-fwd/rocestats"
)

// Histogram of packets received from one queue in one poll (up to
// max_bursts bursts): 0 (empty poll), 1, 2-3, 4-7, ... 256+.
const HistBuckets = 10

// HistBucketLabel names bucket i ("0", "1", "2-3", ..., "256+").
func HistBucketLabel(i int) string {
	switch {
	case i == 0:
		return "0"
	case i == 1:
		return "1"
	case i == HistBuckets-1:
		return "256+"
	}
	lo := 1 << (i - 1)
	return strconv.Itoa(lo) + "-" + strconv.Itoa(2*lo-1)
}

// histBucket maps a burst size to its bucket: the bit length of n.
func histBucket(n int) int {
	return min(bits.Len(uint(n)), HistBuckets-1)
}

// lcoreCounters belong to one worker and only that worker writes them,
// with plain stores: no atomic instruction on the data path. The control
// plane gets a consistent copy through a snapshot handshake (below).
type lcoreCounters struct {
	packets    uint64              // received and handled
	busyCycles uint64              // TSC cycles of polls that carried packets
	hist       [HistBuckets]uint64 // bucket 0: empty polls; the others: bursts
	drops      [NumReasons]uint64
}

// snapshot is the handshake through which a running worker publishes a
// copy of its counters: the control plane bumps req and waits for ack;
// the worker, between two bursts, sees req != ack, copies, and stores ack.
// The worker pays one plain load per burst.
type snapshot struct {
	mu  sync.Mutex // one control-plane reader at a time
	req atomic.Uint64
	ack atomic.Uint64
	pub lcoreCounters
	// flows asks for the flow tables' counters too: they can be large,
	// so only the reader that wants them makes the worker copy them.
	flows atomic.Bool
}

// snapshotWait bounds how long a reader waits for a busy worker.
const snapshotWait = time.Second

// serveSnapshot is called by the worker between bursts.
func (w *Worker) serveSnapshot() {
	if r := w.snap.req.Load(); r != w.snap.ack.Load() {
		w.snap.pub = w.c
		if w.rs != nil {
			copy(w.rs.pub, w.rs.ports)
		}
		if w.qs != nil {
			w.qs.publish(w.now)
		}
		if w.snap.flows.Load() {
			w.fs.publish()
		}
		w.snap.ack.Store(r)
	}
	if w.rs != nil && w.rs.qp != nil {
		w.rs.serveQP()
	}
}

// counters returns a consistent copy of the worker's counters and, in
// roce mode, copies its per-rx-queue RoCE counters into rc.
func (w *Worker) counters(rc []rocestats.Counters) lcoreCounters {
	w.snap.mu.Lock()
	defer w.snap.mu.Unlock()
	if w.published() {
		if w.rs != nil {
			copy(rc, w.rs.pub)
		}
		return w.snap.pub
	}
	// Stopped: its last writes happened before rte_eal_wait_lcore returned.
	if w.rs != nil {
		copy(rc, w.rs.ports)
	}
	return w.c
}

// published asks a running worker for a copy and waits for it. False
// means the worker is not running and its counters may be read directly.
func (w *Worker) published() bool {
	if !w.looping.Load() {
		return false
	}
	r := w.snap.req.Add(1)
	deadline := time.Now().Add(snapshotWait)
	for w.snap.ack.Load() < r {
		if !w.looping.Load() {
			return false
		}
		if time.Now().After(deadline) {
			return true // a worker stuck inside a PMD: the last copy it made
		}
		time.Sleep(20 * time.Microsecond)
	}
	return true
}

// LcoreStats is a snapshot of one worker's counters.
type LcoreStats struct {
	Lcore      int
	Socket     int
	Queues     []string // "port/queue" it polls
	Packets    uint64
	Bursts     uint64
	EmptyPolls uint64
	BusyCycles uint64
	Hist       [HistBuckets]uint64
	Drops      [NumReasons]uint64
}

// CyclesPerPacket is the TSC cycles spent per packet on busy polls.
func (s LcoreStats) CyclesPerPacket() float64 {
	if s.Packets == 0 {
		return 0
	}
	return float64(s.BusyCycles) / float64(s.Packets)
}
