// Package qpstats keeps per-queue-pair RoCEv2 telemetry on the data path:
// a fixed-size table per worker lcore, keyed by (source IP, destination
// IP, destination QP), that never allocates after it is made. Entries age
// out after a configurable idle time; when both of a key's buckets are
// full the least recently seen entry of the two is evicted. Both are
// counted.
//
// A flow's packets all travel one way, so a requester→responder flow
// carries requests and the reverse flow carries responses and ACKs to the
// requester's QP. PSN continuity is tracked on every packet but ACKs
// (which are cumulative and may coalesce): a PSN one past the last is in
// order, a later one is a gap (the PSNs skipped are counted), an earlier
// one is out of order (a retransmission or reordering). A READ request
// consumes one PSN per response packet, which depends on the path MTU, so
// after a READ request any forward PSN is accepted as in order.
//
// The table is built for thousands of QPs per worker, whose entries do not
// fit in the CPU's caches. A burst is looked up in three passes (Add,
// Find, Update) so that the cache misses of a whole burst overlap: Add
// hashes every packet's key, Find prefetches the keys' buckets and then
// picks each packet's slot from its bucket alone and starts loading the
// first slots, Update (Settle, then CountStaged, which the data path calls
// itself) counts each packet into its slot while the caller keeps the
// slots of the packets a few ahead loading (Ahead). A bucket is one cache
// line of eight signatures and coarse last-seen times, so a lookup, an
// insertion and the choice of a victim read one line, never the slots
// themselves.
// What packets update sits in one cache line, the slot; what only NAKs,
// CE marks, counter carries and insertions touch is kept apart, and an
// insertion writes only its first line (the rest is zeroed at the flow's
// first write there). When the table is nearly full, so that insertions
// evict, a key's second bucket is loaded with its first. A port with a
// handful of busy QPs pays for none of this: Hit finds a packet of the
// flow found last, or of one of the flows found recently in a memo, and
// Count counts it at once, in its slot still in the cache; only the others
// are staged (Add). The two count the PSN state differently (Count with
// branches, Update with selects), each for the traffic that takes it.
// The memory can come from the caller (DPDK's hugepage heap on the
// worker's socket: no TLB misses on 4 KB pages, invisible to the Go
// garbage collector).
package qpstats

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"unsafe"

	"roce-fwd/internal/cacheline"
	"roce-fwd/prefetch"

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
	OutOfOrder  uint64
	Gaps        uint64 // times the PSN jumped forward
	GapPSNs     uint64 // PSNs skipped over by those jumps
	NAKs        [NumNAKs]uint64
	RNRNAKs     uint64
	CE          uint64 // packets that arrived CE-marked
	// What the QoS stage did to the flow: packets it marked CE, queued
	// while their TC was paused by PFC, and dropped (Victim).
	MarkedCE   uint64
	HeldPaused uint64
	QoSDropped uint64
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

// Entry is one flow as the table reports it, assembled from its slot.
type Entry struct {
	Key
	Counters
}

// TableStats count how the table itself fared.
type TableStats struct {
	Slots     int
	Used      int
	Bytes     int    // memory the table occupies
	Inserts   uint64 // flows added
	Evictions uint64 // a live flow pushed out because its bucket was full
	Aged      uint64 // an idle flow's slot reused after MaxAge
}

// Add adds o's counts to s: the stats of several tables (one per worker)
// as one.
func (s *TableStats) Add(o TableStats) {
	s.Slots += o.Slots
	s.Used += o.Used
	s.Bytes += o.Bytes
	s.Inserts += o.Inserts
	s.Evictions += o.Evictions
	s.Aged += o.Aged
}

// ways is the number of slots of a bucket.
const ways = 8

// bucket is one cache line: the signatures of its slots (0: free) and the
// coarse time of each slot's last packet. A lookup, an insertion and the
// choice of a victim read it alone.
type bucket struct {
	sig [ways]uint32
	age [ways]uint32 // now >> ageShift, compared modulo 2^32
}

// ageShift makes bucket times units of 2^20 ns (about a millisecond):
// fine enough to pick the least recently seen flow, and 32 bits of them
// last 52 days.
const ageShift = 20

// slot is what every packet of a flow touches, in one cache line: the
// key, the PSN state and the low words of the byte, out-of-order and
// opcode counters. Their carries, and what few packets touch (CE marks,
// PSN gaps, NAKs, the first-seen time), are in the flow's cold part. A
// flow's last-seen time is its bucket's. Out-of-order PSNs are counted
// here: a go-back-N retransmission (or a replayed capture) makes every
// packet of a run one.
type slot struct {
	src, dst [2]uint64
	qp       uint32
	psn      uint32             // the expected PSN, with psnKnown and psnAfterRead
	bytes    uint32             // low word; carries in cold.bytesHigh
	ooo      uint32             // out-of-order PSNs, low word; carries in cold.oooHigh
	mix      [NumClasses]uint16 // packets per opcode class, low 16 bits; carries in cold.mixHigh
}

const (
	psnMask      = 0xffffff
	psnKnown     = 1 << 31
	psnAfterRead = 1 << 30 // the last request was a READ: any forward PSN is in order
)

