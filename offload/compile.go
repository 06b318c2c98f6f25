package offload

import (
	"errors"
	"fmt"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
)

// ErrNotOffloadable is wrapped by compile's error for a rule that rte_flow
// in DPDK 22.11 cannot express: such rules run in software only
// (flowrule.Table).
var ErrNotOffloadable = errors.New("not offloadable with DPDK 22.11 rte_flow")

// compile turns r into the C structures rte_flow takes, through the
// binding's description of them (nicFlow, then dpdk.NewFlowSpec). The
// caller frees the FlowSpec.
func compile(r *flowrule.Rule) (*dpdk.FlowSpec, error) {
	attr, pattern, actions, err := nicFlow(r)
	if err != nil {
		return nil, err
	}
	return dpdk.NewFlowSpec(attr, pattern, actions)
}

// nicFlow translates r into the binding's types: the attributes, one item
// per r.Items and one action per r.Actions. An item with a nil Match has
// no spec, mask or last (any header of its type); a Match without Last has
// no last. An rss action takes the queues of Action.Queues, and a count
// action counter id 0.
//
// ib_bth items and meter actions give an error wrapping ErrNotOffloadable.
func nicFlow(r *flowrule.Rule) (dpdk.FlowAttr, []dpdk.FlowItem, []dpdk.FlowAction, error) {
	if r == nil {
		return dpdk.FlowAttr{}, nil, nil, errors.New("compile flow: nil rule")
	}
	attr := dpdk.FlowAttr{Group: r.Group, Priority: r.Priority, Ingress: r.Ingress, Egress: r.Egress, Transfer: r.Transfer}
	pattern := make([]dpdk.FlowItem, len(r.Items))
	for i := range r.Items {
		it, err := nicItem(&r.Items[i])
		if err != nil {
			return dpdk.FlowAttr{}, nil, nil, fmt.Errorf("compile flow: pattern item %d (%s): %w", i, r.Items[i].Type, err)
		}
		pattern[i] = it
	}
	actions := make([]dpdk.FlowAction, len(r.Actions))
	for i := range r.Actions {
		a, err := nicAction(&r.Actions[i])
		if err != nil {
			return dpdk.FlowAttr{}, nil, nil, fmt.Errorf("compile flow: action %d (%s): %w", i, r.Actions[i].Type, err)
		}
		actions[i] = a
	}
	return attr, pattern, actions, nil
}

// nicMatch is an item of type t with m's spec, mask and last converted by
// conv.
func nicMatch[H any](t dpdk.FlowItemType, m *flowrule.Match[H], conv func(*H) dpdk.FlowItemSpec) dpdk.FlowItem {
	it := dpdk.FlowItem{Type: t}
	if m == nil {
		return it
	}
	it.Spec, it.Mask = conv(&m.Spec), conv(&m.Mask)
	if m.Last != nil {
		it.Last = conv(m.Last)
	}
	return it
}

