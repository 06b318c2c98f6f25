package flowrule

import (
	"strconv"

	"roce-fwd/roce"
)

// Rule is one flow rule: rte_flow_attr, the pattern and the actions.
type Rule struct {
	ID                        uint32 // caller's identifier; not part of the testpmd line
	Group, Priority           uint32
	Ingress, Egress, Transfer bool
	Items                     []Item
	Actions                   []Action
}

// ItemType is a pattern item type (RTE_FLOW_ITEM_TYPE_*).
type ItemType uint8

const (
	ItemEth   ItemType = iota + 1 // RTE_FLOW_ITEM_TYPE_ETH
	ItemVLAN                      // RTE_FLOW_ITEM_TYPE_VLAN
	ItemIPv4                      // RTE_FLOW_ITEM_TYPE_IPV4
	ItemIPv6                      // RTE_FLOW_ITEM_TYPE_IPV6
	ItemUDP                       // RTE_FLOW_ITEM_TYPE_UDP
	ItemTCP                       // RTE_FLOW_ITEM_TYPE_TCP
	ItemIBBTH                     // RTE_FLOW_ITEM_TYPE_IB_BTH (DPDK 23.07 and later)
	numItemTypes
)

var itemNames = [numItemTypes]string{"", "eth", "vlan", "ipv4", "ipv6", "udp", "tcp", "ib_bth"}

func (t ItemType) String() string {
	if t > 0 && t < numItemTypes {
		return itemNames[t]
	}
	return "item-" + itoa(uint64(t))
}

// Match is the spec/mask/last triple of an item. Mask applies to Spec and
// Last; Last, when not nil, makes each field whose masked Last exceeds its
// masked Spec an inclusive range.
type Match[H any] struct {
	Spec, Mask H
	Last       *H
}

// EthHeader mirrors rte_flow_item_eth.
type EthHeader struct {
	Dst, Src roce.MAC
	Type     uint16 // EtherType, or TPID when the frame is tagged
	HasVLAN  bool   // has_vlan bit
}

// VLANHeader mirrors rte_flow_item_vlan.
type VLANHeader struct {
	TCI         uint16 // PCP(3) DEI(1) VID(12)
	InnerType   uint16 // EtherType or TPID after the tag
	HasMoreVLAN bool   // has_more_vlan bit
}

// IPv4Header mirrors the rte_ipv4_hdr fields rte_flow_item_ipv4 matches here.
type IPv4Header struct {
	TOS      uint8 // type_of_service: DSCP(6) ECN(2)
	TTL      uint8 // time_to_live
	Proto    uint8 // next_proto_id
	Src, Dst [4]byte
}

// IPv6Header mirrors the rte_ipv6_hdr fields rte_flow_item_ipv6 matches here.
type IPv6Header struct {
	VTCFlow  uint32 // vtc_flow: version(4) traffic class(8) flow label(20)
	Proto    uint8  // next header of the fixed header
	HopLimit uint8  // hop_limits
	Src, Dst [16]byte
}

// UDPHeader mirrors the ports of rte_flow_item_udp.
type UDPHeader struct{ SrcPort, DstPort uint16 }

// TCPHeader mirrors the ports of rte_flow_item_tcp.
type TCPHeader struct{ SrcPort, DstPort uint16 }

// BTHHeader mirrors the rte_ib_bth fields rte_flow_item_ib_bth matches here.
type BTHHeader struct {
	Opcode uint8
	DestQP uint32 // dst_qp, 24 bits
}

// Item is one pattern item. Only the Match of Type may be set; nil means
// no spec (any header of that type).
type Item struct {
	Type ItemType
	Eth  *Match[EthHeader]
	VLAN *Match[VLANHeader]
	IPv4 *Match[IPv4Header]
	IPv6 *Match[IPv6Header]
	UDP  *Match[UDPHeader]
	TCP  *Match[TCPHeader]
	BTH  *Match[BTHHeader]
}