// cold is what only insertions, CE marks, PSN gaps, NAKs, what QoS did
// and counter carries touch. Its first line is what an insertion writes
// and the counting of a packet may: the carries and CE marks. The rest is
// written rarely and zeroed lazily: an insertion sets restStale in
// firstSeen, and the first write there (rest) zeroes it first. With more
// flows than slots nearly every packet inserts, and then loads one cold
// line, not three.
type cold struct {
	firstSeen int64              // unix ns, and restStale
	ce        uint64             // CE-marked packets
	bytesHigh uint64             // slot.bytes wrapped this often (units of 2^32)
	oooHigh   uint64             // slot.ooo wrapped this often (2^32)
	mixHigh   [NumClasses]uint32 // slot.mix wrapped this often (2^16)
	coldRare
	_ [4]uint64
}

// coldRare is the cold part past its first line, zeroed lazily (rest).
type coldRare struct {
	gaps    uint64
	gapPSNs uint64
	naks    [NumNAKs]uint64
	rnrNAKs uint64
	victim  [numVictims]uint64 // Victim's counts
}

// restStale, in cold.firstSeen: the cold part past its first line still
// holds an earlier flow's counts. Unix nanoseconds reach bit 62 in 2116.
const restStale = 1 << 62

// The first line ends where the rest begins.
var _ [64]byte = [unsafe.Offsetof(cold{}.coldRare)]byte{}

// VictimKind is what the QoS stage did to a flow's packet.
type VictimKind uint8

const (
	VictimMarked  VictimKind = iota // marked CE by WRED-ECN
	VictimHeld                      // queued while its TC was paused by PFC
	VictimDropped                   // dropped by the QoS stage (tail, WRED, lossless overflow, watchdog)
	numVictims
)

// Victim counts what the QoS stage did to a packet of the flow in slot,
// as Hit or Update returned it.
func (t *Table) Victim(slot int32, k VictimKind) {
	t.rest(uint32(slot)).victim[k%numVictims]++
}

// SlotBytes is the memory of one slot: its share of a bucket, its hot
// line and its cold part.
const SlotBytes = int(unsafe.Sizeof(bucket{}))/ways + int(unsafe.Sizeof(slot{})) + int(unsafe.Sizeof(cold{}))

// slotAlign keeps each slot in one cache line.
const slotAlign = 64

// A bucket and a slot are one cache line each, and a cold part three
// (Find and Ahead prefetch them by line): the build fails otherwise.
var (
	_ [unsafe.Sizeof(bucket{}) - 64]byte
	_ [64 - unsafe.Sizeof(bucket{})]byte
	_ [unsafe.Sizeof(slot{}) - slotAlign]byte
	_ [slotAlign - unsafe.Sizeof(slot{})]byte
	_ [unsafe.Sizeof(cold{}) - 3*64]byte
	_ [3*64 - unsafe.Sizeof(cold{})]byte
)

// Table is one worker's QP table. Only its worker calls Begin, Hit,
// Count, Add, Find, Update, Settle, CountStaged and Observe.
type Table struct {
	buckets []bucket
	slots   []slot
	cold    []cold
	bmask   uint32
	maxAge  uint32 // in bucket time units; 0: flows never age
	now     int64  // the latest time Find was given, to unwrap bucket times
	age     uint32 // now in bucket time units, set by Begin
	stats   TableStats
	// crowded: the table is at least 7/8 full, so that a new flow's miss,
	// common when more flows than slots come, looks in its second bucket
	// too (it evicts from either). Add then stages both buckets' loads.
	crowded bool
	one     Batch     // Observe's batch of one
	psn     PSNEvents // over every flow, for offline callers (PSNEvents)
	// memo is the slot where each of the last flows found was, by a hash
	// of its key's low words (the slot index plus one, with the QP in the
	// high word): a packet of a flow seen in the last bursts is counted
	// at once, its slot in the cache, without being hashed or staged. A
	// guess, checked against the slot's key before it is used. An empty
	// entry holds memoEmpty, whose QP no packet has.
	memo [memoSize]uint64
	// memoSeen[k] is 1 when memo entry k found a flow since the bucket
	// times were last brought up to date (touch): a hit stores a byte
	// where writing the time would load the flow's bucket line too. The
	// times are written before anything reads them, and whenever the
	// clock ticks.
	memoSeen [memoSize]uint8
	// last is the slot of the flow found last (slot lastI; none, whose QP
	// no packet has, when there is none), tried before the memo. lastHit:
	// Hit found it there since the last touch (which brings its bucket's
	// time up to date).
	last    *slot
	lastI   int32
	lastHit bool
	none    slot
}

// touch reads memoSeen a word at a time.
var _ [0]byte = [unsafe.Offsetof(Table{}.memoSeen) % 8]byte{}

// memoEmpty is an empty memo entry: a QP of 32 bits, where BTH's are 24.
const memoEmpty = 0xffffffff << 32

// memoSize is the number of flows the memo remembers: enough for the
// handful of busy QPs a port often carries, small enough to stay in L1.
const memoSize = 64

// size is the number of slots a table of at least n slots has: a power
// of two, at least two buckets.
func size(n int) int {
	s := 2 * ways
	for s < n {
		s <<= 1
	}
	return s
}

// Footprint is the memory, in bytes, NewAt needs for a table of at least n
// slots.
func Footprint(n int) int { return size(n)*SlotBytes + slotAlign }

// CopyFootprint is the memory, in bytes, a copy of a whole table of at
// least n slots takes (CopyChunk into Entries).
func CopyFootprint(n int) int { return size(n) * int(unsafe.Sizeof(Entry{})) }

// New makes a table of at least n slots (rounded up to a power of two) in
// Go memory, whose flows idle for maxAgeNS nanoseconds may be replaced.
func New(n int, maxAgeNS int64) *Table {
	mem := make([]byte, Footprint(n))
	return NewAt(unsafe.Pointer(&mem[0]), n, maxAgeNS)
}

