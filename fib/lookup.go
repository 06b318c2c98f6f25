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
	f := t.fbits
	e := atomic.LoadUint32(&t.first[hi>>(64-f)])
	hi, lo = hi<<f|lo>>(64-f), lo<<f
	for e&groupBit != 0 {
		e = atomic.LoadUint32(&t.groups[(e&payloadMask)<<8|uint32(hi>>56)])
		hi, lo = hi<<8|lo>>56, lo<<8
	}
	return e & payloadMask
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
func (t *Table) LookupBatch4(addrs []uint32, nh []uint32) {
	nh = nh[:len(addrs)]
	for len(addrs) > chunk {
		t.batch4(addrs[:chunk], nh[:chunk])
		addrs, nh = addrs[chunk:], nh[chunk:]
	}
	t.batch4(addrs, nh)
}

func (t *Table) batch4(addrs []uint32, nh []uint32) {
	// Scratch on the stack: a table-owned buffer would be shared by the
	// workers looking up concurrently. prefetch.Lines does not let it
	// escape, so this does not allocate.
	var pf [chunk]uintptr
	var pend [chunk]uint8 // indexes of lookups that point into a group
	first, groups := t.first, t.groups
	f := t.fbits
	nh = nh[:len(addrs)]
	if len(addrs) == 0 || len(addrs) > chunk {
		return
	}

	base := uintptr(unsafe.Pointer(unsafe.SliceData(first)))
	for i, a := range addrs {
		pf[i] = base + uintptr(a>>(32-f))*4
	}
	prefetch.Lines(pf[:len(addrs)])

	// nh holds the payload: the next hop, or the group index while the
	// lookup is pending. Adding the group bit to np instead of branching
	// keeps a mix of leaves and groups free of mispredictions.
	np := 0
	for i, a := range addrs {
		e := atomic.LoadUint32(&first[a>>(32-f)])
		nh[i] = e & payloadMask
		pend[np&(chunk-1)] = uint8(i)
		np += int(e >> 31)
	}

	gbase := uintptr(unsafe.Pointer(unsafe.SliceData(groups)))
	for s := f; np > 0; s += 8 {
		pend := pend[:np]
		if np > 1 {
			for j, i := range pend {
				pf[j] = gbase + uintptr(nh[i]<<8|addrs[i]<<s>>24)*4
			}
			prefetch.Lines(pf[:np])
		}
		np = 0
		for _, i := range pend {
			e := atomic.LoadUint32(&groups[nh[i]<<8|addrs[i]<<s>>24])
			nh[i] = e & payloadMask
			pend[np] = i
			np += int(e >> 31)
		}
	}
}

// LookupBatch6 looks up every address hi[i]:lo[i] (as Lookup6) into
// nh[i]; lo and nh must be at least as long as hi. It is staged like
// LookupBatch4, which matters more here: an IPv6 /48 is three group
// levels below a 24-bit first level, and each level of the chunk's
// pending lookups is prefetched before it is read.
func (t *Table) LookupBatch6(hi, lo []uint64, nh []uint32) {
	lo, nh = lo[:len(hi)], nh[:len(hi)]
	for len(hi) > chunk {
		t.batch6(hi[:chunk], lo[:chunk], nh[:chunk])
		hi, lo, nh = hi[chunk:], lo[chunk:], nh[chunk:]
	}
	t.batch6(hi, lo, nh)
}

func (t *Table) batch6(hi, lo []uint64, nh []uint32) {
	var pf [chunk]uintptr
	var pend [chunk]uint8
	first, groups := t.first, t.groups
	f := t.fbits
	lo, nh = lo[:len(hi)], nh[:len(hi)]
	if len(hi) == 0 || len(hi) > chunk {
		return
	}

	base := uintptr(unsafe.Pointer(unsafe.SliceData(first)))
	for i, h := range hi {
		pf[i] = base + uintptr(h>>(64-f))*4
	}
	prefetch.Lines(pf[:len(hi)])

	np := 0
	for i, h := range hi {
		e := atomic.LoadUint32(&first[h>>(64-f)])
		nh[i] = e & payloadMask
		pend[np&(chunk-1)] = uint8(i)
		np += int(e >> 31)
	}

	// Each level's entries are computed once: prefetched, then read.
	var idx [chunk]uint32
	gbase := uintptr(unsafe.Pointer(unsafe.SliceData(groups)))
	for s := uint(f); np > 0; s += 8 {
		pend := pend[:np]
		for j, i := range pend {
			x := nh[i]<<8 | byteAt(hi[i], lo[i], s)
			idx[j&(chunk-1)] = x
			pf[j&(chunk-1)] = gbase + uintptr(x)*4
		}
		if np > 1 {
			prefetch.Lines(pf[:np])
		}
		np = 0
		for j, i := range pend {
			e := atomic.LoadUint32(&groups[idx[j&(chunk-1)]])
			nh[i] = e & payloadMask
			pend[np] = i
			np += int(e >> 31)
		}
	}
}

// byteAt is the 8 bits of hi:lo starting s bits from the top, zero past
// the end. Without a branch: Go's shifts by 64 or more give 0 (64-s and
// s-64 wrap to huge counts when negative), so of the three terms only
// those that apply are non-zero (at s = 64 two of them are lo, alike).
func byteAt(hi, lo uint64, s uint) uint32 {
	return uint32((hi<<s | lo>>(64-s) | lo<<(s-64)) >> 56)
}
