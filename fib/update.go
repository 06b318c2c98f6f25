package fib

import (
	"fmt"
	"net/netip"
	"sync/atomic"
)

// maxLevels bounds the group levels below the first: (128-8)/8.
const maxLevels = 15

// leaf is the entry of a route of length l.
func leaf(l int, nh uint32) uint32 { return uint32(l+1)<<depthShift | nh }

// afterStore, when set (by tests), runs after every entry store the
// writer makes, to check each intermediate state a reader can see.
var afterStore func()

// store is the writer's only way to change an entry: one atomic store.
func (t *Table) store(i int, v uint32) {
	atomic.StoreUint32(&t.mem[i], v)
	if afterStore != nil {
		afterStore()
	}
}

// groupBase is the index in t.mem of group g's first entry.
func (t *Table) groupBase(g uint32) int { return len(t.first) + int(g)*groupSize }

// Add sets the route for p (masked) to next hop nh, 1..MaxNextHop,
// replacing the next hop if p is already present. p must be of the
// table's family. It returns ErrFull, changing nothing, if the route needs
// more groups than are free.
func (t *Table) Add(p netip.Prefix, nh uint32) error {
	k, l, err := t.prefix(p)
	if err != nil {
		return err
	}
	if nh == 0 || nh > MaxNextHop {
		return fmt.Errorf("fib: next hop %d not in 1..%d", nh, MaxNextHop)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Count before touching anything, so a full table stays as it was.
	if t.groupsNeeded(k, l) > len(t.free) {
		return ErrFull
	}
	t.insert(k, l, leaf(l, nh))
	t.routes.put(l, k, nh)
	t.changed()
	return nil
}

// changed marks the end of a change to the entries: the memos forget
// what they learnt before it. Once per Add or Delete, after its stores
// (not per store: an atomic add for each of a new group's 256 entries
// cost route adds a third of their rate). A memo entry learnt during
// the change is as good as a lookup racing it, old or new: every entry
// the writer leaves is right, for one or the other, over its whole range.
func (t *Table) changed() { t.gen.Add(1) }

// Delete removes the route for p (masked). Its addresses go to the
// longest shorter route that contains p, if any. It returns an error
// wrapping ErrNotFound if p is not present.
func (t *Table) Delete(p netip.Prefix) error {
	k, l, err := t.prefix(p)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.routes.get(l, k); !ok {
		return fmt.Errorf("%w: %v", ErrNotFound, p.Masked())
	}
	t.routes.del(l, k)
	var repl uint32 // no covering route: the entries become empty
	if cl, cnh, ok := t.routes.longest(k, l-1); ok {
		repl = leaf(cl, cnh)
	}
	t.remove(k, l, repl)
	t.changed()
	return nil
}

// groupsNeeded is the number of new groups a route of length l at k
// needs: one per level below the first that it reaches and that does not
// exist yet on its path.
func (t *Table) groupsNeeded(k key, l int) int {
	base, s, w := 0, uint(0), uint(t.fbits)
	for uint(l) > s+w {
		e := t.mem[base+int(k.bits(s, w))]
		if e&groupBit == 0 {
			n := 0
			for ; uint(l) > s+w; s, w = s+w, 8 {
				n++
			}
			return n
		}
		base, s, w = t.groupBase(e&payloadMask), s+w, 8
	}
	return 0
}

// insert writes leaf v of a route of length l at k. The caller has
// checked that enough groups are free.
func (t *Table) insert(k key, l int, v uint32) {
	m := t.mem
	base, s, w := 0, uint(0), uint(t.fbits)
	for {
		i := base + int(k.bits(s, w))
		if uint(l) <= s+w {
			// The route ends in this level: it covers 2^(s+w-l) entries.
			for n := 1 << (s + w - uint(l)); n > 0; n-- {
				t.set(i, v)
				i++
			}
			return
		}
		e := m[i]
		if e&groupBit == 0 {
			g := t.free[len(t.free)-1]
			t.free = t.free[:len(t.free)-1]
			// Fill the group with what the entry means now before
			// readers can reach it, then switch the entry.
			gb := t.groupBase(g)
			for j := gb; j < gb+groupSize; j++ {
				t.store(j, e)
			}
			e = groupBit | g
			t.store(i, e)
		}
		base, s, w = t.groupBase(e&payloadMask), s+w, 8
	}
}

// set writes leaf v into entry i unless a longer route owns it; below a
// group pointer, into every entry of the group the same way.
func (t *Table) set(i int, v uint32) {
	e := t.mem[i]
	if e&groupBit != 0 {
		gb := t.groupBase(e & payloadMask)
		for j := gb; j < gb+groupSize; j++ {
			t.set(j, v)
		}
		return
	}
	// Skipping equal entries spares readers' cache lines on a replace.
	if e != v && e>>depthShift <= v>>depthShift {
		t.store(i, v)
	}
}

// remove gives the entries of the route of length l at k to repl (the
// covering route's leaf, or 0), then folds the groups on its path that
// no longer differ inside.
func (t *Table) remove(k key, l int, repl uint32) {
	// The entry pointing to each group on the way, and the bit where
	// that group's index starts.
	var path [maxLevels]int
	var start [maxLevels]uint
	np := 0
	d := uint32(l + 1)
	m := t.mem
	base, s, w := 0, uint(0), uint(t.fbits)
	for {
		i := base + int(k.bits(s, w))
		if uint(l) <= s+w {
			for n := 1 << (s + w - uint(l)); n > 0; n-- {
				t.unset(i, d, repl)
				i++
			}
			break
		}
		e := m[i]
		if e&groupBit == 0 {
			break // not reached: a route below this level keeps its group
		}
		path[np], start[np] = i, s+w
		np++
		base, s, w = t.groupBase(e&payloadMask), s+w, 8
	}
	// A group stays while some route longer than its start lies inside
	// it. Only groups on the path can have lost their last such route: a
	// group below the deleted range still holds the route that made it.
	for np > 0 {
		np--
		if !t.fold(path[np], start[np]) {
			break // a group that stays keeps its parents non-uniform
		}
	}
}

// unset replaces entry i with repl if the deleted route, of depth d, set
// it; below a group pointer, in every entry of the group.
func (t *Table) unset(i int, d, repl uint32) {
	e := t.mem[i]
	if e&groupBit != 0 {
		gb := t.groupBase(e & payloadMask)
		for j := gb; j < gb+groupSize; j++ {
			t.unset(j, d, repl)
		}
		return
	}
	if e>>depthShift == d {
		t.store(i, repl)
	}
}

// fold replaces the pointer in entry i by its group's single leaf if all
// 256 entries are that leaf and it belongs to a route that ends above
// the group (index bits from s on), and puts the group on the pending
// list: readers may still be inside it until Reclaim. It reports whether
// it folded.
//
// The depth condition matters: two sibling routes longer than s with the
// same next hop also fill a group with one leaf, but folding it would put
// their depth in an entry above them, where Delete and Add would no
// longer find their entries.
func (t *Table) fold(i int, s uint) bool {
	g := t.mem[i] & payloadMask
	gb := t.groupBase(g)
	grp := t.mem[gb : gb+groupSize]
	e := grp[0]
	if e&groupBit != 0 || e>>depthShift > uint32(s)+1 {
		return false
	}
	for _, x := range grp[1:] {
		if x != e {
			return false
		}
	}
	t.store(i, e)
	t.pending = append(t.pending, g)
	return true
}
