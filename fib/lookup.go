package fib

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"unsafe"

	"roce-fwd/prefetch"
)

// Lookup4 returns the next hop for IPv4 address a (big-endian, as read
// from the header), or 0 if no route matches. The table must be V4.
func (t *Table) Lookup4(a uint32) uint32 {
	e := atomic.LoadUint32(&t.first[a>>(32-t.fbits)])
	a <<= t.fbits
	for e&groupBit != 0 {
		e = atomic.LoadUint32(&t.groups[(e&payloadMask)<<8|a>>24])
		a <<= 8
	}
	return e & payloadMask
}

// Lookup6 returns the next hop for the IPv6 address hi:lo (its two
// big-endian halves), or 0 if no route matches. The table must be V6.
func (t *Table) Lookup6(hi, lo uint64) uint32 {
	nh, _ := t.walk6(hi, lo)
	return nh
}

// walk6 looks hi:lo up alone: the next hop, and how many of the
// address's leading bits the walk used (the first level's, and 8 per
// group).
func (t *Table) walk6(hi, lo uint64) (nh, bits uint32) {
	f := t.fbits
	e := atomic.LoadUint32(&t.first[hi>>(64-f)])
	hi, lo, bits = hi<<f|lo>>(64-f), lo<<f, f
	for e&groupBit != 0 {
		e = atomic.LoadUint32(&t.groups[(e&payloadMask)<<8|uint32(hi>>56)])
		hi, lo, bits = hi<<8|lo>>56, lo<<8, bits+8
	}
	return e & payloadMask, bits
}

// Lookup returns the next hop for a, and whether a route matched. It is
// the convenient form of Lookup4 and Lookup6 (an address of the other
// family matches nothing); it takes no lock.
func (t *Table) Lookup(a netip.Addr) (nh uint32, ok bool) {
	switch {
	case t.family == V4 && a.Is4():
		b := a.As4()
		nh = t.Lookup4(binary.BigEndian.Uint32(b[:]))
	case t.family == V6 && a.Is6():
		b := a.As16()
		nh = t.Lookup6(binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]))
	}
	return nh, nh != 0
}

// chunk is how many lookups a batch stages at once. It bounds the stack
// scratch and is more than the misses a core keeps in flight (10 to 20
// line fill buffers), so larger chunks would not overlap more.
const chunk = 64

// LookupBatch4 looks up every address of addrs (as Lookup4) into the
// same index of nh, which must be at least as long. Any length works;
// it is staged in chunks of 64.
//
// As in rte_lpm_lookup_bulk, the lookups of a chunk advance together so
// their cache misses overlap: every first-level line is prefetched, then
// the entries are read, then the lookups that point into groups prefetch
// their group lines and read them, level by level.
//
// s, if not nil, is the caller's Scratch4; without one the scratch is
// on the stack, which zeroes it first.
func (t *Table) LookupBatch4(addrs []uint32, nh []uint32, s *Scratch4) {
	if s == nil {
		s = new(Scratch4) // does not escape: on the stack
	}
	nh = nh[:len(addrs)]
	for len(addrs) > chunk {
		t.batch4(addrs[:chunk], nh[:chunk], s)
		addrs, nh = addrs[chunk:], nh[chunk:]
	}
	t.batch4(addrs, nh, s)
}

// Scratch4 is one caller's working memory for LookupBatch4: a batch that
// has it does not zero its scratch on the stack first (576 bytes, a
// third of a cycle a packet on the routed path). It belongs to one
// caller (a worker lcore) at a time; a table-owned one would be shared
// by the workers looking up concurrently. The zero value is ready.
type Scratch4 struct {
	pf   [chunk]uintptr
	pend [chunk]uint8 // indexes of lookups that point into a group
}

func (t *Table) batch4(addrs []uint32, nh []uint32, s *Scratch4) {
	pf, pend := &s.pf, &s.pend
	first, groups := t.first, t.groups
	// The shifts are masked (FirstBits is 8..24, so this changes no
	// value): a shift the compiler knows is below the width is one
	// instruction, not the eight that Go's rules for larger ones take.
	sh := (32 - t.fbits) & 31
	nh = nh[:len(addrs)]
	if len(addrs) == 0 || len(addrs) > chunk {
		return
	}

	base := uintptr(unsafe.Pointer(unsafe.SliceData(first)))
	for i, a := range addrs {
		pf[i] = base + uintptr(a>>sh)*4
	}
	prefetch.Lines(pf[:len(addrs)])

	// nh holds the payload: the next hop, or the group index while the
	// lookup is pending. Adding the group bit to np instead of branching
	// keeps a mix of leaves and groups free of mispredictions.
	np := 0
	for i, a := range addrs {
		e := atomic.LoadUint32(&first[a>>sh])
		nh[i] = e & payloadMask
		pend[np&(chunk-1)] = uint8(i)
		np += int(e >> 31)
	}

	gbase := uintptr(unsafe.Pointer(unsafe.SliceData(groups)))
	// w is the bits walked before this level, at most 24: a level reads
	// 8 bits of a 32-bit address, so none is pending past w = 24 and the
	// mask never wraps a value in use.
	for w := t.fbits & 31; np > 0; w = (w + 8) & 31 {
		pend := pend[:np]
		if np > 1 {
			for j, i := range pend {
				pf[j] = gbase + uintptr(nh[i]<<8|addrs[i]<<w>>24)*4
			}
			prefetch.Lines(pf[:np])
		}
		np = 0
		for _, i := range pend {
			e := atomic.LoadUint32(&groups[nh[i]<<8|addrs[i]<<w>>24])
			nh[i] = e & payloadMask
			pend[np] = i
			np += int(e >> 31)
		}
	}
}