// NewAt makes a table of at least n slots in mem: Footprint(n) zeroed
// bytes that stay put and are not freed while the table is in use (DPDK
// memory on the worker's socket, for the data path).
func NewAt(mem unsafe.Pointer, n int, maxAgeNS int64) *Table {
	ns := size(n)
	p := unsafe.Add(mem, (slotAlign-uintptr(mem)%slotAlign)%slotAlign)
	t := cacheline.New[Table]() // its memo and counters change with every packet
	t.bmask = uint32(ns/ways - 1)
	t.slots = unsafe.Slice((*slot)(p), ns)
	p = unsafe.Add(p, uintptr(ns)*unsafe.Sizeof(slot{}))
	t.buckets = unsafe.Slice((*bucket)(p), ns/ways)
	p = unsafe.Add(p, uintptr(ns/ways)*unsafe.Sizeof(bucket{}))
	t.cold = unsafe.Slice((*cold)(p), ns)
	if maxAgeNS > 0 {
		t.maxAge = uint32(max(1, min(maxAgeNS>>ageShift, 1<<31)))
	}
	t.stats = TableStats{Slots: ns, Bytes: ns * SlotBytes}
	t.one = *NewBatch(1)
	t.clearMemo()
	return t
}

// Batch is one burst's lookups, between Add and Update.
type Batch struct {
	n       int
	items   []item
	nb      int       // bucket addresses in buckets
	loaded  int       // of which Prefetch has had the CPU load this many
	buckets []uintptr // the items' first buckets (and second, crowded), to prefetch
	slots   []uintptr // the items' slot lines: one each, two for a new flow or a CE mark
}

// item is one packet's lookup: its key, the key's two buckets and
// signature, and the slot Find chose (Update's, after a signature
// collision). One cache line.
type item struct {
	key   Addrs
	qp    uint32
	sig   uint32
	bkt   uint32 // the first bucket; after Find, the one holding the slot
	alt   uint32 // the second bucket
	slot  uint32
	pkt   uint32 // the packet's index in the caller's burst
	fresh bool   // Find claimed the slot for this key: Update fills it in
	ce    bool   // the packet is CE-marked: Update counts it in the cold part
	again bool   // the key of the packet before: its slot, found once
}

// NewBatch makes a batch for up to n packets.
func NewBatch(n int) *Batch {
	b := cacheline.New[Batch]() // a worker writes it for every packet staged
	*b = Batch{items: cacheline.Alone[item](n), buckets: cacheline.Alone[uintptr](2 * n), slots: cacheline.Alone[uintptr](2 * n)}
	return b
}

// Len is the number of packets staged since the last Reset.
func (b *Batch) Len() int { return b.n }

// Reset empties the batch for the next burst.
func (b *Batch) Reset() { b.n, b.nb, b.loaded = 0, 0, 0 }

// Pkt is the index Add was given for the k-th staged packet.
func (b *Batch) Pkt(k int) int { return int(b.items[k].pkt) }

// v4mapped is the upper half of the low word of an IPv4-mapped address.
const v4mapped = 0xffff << 32

// Addrs are a packet's addresses as the table keys them: big-endian
// words, IPv4 as IPv4-mapped. Hit reads them, Add takes them back.
type Addrs struct{ s0, s1, d0, d1 uint64 }

// v4Words reads an IPv4 packet's addresses as words, small enough to
// inline where the data path calls it: source and destination are
// adjacent, one load for both.
func v4Words(frame []byte, l3 int) Addrs {
	const src, end = roce.IPv4SrcOffset, roce.IPv4DstOffset + roce.IPv4AddrLen
	a := binary.BigEndian.Uint64(frame[l3+src : l3+end : l3+end])
	return Addrs{0, v4mapped | a>>32, 0, v4mapped | uint64(uint32(a))}
}

// addrWords6 reads an IPv6 packet's addresses as words: ip holds the
// source, then the destination.
//
//go:noinline
func addrWords6(frame []byte, r *roce.Result) Addrs {
	const src, dst, end = roce.IPv6SrcOffset, roce.IPv6DstOffset, roce.IPv6DstOffset + roce.IPv6AddrLen
	l3 := int(r.L3)
	ip := frame[l3+src : l3+end]
	return Addrs{binary.BigEndian.Uint64(ip), binary.BigEndian.Uint64(ip[8:]),
		binary.BigEndian.Uint64(ip[dst-src:]), binary.BigEndian.Uint64(ip[dst-src+8:])}
}

// sameFlow reports whether k and qp are o and oqp, with one branch, not
// five: whether a packet is of its predecessor's flow depends on the
// traffic, not on anything a predictor learns.
func sameFlow(k, o Addrs, qp, oqp uint32) bool {
	return (k.s1^o.s1)|(k.d1^o.d1)|(k.s0^o.s0)|(k.d0^o.d0)|uint64(qp^oqp) == 0
}

// holds reports whether s is the flow of k and qp.
func (s *slot) holds(k Addrs, qp uint32) bool {
	// One branch, not five: the words are in one line. (sameFlow's test,
	// written against the slot's fields: through sameFlow the compiler
	// builds an Addrs of them first, six instructions more in Hit.)
	return (s.src[1]^k.s1)|(s.dst[1]^k.d1)|(s.src[0]^k.s0)|(s.dst[0]^k.d0)|uint64(s.qp^qp) == 0
}

