// Package qpstats keeps per-queue-pair RoCEv2 telemetry on the data path:
// a fixed-size table per worker lcore, keyed by (source IP, destination
// IP, destination QP), that never allocates after it is made. Entries age
// out after a configurable idle time; when a probe window is full the
// least recently seen entry is evicted. Both are counted.
//
// A flow's packets all travel one way, so a requester→responder flow
// carries requests and the reverse flow carries responses and ACKs to the
// requester's QP. PSN continuity is tracked on every packet but ACKs
// (which are cumulative and may coalesce): a PSN one past the last is in
// order, a later one is a gap (the PSNs skipped are counted), an earlier
// one is out of order (a retransmission or reordering). A READ request
// consumes one PSN per response packet, which depends on the path MTU, so
// after a READ request any forward PSN is accepted as in order.
package qpstats

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"roce-fwd/roce"
)

// Key identifies a flow to one QP. Addresses are IPv6 as two big-endian
// words (IPv4 as IPv4-mapped IPv6), so keys compare and hash as words.
type Key struct {
	Src, Dst [2]uint64
	QP       uint32
}

func addr(w [2]uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], w[0])
	binary.BigEndian.PutUint64(b[8:], w[1])
	return netip.AddrFrom16(b).Unmap()
}

// SrcAddr is the source address (IPv4 unmapped).
func (k Key) SrcAddr() netip.Addr { return addr(k.Src) }

// DstAddr is the destination address.
func (k Key) DstAddr() netip.Addr { return addr(k.Dst) }

// Opcode classes of the opcode mix.
const (
	ClassSend = iota
	ClassWrite
	ClassReadRequest
	ClassReadResponse
	ClassAck
	ClassAtomic
	ClassCNP
	ClassOther
	NumClasses // a power of two: Observe masks with NumClasses-1
)

// ClassNames name the opcode classes.
var ClassNames = [NumClasses]string{"send", "write", "read_request", "read_response", "ack", "atomic", "cnp", "other"}

// NAK syndromes counted separately; anything else counts as "other".
const (
	NAKPSNSequence = iota
	NAKInvalidRequest
	NAKRemoteAccess
	NAKRemoteOperational
	NAKInvalidRDRequest
	NAKOther
	NumNAKs
)

// NAKNames name the NAK counters.
var NAKNames = [NumNAKs]string{"psn_sequence_error", "invalid_request", "remote_access_error", "remote_operational_error", "invalid_rd_request", "other"}

// Counters are one QP flow's statistics. Each packet counts in one class
// of Mix, so the packet and CNP totals are derived from it (Packets,
// CNPs) rather than counted again per packet.
type Counters struct {
	Bytes       uint64 // whole frames
	FirstSeen   int64  // unix nanoseconds
	LastSeen    int64
	Mix         [NumClasses]uint64
	ExpectedPSN uint32 // next PSN in order, valid when PSNKnown
	PSNKnown    bool
	afterRead   bool // the last request was a READ: any forward PSN is in order
	OutOfOrder  uint64
	Gaps        uint64 // times the PSN jumped forward
	GapPSNs     uint64 // PSNs skipped over by those jumps
	NAKs        [NumNAKs]uint64
	RNRNAKs     uint64
	CE          uint64 // packets that arrived CE-marked
}

// Packets is the number of packets of the flow.
func (c *Counters) Packets() uint64 {
	var n uint64
	for _, v := range c.Mix {
		n += v
	}
	return n
}

// CNPs is the number of congestion notification packets to the QP.
func (c *Counters) CNPs() uint64 { return c.Mix[ClassCNP] }

// NAKTotal is the number of NAKs of any kind (RNR NAKs excluded).
func (c *Counters) NAKTotal() uint64 {
	var n uint64
	for _, v := range c.NAKs {
		n += v
	}
	return n
}

// Entry is one slot of the table. used sits by the key: a probe reads
// both, from one cache line.
type Entry struct {
	Key
	used bool
	Counters
}

// TableStats count how the table itself fared.
type TableStats struct {
	Slots     int
	Used      int
	Inserts   uint64
	Evictions uint64 // a live entry pushed out because its probe window was full
	Aged      uint64 // an idle entry reused after MaxAge
}

