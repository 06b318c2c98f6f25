/* rte_fib and rte_fib6 from Go: creation with the configuration filled in
 * C (its anonymous union is out of cgo's reach), and bulk lookups that take
 * their tables and arrays as integers. The arrays live in DPDK memory, so
 * no Go pointer is ever passed, and cgo's per-call pointer checks (which
 * cost as much as a burst of lookups) are skipped. */
#ifndef ROCEFWD_FIB_H
#define ROCEFWD_FIB_H

#include <stdint.h>
#include <stddef.h>
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_malloc.h>

/* DIR24_8 with 4-byte next hops and default next hop 0; NULL on failure,
 * with rte_errno in *err (read on the thread that failed). */
struct rte_fib *rf_fib_create(const char *name, int socket, int max_routes, uint32_t num_tbl8, int *err);
/* TRIE with 4-byte next hops and default next hop 0. */
struct rte_fib6 *rf_fib6_create(const char *name, int socket, int max_routes, uint32_t num_tbl8, int *err);

/* One rte_fib_lookup_bulk / rte_fib6_lookup_bulk of n addresses. */
int rf_fib_lookup(uintptr_t fib, uintptr_t ips, uintptr_t nhs, int n);
int rf_fib6_lookup(uintptr_t fib, uintptr_t ips, uintptr_t nhs, int n);

/* n addresses in consecutive bulk lookups of burst addresses each (the
 * last may be shorter), all in one call from Go. */
void rf_fib_lookup_bursts(uintptr_t fib, uintptr_t ips, uintptr_t nhs, uint32_t n, uint32_t burst);
void rf_fib6_lookup_bursts(uintptr_t fib, uintptr_t ips, uintptr_t nhs, uint32_t n, uint32_t burst);

/* The tbl8 counters of a DIR24_8 or TRIE data plane (rte_fib_get_dp,
 * rte_fib6_get_dp), read from DPDK 22.11's private structures (lib/fib/
 * dir24_8.h, trie.h), mirrored in fib.c. */
struct rf_tbl8_use {
	uint32_t number;   /* configured */
	uint32_t reserved; /* what an add checks against number */
	uint32_t used;     /* allocated now */
};
void rf_fib_tbl8_use(uintptr_t dp, struct rf_tbl8_use *u);
void rf_fib6_tbl8_use(uintptr_t dp, struct rf_tbl8_use *u);

/* Allocated bytes of the malloc heap of a socket (internal or external);
 * -1 if the socket has no heap. */
int64_t rf_heap_alloc_bytes(int socket);

#endif