// hash folds a key into one word: the destination rotated, so that a flow
// and its reverse differ, the IPv6 upper words and the QP through
// multiplies of their own, which run alongside. The two buckets and the
// signature are the high halves of three products of it with odd
// constants (Fibonacci hashing), independent of each other.
func hash(k Addrs, qp uint32) (bkt, alt, sig uint32) {
	s0, s1, d0, d1 := k.s0, k.s1, k.d0, k.d1
	x := s1 ^ bits.RotateLeft64(d1, 32) ^ (s0^bits.RotateLeft64(d0, 16))*0xc2b2ae3d27d4eb4f ^
		uint64(qp)*0x9e3779b97f4a7c15
	return uint32(x * 0xbf58476d1ce4e5b9 >> 32), uint32(x * 0xd6e8feb86659fd93 >> 32), uint32(x*0x94d049bb133111eb>>32) | 1
}

// Begin starts a burst seen at now (unix ns): the batch is emptied.
func (t *Table) Begin(b *Batch, now int64) {
	b.Reset()
	t.now = max(t.now, now)
	if age := uint32(t.now >> ageShift); age != t.age {
		t.touch() // the hits so far were at the old time
		t.age = age
	}
}

// touch writes the bucket time of each flow the memo found since the last
// touch: the time of the hits, which Begin keeps until it ticks.
func (t *Table) touch() {
	if t.lastHit {
		t.touchLast()
	}
	// Eight marks a word: with many flows, hits are few and a staged
	// burst's touch reads eight words.
	words := (*[memoSize / 8]uint64)(unsafe.Pointer(&t.memoSeen))
	for w, v := range words {
		if v == 0 {
			continue
		}
		for k := w * 8; k < w*8+8; k++ {
			if t.memoSeen[k] != 0 { // the entry is as it was at the hit: only Update writes it, after a touch
				i := uint32(t.memo[k]) - 1
				t.buckets[i/ways].age[i%ways] = t.age
			}
		}
		words[w] = 0
	}
}

// setLast makes slot i the flow found last, keeping the last one's hit.
func (t *Table) setLast(i uint32) {
	if t.lastHit {
		t.touchLast()
	}
	t.last, t.lastI = &t.slots[i], int32(i)
}

// touchLast writes the bucket time of the flow found last, found in Hit.
func (t *Table) touchLast() {
	i := uint32(t.lastI)
	t.buckets[i/ways].age[i%ways] = t.age
	t.lastHit = false
}

// clearMemo empties the memo.
func (t *Table) clearMemo() {
	for k := range t.memo {
		t.memo[k] = memoEmpty
	}
	t.none.qp = memoEmpty >> 32
	t.last, t.lastI, t.lastHit = &t.none, -1, false
	t.memoSeen = [memoSize]uint8{}
}

// Hit looks the flow of a classified RoCE frame up in the memo of the
// flows found last. While no packet of the burst b is staged, a flow the
// memo holds is found there: Hit marks it seen and returns its slot, and
// the caller counts the packet with Count before the next Hit. Otherwise
// Hit returns -1, and the caller stages the packet with Add, giving it
// the addresses Hit read. (Three calls, not one that does all three: the
// data path makes each of them itself, so that profile-guided inlining
// puts all three into its loop.)
func (t *Table) Hit(b *Batch, frame []byte, r *roce.Result) (int32, Addrs) {
	var k Addrs
	if r.IPVersion == 4 {
		k = v4Words(frame, int(r.L3))
	} else {
		k = addrWords6(frame, r)
	}
	// Once a packet is staged, the rest of the burst is staged too: Find
	// may give its slot to a new flow, and the packets after it must see
	// the table as if counted one at a time.
	if b.n != 0 {
		return -1, k
	}
	// The flow found last first: RDMA sends runs of packets of one QP (a
	// message of many MTUs), and this check neither hashes nor waits for
	// a load of the memo.
	qp := r.DestQP
	if t.last.holds(k, qp) {
		t.lastHit = true
		return t.lastI, k
	}
	x := memoIndex(k, qp)
	m := t.memo[x]
	i := uint32(m) - 1
	if uint32(m>>32) != qp || !t.slots[i].holds(k, qp) {
		return -1, k
	}
	t.memoSeen[x] = 1
	t.setLast(i)
	return int32(i), k
}

// Add stages a classified RoCE frame with addresses k (as Hit read them),
// the j-th packet of the caller's burst, for Find and Update (Batch.Pkt
// gives back j).
func (t *Table) Add(b *Batch, j int, k Addrs, r *roce.Result) {
	it := &b.items[b.n]
	it.key, it.pkt = k, uint32(j)
	it.qp, it.ce = r.DestQP, r.ECN == 3
	bkt, alt, sig := hash(k, it.qp)
	bkt, alt = bkt&t.bmask, alt&t.bmask
	it.bkt, it.alt, it.sig = bkt, alt, sig
	// RDMA sends runs of packets of one QP (a message of many MTUs): a
	// packet of the previous packet's flow shares its lookup, without a
	// bucket of its own. The signatures are compared first, the keys only
	// when they match: among many flows, rarely.
	it.again = false
	if b.n > 0 {
		if p := &b.items[b.n-1]; p.sig == sig && sameFlow(p.key, k, p.qp, it.qp) {
			it.again = true
			b.n++
			return
		}
	}
	b.n++
	b.buckets[b.nb] = uintptr(unsafe.Pointer(&t.buckets[bkt]))
	b.nb++
	if t.crowded {
		b.buckets[b.nb] = uintptr(unsafe.Pointer(&t.buckets[alt]))
		b.nb++
	}
}

