/* C side of the binding: helpers for what cgo cannot reach directly
 * (static inlines, bitfields, macros) and the per-burst step that keeps
 * the dataplane at one cgo call per burst. */
#ifndef ROCEFWD_SHIM_H
#define ROCEFWD_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_dev.h>
#include <rte_bus.h>
#include <rte_version.h>
#include <rte_ring.h>

/* One transmit queue a worker writes to. Lives in DPDK memory. */
struct rf_txq {
	struct rte_mbuf **pkts; /* capacity: as rf_step.rx */
	uint16_t port;
	uint16_t queue;
	uint16_t n;          /* pending packets, set by Go */
	uint16_t _pad;
	uint64_t sent;       /* cumulative, written by C */
	uint64_t dropped;    /* unsent after retries, freed by C */
	struct rte_ring *ring; /* non-NULL: enqueued here for a pump to transmit */
};

/* One receive queue a worker polls, and what the last step got from it. */
struct rf_rxq {
	uint16_t port;
	uint16_t queue;
	uint16_t n;          /* result of the last step */
	uint16_t skip;       /* polled once every skip+1 steps (a power of two); 0: every step */
};

/* One step of a worker: free what Go dropped, flush every pending tx queue,
 * then receive one burst from each of its rx queues. Go fills the request
 * fields, C fills the results. Lives in DPDK memory so that no Go pointer
 * ever crosses into C. */
struct rf_step {
	struct rte_mbuf **rx;   /* nb_rxq * burst * max_bursts: queue i's at rx + i*burst*max_bursts */
	struct rf_rxq *rxq;     /* nb_rxq entries */
	struct rf_txq *txq;     /* nb_txq entries */
	struct rte_mbuf **drop; /* capacity: as rx; freed at the next step */
	uint16_t nb_drop;
	uint16_t nb_rxq;
	uint16_t nb_txq;
	uint16_t burst;         /* packets per rx_burst call; 0: flush only */
	uint16_t max_bursts;    /* rx_burst calls per queue per step while they come back full */
	uint16_t tx_retries;    /* tx_burst calls that send nothing before dropping */
	uint16_t steps;         /* steps run, for the queues polled less often */
	uint64_t tsc;           /* rte_rdtsc() at the start of this step */
};

/* Takes the step as an integer: cgo checks every pointer argument for Go
 * pointers on each call, which costs more than the step itself at line
 * rate, and this one never is. */
uint16_t rf_step_run(uintptr_t step);

/* A pump moves what workers enqueued on rings to ports' tx queues, off
 * the workers' lcores (for ports whose transmit is slow: a kernel TAP's
 * is a system call per packet). */
struct rf_pump_q {
	struct rte_ring *ring;
	uint16_t port;
	uint16_t queue;
	uint32_t _pad;
	uint64_t sent;
	uint64_t dropped;
};

struct rf_pump {
	uint16_t n;
	struct rf_pump_q *q;
};

/* Drains each ring once (up to RF_PUMP_BURST packets per ring); returns
 * the packets moved. */
#define RF_PUMP_BURST 64
uint32_t rf_pump_run(uintptr_t pump);

/* Lcore launch: the trampoline calls back into Go with a cgo.Handle. */
int rf_launch(unsigned lcore, uintptr_t handle);

/* Errors and EAL. */
int rf_errno(void);
uint64_t rf_tsc_hz(void);
uint64_t rf_rdtsc(void);

/* Mbuf layout, for asserting the Go-side constants. */
struct rf_mbuf_layout {
	size_t size, buf_addr, data_off, refcnt, nb_segs, port, ol_flags,
	       packet_type, pkt_len, data_len, vlan_tci, hash, fdir_hi,
	       buf_len, pool, next;
};
void rf_mbuf_layout(struct rf_mbuf_layout *l);

/* Ethdev. */
struct rf_link {
	uint32_t speed;
	uint8_t duplex_full, autoneg, up;
};
int rf_link_get(uint16_t port, struct rf_link *l, int wait);
/* rss_hf 0: no RSS (one rx queue, or a device without it). */
int rf_port_configure(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint16_t mtu,
		      uint64_t rss_hf, uint64_t rx_offloads);
int rf_port_rss_hf(uint16_t port, uint64_t *rss_hf);
int rf_rx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc, int socket, struct rte_mempool *mp);
int rf_tx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc, int socket);

/* Mempool. */
void rf_mbuf_free_bulk(struct rte_mbuf **pkts, unsigned n);
struct rte_mbuf *rf_mbuf_alloc(struct rte_mempool *mp);
int rf_mbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **pkts, unsigned n);

#endif
