package pipeline

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
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

// StallBounds are the gaps between the starts of two polls of a worker
// that count as stalls: for that long none of its rx queues was read, and
// a NIC's rx ring fills in that time (1024 descriptors at 20 Mpps: 51 µs)
// and drops what comes next (rx_missed). A busy poll of 128 packets takes
// a few microseconds; a stall is the collector stopping the world, the
// kernel running something else on the worker's CPU, or work given to the
// worker taking too long.
var StallBounds = [NumStallBounds]time.Duration{50 * time.Microsecond, 200 * time.Microsecond, time.Millisecond, 10 * time.Millisecond}

// NumStallBounds is how many StallBounds there are.
const NumStallBounds = 4

// StallBoundLabel names bound i ("50us", "200us", "1ms", "10ms"), as a
// Prometheus label and a JSON key.
func StallBoundLabel(i int) string {
	return strings.Replace(StallBounds[i].String(), "µ", "u", 1)
}

// lcoreCounters belong to one worker and only that worker writes them,
// with plain stores: no atomic instruction on the data path. The control
// plane gets a consistent copy through a snapshot handshake (below).
type lcoreCounters struct {
	packets    uint64              // received and handled
	busyCycles uint64              // TSC cycles of polls that carried packets
	hist       [HistBuckets]uint64 // bucket 0: empty polls; the others: bursts
	drops      [NumReasons]uint64
	// stalls[i] counts the polls that started more than StallBounds[i]
	// but at most StallBounds[i+1] after the one before; maxGap is the
	// longest gap between two polls (TSC cycles), stall or not.
	stalls [NumStallBounds]uint64
	maxGap uint64
}

// snapshot is the last copy of the worker's counters the control plane
// got, for a reader when the worker does not answer.
type snapshot struct {
	mu   sync.Mutex
	pub  lcoreCounters
	roce []rocestats.Counters // in roce mode, per rx queue
}

// counters returns a consistent copy of the worker's counters (the
// worker copies them between two polls) and, in roce mode, copies its
// per-rx-queue RoCE counters into rc. If a running worker does not
// answer (stuck inside a PMD), it is the last copy made.
func (w *Worker) counters(rc []rocestats.Counters) lcoreCounters {
	var c lcoreCounters
	err := w.do("counters snapshot", func() bool {
		c = w.c
		if w.rs != nil {
			copy(rc, w.rs.ports)
		}
		return true
	})
	w.snap.mu.Lock()
	defer w.snap.mu.Unlock()
	if err != nil {
		copy(rc, w.snap.roce)
		return w.snap.pub
	}
	w.snap.pub = c
	if len(rc) > 0 {
		w.snap.roce = append(w.snap.roce[:0], rc...)
	}
	return c
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
	// Stalls[i] counts the polls that started more than StallBounds[i]
	// after the poll before (cumulative: a gap over 1 ms is counted under
	// 50 µs and 200 µs too). MaxPollGap is the longest gap between two
	// polls since the worker started, stall or not.
	Stalls     [NumStallBounds]uint64
	MaxPollGap time.Duration
}

// CyclesPerPacket is the TSC cycles spent per packet on busy polls.
func (s LcoreStats) CyclesPerPacket() float64 {
	if s.Packets == 0 {
		return 0
	}
	return float64(s.BusyCycles) / float64(s.Packets)
}