// memoIndex is where the memo keeps a key: a flow and its reverse (a
// CNP's flow runs against its QP's data) differ.
func memoIndex(k Addrs, qp uint32) uint32 {
	return uint32((k.s1^bits.RotateLeft64(k.d1, 17)^uint64(qp))*0x9e3779b97f4a7c15>>58) & (memoSize - 1)
}

// Prefetch starts loading the buckets of the packets staged so far, for a
// caller with other work to do before Find: the loads overlap it.
func (t *Table) Prefetch(b *Batch) {
	prefetch.Lines(b.buckets[b.loaded:b.nb])
	b.loaded = b.nb
}

// Find chooses every staged packet's slot from its bucket, claiming one
// for a key the table does not hold, and starts loading the first
// slotLead packets' slots, so that Update finds them in the cache (the
// caller has the rest loaded with Ahead as it counts). now is unix
// nanoseconds.
func (t *Table) Find(b *Batch, now int64) {
	n := b.n
	if n == 0 {
		return
	}
	prefetch.Lines(b.buckets[b.loaded:b.nb])
	// The memo's hits are seen before a claim reads the times, and
	// before Update rewrites the memo.
	t.touch()
	t.crowded = t.stats.Used >= len(t.slots)-len(t.slots)/8 // for the next burst's Add
	t.now = max(t.now, now)
	age := uint32(now >> ageShift)
	items := b.items[:n]
	// Two loops, each with few live values: a loop that kept them all
	// spilled its bucket scan's counter to the stack.
	for i := range items {
		it := &items[i]
		if it.again && i > 0 {
			it.slot, it.fresh = items[i-1].slot, false
			continue
		}
		bk := &t.buckets[it.bkt]
		w := bk.find(it.sig)
		it.fresh = w == ways
		if w == ways {
			bk, w = t.miss(it, age)
		}
		bk.age[w&(ways-1)] = age
		it.slot = it.bkt*ways + uint32(w)
	}
	t.loadSlots(b, 0, slotLead)
}

// slotLead is how many staged packets ahead of the one being counted the
// slots are loading: Find starts the first slotLead, and Ahead the rest,
// aheadStep at a time, as the caller counts. All of a large poll's slots
// at once were more loads than the core keeps in flight: most of them
// were not started, and the count stalled on them.
const slotLead = 16

// aheadStep is how many packets' slots Ahead asks for at a time: a call
// every eight packets, not one per packet, whose spills around the call
// would cost every packet.
const aheadStep = 8

// Find's slotLead and Ahead's steps cover every packet once: the build
// fails unless aheadStep divides slotLead.
var _ = [1]struct{}{}[slotLead%aheadStep]

// Ahead tells the table that the caller is about to count the k-th staged
// packet (Settle, then CountStaged): every aheadStep packets it starts
// loading the slots of the packets slotLead ahead. Small enough to be
// inlined: the count's loop makes a call once per aheadStep packets.
func (t *Table) Ahead(b *Batch, k int) {
	if k%aheadStep == 0 {
		t.loadSlots(b, k+slotLead, k+slotLead+aheadStep)
	}
}

// loadSlots starts loading the slot lines of the staged packets from to
// to: aheadLines.
func (t *Table) loadSlots(b *Batch, from, to int) {
	prefetch.Lines(t.aheadLines(b, from, to))
}

// aheadLines lists the lines the count of the staged packets from to to
// (to capped at the batch's end) reads and writes: the first line of each
// packet's slot, and of its cold part for a new flow or a CE mark. A
// packet of its predecessor's flow shares its lines.
func (t *Table) aheadLines(b *Batch, from, to int) []uintptr {
	to = min(to, b.n)
	if from >= to {
		return nil
	}
	items := b.items[from:to]
	slots := b.slots[:2*len(items)]
	ns := 0
	for i := range items {
		it := &items[i]
		if it.again && !it.ce {
			continue // the packet before loads the slot
		}
		slots[ns] = uintptr(unsafe.Pointer(&t.slots[it.slot]))
		ns++
		if it.fresh || it.ce {
			slots[ns] = uintptr(unsafe.Pointer(&t.cold[it.slot]))
			ns++
		}
	}
	return slots[:ns]
}

// miss is Find for a key not in its first bucket: it looks in the second,
// else claims a way (it.fresh stays set) and returns the bucket and way.
func (t *Table) miss(it *item, age uint32) (*bucket, int) {
	if ab := &t.buckets[it.alt]; it.alt != it.bkt {
		if w := ab.find(it.sig); w < ways {
			it.bkt, it.fresh = it.alt, false
			return ab, w
		}
	}
	return t.claim(it, age)
}

// findWords is find a word at a time: the first way holding sig, or ways
// if none does. Without a branch per way: which way a flow has is random,
// and a chain of compares mispredicted. The signatures are compared two
// to a (little-endian) word: a lane of w^pattern is zero where they match,
// and (x-1)&^x has its top bit set exactly there (a borrow out of a
// matching lane can only flag the lane above it, and the lowest flag is
// the one taken). Way 2k's flag goes to bit 2k and way 2k+1's to bit
// 32+2k, then down to 2k+1.
func (bk *bucket) findWords(sig uint32) int {
	const one, top = 1<<32 | 1, 1<<63 | 1<<31
	p := uint64(sig) * one
	// Written out, not a loop: four independent words, constant shifts.
	w := (*[ways / 2]uint64)(unsafe.Pointer(&bk.sig))
	x0, x1, x2, x3 := w[0]^p, w[1]^p, w[2]^p, w[3]^p
	m := (x0-one)&^x0&top>>31 | (x1-one)&^x1&top>>29 | (x2-one)&^x2&top>>27 | (x3-one)&^x3&top>>25
	return bits.TrailingZeros8(uint8(m | m>>31))
}

