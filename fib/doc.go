// Package fib holds longest-prefix-match forwarding tables for IPv4 and
// IPv6: looked up per burst on the worker lcores, changed live by the
// control plane while the workers read them. It is sized for a full
// routing table (1M IPv4 and 200k IPv6 prefixes).
//
// # Structure
//
// A Table is a multibit trie in the DIR-24-8 style of DPDK's rte_lpm and
// rte_fib, one implementation for both families. The first level has 2^F
// entries (F = Config.FirstBits, 24 by default) indexed by the top F bits
// of the address. An entry either holds a result or points to a group of
// 256 entries indexed by the next 8 bits, whose entries again hold a
// result or point to a deeper group. IPv4 with F = 24 needs at most one
// group level; IPv6 up to (128-F)/8 (rounded up; when 8 does not divide
// W-F the last level's low index bits are always zero). Most IPv4 routes
// are /24 or shorter, so most lookups are one memory read, and a /32 two.
//
// Every entry is a uint32:
//
//	bit 31      group: bits 0..22 are a group index
//	bits 23..30 depth: prefix length + 1 of the route that set the entry,
//	            0 for an empty entry (no route)
//	bits 0..22  payload: the next hop (a leaf) or the group index
//
// so next hops are 1..MaxNextHop (0 means "no route") and a table has at
// most MaxGroups groups. The first level and the groups are one flat
// []uint32, which can live in DPDK hugepage memory on the workers' NUMA
// node (NewAt) or in Go memory (New). Groups are preallocated
// (Config.Groups): an Add that would need more fails with ErrFull and
// changes nothing.
//
// The control plane keeps the authoritative route set in Go maps, one per
// prefix length. They answer Get, Walk and Covering, and tell Delete which
// shorter route takes over the deleted route's addresses.
//
// An insertion writes its result into every entry of its range whose
// depth is not greater than its own (so longer routes keep their entries)
// and, below entries that point to groups, into the groups' entries the
// same way. A prefix longer than a level descends into, or first makes,
// the group under its entry. A deletion gives every entry that the route
// set (those of its depth in its range) to the covering route: the longest
// shorter route containing it, or none. A group left with no route longer
// than its parent level then holds one result in all 256 entries, and is
// folded back: the parent entry gets that result.
//
// # Concurrency
//
// There is exactly one writer at a time: Add, Delete, Reclaim and the
// other control methods take an internal mutex, so they may be called from
// any goroutine, but they are meant for one control goroutine. Lookups
// (Lookup4, Lookup6, LookupBatch4, LookupBatch6, Lookup) take no lock and
// may run on any number of goroutines or lcores at the same time as the
// writer. A Memo, which spares IPv6 lookups to recent subnets their walk,
// belongs to one of them; every Add and Delete makes it forget. So does a
// Scratch4, the working memory of LookupBatch4 that a worker keeps so
// that its batches zero none on the stack.
//
// Copying the table for every update and swapping a pointer (RCU over the
// whole table) would copy a 64 MiB first level per route change and need
// twice the hugepages. Instead the writer changes entries in place, one
// atomic 32-bit store each, and readers load entries atomically (a plain
// load on amd64 and arm64). This is safe because
//
//   - an entry is self-contained: a reader sees either the entry's old or
//     its new result, never a mixture;
//   - a new group is filled completely with its parent entry's result
//     before the parent is switched to point to it, so a reader that
//     follows the new pointer finds the same result it would have found
//     before, or a newer one; an address never looks up as empty while a
//     route covers it;
//   - a group that is folded back into its parent may still be read by a
//     reader that loaded the parent's old pointer just before; its entries
//     still hold correct (old) results, and the writer does not reuse it
//     until told that every such reader is gone.
//
// That last point is the caller's part of the contract. Folded groups go
// on a pending list and are not used for new groups until Reclaim moves
// them to the free list. Call Reclaim only after every reader that might
// have been inside a lookup when the groups were folded has passed a
// quiescent point: typically the control goroutine applies its updates,
// waits until every worker lcore has finished one more poll iteration (a
// per-worker counter it bumps per burst, as rte_rcu_qsbr does), and then
// calls Reclaim, with no Add or Delete in between. Calling Reclaim too
// early lets a slow reader follow a stale pointer into a reused group and
// return another prefix's next hop. Never calling it only costs groups:
// Stats reports them as GroupsPending, and Add returns ErrFull once free
// groups run out.
package fib