// probeWindow is how many slots a key may occupy from its hash.
const probeWindow = 8

// Table is one worker's QP table. Only its worker calls Observe.
type Table struct {
	last   *Entry // entry of the previous packet
	slots  []Entry
	mask   uint32
	maxAge int64 // ns; 0: entries never age
	stats  TableStats
}

// New makes a table of at least n slots (rounded up to a power of two),
// whose entries idle for maxAgeNS nanoseconds may be reused.
func New(n int, maxAgeNS int64) *Table {
	size := 16
	for size < n {
		size <<= 1
	}
	return &Table{slots: make([]Entry, size), mask: uint32(size - 1), maxAge: maxAgeNS,
		stats: TableStats{Slots: size}}
}

// v4mapped is the upper half of the low word of an IPv4-mapped address.
const v4mapped = 0xffff << 32

// addrWords reads the addresses as words. The data path keeps them in
// registers: building a Key on the stack and copying it costs a
// store-forwarding stall per packet (measured: a third of Observe).
func addrWords(frame []byte, r *roce.Result) (s0, s1, d0, d1 uint64) {
	l3 := int(r.L3)
	if r.IPVersion == 4 {
		// Source and destination are adjacent: one load for both.
		a := binary.BigEndian.Uint64(frame[l3+12 : l3+20 : l3+20])
		return 0, v4mapped | a>>32, 0, v4mapped | uint64(uint32(a))
	}
	ip := frame[l3+8 : l3+40]
	return binary.BigEndian.Uint64(ip), binary.BigEndian.Uint64(ip[8:]),
		binary.BigEndian.Uint64(ip[16:]), binary.BigEndian.Uint64(ip[24:])
}

// hash mixes a key into 32 bits with a single multiply on its critical
// path: the words are folded (the destination rotated, so that a flow and
// its reverse differ; the IPv6 upper words and the QP through multiplies
// of their own, which run alongside), and the high half of the product
// with an odd constant is kept (Fibonacci hashing). A probe runs on every
// packet that is not of the previous packet's flow, so its latency counts.
func hash(s0, s1, d0, d1 uint64, qp uint32) uint32 {
	x := s1 ^ bits.RotateLeft64(d1, 32) ^ (s0^bits.RotateLeft64(d0, 16))*0xc2b2ae3d27d4eb4f ^
		uint64(qp)*0x9e3779b97f4a7c15
	return uint32(x * 0xbf58476d1ce4e5b9 >> 32)
}

// Observe counts one classified RoCE frame of frameLen bytes seen at now
// (unix ns, one reading per burst is enough).
func (t *Table) Observe(frame []byte, r *roce.Result, frameLen int, now int64) {
	s0, s1, d0, d1 := addrWords(frame, r)
	qp := r.DestQP
	// RDMA sends runs of packets of one QP (a message of many MTUs), so
	// the last entry found is tried before hashing. Checked here rather
	// than in a function of its own (measured: the call cost more than the
	// check).
	e := t.last
	if e == nil || e.QP != qp || e.Src[1] != s1 || e.Dst[1] != d1 || e.Src[0] != s0 || e.Dst[0] != d0 {
		e = t.probe(s0, s1, d0, d1, qp, now)
		t.last = e
	}
	c := &e.Counters
	c.Bytes += uint64(frameLen)
	c.LastSeen = now
	if r.ECN == 3 {
		c.CE++
	}
	class := classOf[r.Opcode]
	c.Mix[class&(NumClasses-1)]++ // the mask spares a bounds check
	switch {
	case r.CNP:
		return
	case r.HasAETH && r.AETH.IsNAK():
		c.NAKs[nakIndex(r.AETH.NAKCode())]++
	case r.HasAETH && r.AETH.IsRNRNAK():
		c.RNRNAKs++
	}
	if class == ClassAck {
		return // cumulative: no continuity to check
	}
	c.trackPSN(r.PSN, class == ClassReadRequest)
}