// oldestTree is oldest without vectors: the way idle longest at time age
// among the ways of two buckets' ages a and c (c's ways numbered from
// ways on; the lowest number among equals), and how long it has been
// idle. Each way's idle time goes into a key with its number, and the
// keys meet in a tree of maxima: four compares deep, where a scan way by
// way is sixteen, each waiting for the one before.
func oldestTree(age uint32, a, c *[ways]uint32) (int, uint32) {
	key := func(ages *[ways]uint32, w int, n uint64) uint64 {
		return uint64(age-ages[w])<<5 | (31 - n) // the lower number wins a tie
	}
	m := max(
		max(max(key(a, 0, 0), key(a, 1, 1)), max(key(a, 2, 2), key(a, 3, 3))),
		max(max(key(a, 4, 4), key(a, 5, 5)), max(key(a, 6, 6), key(a, 7, 7))),
		max(max(key(c, 0, 8), key(c, 1, 9)), max(key(c, 2, 10), key(c, 3, 11))),
		max(max(key(c, 4, 12), key(c, 5, 13)), max(key(c, 6, 14), key(c, 7, 15))))
	return int(31 - m&31), uint32(m >> 5)
}

// oldestTree is written out for eight ways.
var _ [8]struct{} = [ways]struct{}{}

// claim takes a way for a new key in its first bucket, or in its second
// when the first is full (so that at half load no flow is left without a
// slot, while nearly every flow sits in its first bucket, the only one a
// lookup prefetches), or, when both are full, the way of either idle
// longest (counted as aged past MaxAge, else as an eviction). Only the
// buckets are read. It sets it.bkt to the bucket chosen.
func (t *Table) claim(it *item, age uint32) (*bucket, int) {
	bk := &t.buckets[it.bkt]
	if w := bk.free(); w < ways {
		return bk, t.take(bk, w, it.sig)
	}
	if ab := &t.buckets[it.alt]; it.alt != it.bkt {
		if w := ab.free(); w < ways {
			it.bkt = it.alt
			return ab, t.take(ab, w, it.sig)
		}
	}
	victim, idle := oldest(age, &bk.age, &t.buckets[it.alt].age)
	vb := it.bkt
	if victim >= ways {
		victim, vb = victim-ways, it.alt
	}
	if t.maxAge > 0 && idle > t.maxAge {
		t.stats.Aged++
	} else {
		t.stats.Evictions++
	}
	t.stats.Used-- // take counts the new key in
	it.bkt, bk = vb, &t.buckets[vb]
	bk.sig[victim] = 0
	return bk, t.take(bk, victim, it.sig)
}

// take gives way w of bk, free, to a key with signature sig.
func (t *Table) take(bk *bucket, w int, sig uint32) int {
	bk.sig[w] = sig
	t.stats.Inserts++
	t.stats.Used++
	return w
}

// free returns the first free way of bk, or ways if none is.
func (bk *bucket) free() int {
	return bk.find(0)
}

// Update counts the k-th staged packet, classified as r and frameLen
// bytes long, into its slot, and returns the slot: Settle, then
// CountStaged.
func (t *Table) Update(b *Batch, k int, r *roce.Result, frameLen int, now int64) int32 {
	i := t.Settle(b, k, now)
	t.CountStaged(i, r, frameLen)
	return i
}

// Settle makes sure the k-th staged packet's slot, as Find chose it, holds
// the packet's flow (filling in a slot Find claimed, resolving a
// signature shared with another flow), remembers the flow in the memo and
// returns the slot, for CountStaged. (Two calls, not one: the data path
// makes each itself, so that profile-guided inlining puts both into its
// loop; a call inside an inlined call is judged by the ordinary budget.)
func (t *Table) Settle(b *Batch, k int, now int64) int32 {
	it := &b.items[k]
	i := it.slot
	switch {
	case it.again && k > 0:
		// The packet before has the same key and has settled the slot.
		i = b.items[k-1].slot
		it.slot = i
	case it.fresh:
		t.fill(i, it.key, it.qp, now)
	case !t.slots[i].holds(it.key, it.qp):
		i = t.resolve(it, it.key, it.qp, now) // another key with the same signature
		it.slot = i
	}
	x := memoIndex(it.key, it.qp)
	t.memo[x] = uint64(it.qp)<<32 | uint64(i+1)
	if k == b.n-1 { // the flow found last is the batch's last
		t.setLast(i)
	}
	return int32(i)
}