func nicItem(it *flowrule.Item) (dpdk.FlowItem, error) {
	set := 0
	for _, m := range []bool{it.Eth != nil, it.VLAN != nil, it.IPv4 != nil, it.IPv6 != nil, it.UDP != nil, it.TCP != nil, it.BTH != nil} {
		if m {
			set++
		}
	}
	if set > 1 {
		return dpdk.FlowItem{}, errors.New("more than one header match set")
	}
	// With one match set, it must be the item type's own.
	own := func(ok bool) error {
		if set == 1 && !ok {
			return errors.New("the header match set is not the item type's")
		}
		return nil
	}
	var err error
	var out dpdk.FlowItem
	switch it.Type {
	case flowrule.ItemEth:
		err = own(it.Eth != nil)
		out = nicMatch(dpdk.FlowItemEth, it.Eth, func(h *flowrule.EthHeader) dpdk.FlowItemSpec {
			return dpdk.FlowEth{Dst: h.Dst, Src: h.Src, Type: h.Type, HasVLAN: h.HasVLAN}
		})
	case flowrule.ItemVLAN:
		err = own(it.VLAN != nil)
		out = nicMatch(dpdk.FlowItemVLAN, it.VLAN, func(h *flowrule.VLANHeader) dpdk.FlowItemSpec {
			return dpdk.FlowVLAN{TCI: h.TCI, InnerType: h.InnerType, HasMoreVLAN: h.HasMoreVLAN}
		})
	case flowrule.ItemIPv4:
		err = own(it.IPv4 != nil)
		out = nicMatch(dpdk.FlowItemIPv4, it.IPv4, func(h *flowrule.IPv4Header) dpdk.FlowItemSpec {
			return dpdk.FlowIPv4{TOS: h.TOS, TTL: h.TTL, Proto: h.Proto, Src: h.Src, Dst: h.Dst}
		})
	case flowrule.ItemIPv6:
		err = own(it.IPv6 != nil)
		out = nicMatch(dpdk.FlowItemIPv6, it.IPv6, func(h *flowrule.IPv6Header) dpdk.FlowItemSpec {
			return dpdk.FlowIPv6{VTCFlow: h.VTCFlow, Proto: h.Proto, HopLimit: h.HopLimit, Src: h.Src, Dst: h.Dst}
		})
	case flowrule.ItemUDP:
		err = own(it.UDP != nil)
		out = nicMatch(dpdk.FlowItemUDP, it.UDP, func(h *flowrule.UDPHeader) dpdk.FlowItemSpec {
			return dpdk.FlowUDP{SrcPort: h.SrcPort, DstPort: h.DstPort}
		})
	case flowrule.ItemTCP:
		err = own(it.TCP != nil)
		out = nicMatch(dpdk.FlowItemTCP, it.TCP, func(h *flowrule.TCPHeader) dpdk.FlowItemSpec {
			return dpdk.FlowTCP{SrcPort: h.SrcPort, DstPort: h.DstPort}
		})
	case flowrule.ItemIBBTH:
		return dpdk.FlowItem{}, fmt.Errorf("%w: the InfiniBand BTH item (RTE_FLOW_ITEM_TYPE_IB_BTH) only exists from DPDK 23.07", ErrNotOffloadable)
	default:
		return dpdk.FlowItem{}, fmt.Errorf("unknown item type %d", it.Type)
	}
	if err != nil {
		return dpdk.FlowItem{}, err
	}
	return out, nil
}

func nicAction(a *flowrule.Action) (dpdk.FlowAction, error) {
	switch a.Type {
	case flowrule.ActQueue:
		return dpdk.FlowAction{Type: dpdk.FlowActionQueue, Index: a.Index}, nil
	case flowrule.ActRSS:
		return dpdk.FlowAction{Type: dpdk.FlowActionRSS, Queues: a.Queues}, nil
	case flowrule.ActMark:
		return dpdk.FlowAction{Type: dpdk.FlowActionMark, ID: a.ID}, nil
	case flowrule.ActFlag:
		return dpdk.FlowAction{Type: dpdk.FlowActionFlag}, nil
	case flowrule.ActCount:
		return dpdk.FlowAction{Type: dpdk.FlowActionCount}, nil // counter id 0
	case flowrule.ActDrop:
		return dpdk.FlowAction{Type: dpdk.FlowActionDrop}, nil
	case flowrule.ActJump:
		return dpdk.FlowAction{Type: dpdk.FlowActionJump, Group: a.Group}, nil
	case flowrule.ActSetIPv4DSCP:
		return dpdk.FlowAction{Type: dpdk.FlowActionSetIPv4DSCP, DSCP: a.DSCP}, nil
	case flowrule.ActSetIPv6DSCP:
		return dpdk.FlowAction{Type: dpdk.FlowActionSetIPv6DSCP, DSCP: a.DSCP}, nil
	case flowrule.ActMeter:
		return dpdk.FlowAction{}, fmt.Errorf("%w: an rte_flow meter action points at an rte_mtr meter object "+
			"(profile, policy and meter created on the port beforehand), and this binding does not create them yet", ErrNotOffloadable)
	}
	return dpdk.FlowAction{}, fmt.Errorf("unknown action type %d", a.Type)
}
