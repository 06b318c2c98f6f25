/* rte_flow from Go: fillers for the item structures (their anonymous unions
 * and bitfields are out of cgo's reach) and wrappers that run one rte_flow
 * call and copy its rte_flow_error and rte_errno out before returning, on the
 * same thread. */
#ifndef ROCEFWD_FLOW_H
#define ROCEFWD_FLOW_H

#include <stdint.h>
#include <stddef.h>
#include <rte_ethdev.h>
#include <rte_flow.h>

/* What a failed rte_flow call reported. */
struct rf_flow_status {
	int32_t rc;          /* 0, or a negative errno */
	int32_t type;        /* enum rte_flow_error_type */
	uintptr_t cause;     /* rte_flow_error.cause */
	int32_t has_message; /* the PMD set rte_flow_error.message */
	char message[256];
};

/* Size of the spec/mask/last structure of an item type, of the
 * configuration of an action type; 0 for the types not handled here. */
size_t rf_flow_item_size(int type);
size_t rf_flow_conf_size(int type);

/* Attributes, with their bitfields. */
struct rf_flow_attr_view {
	uint32_t group, priority;
	uint8_t ingress, egress, transfer;
};
void rf_flow_attr_set(struct rte_flow_attr *a, const struct rf_flow_attr_view *v);
void rf_flow_attr_get(const struct rte_flow_attr *a, struct rf_flow_attr_view *v);

/* Item structures from host-order values; the fillers convert to network
 * byte order where rte_flow's field is big-endian. */
void rf_flow_eth_set(struct rte_flow_item_eth *e, const uint8_t *dst, const uint8_t *src,
		     uint16_t type, int has_vlan);
void rf_flow_vlan_set(struct rte_flow_item_vlan *v, uint16_t tci, uint16_t inner_type, int has_more_vlan);
void rf_flow_ipv4_set(struct rte_flow_item_ipv4 *p, uint8_t tos, uint8_t ttl, uint8_t proto,
		      const uint8_t *src, const uint8_t *dst);
void rf_flow_ipv6_set(struct rte_flow_item_ipv6 *p, uint32_t vtc_flow, uint8_t proto, uint8_t hop_limits,
		      const uint8_t *src, const uint8_t *dst);
void rf_flow_udp_set(struct rte_flow_item_udp *u, uint16_t src_port, uint16_t dst_port);
void rf_flow_tcp_set(struct rte_flow_item_tcp *t, uint16_t src_port, uint16_t dst_port);

/* Synchronous API. */
int rf_flow_validate(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
		     const struct rte_flow_action *actions, struct rf_flow_status *st);
uintptr_t rf_flow_create(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
			 const struct rte_flow_action *actions, struct rf_flow_status *st);
int rf_flow_destroy(uint16_t port, uintptr_t flow, struct rf_flow_status *st);
int rf_flow_flush(uint16_t port, struct rf_flow_status *st);
int rf_flow_isolate(uint16_t port, int on, struct rf_flow_status *st);

struct rf_flow_count {
	uint64_t hits, bytes;
	uint8_t hits_set, bytes_set;
};
int rf_flow_query_count(uint16_t port, uintptr_t flow, int reset, struct rf_flow_count *out,
			struct rf_flow_status *st);

/* Flow engine (template API). */
struct rf_flow_info {
	uint32_t max_nb_queues, max_nb_counters, max_nb_aging_objects, max_nb_meters,
		 max_nb_conn_tracks, supported_flags, max_queue_size;
};
int rf_flow_info_get(uint16_t port, struct rf_flow_info *out, struct rf_flow_status *st);

struct rf_flow_engine {
	uint32_t nb_counters, nb_aging_objects, nb_meters, nb_conn_tracks, flags;
	uint16_t nb_queues;
	uint32_t queue_size;
};
int rf_flow_configure(uint16_t port, const struct rf_flow_engine *cfg, struct rf_flow_status *st);

/* A template table with one pattern template (from pattern's masks) and one
 * actions template (actions with every configuration fixed). On failure
 * whatever was created is destroyed again. */
struct rf_flow_table {
	uintptr_t pattern_template, actions_template, table;
};
int rf_flow_table_create(uint16_t port, const struct rte_flow_attr *attr, const struct rte_flow_item *pattern,
			 const struct rte_flow_action *actions, uint32_t nb_flows, int relaxed,
			 struct rf_flow_table *out, struct rf_flow_status *st);
int rf_flow_table_destroy(uint16_t port, const struct rf_flow_table *t, struct rf_flow_status *st);

/* Asynchronous operations. DPDK 22.11 calls the PMD's callbacks without
 * checking that they exist: only call these on a port whose flow engine
 * was configured and for a table that was created on it. */
uintptr_t rf_flow_async_create(uint16_t port, uint32_t queue, int postpone, uintptr_t table,
			       const struct rte_flow_item *pattern, const struct rte_flow_action *actions,
			       uint64_t user_data, struct rf_flow_status *st);
int rf_flow_async_destroy(uint16_t port, uint32_t queue, int postpone, uintptr_t flow, uint64_t user_data,
			  struct rf_flow_status *st);
int rf_flow_push(uint16_t port, uint32_t queue, struct rf_flow_status *st);

struct rf_flow_op_result {
	int32_t status; /* enum rte_flow_op_status */
	uint64_t user_data;
};
int rf_flow_pull(uint16_t port, uint32_t queue, struct rf_flow_op_result *res, uint16_t n,
		 struct rf_flow_status *st);

#endif