// LookupBatch6 looks up every address hi[i]:lo[i] (as Lookup6) into
// nh[i]; lo and nh must be at least as long as hi. It is staged like
// LookupBatch4, which matters more here: an IPv6 /64 is five group
// levels below a 24-bit first level, and each level of the chunk's
// pending lookups is prefetched before it is read.
//
// m, if not nil, is the caller's Memo: an address that agrees with one
// it remembers in the bits that decided that lookup gets the same next
// hop without a walk, and the walks made fill it in. A memo belongs to
// one caller (a worker lcore) and one table.
func (t *Table) LookupBatch6(hi, lo []uint64, nh []uint32, m *Memo) {
	lo, nh = lo[:len(hi)], nh[:len(hi)]
	if m != nil {
		// An entry answers only in the epoch it was learnt in, and each
		// change to the table starts a new one: the memo forgets without
		// being cleared, which while routes stream in (BGP converging)
		// would stall the worker once a burst. Epoch 0 is that of the
		// empty entries; it comes round again after 4 billion changes,
		// which clear the memo, as does another table.
		if g := t.gen.Load(); m.t != t || m.gen != g {
			if m.t != t {
				clear(m.e[:])
				m.t, m.epoch = t, 0
			}
			m.gen = g
			if m.epoch++; m.epoch == 0 {
				clear(m.e[:])
				m.epoch = 1
			}
		}
	}
	for len(hi) > chunk {
		t.batch6(hi[:chunk], lo[:chunk], nh[:chunk], m)
		hi, lo, nh = hi[chunk:], lo[chunk:], nh[chunk:]
	}
	t.batch6(hi, lo, nh, m)
}

// memoSize is the entries of a Memo (160 KiB, in the worker's L2 cache):
// enough for the subnets and a few thousand hosts a port's bursts go to.
// With host routes (a /128 per host: every walk to the last level) to 256
// hosts, 64 entries answered 24% of the lookups, 256 answered 70%, and
// 4096 answer all but a few: direct-mapped, hosts share an entry by
// chance long before the memo is full (BenchmarkLookupBatch6's hosts
// cases). A lookup reads only the one or two entries it checks.
const (
	memoBits = 12
	memoSize = 1 << memoBits
)

// Memo is one caller's memory of its recent IPv6 lookups in one table.
// A lookup that ends at a level of the trie depends only on the address
// bits it walked through (the first level's and 8 per group); every
// address agreeing in those bits walks the same entries to the same
// result. So the memo keeps, per entry, an address, the mask of the bits
// its walk used and its next hop.
//
// It is direct-mapped twice: a walk that used no more than the upper 64
// bits (a fabric's /64 and shorter subnets, without longer routes inside)
// is kept by those bits, so that every host of the subnet finds it; a
// longer walk (host routes) by the whole address. A lookup checks both.
//
// Any change to the table (an Add or a Delete that returned) makes the
// next LookupBatch6 forget the memo; while the change is under way the
// memo answers as a lookup racing it would, with the result before the
// change or after it. The zero Memo is empty.
type Memo struct {
	t      *Table
	gen    uint64 // the table's generation
	epoch  uint32 // the entries that answer: learnt since gen
	e      [memoSize]memoEntry
	memo   uint64 // lookups it answered
	walked uint64 // lookups that walked the trie
	w      walk6  // batch6's scratch
}

// walk6 is batch6's scratch for a chunk of lookups: the lines to
// prefetch, and the lookups still walking (see batch6).
type walk6 struct {
	pf     [chunk]uintptr
	ph, pl [chunk]uint64
	pe     [chunk]uint32
	pi     [chunk]uint8
}

// Counts reports the lookups the memo answered and those that walked the
// trie, since the Memo was made.
func (m *Memo) Counts() (memo, walked uint64) { return m.memo, m.walked }

type memoEntry struct {
	hi, lo   uint64 // the address, masked
	mhi, mlo uint64 // the bits the walk used
	nh       uint32
	epoch    uint32 // the memo's epoch the walk was in; 0: empty
}

// memoSubnet and memoHost are where a walk of up to 64 bits and a longer
// one are kept.
func memoSubnet(hi uint64) uint64 { return hi * 0x9e3779b97f4a7c15 >> (64 - memoBits) }
func memoHost(hi, lo uint64) uint64 {
	return (hi ^ lo*0xbf58476d1ce4e5b9) * 0x94d049bb133111eb >> (64 - memoBits)
}

