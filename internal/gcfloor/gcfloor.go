// Package gcfloor keeps the Go collector from running more often than a
// small heap needs.
//
// A collection stops the world twice, and a worker lcore, whose data path
// is Go code, stops with it: for up to a millisecond or more on a loaded
// machine, long enough for a NIC's rx ring to overflow. With GOGC=100 the
// collector runs each time the heap doubles, and the daemon's heap is
// small (about a megabyte live), so a little control-plane garbage (a
// Prometheus scrape, a console command) starts a collection every few
// seconds. Set puts a floor under that: the collector runs when the Go
// heap reaches twice (GOGC) what the last collection left live, or the
// Go runtime's memory reaches the floor, whichever comes later. A heap
// larger than the floor is paced by GOGC as before.
//
// The floor is a memory limit (debug.SetMemoryLimit) with GOGC off, moved
// after every collection. A user's own GOGC or GOMEMLIMIT in the
// environment is left alone.
package gcfloor

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is what the daemon uses: little beside the hugepage
// memory DPDK reserves, and, with the control plane's garbage at about a
// megabyte a second, a collection a minute instead of one every few
// seconds.
const DefaultFloor = 64 << 20

// pacer is the state Set installs: one at a time per process.
type pacer struct {
	mu     sync.Mutex
	on     bool
	floor  uint64
	gogc   int   // the percentage the limit follows, from GOGC; Undo restores it
	prevML int64 // the memory limit Undo restores
	gen    int   // Set's call; a finalizer of an older one stops
	limit  int64 // the limit set last
	moves  int   // how many times the limit was set after a collection
	sample []metrics.Sample
}

var p pacer

// Set installs a floor of floor bytes of Go runtime memory under the
// collector's goal and reports whether it did: not when GOGC or
// GOMEMLIMIT is set in the environment. Undo puts the collector back as
// it was.
func Set(floor uint64) bool {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.floor = floor
		p.retune()
		return true
	}
	gogc := debug.SetGCPercent(-1)
	if gogc < 0 {
		debug.SetGCPercent(gogc)
		return false
	}
	p.on, p.floor, p.gogc = true, floor, gogc
	p.prevML = debug.SetMemoryLimit(-1)
	p.gen++
	p.sample = []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/gc/heap/live:bytes"}}
	p.retune()
	arm(p.gen)
	return true
}

// Undo removes the floor: GOGC and the memory limit are what they were
// before Set.
func Undo() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	p.on = false
	p.gen++
	debug.SetMemoryLimit(p.prevML)
	debug.SetGCPercent(p.gogc)
}

// Limit is the memory limit the floor set last (0: none set) and how
// many collections moved it.
func Limit() (limit int64, moves int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return 0, p.moves
	}
	return p.limit, p.moves
}

// retune sets the limit (p.mu held) to the floor, or to what the
// runtime's memory beside the heap (stacks, metadata) plus the heap GOGC
// would let grow from the last collection's live bytes comes to, if
// more. The heap's free and unused spans are left out, as the runtime
// leaves them out of the heap goal it derives from a limit: its
// scavenger gives them back before the limit is reached.
func (p *pacer) retune() {
	metrics.Read(p.sample)
	v := func(i int) uint64 { return p.sample[i].Value.Uint64() }
	total, released, free, objects, unused, live := v(0), v(1), v(2), v(3), v(4), v(5)
	beside := total - released - free - objects - unused
	goal := beside + live + live/100*uint64(p.gogc)
	limit := int64(min(max(goal, p.floor), math.MaxInt64))
	p.limit = limit
	debug.SetMemoryLimit(limit)
}

// sentinel is what a collection finds unreachable, so that its finalizer
// runs after each cycle. It holds a pointer: a pointer-free object this
// small could share a block with others and outlive the cycle.
type sentinel struct {
	_ *int
	_ [8]byte
}

// arm allocates a sentinel whose finalizer moves the limit after the next
// collection and arms the one after.
func arm(gen int) {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.on || p.gen != gen {
			return // undone or set again since
		}
		p.retune()
		p.moves++
		arm(gen)
	})
}
