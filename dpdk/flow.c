#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <rte_errno.h>
#include <rte_byteorder.h>
#include "flow.h"

size_t rf_flow_item_size(int type)
{
	switch (type) {
	case RTE_FLOW_ITEM_TYPE_ETH:
		return sizeof(struct rte_flow_item_eth);
	case RTE_FLOW_ITEM_TYPE_VLAN:
		return sizeof(struct rte_flow_item_vlan);
	case RTE_FLOW_ITEM_TYPE_IPV4:
		return sizeof(struct rte_flow_item_ipv4);
	case RTE_FLOW_ITEM_TYPE_IPV6:
		return sizeof(struct rte_flow_item_ipv6);
	case RTE_FLOW_ITEM_TYPE_UDP:
		return sizeof(struct rte_flow_item_udp);
	case RTE_FLOW_ITEM_TYPE_TCP:
		return sizeof(struct rte_flow_item_tcp);
	}
	return 0;
}

size_t rf_flow_conf_size(int type)
{
	switch (type) {
	case RTE_FLOW_ACTION_TYPE_QUEUE:
		return sizeof(struct rte_flow_action_queue);
	case RTE_FLOW_ACTION_TYPE_RSS:
		return sizeof(struct rte_flow_action_rss);
	case RTE_FLOW_ACTION_TYPE_MARK:
		return sizeof(struct rte_flow_action_mark);
	case RTE_FLOW_ACTION_TYPE_COUNT:
		return sizeof(struct rte_flow_action_count);
	case RTE_FLOW_ACTION_TYPE_JUMP:
		return sizeof(struct rte_flow_action_jump);
	case RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP:
	case RTE_FLOW_ACTION_TYPE_SET_IPV6_DSCP:
		return sizeof(struct rte_flow_action_set_dscp);
	}
	return 0;
}

void rf_flow_attr_set(struct rte_flow_attr *a, const struct rf_flow_attr_view *v)
{
	memset(a, 0, sizeof(*a));
	a->group = v->group;
	a->priority = v->priority;
	a->ingress = !!v->ingress;
	a->egress = !!v->egress;
	a->transfer = !!v->transfer;
}

void rf_flow_attr_get(const struct rte_flow_attr *a, struct rf_flow_attr_view *v)
{
	v->group = a->group;
	v->priority = a->priority;
	v->ingress = a->ingress;
	v->egress = a->egress;
	v->transfer = a->transfer;
}

void rf_flow_eth_set(struct rte_flow_item_eth *e, const uint8_t *dst, const uint8_t *src,
		     uint16_t type, int has_vlan)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->hdr.dst_addr.addr_bytes, dst, RTE_ETHER_ADDR_LEN);
	memcpy(e->hdr.src_addr.addr_bytes, src, RTE_ETHER_ADDR_LEN);
	e->hdr.ether_type = rte_cpu_to_be_16(type);
	e->has_vlan = !!has_vlan;
}

void rf_flow_vlan_set(struct rte_flow_item_vlan *v, uint16_t tci, uint16_t inner_type, int has_more_vlan)
{
	memset(v, 0, sizeof(*v));
	v->hdr.vlan_tci = rte_cpu_to_be_16(tci);
	v->hdr.eth_proto = rte_cpu_to_be_16(inner_type);
	v->has_more_vlan = !!has_more_vlan;
}

void rf_flow_ipv4_set(struct rte_flow_item_ipv4 *p, uint8_t tos, uint8_t ttl, uint8_t proto,
		      const uint8_t *src, const uint8_t *dst)
{
	memset(p, 0, sizeof(*p));
	p->hdr.type_of_service = tos;
	p->hdr.time_to_live = ttl;
	p->hdr.next_proto_id = proto;
	/* The addresses come in network order already (a.b.c.d as bytes). */
	memcpy(&p->hdr.src_addr, src, 4);
	memcpy(&p->hdr.dst_addr, dst, 4);
}

void rf_flow_ipv6_set(struct rte_flow_item_ipv6 *p, uint32_t vtc_flow, uint8_t proto, uint8_t hop_limits,
		      const uint8_t *src, const uint8_t *dst)
{
	memset(p, 0, sizeof(*p));
	p->hdr.vtc_flow = rte_cpu_to_be_32(vtc_flow);
	p->hdr.proto = proto;
	p->hdr.hop_limits = hop_limits;
	memcpy(p->hdr.src_addr, src, 16);
	memcpy(p->hdr.dst_addr, dst, 16);
}

void rf_flow_udp_set(struct rte_flow_item_udp *u, uint16_t src_port, uint16_t dst_port)
{
	memset(u, 0, sizeof(*u));
	u->hdr.src_port = rte_cpu_to_be_16(src_port);
	u->hdr.dst_port = rte_cpu_to_be_16(dst_port);
}

