package fib

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Family is the address family of a Table.
type Family uint8

// The families.
const (
	V4 Family = 4
	V6 Family = 6
)

func (f Family) String() string {
	switch f {
	case V4:
		return "ipv4"
	case V6:
		return "ipv6"
	}
	return fmt.Sprintf("Family(%d)", uint8(f))
}

// bits is the address width of the family.
func (f Family) bits() int {
	if f == V6 {
		return 128
	}
	return 32
}

// Limits of the entry format.
const (
	MaxNextHop = 1<<23 - 1 // largest next hop; 0 means no route
	MaxGroups  = 1 << 23   // most groups a Config may ask for
)

// Defaults for a zero Config field.
const (
	DefaultFirstBits = 24
	DefaultGroups    = 1 << 16 // 64 MiB of groups
)

// Entry layout; see the package comment.
const (
	groupBit    = 1 << 31
	depthShift  = 23
	payloadMask = 1<<23 - 1
	groupSize   = 256
)

// ErrFull is returned by Add when the table has no free group for the
// prefix. The table is unchanged. Reclaim may free folded groups.
var ErrFull = errors.New("fib: no free groups")

// ErrNotFound is returned by Delete for a prefix that is not in the table.
var ErrNotFound = errors.New("fib: no such route")

// Config sizes a Table. The zero value means DefaultFirstBits and
// DefaultGroups.
type Config struct {
	// FirstBits is the number of address bits that index the first level
	// (2^FirstBits entries), 8..24. Routes up to this length cost no
	// groups; 24 suits IPv4, where most routes are /24 or shorter.
	FirstBits int
	// Groups is the number of 256-entry groups (1 KiB each),
	// 1..MaxGroups; 0 means DefaultGroups. A route longer than FirstBits needs one
	// group per level below the first it passes through, shared with
	// every route under the same entry.
	Groups int
}

func (c Config) withDefaults() Config {
	if c.FirstBits == 0 {
		c.FirstBits = DefaultFirstBits
	}
	if c.Groups == 0 {
		c.Groups = DefaultGroups
	}
	return c
}

// Validate reports whether New and NewAt accept c.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.FirstBits < 8 || c.FirstBits > 24 {
		return fmt.Errorf("fib: FirstBits %d not in 8..24", c.FirstBits)
	}
	if c.Groups < 0 || c.Groups > MaxGroups {
		return fmt.Errorf("fib: Groups %d not in 1..%d", c.Groups, MaxGroups)
	}
	return nil
}

// Footprint is the number of bytes of entry memory a Table with config c
// uses (the first level and every group); NewAt needs that much.
func Footprint(c Config) int {
	c = c.withDefaults()
	return entries(c) * 4
}

func entries(c Config) int { return 1<<c.FirstBits + c.Groups*groupSize }

// Table is a longest-prefix-match table for one address family. See the
// package comment for which methods may run concurrently.
type Table struct {
	// The lookup path reads only these, and nothing writes them after
	// New; the padding keeps the writer's fields off their cache line.
	first  []uint32 // 2^FirstBits entries
	groups []uint32 // Groups*256 entries
	fbits  uint32   // FirstBits
	_      [64]byte
	// gen counts the writer's changes (Add, Delete): a Memo holds
	// results only while it stays the same. On a line of its own, as the
	// writer changes it.
	gen atomic.Uint64
	_   [56]byte

	family Family
	cfg    Config
	width  int      // address bits: 32 or 128
	mem    []uint32 // first and groups, contiguous

	mu      sync.Mutex
	routes  routeSet
	free    []uint32 // group indexes ready for use, popped from the end
	pending []uint32 // folded groups waiting for Reclaim
}

// New makes an empty table in Go memory. It panics if c is not valid
// (see Config.Validate) or family is neither V4 nor V6.
func New(c Config, family Family) *Table {
	c = mustValid(c, family)
	return newTable(make([]uint32, entries(c)), c, family)
}

// NewAt makes an empty table whose entries live at mem, Footprint(c)
// bytes aligned to at least 4 (DPDK memory on the workers' socket, for
// example from rte_zmalloc_socket). The memory must hold no Go pointers,
// it need not be zeroed (NewAt clears the first level; groups are filled
// before use), and it must outlive every use of the table. It panics like
// New, and if mem is nil or misaligned.
func NewAt(mem unsafe.Pointer, c Config, family Family) *Table {
	c = mustValid(c, family)
	if mem == nil || uintptr(mem)%4 != 0 {
		panic(fmt.Sprintf("fib: NewAt memory %p is nil or not 4-byte aligned", mem))
	}
	m := unsafe.Slice((*uint32)(mem), entries(c))
	clear(m[:1<<c.FirstBits])
	return newTable(m, c, family)
}

func mustValid(c Config, family Family) Config {
	if err := c.Validate(); err != nil {
		panic(err)
	}
	if family != V4 && family != V6 {
		panic(fmt.Sprintf("fib: bad family %v", family))
	}
	return c.withDefaults()
}

func newTable(m []uint32, c Config, family Family) *Table {
	n := 1 << c.FirstBits
	t := &Table{
		first:  m[:n:n],
		groups: m[n:],
		fbits:  uint32(c.FirstBits),
		family: family,
		cfg:    c,
		width:  family.bits(),
		mem:    m,
		free:   make([]uint32, c.Groups),
	}
	t.routes.init(family)
	// Popped from the end, so groups are used from the lowest address up.
	for i := range t.free {
		t.free[i] = uint32(c.Groups - 1 - i)
	}
	return t
}

// Family is the table's address family.
func (t *Table) Family() Family { return t.family }

// Stats describes a table's use.
type Stats struct {
	Routes        int
	GroupsUsed    int // reachable from the first level
	GroupsFree    int // ready for Add
	GroupsPending int // folded, waiting for Reclaim
	Bytes         int // Footprint of the table's config
}

// Stats reports the table's use.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{
		Routes:        t.routes.n,
		GroupsUsed:    t.cfg.Groups - len(t.free) - len(t.pending),
		GroupsFree:    len(t.free),
		GroupsPending: len(t.pending),
		Bytes:         Footprint(t.cfg),
	}
}

// Len is the number of routes.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.routes.n
}

// Reclaim makes every group folded so far free for reuse. The caller
// promises that every reader that could have loaded a pointer to one of
// them has since finished its lookup (see the package comment).
func (t *Table) Reclaim() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.free = append(t.free, t.pending...)
	t.pending = t.pending[:0]
}