// Count counts a packet classified as r, frameLen bytes long, into the
// slot Hit returned for it.
//
// The counters branch only where a branch is rarely taken (a NAK, a
// carry, a CE mark). The PSN state branches on the class and on where the
// PSN falls: the memo's flows are the few busy ones, whose packets follow
// each other closely. A state computed from the one before (a select, as
// CountStaged does) chains each packet of such a flow to the one before
// it through memory, a store-to-load round trip and a dozen operations,
// and a burst of a few busy QPs runs at the speed of that chain; after a
// predicted branch the new state does not wait for the old.
// (BenchmarkPoll/roce, the demo frames: 17.7 ns a packet with selects,
// 15.5 with branches.)
func (t *Table) Count(slot int32, r *roce.Result, frameLen int) {
	i := uint32(slot)
	s := &t.slots[i]
	pc := t.countSize(s, i, r, frameLen)
	t.countNAK(i, r)
	if pc&psnTracked == 0 {
		return
	}
	st := s.psn
	d := (r.PSN - st) & psnMask
	switch {
	case d == 0 || st&psnKnown == 0: // in order, or the first
	case d < 1<<23: // ahead
		if st&psnAfterRead == 0 {
			t.psnGap(i, d)
		}
	default: // behind: the expectation stays
		if s.ooo++; s.ooo == 0 { // the low word carries
			t.cold[i].oooHigh++
		}
		t.psn.OutOfOrder++
		if stay := st&^psnAfterRead | pc&psnAfterRead; stay != st {
			s.psn = stay // written only when it changes: no chain through memory
		}
		return
	}
	s.psn = (r.PSN+1)&psnMask | psnKnown | pc&psnAfterRead
}

// CountStaged is Count for a packet Settle found the slot of: the same
// counts, the PSN state updated without a branch. Staged packets are of
// many flows, each with a packet or two in a burst, in a mix of opcode
// classes in no order a branch predictor learns: there a select forms no
// chain, and a branch on the class would mispredict (daemon, 8192 QPs:
// 0.91 of the rate with Count's branches).
func (t *Table) CountStaged(slot int32, r *roce.Result, frameLen int) {
	i := uint32(slot)
	s := &t.slots[i]
	pc := t.countSize(s, i, r, frameLen)
	t.countNAK(i, r)
	tracked := pc & psnTracked
	st := s.psn
	d := (r.PSN - st) & psnMask
	known := st >> 31
	// 1 <= d < 2^23 in one unsigned compare: d != 0 && d < 1<<23 is a
	// branch on d == 0, which an in-order packet takes and an ACK or a
	// CNP (whose d means nothing) does not, in the port's mix of classes.
	gap := known & b2u(d-1 < 1<<23-1) &^ (st >> 30)
	next := (r.PSN+1)&psnMask | psnKnown | pc&psnAfterRead
	if gap&tracked != 0 {
		t.psnGap(i, d)
		s.psn = next
		return
	}
	behind := known & b2u(d >= 1<<23) & tracked
	o := s.ooo + behind
	if o < s.ooo { // the low word carries
		t.cold[i].oooHigh++
	}
	s.ooo = o
	t.psn.OutOfOrder += uint64(behind)
	stay := st&^psnAfterRead | pc&psnAfterRead
	next ^= (next ^ stay) & -behind
	s.psn = st ^ (st^next)&-tracked
}

// countSize counts a packet classified as r, frameLen bytes long, into
// slot i at s: its bytes, its opcode class and its CE mark. It returns the
// class's PSN bits (classPSN), for the caller's PSN continuity.
//
// countSize and countNAK are two calls, each small enough to be inlined
// anywhere: as one, profile-guided inlining left it a call in Count.
func (t *Table) countSize(s *slot, i uint32, r *roce.Result, frameLen int) uint32 {
	nb := s.bytes + uint32(frameLen)
	if nb < s.bytes {
		t.cold[i].bytesHigh++
	}
	s.bytes = nb
	class := classOf[r.Opcode] & (NumClasses - 1) // the mask spares a bounds check
	if s.mix[class]++; s.mix[class] == 0 {
		t.cold[i].mixHigh[class]++
	}
	if r.ECN == 3 {
		t.cold[i].ce++
	}
	return classPSN[class]
}

// countNAK counts a packet's NAK into slot i. An ACK's syndrome is 0 in
// its kind bits, as is every packet's without an AETH: one test for NAKs
// and RNR NAKs alone.
func (t *Table) countNAK(i uint32, r *roce.Result) {
	if r.AETH&aethKindBits != 0 && r.HasAETH {
		t.nak(i, r.AETH)
	}
}

// classPSN says, per opcode class, whether its packets carry a PSN to
// track (psnTracked) and whether they are READ requests (psnAfterRead,
// the bit the state keeps). The rules Count and CountStaged both keep:
// ACKs are cumulative and CNPs carry no PSN, so their class does not
// track it and the state stays as it is. For the others, the first PSN,
// the next in order, and after a READ any PSN ahead all move the
// expectation to psn+1; a PSN behind (a retransmission) is counted out of
// order and leaves the expectation where it is.
var classPSN = func() (t [NumClasses]uint32) {
	for c := range t {
		if c != ClassAck && c != ClassCNP {
			t[c] = psnTracked
		}
	}
	t[ClassReadRequest] |= psnAfterRead
	return t
}()

const psnTracked = 1

// aethKindBits are an AETH syndrome's kind: 0 for an ACK.
const aethKindBits = 0x60

// b2u is 1 for true: a SETcc, not a branch.
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// nak counts a NAK or an RNR NAK with syndrome syn into slot i.
func (t *Table) nak(i uint32, syn roce.AETHSyndrome) {
	c := t.rest(i) // the caller saw a NAK or an RNR NAK
	switch syn.Kind() {
	case roce.AckKindNAK:
		c.naks[nakOf[syn&31]]++
	case roce.AckKindRNRNAK:
		c.rnrNAKs++
	}
}

// nakOf is nakIndex by code: a table, so that nak, with a switch too
// large to inline, is inlined into Count (and Count's into the classify
// pass without a call, whose spills cost every packet).
var nakOf = func() (t [32]uint8) {
	for c := range t {
		t[c] = uint8(nakIndex(roce.NAKCode(c)))
	}
	return
}()

