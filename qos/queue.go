package qos

import "strconv"

// Reason says why the QoS stage dropped a packet. Reasons are small
// integers so the dataplane can keep per-reason counters in an array.
type Reason uint8

const (
	ReasonNone       Reason = iota
	ReasonQueueFull         // the queue's byte limit would be exceeded
	ReasonQueueSlots        // every slot of the queue's ring is in use
	ReasonWRED              // WRED dropped a Not-ECT packet on a lossy TC
	ReasonPFCWD             // the PFC watchdog (action drop) holds the queue
	NumReasons
)

var reasonNames = [NumReasons]string{"none", "qos_queue_full", "qos_queue_slots", "qos_wred", "qos_pfcwd"}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "qos_reason_" + strconv.Itoa(int(r))
}

// Slot is one queued packet: an opaque handle (an mbuf pointer in the
// dataplane), its frame length as counted against byte limits, shapers
// and DWRR deficits, and the ingress port it came from, so the dequeuing
// side can return its bytes to that port's PFCTx.
type Slot struct {
	Handle uintptr
	Len    uint32
	Src    uint16
}

// QueueStats are a queue's cumulative counters and watermarks.
type QueueStats struct {
	EnqPackets, EnqBytes uint64
	DeqPackets, DeqBytes uint64
	DropFull             uint64 // refused: byte limit
	DropSlots            uint64 // refused: no free slot
	MaxBytes             uint64 // deepest seen, in bytes
	MaxPackets           uint32 // deepest seen, in packets
}

// Queue is a FIFO of Slots bounded by a slot count (the length of the ring
// the caller provides, which may live in DPDK memory) and by a byte limit.
// The zero Queue is unusable; call Init or NewQueue.
type Queue struct {
	ring  []Slot
	head  uint32
	n     uint32
	bytes uint64
	limit uint64 // 0: slots are the only bound
	st    QueueStats
}

// NewQueue returns a queue over ring with the given byte limit (0 means
// no byte limit).
func NewQueue(ring []Slot, limit uint64) *Queue {
	q := new(Queue)
	q.Init(ring, limit)
	return q
}

// Init (re)initialises q over ring, empty, counters cleared. The ring must
// hold at least one slot and at most 2^32-1.
func (q *Queue) Init(ring []Slot, limit uint64) {
	if len(ring) == 0 || uint64(len(ring)) > 1<<32-1 {
		panic("qos: queue ring must hold 1 to 2^32-1 slots")
	}
	*q = Queue{ring: ring, limit: limit}
}

// Fits reports whether a packet of n bytes could be enqueued now, and if
// not, why.
func (q *Queue) Fits(n uint32) Reason {
	if q.n == uint32(len(q.ring)) {
		return ReasonQueueSlots
	}
	if q.limit != 0 && q.bytes+uint64(n) > q.limit {
		return ReasonQueueFull
	}
	return ReasonNone
}

// Enqueue appends s, or refuses it (counting the refusal) and says why.
func (q *Queue) Enqueue(s Slot) Reason {
	if r := q.Fits(s.Len); r != ReasonNone {
		if r == ReasonQueueSlots {
			q.st.DropSlots++
		} else {
			q.st.DropFull++
		}
		return r
	}
	q.push(s)
	return ReasonNone
}

// push appends s; the caller has checked Fits.
func (q *Queue) push(s Slot) {
	i := q.head + q.n
	if i >= uint32(len(q.ring)) {
		i -= uint32(len(q.ring))
	}
	q.ring[i] = s
	q.n++
	q.bytes += uint64(s.Len)
	q.st.EnqPackets++
	q.st.EnqBytes += uint64(s.Len)
	if q.bytes > q.st.MaxBytes {
		q.st.MaxBytes = q.bytes
	}
	if q.n > q.st.MaxPackets {
		q.st.MaxPackets = q.n
	}
}

// Dequeue removes and returns the head packet.
func (q *Queue) Dequeue() (Slot, bool) {
	if q.n == 0 {
		return Slot{}, false
	}
	s := q.pop()
	q.st.DeqPackets++
	q.st.DeqBytes += uint64(s.Len)
	return s, true
}

// pop removes the head without counting it as sent; q is not empty.
func (q *Queue) pop() Slot {
	s := q.ring[q.head]
	q.head++
	if q.head == uint32(len(q.ring)) {
		q.head = 0
	}
	q.n--
	q.bytes -= uint64(s.Len)
	return s
}

// HeadLen is the length of the head packet, 0 when the queue is empty.
func (q *Queue) HeadLen() uint32 {
	if q.n == 0 {
		return 0
	}
	return q.ring[q.head].Len
}

// Drain removes up to len(out) packets into out without counting them as
// sent (a flush: the caller frees them and counts the drop) and returns
// how many it removed.
func (q *Queue) Drain(out []Slot) int {
	k := 0
	for k < len(out) && q.n > 0 {
		out[k] = q.pop()
		k++
	}
	return k
}

func (q *Queue) Bytes() uint64     { return q.bytes }
func (q *Queue) Packets() int      { return int(q.n) }
func (q *Queue) Stats() QueueStats { return q.st }
func (q *Queue) MaxPackets() int   { return int(q.st.MaxPackets) }

// ResetMax restarts the watermarks from the current depth, for periodic
// "max depth since last read" reporting.
func (q *Queue) ResetMax() { q.st.MaxBytes, q.st.MaxPackets = q.bytes, q.n }