// ActionType is an action type (RTE_FLOW_ACTION_TYPE_*).
type ActionType uint8

const (
	ActQueue       ActionType = iota + 1 // RTE_FLOW_ACTION_TYPE_QUEUE
	ActRSS                               // RTE_FLOW_ACTION_TYPE_RSS
	ActMark                              // RTE_FLOW_ACTION_TYPE_MARK
	ActFlag                              // RTE_FLOW_ACTION_TYPE_FLAG
	ActCount                             // RTE_FLOW_ACTION_TYPE_COUNT
	ActDrop                              // RTE_FLOW_ACTION_TYPE_DROP
	ActJump                              // RTE_FLOW_ACTION_TYPE_JUMP
	ActSetIPv4DSCP                       // RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP
	ActSetIPv6DSCP                       // RTE_FLOW_ACTION_TYPE_SET_IPV6_DSCP
	ActMeter                             // RTE_FLOW_ACTION_TYPE_METER
	numActionTypes
)

var actionNames = [numActionTypes]string{"", "queue", "rss", "mark", "flag", "count", "drop",
	"jump", "set_ipv4_dscp", "set_ipv6_dscp", "meter"}

func (t ActionType) String() string {
	if t > 0 && t < numActionTypes {
		return actionNames[t]
	}
	return "action-" + itoa(uint64(t))
}

// Action is one action. The fields that apply depend on Type and mirror
// the rte_flow_action_* configuration structures.
type Action struct {
	Type   ActionType
	Index  uint16   // queue: rte_flow_action_queue.index
	Queues []uint16 // rss: queue list; nil means testpmd's default (all Rx queues)
	ID     uint32   // mark: rte_flow_action_mark.id
	Group  uint32   // jump: rte_flow_action_jump.group
	DSCP   uint8    // set_ipv4_dscp, set_ipv6_dscp: rte_flow_action_set_dscp.dscp
	Meter  *Meter   // meter
}

// MeterAlgorithm selects the token-bucket algorithm of a meter profile.
type MeterAlgorithm uint8

const (
	SrTCM MeterAlgorithm = iota + 1 // RFC 2697, RTE_MTR_SRTCM_RFC2697
	TrTCM                           // RFC 2698, RTE_MTR_TRTCM_RFC2698
)

// Meter is a colour-blind meter with its per-colour policy. Rates are in
// bytes per second and bursts in bytes (rte_mtr byte mode).
type Meter struct {
	// ID is used as the meter, profile and policy ID in testpmd output;
	// those are separate name spaces in rte_mtr.
	ID        uint32
	Algorithm MeterAlgorithm
	CIR, PIR  uint64 // PIR: trTCM only
	CBS       uint64
	EBS       uint64 // srTCM only
	PBS       uint64 // trTCM only
	// Green, Yellow, Red: what happens to a packet of that colour.
	Green, Yellow, Red ColorAction
}

// ColorActionKind is a policy action for one meter colour.
type ColorActionKind uint8

const (
	ColorPass ColorActionKind = iota
	ColorDrop
	ColorMark // set the mark to ColorAction.Mark
)

// ColorAction is the policy for one colour.
type ColorAction struct {
	Kind ColorActionKind
	Mark uint32
}

// Color is a meter result.
type Color uint8

const (
	ColorNone Color = iota // no meter ran
	Green
	Yellow
	Red
)

var colorNames = [...]string{"none", "green", "yellow", "red"}

func (c Color) String() string {
	if int(c) < len(colorNames) {
		return colorNames[c]
	}
	return "color-" + itoa(uint64(c))
}

// maxBurst bounds burst sizes so that token buckets counted in
// nano-bytes fit in 64 bits.
const maxBurst = 1 << 33

// MaxPath bounds how many rules a packet can traverse through jumps.
const MaxPath = 8

// maxRSSQueues is testpmd's ACTION_RSS_QUEUE_NUM.
const maxRSSQueues = 128

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