// fill makes slot i the flow of k and qp, first seen at now.
func (t *Table) fill(i uint32, k Addrs, qp uint32, now int64) {
	t.slots[i] = slot{src: [2]uint64{k.s0, k.s1}, dst: [2]uint64{k.d0, k.d1}, qp: qp}
	c := &t.cold[i]
	c.firstSeen, c.ce, c.bytesHigh, c.oooHigh, c.mixHigh = now|restStale, 0, 0, 0, [NumClasses]uint32{}
}

// rest is slot i's cold part for a write past its first line, zeroed
// first if it still holds an earlier flow's counts.
func (t *Table) rest(i uint32) *cold {
	c := &t.cold[i]
	c.settle()
	return c
}

// settle zeroes c's rare counts if they are an earlier flow's, and drops
// the mark.
func (c *cold) settle() {
	if c.firstSeen&restStale != 0 {
		c.firstSeen &^= restStale
		c.coldRare = coldRare{}
	}
}

// resolve finds the key among the ways of its two buckets with its
// signature, or claims a way for it: the slow path of a signature
// collision.
func (t *Table) resolve(it *item, k Addrs, qp uint32, now int64) uint32 {
	age := uint32(now >> ageShift)
	for _, b := range [2]uint32{it.bkt, it.alt} {
		bk := &t.buckets[b]
		for w := range bk.sig {
			if i := b*ways + uint32(w); bk.sig[w] == it.sig && t.slots[i].holds(k, qp) {
				bk.age[w] = age
				return i
			}
		}
	}
	bk, w := t.claim(it, age)
	bk.age[w] = age
	i := it.bkt*ways + uint32(w)
	t.fill(i, k, qp, now)
	return i
}

// psnGap counts a PSN d ahead of slot i's expectation: packets lost, or
// reordered, on the way.
func (t *Table) psnGap(i uint32, d uint32) {
	c := t.rest(i)
	c.gaps++
	c.gapPSNs += uint64(d)
	t.psn.Gaps++
	t.psn.GapPSNs += uint64(d)
}

// Observe counts one classified RoCE frame of frameLen bytes seen at now
// (unix ns): the three passes for a batch of one, for callers that see
// one frame at a time.
func (t *Table) Observe(frame []byte, r *roce.Result, frameLen int, now int64) {
	b := &t.one
	t.Begin(b, now)
	slot, k := t.Hit(b, frame, r)
	if slot >= 0 {
		t.Count(slot, r, frameLen)
		return
	}
	t.Add(b, 0, k, r)
	t.Find(b, now)
	t.Update(b, 0, r, frameLen, now)
}

// Stats reports the table's own counters.
func (t *Table) Stats() TableStats { return t.stats }

// entry assembles slot i's flow.
func (t *Table) entry(i int) Entry {
	s, c := &t.slots[i], t.cold[i] // a copy: reading leaves the table as it is
	c.settle()
	e := Entry{Key: Key{Src: s.src, Dst: s.dst, QP: s.qp}, Counters: Counters{
		Bytes: c.bytesHigh<<32 | uint64(s.bytes), FirstSeen: c.firstSeen, LastSeen: t.lastSeen(i),
		ExpectedPSN: s.psn & psnMask, PSNKnown: s.psn&psnKnown != 0,
		OutOfOrder: c.oooHigh<<32 | uint64(s.ooo), Gaps: c.gaps, GapPSNs: c.gapPSNs,
		NAKs: c.naks, RNRNAKs: c.rnrNAKs, CE: c.ce,
		MarkedCE: c.victim[VictimMarked], HeldPaused: c.victim[VictimHeld], QoSDropped: c.victim[VictimDropped]}}
	for k := range e.Mix {
		e.Mix[k] = uint64(c.mixHigh[k])<<16 | uint64(s.mix[k])
	}
	return e
}

// lastSeen is slot i's last-seen time from its bucket's coarse clock,
// unwrapped against the latest time the table was given: unix ns, to
// about a millisecond, and never before the flow was first seen.
func (t *Table) lastSeen(i int) int64 {
	age := t.buckets[i/ways].age[i%ways]
	now := t.now >> ageShift
	last := (now - int64(uint32(now)-age)) << ageShift
	return max(last, t.cold[i].firstSeen&^restStale)
}

// CopyTo copies the flows into dst (reusing its storage) and returns it
// with the table's stats.
func (t *Table) CopyTo(dst []Entry) ([]Entry, TableStats) {
	dst, _ = t.CopyChunk(dst[:0], 0, len(t.slots))
	return dst, t.stats
}

// CopyChunk appends the flows among slots [from, from+n) to dst and
// returns it with the next slot to copy (Slots when done), so a worker can
// copy its table a little per burst instead of stalling for all of it.
func (t *Table) CopyChunk(dst []Entry, from, n int) ([]Entry, int) {
	t.touch()
	end := min(from+n, len(t.slots))
	for i := from; i < end; i++ {
		if t.buckets[i/ways].sig[i%ways] != 0 {
			dst = append(dst, t.entry(i))
		}
	}
	return dst, end
}

// Reset empties the table and its counters.
func (t *Table) Reset() {
	clear(t.buckets)
	clear(t.slots)
	clear(t.cold)
	t.clearMemo()
	t.stats = TableStats{Slots: len(t.slots), Bytes: t.stats.Bytes}
	t.psn = PSNEvents{}
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

// ClassOf is the class of opcode op (ClassSend ... ClassOther).
func ClassOf(op roce.Opcode) int { return int(classOf[op] & (NumClasses - 1)) }
