package fib

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentReaders runs readers doing LookupBatch4 and Lookup4 while
// the writer keeps adding, replacing and deleting prefixes inside a
// static covering /8, so groups are made, folded and (after a grace
// period the readers signal, as workers would) reused. A reader may see
// the old or the new route for an address, nothing else: never 0, and
// never the next hop of a prefix that does not contain the address,
// which is what a reader following a stale pointer into a reused group
// would see. Run it with -race.
func TestConcurrentReaders(t *testing.T) {
	const cover = 1 // 10.0.0.0/8, always present
	type toggled struct {
		p    netip.Prefix
		a, b uint32 // the two next hops it alternates between
	}
	var toggles []toggled
	for i, s := range []string{
		"10.1.2.0/25", "10.1.2.128/32", "10.1.0.0/20", "10.1.2.64/26", // region X
		"10.2.3.0/26", "10.2.3.7/32", "10.2.0.0/17", "10.2.3.0/24", // region Y
	} {
		toggles = append(toggles, toggled{netip.MustParsePrefix(s), uint32(10 + 2*i), uint32(11 + 2*i)})
	}

	tab := New(Config{FirstBits: 16, Groups: 8}, V4)
	if err := tab.Add(netip.MustParsePrefix("10.0.0.0/8"), cover); err != nil {
		t.Fatal(err)
	}

	// Addresses in and around the toggled prefixes, each with the next
	// hops it may legitimately see.
	r := rand.New(rand.NewPCG(5, 5))
	var addrs []uint32
	for _, tg := range toggles {
		for range 24 {
			addrs = append(addrs, u32(inside(r, tg.p)))
		}
		first := u32(tg.p.Addr())
		last := first | (1<<(32-tg.p.Bits()) - 1)
		addrs = append(addrs, first-1, first, last, last+1)
	}
	addrs = append(addrs, u32(netip.MustParseAddr("10.3.0.1")), u32(netip.MustParseAddr("10.1.128.0")))
	allowed := make([][]uint32, len(addrs))
	for i, a := range addrs {
		allowed[i] = []uint32{cover}
		for _, tg := range toggles {
			if tg.p.Contains(addr4(a)) {
				allowed[i] = append(allowed[i], tg.a, tg.b)
			}
		}
	}

	readers := max(2, runtime.GOMAXPROCS(0))
	passes := make([]atomic.Uint64, readers) // bumped per batch: a quiescent point
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, readers)
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nh := make([]uint32, len(addrs))
			for n := 0; !stop.Load(); n++ {
				tab.LookupBatch4(addrs, nh, nil)
				if n%4 == 0 { // and the single lookup now and then
					for i, a := range addrs {
						if i%7 == n%7 {
							nh[i] = tab.Lookup4(a)
						}
					}
				}
				for i, v := range nh {
					if !slices.Contains(allowed[i], v) {
						errs <- fmt.Sprintf("reader %d: %v looked up as %d, allowed %v", w, addr4(addrs[i]), v, allowed[i])
						return
					}
				}
				passes[w].Add(1)
			}
		}()
	}

	// grace waits until every reader has finished a batch begun after
	// the call, so none can still hold a pointer read before it.
	grace := func() {
		seen := make([]uint64, readers)
		for i := range passes {
			seen[i] = passes[i].Load()
		}
		for i := range passes {
			for passes[i].Load() < seen[i]+2 && !stop.Load() {
				runtime.Gosched()
			}
		}
	}

	deadline := time.Now().Add(time.Second)
	ops, folds := 0, 0
	for ; time.Now().Before(deadline) && len(errs) == 0; ops++ {
		tg := toggles[r.IntN(len(toggles))]
		var err error
		switch nh, ok := tab.Get(tg.p); {
		case !ok:
			err = tab.Add(tg.p, tg.a)
		case r.IntN(3) == 0:
			err = tab.Delete(tg.p)
		case nh == tg.a:
			err = tab.Add(tg.p, tg.b)
		default:
			err = tab.Add(tg.p, tg.a)
		}
		if err != nil {
			t.Fatalf("op %d on %v: %v", ops, tg.p, err)
		}
		if st := tab.Stats(); st.GroupsPending > 0 && (st.GroupsFree < 3 || r.IntN(8) == 0) {
			folds += st.GroupsPending
			grace()
			tab.Reclaim()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var batches uint64
	for i := range passes {
		batches += passes[i].Load()
	}
	t.Logf("%d writer ops, %d groups folded and reclaimed, %d reader batches", ops, folds, batches)
	if folds == 0 || batches == 0 {
		t.Fatal("the test did not exercise folding or reading")
	}
}