func (c *Counters) trackPSN(psn uint32, isRead bool) {
	if c.PSNKnown {
		// 24-bit serial arithmetic: differences in the upper half are "behind".
		d := (psn - c.ExpectedPSN) & 0xffffff
		switch {
		case d == 0:
		case d < 1<<23:
			if !c.afterRead {
				c.Gaps++
				c.GapPSNs += uint64(d)
			}
		default:
			c.OutOfOrder++
			c.afterRead = isRead
			return // do not move expectations back
		}
	}
	c.ExpectedPSN = (psn + 1) & 0xffffff
	c.PSNKnown = true
	c.afterRead = isRead
}

func nakIndex(code roce.NAKCode) int {
	switch code {
	case roce.NAKPSNSequenceError:
		return NAKPSNSequence
	case roce.NAKInvalidRequest:
		return NAKInvalidRequest
	case roce.NAKRemoteAccessError:
		return NAKRemoteAccess
	case roce.NAKRemoteOperationalError:
		return NAKRemoteOperational
	case roce.NAKInvalidRDRequest:
		return NAKInvalidRDRequest
	}
	return NAKOther
}

// classOf maps every opcode to its class: a table, built once from the
// low five bits, which name the operation in every transport.
var classOf = func() (t [256]uint8) {
	for op := range t {
		c := ClassOther
		switch op & 0x1f {
		case 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x16, 0x17:
			c = ClassSend
		case 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x1d:
			c = ClassWrite
		case 0x0c:
			c = ClassReadRequest
		case 0x0d, 0x0e, 0x0f, 0x10:
			c = ClassReadResponse
		case 0x11:
			c = ClassAck
		case 0x12, 0x13, 0x14:
			c = ClassAtomic
		}
		if roce.Opcode(op) == roce.OpCNP { // the class CNPs() counts
			c = ClassCNP
		}
		t[op] = uint8(c)
	}
	return t
}()

// probe returns the entry for a key, inserting it if needed.
func (t *Table) probe(s0, s1, d0, d1 uint64, qp uint32, now int64) *Entry {
	h := hash(s0, s1, d0, d1, qp)
	var victim *Entry
	for i := uint32(0); i < probeWindow; i++ {
		e := &t.slots[(h+i)&t.mask]
		if !e.used {
			return t.insert(e, s0, s1, d0, d1, qp, now)
		}
		if e.QP == qp && e.Src[1] == s1 && e.Dst[1] == d1 && e.Src[0] == s0 && e.Dst[0] == d0 {
			return e
		}
		if t.maxAge > 0 && now-e.LastSeen > t.maxAge {
			t.stats.Aged++
			t.stats.Used--
			return t.insert(e, s0, s1, d0, d1, qp, now)
		}
		if victim == nil || e.LastSeen < victim.LastSeen {
			victim = e
		}
	}
	t.stats.Evictions++
	t.stats.Used--
	return t.insert(victim, s0, s1, d0, d1, qp, now)
}

func (t *Table) insert(e *Entry, s0, s1, d0, d1 uint64, qp uint32, now int64) *Entry {
	*e = Entry{used: true}
	e.Src, e.Dst, e.QP = [2]uint64{s0, s1}, [2]uint64{d0, d1}, qp
	e.FirstSeen = now
	t.stats.Inserts++
	t.stats.Used++
	return e
}

// Stats reports the table's own counters.
func (t *Table) Stats() TableStats { return t.stats }

// CopyTo copies the used entries into dst (reusing its storage) and
// returns it with the table's stats; the worker calls it when the control
// plane asks for a snapshot.
func (t *Table) CopyTo(dst []Entry) ([]Entry, TableStats) {
	dst = dst[:0]
	for i := range t.slots {
		if t.slots[i].used {
			dst = append(dst, t.slots[i])
		}
	}
	return dst, t.stats
}

// CopyChunk appends the used entries among slots [from, from+n) to dst and
// returns it with the next slot to copy (Slots when done), so a worker can
// copy its table a little per burst instead of stalling for all of it.
func (t *Table) CopyChunk(dst []Entry, from, n int) ([]Entry, int) {
	end := min(from+n, len(t.slots))
	for i := from; i < end; i++ {
		if t.slots[i].used {
			dst = append(dst, t.slots[i])
		}
	}
	return dst, end
}

// Reset empties the table and its counters.
func (t *Table) Reset() {
	t.last = nil
	clear(t.slots)
	t.stats = TableStats{Slots: len(t.slots)}
}
