// Package flowrule models rte_flow rules for roce-fwd, reads and writes
// them in testpmd's "flow" command grammar, and runs them in software with
// the same semantics as the NIC offload.
//
// # Model
//
// A Rule mirrors rte_flow_attr plus the pattern and action arrays. Each
// Item carries, for its type, a Match with a typed Spec and Mask (and a
// Last pointer when a range is given) whose fields mirror the rte_flow item
// structures (rte_flow_item_eth, _vlan, _ipv4, _ipv6, _udp, _tcp, _ib_bth)
// in host byte order, so that a binding fills the C structures field by
// field with a byte swap where the C field is big-endian. A nil Match
// stands for NULL spec/last/mask: any header of that type.
//
// # Grammar
//
// Parse reads testpmd 22.11's flow commands:
//
//	flow validate|create PORT [group N] [priority N] [ingress] [egress] [transfer]
//	     pattern [ITEM [FIELD is|spec|mask|last|prefix VALUE]... /]... end
//	     actions [ACTION [ARG VALUE]... /]... end
//	flow list PORT [group N]...
//	flow query PORT RULE count
//	flow destroy PORT [rule N]...
//	flow flush PORT
//
// Items and fields (sub-fields of a wider field, as in testpmd, set only
// their bits of it):
//
//	eth     dst src type has_vlan
//	vlan    tci pcp dei vid inner_type has_more_vlan
//	ipv4    src dst tos dscp ecn proto ttl          (dscp, ecn: bits of tos)
//	ipv6    src dst tc dscp ecn flow proto hop      (tc, flow: bits of vtc_flow)
//	udp     src dst
//	tcp     src dst
//	ib_bth  opcode dst_qp                           (DPDK 23.07 syntax; software only on 22.11)
//
// Actions:
//
//	queue index N | rss [queues N... end] | mark id N | flag | count | drop |
//	jump group N | set_ipv4_dscp dscp_value N | set_ipv6_dscp dscp_value N |
//	meter srtcm [id N] cir BPS cbs BYTES ebs BYTES [green|yellow|red pass|drop|mark N]...
//	meter trtcm [id N] cir BPS pir BPS cbs BYTES pbs BYTES [green|yellow|red pass|drop|mark N]...
//
// The inline meter is this package's own form: testpmd needs a meter
// profile, a policy and a meter object created before the flow refers to
// it with "meter mtr_id N". Rule.Testpmd prints those lines.
//
// As in testpmd, "is" sets the value with a full mask, "spec", "mask" and
// "last" set one of the three structures, and "prefix" sets the mask from a
// prefix length. When an item sets values but never its mask, testpmd
// passes a NULL mask and the PMD applies the item's default mask
// (rte_flow_item_*_mask); Parse does the same, so a parsed rule means what
// testpmd would program. Command.String prints every mask explicitly.
//
// # Software matching
//
// Compile builds an immutable Table. Table.Match finds the rule a frame
// hits: within a group the lowest priority value wins, then the lowest rule
// ID, then the earliest rule; matching starts in group 0 and follows jump
// actions. Table.Apply runs the rule's actions on the frame with per-lcore
// State: counters, meters (srTCM RFC 2697, trTCM RFC 2698, colour-blind),
// mark/flag, DSCP rewrite. Match and Apply do not allocate. When rules are
// added or removed, State.Carry moves each surviving rule's counters and
// meter buckets into the State of the recompiled table.
//
// Header semantics follow the rte_flow documentation: an eth item without
// type or has_vlan matches tagged and untagged frames and its type is the
// first EtherType or TPID after the addresses; the n-th vlan item matches
// the n-th tag; ipv4/ipv6 match the IP header after all tags; udp, tcp and
// ib_bth match the headers Classify located. The ipv6 proto field is the
// fixed header's next header; tcp behind IPv6 extension headers is not
// matched.
package flowrule
