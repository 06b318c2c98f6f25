package pipeline

import (
	"math/bits"
	"sync/atomic"
)

// Reason is a named cause for a packet the pipeline did not transmit.
// Every packet that enters a worker is either handed to a PMD for
// transmission or counted under exactly one Reason.
type Reason uint8

const (
	DropTxFull Reason = iota // the PMD took no more after every retry
	DropRunt                 // too short for an Ethernet header ("mac" mode rewrites it)
	NumReasons
)

var reasonNames = [NumReasons]string{
	DropTxFull: "tx_full",
	DropRunt:   "runt",
}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Burst-size histogram buckets: 0 (empty poll), 1, 2-3, 4-7, ... 256+.
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
	return itoa(lo) + "-" + itoa(2*lo-1)
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// histBucket maps a burst size to its bucket: the bit length of n.
func histBucket(n int) int {
	return min(bits.Len(uint(n)), HistBuckets-1)
}

// lcoreCounters belong to one worker. Only that worker writes them (once
// per burst, never per packet); the control plane reads them at any time.
// The struct is padded so two workers never share a cache line.
type lcoreCounters struct {
	_          [64]byte
	packets    atomic.Uint64 // received and handled
	bursts     atomic.Uint64 // polls that returned packets
	emptyPolls atomic.Uint64
	busyCycles atomic.Uint64 // TSC cycles of polls that carried packets
	hist       [HistBuckets]atomic.Uint64
	drops      [NumReasons]atomic.Uint64
	_          [64]byte
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

// EmptyShare is the fraction of polls that returned nothing.
func (s LcoreStats) EmptyShare() float64 {
	polls := s.Bursts + s.EmptyPolls
	if polls == 0 {
		return 0
	}
	return float64(s.EmptyPolls) / float64(polls)
}

// Sub returns the counts accumulated since an earlier snapshot.
func (s LcoreStats) Sub(old LcoreStats) LcoreStats {
	d := s
	d.Packets -= old.Packets
	d.Bursts -= old.Bursts
	d.EmptyPolls -= old.EmptyPolls
	d.BusyCycles -= old.BusyCycles
	for i := range d.Hist {
		d.Hist[i] -= old.Hist[i]
	}
	for i := range d.Drops {
		d.Drops[i] -= old.Drops[i]
	}
	return d
}