void rf_flow_tcp_set(struct rte_flow_item_tcp *t, uint16_t src_port, uint16_t dst_port)
{
	memset(t, 0, sizeof(*t));
	t->hdr.src_port = rte_cpu_to_be_16(src_port);
	t->hdr.dst_port = rte_cpu_to_be_16(dst_port);
}

/* Copies a failure out of err. The message is a PMD constant valid while
 * the port stays configured: copy it now. */
static void status_from(struct rf_flow_status *st, int rc, const struct rte_flow_error *err)
{
	memset(st, 0, sizeof(*st));
	st->rc = rc;
	if (rc >= 0)
		return;
	st->type = (int32_t)err->type;
	st->cause = (uintptr_t)err->cause;
	if (err->message != NULL) {
		st->has_message = 1;
		strncpy(st->message, err->message, sizeof(st->message) - 1);
	}
}

/* The errno of a call that reports failure by a NULL return: rte_errno,
 * which is per thread and therefore read here. */
static int errno_rc(void)
{
	return rte_errno > 0 ? -rte_errno : -EIO;
}

int rf_flow_validate(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
		     const struct rte_flow_action *actions, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_validate(port, attr, pattern, actions, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

uintptr_t rf_flow_create(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
			 const struct rte_flow_action *actions, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	struct rte_flow *f;

	memset(&err, 0, sizeof(err));
	rte_errno = 0;
	f = rte_flow_create(port, attr, pattern, actions, &err);
	status_from(st, f == NULL ? errno_rc() : 0, &err);
	return (uintptr_t)f;
}

int rf_flow_destroy(uint16_t port, uintptr_t flow, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_destroy(port, (struct rte_flow *)flow, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_flush(uint16_t port, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_flush(port, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_isolate(uint16_t port, int on, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_isolate(port, on, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_query_count(uint16_t port, uintptr_t flow, int reset, struct rf_flow_count *out,
			struct rf_flow_status *st)
{
	struct rte_flow_action_count conf = { .id = 0 };
	const struct rte_flow_action action = { .type = RTE_FLOW_ACTION_TYPE_COUNT, .conf = &conf };
	struct rte_flow_query_count q;
	struct rte_flow_error err;
	int rc;

	memset(&q, 0, sizeof(q));
	memset(&err, 0, sizeof(err));
	q.reset = !!reset;
	rc = rte_flow_query(port, (struct rte_flow *)flow, &action, &q, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	if (rc == 0) {
		out->hits = q.hits;
		out->bytes = q.bytes;
		out->hits_set = q.hits_set;
		out->bytes_set = q.bytes_set;
	}
	return st->rc;
}

int rf_flow_info_get(uint16_t port, struct rf_flow_info *out, struct rf_flow_status *st)
{
	struct rte_flow_port_info pi;
	struct rte_flow_queue_info qi;
	struct rte_flow_error err;
	int rc;

	memset(&pi, 0, sizeof(pi));
	memset(&qi, 0, sizeof(qi));
	memset(&err, 0, sizeof(err));
	rc = rte_flow_info_get(port, &pi, &qi, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	if (rc == 0) {
		out->max_nb_queues = pi.max_nb_queues;
		out->max_nb_counters = pi.max_nb_counters;
		out->max_nb_aging_objects = pi.max_nb_aging_objects;
		out->max_nb_meters = pi.max_nb_meters;
		out->max_nb_conn_tracks = pi.max_nb_conn_tracks;
		out->supported_flags = pi.supported_flags;
		out->max_queue_size = qi.max_size;
	}
	return st->rc;
}

int rf_flow_configure(uint16_t port, const struct rf_flow_engine *cfg, struct rf_flow_status *st)
{
	struct rte_flow_port_attr pa;
	struct rte_flow_queue_attr qa;
	const struct rte_flow_queue_attr **qas;
	struct rte_flow_error err;
	unsigned i;
	int rc;

	/* At least one entry: rte_flow_configure refuses a NULL array. */
	qas = calloc(cfg->nb_queues ? cfg->nb_queues : 1, sizeof(*qas));
	if (qas == NULL) {
		memset(st, 0, sizeof(*st));
		st->rc = -ENOMEM;
		return st->rc;
	}
	memset(&pa, 0, sizeof(pa));
	memset(&err, 0, sizeof(err));
	pa.nb_counters = cfg->nb_counters;
	pa.nb_aging_objects = cfg->nb_aging_objects;
	pa.nb_meters = cfg->nb_meters;
	pa.nb_conn_tracks = cfg->nb_conn_tracks;
	pa.flags = cfg->flags;
	qa.size = cfg->queue_size;
	/* Every queue gets the same attributes. */
	for (i = 0; i < cfg->nb_queues; i++)
		qas[i] = &qa;
	rc = rte_flow_configure(port, &pa, cfg->nb_queues, qas, &err);
	free(qas);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_table_create(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
			 const struct rte_flow_action *actions, uint32_t nb_flows, int relaxed,
			 struct rf_flow_table *out, struct rf_flow_status *st)
{
	struct rte_flow_pattern_template_attr pta;
	struct rte_flow_actions_template_attr ata;
	struct rte_flow_template_table_attr ta;
	struct rte_flow_pattern_template *pt;
	struct rte_flow_actions_template *at;
	struct rte_flow_template_table *t;
	struct rte_flow_error err, ignored;

	memset(out, 0, sizeof(*out));
	memset(&pta, 0, sizeof(pta));
	memset(&ata, 0, sizeof(ata));
	memset(&ta, 0, sizeof(ta));
	memset(&err, 0, sizeof(err));
	pta.relaxed_matching = !!relaxed;
	pta.ingress = attr->ingress;
	pta.egress = attr->egress;
	pta.transfer = attr->transfer;
	ata.ingress = attr->ingress;
	ata.egress = attr->egress;
	ata.transfer = attr->transfer;
	ta.flow_attr = *attr;
	ta.nb_flows = nb_flows;

	rte_errno = 0;
	pt = rte_flow_pattern_template_create(port, &pta, pattern, &err);
	if (pt == NULL) {
		status_from(st, errno_rc(), &err);
		return st->rc;
	}
	rte_errno = 0;
	/* The actions as their own masks: every configuration is fixed by the
	 * template, rules only pick the table. */
	at = rte_flow_actions_template_create(port, &ata, actions, actions, &err);
	if (at == NULL) {
		status_from(st, errno_rc(), &err);
		rte_flow_pattern_template_destroy(port, pt, &ignored);
		return st->rc;
	}
	rte_errno = 0;
	t = rte_flow_template_table_create(port, &ta, &pt, 1, &at, 1, &err);
	if (t == NULL) {
		status_from(st, errno_rc(), &err);
		rte_flow_actions_template_destroy(port, at, &ignored);
		rte_flow_pattern_template_destroy(port, pt, &ignored);
		return st->rc;
	}
	status_from(st, 0, &err);
	out->pattern_template = (uintptr_t)pt;
	out->actions_template = (uintptr_t)at;
	out->table = (uintptr_t)t;
	return 0;
}

int rf_flow_table_destroy(uint16_t port, const struct rf_flow_table *t, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_template_table_destroy(port, (struct rte_flow_template_table *)t->table, &err);
	if (rc == 0)
		rc = rte_flow_actions_template_destroy(port, (struct rte_flow_actions_template *)t->actions_template,
						       &err);
	if (rc == 0)
		rc = rte_flow_pattern_template_destroy(port, (struct rte_flow_pattern_template *)t->pattern_template,
						       &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

uintptr_t rf_flow_async_create(uint16_t port, uint32_t queue, int postpone, uintptr_t table,
			       const struct rte_flow_item *pattern, const struct rte_flow_action *actions,
			       uint64_t user_data, struct rf_flow_status *st)
{
	struct rte_flow_op_attr oa;
	struct rte_flow_error err;
	struct rte_flow *f;

	memset(&oa, 0, sizeof(oa));
	memset(&err, 0, sizeof(err));
	oa.postpone = !!postpone;
	rte_errno = 0;
	f = rte_flow_async_create(port, queue, &oa, (struct rte_flow_template_table *)table, pattern, 0,
				  actions, 0, (void *)(uintptr_t)user_data, &err);
	status_from(st, f == NULL ? errno_rc() : 0, &err);
	return (uintptr_t)f;
}

int rf_flow_async_destroy(uint16_t port, uint32_t queue, int postpone, uintptr_t flow, uint64_t user_data,
			  struct rf_flow_status *st)
{
	struct rte_flow_op_attr oa;
	struct rte_flow_error err;
	int rc;

	memset(&oa, 0, sizeof(oa));
	memset(&err, 0, sizeof(err));
	oa.postpone = !!postpone;
	rc = rte_flow_async_destroy(port, queue, &oa, (struct rte_flow *)flow, (void *)(uintptr_t)user_data, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_push(uint16_t port, uint32_t queue, struct rf_flow_status *st)
{
	struct rte_flow_error err;
	int rc;

	memset(&err, 0, sizeof(err));
	rc = rte_flow_push(port, queue, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	return st->rc;
}

int rf_flow_pull(uint16_t port, uint32_t queue, struct rf_flow_op_result *res, uint16_t n,
		 struct rf_flow_status *st)
{
	struct rte_flow_op_result r[64];
	struct rte_flow_error err;
	int rc, i;

	if (n > RTE_DIM(r))
		n = RTE_DIM(r);
	memset(&err, 0, sizeof(err));
	rc = rte_flow_pull(port, queue, r, n, &err);
	status_from(st, rc < 0 ? rc : 0, &err);
	for (i = 0; i < rc; i++) {
		res[i].status = (int32_t)r[i].status;
		res[i].user_data = (uint64_t)(uintptr_t)r[i].user_data;
	}
	return rc;
}
