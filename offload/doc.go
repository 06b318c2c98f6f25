// Package offload puts flow rules where they run: on the NIC through
// rte_flow when the port's PMD takes them, else in the pipeline's software
// table, one rule at a time.
//
// At start each port is probed (Manager.AddPort, between queue set-up and
// port start, because rte_flow_configure must come before start):
//
//   - rte_flow_info_get: 0 means the template API (mlx5 dv_flow_en=2),
//     ENOTSUP a flow engine with the synchronous API only, ENOSYS none;
//   - the synchronous engine gets an rte_flow_validate matrix of the rule
//     shapes roce-fwd uses, and after start (Manager.Start) a trial
//     create/destroy, which tells a PMD that validates but cannot install
//     (net_tap without cls_flower) from one that works.
//
// The backend is then rte_flow (synchronous create; on mlx5 one root rule in
// group 0 jumps to group 1, and every rule is placed one group up, the
// Direct Rules fast-insertion layout), template (a pattern and actions
// template and a table per rule shape, rules enqueued with
// rte_flow_async_create and the result pulled and checked), or software.
//
// Rules reach the NIC through the dpdk binding's flow description
// (compile.go translates a flowrule.Rule into dpdk.FlowAttr, FlowItem and
// FlowAction); what 22.11's rte_flow cannot express (ib_bth items, meters)
// stops there with ErrNotOffloadable.
//
// A rule the NIC refuses (at compile, validate or create) runs in software,
// and Entry.Why says why. The software table holds every rule of the port
// as soon as one of them runs in software, with the NIC's rules marked as
// done in hardware: a packet then takes the same path through groups and
// priorities as on the NIC, and each rule's actions run exactly once.
package offload
