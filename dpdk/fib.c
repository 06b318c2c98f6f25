#include <string.h>
#include <rte_errno.h>
#include "fib.h"

struct rte_fib *rf_fib_create(const char *name, int socket, int max_routes, uint32_t num_tbl8, int *err)
{
	struct rte_fib_conf conf;
	struct rte_fib *f;

	memset(&conf, 0, sizeof(conf));
	conf.type = RTE_FIB_DIR24_8;
	conf.default_nh = 0;
	conf.max_routes = max_routes;
	conf.rib_ext_sz = 0;
	conf.dir24_8.nh_sz = RTE_FIB_DIR24_8_4B;
	conf.dir24_8.num_tbl8 = num_tbl8;
	rte_errno = 0;
	f = rte_fib_create(name, socket, &conf);
	*err = rte_errno;
	return f;
}

struct rte_fib6 *rf_fib6_create(const char *name, int socket, int max_routes, uint32_t num_tbl8, int *err)
{
	struct rte_fib6_conf conf;
	struct rte_fib6 *f;

	memset(&conf, 0, sizeof(conf));
	conf.type = RTE_FIB6_TRIE;
	conf.default_nh = 0;
	conf.max_routes = max_routes;
	conf.rib_ext_sz = 0;
	conf.trie.nh_sz = RTE_FIB6_TRIE_4B;
	conf.trie.num_tbl8 = num_tbl8;
	rte_errno = 0;
	f = rte_fib6_create(name, socket, &conf);
	*err = rte_errno;
	return f;
}

int rf_fib_lookup(uintptr_t fib, uintptr_t ips, uintptr_t nhs, int n)
{
	return rte_fib_lookup_bulk((struct rte_fib *)fib, (uint32_t *)ips, (uint64_t *)nhs, n);
}

int rf_fib6_lookup(uintptr_t fib, uintptr_t ips, uintptr_t nhs, int n)
{
	return rte_fib6_lookup_bulk((struct rte_fib6 *)fib,
				    (uint8_t (*)[RTE_FIB6_IPV6_ADDR_SIZE])ips, (uint64_t *)nhs, n);
}

void rf_fib_lookup_bursts(uintptr_t fib, uintptr_t ips, uintptr_t nhs, uint32_t n, uint32_t burst)
{
	struct rte_fib *f = (struct rte_fib *)fib;
	uint32_t *ip = (uint32_t *)ips;
	uint64_t *nh = (uint64_t *)nhs;
	uint32_t i, k;

	if (burst == 0)
		burst = n;
	for (i = 0; i < n; i += k) {
		k = n - i < burst ? n - i : burst;
		rte_fib_lookup_bulk(f, ip + i, nh + i, (int)k);
	}
}

void rf_fib6_lookup_bursts(uintptr_t fib, uintptr_t ips, uintptr_t nhs, uint32_t n, uint32_t burst)
{
	struct rte_fib6 *f = (struct rte_fib6 *)fib;
	uint8_t (*ip)[RTE_FIB6_IPV6_ADDR_SIZE] = (uint8_t (*)[RTE_FIB6_IPV6_ADDR_SIZE])ips;
	uint64_t *nh = (uint64_t *)nhs;
	uint32_t i, k;

	if (burst == 0)
		burst = n;
	for (i = 0; i < n; i += k) {
		k = n - i < burst ? n - i : burst;
		rte_fib6_lookup_bulk(f, ip + i, nh + i, (int)k);
	}
}

/* The heads of struct dir24_8_tbl and struct rte_trie_tbl as DPDK 22.11
 * declares them (their flexible tbl24 arrays left out). DIR24_8 counts
 * the groups it uses in cur_tbl8s; TRIE leaves that at 0 and hands groups
 * out from a stack whose top is tbl8_pool_pos. */
struct rf_dir24_8_head {
	uint32_t number_tbl8s;
	uint32_t rsvd_tbl8s;
	uint32_t cur_tbl8s;
};

struct rf_trie_head {
	uint32_t number_tbl8s;
	uint32_t rsvd_tbl8s;
	uint32_t cur_tbl8s;
	uint64_t def_nh;
	enum rte_fib_trie_nh_sz nh_sz;
	uint64_t *tbl8;
	uint32_t *tbl8_pool;
	uint32_t tbl8_pool_pos;
};

void rf_fib_tbl8_use(uintptr_t dp, struct rf_tbl8_use *u)
{
	const struct rf_dir24_8_head *h = (const struct rf_dir24_8_head *)dp;

	u->number = h->number_tbl8s;
	u->reserved = h->rsvd_tbl8s;
	u->used = h->cur_tbl8s;
}

void rf_fib6_tbl8_use(uintptr_t dp, struct rf_tbl8_use *u)
{
	const struct rf_trie_head *h = (const struct rf_trie_head *)dp;

	u->number = h->number_tbl8s;
	u->reserved = h->rsvd_tbl8s;
	u->used = h->tbl8_pool_pos;
}

int64_t rf_heap_alloc_bytes(int socket)
{
	struct rte_malloc_socket_stats st;

	if (rte_malloc_get_socket_stats(socket, &st) < 0)
		return -1;
	return (int64_t)st.heap_allocsz_bytes;
}
