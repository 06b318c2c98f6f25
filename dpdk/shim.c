#include "shim.h"
#include "_cgo_export.h"

uint16_t rf_step_run(uintptr_t step)
{
	struct rf_step *s = (struct rf_step *)step;
	uint16_t i, total = 0;

	s->tsc = rte_rdtsc();
	if (s->nb_drop) {
		rte_pktmbuf_free_bulk(s->drop, s->nb_drop);
		s->nb_drop = 0;
	}
	for (i = 0; i < s->nb_txq; i++) {
		struct rf_txq *t = &s->txq[i];
		uint16_t n = t->n, sent = 0;
		uint16_t retries = s->tx_retries;

		if (n == 0)
			continue;
		/* A PMD may take fewer than offered per call (vector paths cap
		 * the burst): keep going while it makes progress, and give up
		 * after tx_retries calls that take nothing (ring full). */
		if (t->ring != NULL)
			sent = rte_ring_mp_enqueue_burst(t->ring, (void **)t->pkts, n, NULL);
		else
			while (sent < n) {
				uint16_t k = rte_eth_tx_burst(t->port, t->queue, t->pkts + sent, n - sent);
				sent += k;
				if (k == 0 && retries-- == 0)
					break;
			}
		if (sent < n) {
			rte_pktmbuf_free_bulk(t->pkts + sent, n - sent);
			t->dropped += n - sent;
		}
		t->sent += sent;
		t->n = 0;
	}
	if (s->burst == 0)
		return 0;
	/* A queue that returns a full burst has more waiting: take up to
	 * max_bursts bursts from it, so the cost of entering C is shared by
	 * more packets under load, while an idle queue costs one call. */
	s->steps++;
	for (i = 0; i < s->nb_rxq; i++) {
		struct rf_rxq *q = &s->rxq[i];
		struct rte_mbuf **rx = s->rx + (size_t)i * s->burst * s->max_bursts;
		uint16_t k, got, n = 0;

		if (s->steps & q->skip) {
			q->n = 0; /* a slow queue (a kernel TAP: each poll is a system call) */
			continue;
		}

		for (k = 0; k < s->max_bursts; k++) {
			got = rte_eth_rx_burst(q->port, q->queue, rx + n, s->burst);
			n += got;
			if (got < s->burst)
				break;
		}
		q->n = n;
		total += n;
	}
	return total;
}

uint32_t rf_pump_run(uintptr_t pump)
{
	struct rf_pump *p = (struct rf_pump *)pump;
	uint32_t total = 0;
	uint16_t i;

	for (i = 0; i < p->n; i++) {
		struct rf_pump_q *q = &p->q[i];
		struct rte_mbuf *b[RF_PUMP_BURST];
		unsigned int n = rte_ring_sc_dequeue_burst(q->ring, (void **)b, RF_PUMP_BURST, NULL);
		uint16_t sent = 0, retries = 4;

		while (sent < n) {
			uint16_t k = rte_eth_tx_burst(q->port, q->queue, b + sent, n - sent);
			sent += k;
			if (k == 0 && retries-- == 0)
				break;
		}
		if (sent < n) {
			rte_pktmbuf_free_bulk(b + sent, n - sent);
			q->dropped += n - sent;
		}
		q->sent += sent;
		total += n;
	}
	return total;
}

static int rf_lcore_entry(void *arg)
{
	rfLcoreMain((uintptr_t)arg);
	return 0;
}

int rf_launch(unsigned lcore, uintptr_t handle)
{
	return rte_eal_remote_launch(rf_lcore_entry, (void *)handle, lcore);
}

int rf_errno(void) { return rte_errno; }
uint64_t rf_tsc_hz(void) { return rte_get_tsc_hz(); }
uint64_t rf_rdtsc(void) { return rte_rdtsc(); }

void rf_mbuf_layout(struct rf_mbuf_layout *l)
{
	l->size = sizeof(struct rte_mbuf);
	l->buf_addr = offsetof(struct rte_mbuf, buf_addr);
	l->data_off = offsetof(struct rte_mbuf, data_off);
	l->refcnt = offsetof(struct rte_mbuf, refcnt);
	l->nb_segs = offsetof(struct rte_mbuf, nb_segs);
	l->port = offsetof(struct rte_mbuf, port);
	l->ol_flags = offsetof(struct rte_mbuf, ol_flags);
	l->packet_type = offsetof(struct rte_mbuf, packet_type);
	l->pkt_len = offsetof(struct rte_mbuf, pkt_len);
	l->data_len = offsetof(struct rte_mbuf, data_len);
	l->vlan_tci = offsetof(struct rte_mbuf, vlan_tci);
	l->hash = offsetof(struct rte_mbuf, hash);
	l->fdir_hi = offsetof(struct rte_mbuf, hash.fdir.hi);
	l->buf_len = offsetof(struct rte_mbuf, buf_len);
	l->pool = offsetof(struct rte_mbuf, pool);
	l->next = offsetof(struct rte_mbuf, next);
}

int rf_link_get(uint16_t port, struct rf_link *l, int wait)
{
	struct rte_eth_link link;
	int rc;

	memset(&link, 0, sizeof(link));
	rc = wait ? rte_eth_link_get(port, &link) : rte_eth_link_get_nowait(port, &link);
	if (rc < 0)
		return rc;
	l->speed = link.link_speed;
	l->duplex_full = link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
	l->autoneg = link.link_autoneg == RTE_ETH_LINK_AUTONEG;
	l->up = link.link_status == RTE_ETH_LINK_UP;
	return 0;
}

int rf_port_configure(uint16_t port, uint16_t nb_rxq, uint16_t nb_txq, uint16_t mtu,
		      uint64_t rss_hf, uint64_t rx_offloads)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = mtu; /* 0: the PMD's default */
	conf.rxmode.offloads = rx_offloads;
	if (rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = NULL; /* the PMD's default key */
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	}
	return rte_eth_dev_configure(port, nb_rxq, nb_txq, &conf);
}

int rf_port_rss_hf(uint16_t port, uint64_t *rss_hf)
{
	struct rte_eth_rss_conf c;

	memset(&c, 0, sizeof(c));
	int rc = rte_eth_dev_rss_hash_conf_get(port, &c);
	*rss_hf = c.rss_hf;
	return rc;
}

int rf_rx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc, int socket, struct rte_mempool *mp)
{
	return rte_eth_rx_queue_setup(port, q, nb_desc, (unsigned)socket, NULL, mp);
}

int rf_tx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc, int socket)
{
	return rte_eth_tx_queue_setup(port, q, nb_desc, (unsigned)socket, NULL);
}

void rf_mbuf_free_bulk(struct rte_mbuf **pkts, unsigned n) { rte_pktmbuf_free_bulk(pkts, n); }
struct rte_mbuf *rf_mbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }
int rf_mbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **pkts, unsigned n) { return rte_pktmbuf_alloc_bulk(mp, pkts, n); }