// answers reports whether e holds the result of hi:lo in the memo's
// epoch.
func (e *memoEntry) answers(hi, lo uint64, epoch uint32) bool {
	return hi&e.mhi == e.hi && lo&e.mlo == e.lo && e.epoch == epoch
}

// learn looks hi:lo up once more, alone, and records in m what it gave
// and how many of its bits the walk used. Called for a few addresses per
// batch, just walked (their entries are in the cache): the staged walk
// itself stays free of the memo's work.
func (m *Memo) learn(t *Table, hi, lo uint64) {
	nh, bits := t.walk6(hi, lo)
	mhi := ^uint64(0) << (64 - min(bits, 64))
	mlo := ^uint64(0) << (128 - bits) // 0 up to 64 bits: Go's shifts by 64 or more give 0
	i := memoSubnet(hi)
	if bits > 64 {
		i = memoHost(hi, lo)
	}
	m.e[i&(memoSize-1)] = memoEntry{hi: hi & mhi, lo: lo & mlo, mhi: mhi, mlo: mlo, nh: nh, epoch: m.epoch}
}

// batch6 is LookupBatch6 for up to chunk addresses. The lookups still
// walking carry their address shifted past the bits used so far (ph:pl),
// their index (pi) and the entry to read next (pe), kept packed at the
// front as lookups finish: each level's work is a few constant shifts per
// pending lookup.
func (t *Table) batch6(hi, lo []uint64, nh []uint32, m *Memo) {
	// The scratch is the memo's, or on the stack without one: 1.8 KiB
	// that the stack would have zeroed per batch (a cycle a packet).
	var own *walk6
	if m != nil {
		own = &m.w
	} else {
		own = new(walk6) // does not escape: on the stack
	}
	pf, ph, pl, pe, pi := &own.pf, &own.ph, &own.pl, &own.pe, &own.pi
	first, groups := t.first, t.groups
	f := t.fbits & 63 // masked as in batch4
	n := len(hi)
	lo, nh = lo[:n], nh[:n]
	if n == 0 || n > chunk {
		return
	}

	// The memo's answers, and the first-level lines of the rest.
	base := uintptr(unsafe.Pointer(unsafe.SliceData(first)))
	ns := 0 // staged: their indexes in pi
	var epoch uint32
	if m != nil {
		epoch = m.epoch
	}
	for i, h := range hi {
		if m != nil {
			l := lo[i]
			if e := &m.e[memoSubnet(h)&(memoSize-1)]; e.answers(h, l, epoch) {
				nh[i] = e.nh
				continue
			}
			if e := &m.e[memoHost(h, l)&(memoSize-1)]; e.answers(h, l, epoch) {
				nh[i] = e.nh
				continue
			}
		}
		pi[ns&(chunk-1)] = uint8(i)
		pf[ns&(chunk-1)] = base + uintptr(h>>((64-f)&63))*4
		ns++
	}
	if m != nil {
		m.memo += uint64(n - ns)
		m.walked += uint64(ns)
	}
	if ns == 0 {
		return
	}
	prefetch.Lines(pf[:ns])
	// The memo learns the first and the last address walked: a burst's
	// destinations are learnt a few per burst, with no cost per lookup.
	learn0, learn1 := int(pi[0]), int(pi[(ns-1)&(chunk-1)])

	// The first level. nh holds the payload: the next hop, or the group
	// index while the lookup is pending; adding the group bit to np
	// instead of branching keeps a mix of leaves and groups free of
	// mispredictions.
	np := 0
	for k := range ns {
		i := pi[k&(chunk-1)]
		h, l := hi[i], lo[i]
		e := atomic.LoadUint32(&first[h>>((64-f)&63)])
		nh[i] = e & payloadMask
		h, l = h<<f|l>>((64-f)&63), l<<f
		d := np & (chunk - 1)
		ph[d], pl[d], pi[d], pe[d] = h, l, i, (e&payloadMask)<<8|uint32(h>>56)
		np += int(e >> 31)
	}

	// The group levels: each pending lookup's line prefetched, then read.
	gbase := uintptr(unsafe.Pointer(unsafe.SliceData(groups)))
	for np > 0 {
		if np > 1 {
			for k := range np {
				pf[k&(chunk-1)] = gbase + uintptr(pe[k&(chunk-1)])*4
			}
			prefetch.Lines(pf[:np])
		}
		n := 0
		for k := range np {
			k &= chunk - 1
			e := atomic.LoadUint32(&groups[pe[k]])
			i := pi[k]
			nh[i] = e & payloadMask
			h, l := ph[k]<<8|pl[k]>>56, pl[k]<<8
			d := n & (chunk - 1)
			ph[d], pl[d], pi[d], pe[d] = h, l, i, (e&payloadMask)<<8|uint32(h>>56)
			n += int(e >> 31)
		}
		np = n
	}
	if m != nil {
		m.learn(t, hi[learn0], lo[learn0])
		if learn1 != learn0 {
			m.learn(t, hi[learn1], lo[learn1])
		}
	}
}
