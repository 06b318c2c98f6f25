package dpdk

/*
#cgo CFLAGS: -DALLOW_EXPERIMENTAL_API
#include <stdlib.h>
#include "flow.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// FlowItemType is a pattern item type, numbered as DPDK 22.11 numbers
// them (enum rte_flow_item_type).
type FlowItemType int

// The item types NewFlowSpec takes (and END, which it appends).
const (
	FlowItemEnd  FlowItemType = C.RTE_FLOW_ITEM_TYPE_END
	FlowItemEth  FlowItemType = C.RTE_FLOW_ITEM_TYPE_ETH
	FlowItemVLAN FlowItemType = C.RTE_FLOW_ITEM_TYPE_VLAN
	FlowItemIPv4 FlowItemType = C.RTE_FLOW_ITEM_TYPE_IPV4
	FlowItemIPv6 FlowItemType = C.RTE_FLOW_ITEM_TYPE_IPV6
	FlowItemUDP  FlowItemType = C.RTE_FLOW_ITEM_TYPE_UDP
	FlowItemTCP  FlowItemType = C.RTE_FLOW_ITEM_TYPE_TCP
)

// String is testpmd's name of the item ("ipv4").
func (t FlowItemType) String() string {
	switch t {
	case FlowItemEnd:
		return "end"
	case FlowItemEth:
		return "eth"
	case FlowItemVLAN:
		return "vlan"
	case FlowItemIPv4:
		return "ipv4"
	case FlowItemIPv6:
		return "ipv6"
	case FlowItemUDP:
		return "udp"
	case FlowItemTCP:
		return "tcp"
	}
	return fmt.Sprintf("item-type-%d", int(t))
}

// FlowActionType is an action type, numbered as DPDK 22.11 numbers them
// (enum rte_flow_action_type).
type FlowActionType int

// The action types NewFlowSpec takes (and END, which it appends), and
// METER, which it does not take yet.
const (
	FlowActionEnd         FlowActionType = C.RTE_FLOW_ACTION_TYPE_END
	FlowActionJump        FlowActionType = C.RTE_FLOW_ACTION_TYPE_JUMP
	FlowActionMark        FlowActionType = C.RTE_FLOW_ACTION_TYPE_MARK
	FlowActionFlag        FlowActionType = C.RTE_FLOW_ACTION_TYPE_FLAG
	FlowActionQueue       FlowActionType = C.RTE_FLOW_ACTION_TYPE_QUEUE
	FlowActionDrop        FlowActionType = C.RTE_FLOW_ACTION_TYPE_DROP
	FlowActionCount       FlowActionType = C.RTE_FLOW_ACTION_TYPE_COUNT
	FlowActionRSS         FlowActionType = C.RTE_FLOW_ACTION_TYPE_RSS
	FlowActionMeter       FlowActionType = C.RTE_FLOW_ACTION_TYPE_METER
	FlowActionSetIPv4DSCP FlowActionType = C.RTE_FLOW_ACTION_TYPE_SET_IPV4_DSCP
	FlowActionSetIPv6DSCP FlowActionType = C.RTE_FLOW_ACTION_TYPE_SET_IPV6_DSCP
)

// String is testpmd's name of the action ("set_ipv4_dscp").
func (t FlowActionType) String() string {
	switch t {
	case FlowActionEnd:
		return "end"
	case FlowActionJump:
		return "jump"
	case FlowActionMark:
		return "mark"
	case FlowActionFlag:
		return "flag"
	case FlowActionQueue:
		return "queue"
	case FlowActionDrop:
		return "drop"
	case FlowActionCount:
		return "count"
	case FlowActionRSS:
		return "rss"
	case FlowActionMeter:
		return "meter"
	case FlowActionSetIPv4DSCP:
		return "set_ipv4_dscp"
	case FlowActionSetIPv6DSCP:
		return "set_ipv6_dscp"
	}
	return fmt.Sprintf("action-type-%d", int(t))
}

// FlowAttr is rte_flow_attr.
type FlowAttr struct {
	Group, Priority           uint32
	Ingress, Egress, Transfer bool
}

// FlowItem is one rte_flow_item: its type and what its spec, last and
// mask point at. A nil Spec, Last or Mask is a NULL pointer (rte_flow:
// no spec matches any header of the type; no mask is the type's default
// mask; no last is no range). A non-nil one must be the type's structure:
// FlowEth for FlowItemEth, FlowVLAN for FlowItemVLAN, and so on.
type FlowItem struct {
	Type             FlowItemType
	Spec, Last, Mask FlowItemSpec
}

// FlowItemSpec is the Go form of an item structure (struct
// rte_flow_item_eth and the like): FlowEth, FlowVLAN, FlowIPv4, FlowIPv6,
// FlowUDP or FlowTCP. Numbers are in host order; NewFlowSpec stores them
// in network order where rte_flow's field is big-endian. Addresses are
// bytes in wire order. Fields the Go form lacks are zero.
type FlowItemSpec interface {
	// ItemType is the item type the structure belongs to.
	ItemType() FlowItemType
	// fill writes the C structure at p, which has the size of the item
	// type's structure.
	fill(p unsafe.Pointer)
}

// FlowEth is struct rte_flow_item_eth: the Ethernet header and the
// has_vlan bit.
type FlowEth struct {
	Dst, Src [6]byte
	Type     uint16 // ether_type: the EtherType, or the TPID of a tagged frame
	HasVLAN  bool
}

// FlowVLAN is struct rte_flow_item_vlan: the tag and the has_more_vlan bit.
type FlowVLAN struct {
	TCI         uint16 // PCP(3) DEI(1) VID(12)
	InnerType   uint16 // eth_proto: the EtherType or TPID after the tag
	HasMoreVLAN bool
}

// FlowIPv4 is struct rte_flow_item_ipv4 (an rte_ipv4_hdr): type of
// service, time to live, next protocol and the addresses.
type FlowIPv4 struct {
	TOS, TTL, Proto uint8
	Src, Dst        [4]byte
}

// FlowIPv6 is struct rte_flow_item_ipv6 (an rte_ipv6_hdr and extension
// header flags): vtc_flow, next header, hop limit and the addresses.
type FlowIPv6 struct {
	VTCFlow         uint32 // version(4) traffic class(8) flow label(20)
	Proto, HopLimit uint8
	Src, Dst        [16]byte
}

// FlowUDP is struct rte_flow_item_udp: the ports.
type FlowUDP struct{ SrcPort, DstPort uint16 }

// FlowTCP is struct rte_flow_item_tcp: the ports.
type FlowTCP struct{ SrcPort, DstPort uint16 }

func (FlowEth) ItemType() FlowItemType  { return FlowItemEth }
func (FlowVLAN) ItemType() FlowItemType { return FlowItemVLAN }
func (FlowIPv4) ItemType() FlowItemType { return FlowItemIPv4 }
func (FlowIPv6) ItemType() FlowItemType { return FlowItemIPv6 }
func (FlowUDP) ItemType() FlowItemType  { return FlowItemUDP }
func (FlowTCP) ItemType() FlowItemType  { return FlowItemTCP }

func (h FlowEth) fill(p unsafe.Pointer) {
	C.rf_flow_eth_set((*C.struct_rte_flow_item_eth)(p), u8p(h.Dst[:]), u8p(h.Src[:]), C.uint16_t(h.Type), cint(h.HasVLAN))
}

func (h FlowVLAN) fill(p unsafe.Pointer) {
	C.rf_flow_vlan_set((*C.struct_rte_flow_item_vlan)(p), C.uint16_t(h.TCI), C.uint16_t(h.InnerType), cint(h.HasMoreVLAN))
}

func (h FlowIPv4) fill(p unsafe.Pointer) {
	C.rf_flow_ipv4_set((*C.struct_rte_flow_item_ipv4)(p), C.uint8_t(h.TOS), C.uint8_t(h.TTL), C.uint8_t(h.Proto),
		u8p(h.Src[:]), u8p(h.Dst[:]))
}

func (h FlowIPv6) fill(p unsafe.Pointer) {
	C.rf_flow_ipv6_set((*C.struct_rte_flow_item_ipv6)(p), C.uint32_t(h.VTCFlow), C.uint8_t(h.Proto), C.uint8_t(h.HopLimit),
		u8p(h.Src[:]), u8p(h.Dst[:]))
}

func (h FlowUDP) fill(p unsafe.Pointer) {
	C.rf_flow_udp_set((*C.struct_rte_flow_item_udp)(p), C.uint16_t(h.SrcPort), C.uint16_t(h.DstPort))
}

func (h FlowTCP) fill(p unsafe.Pointer) {
	C.rf_flow_tcp_set((*C.struct_rte_flow_item_tcp)(p), C.uint16_t(h.SrcPort), C.uint16_t(h.DstPort))
}

// FlowAction is one rte_flow_action and its configuration. The fields
// that apply depend on Type; the others are ignored.
type FlowAction struct {
	Type FlowActionType
	// Queue: rte_flow_action_queue.index.
	Index uint16
	// RSS: the queues, hashed with types 0 (the PMD's default fields) and
	// the default function, level and key. No queues gives an empty list,
	// which PMDs refuse (testpmd fills in every Rx queue of the port).
	Queues []uint16
	// Mark: rte_flow_action_mark.id; count: rte_flow_action_count.id.
	ID uint32
	// Jump: rte_flow_action_jump.group.
	Group uint32
	// Set_ipv4_dscp and set_ipv6_dscp: the DSCP, 0..63.
	DSCP uint8
}

// FlowSpec is a rule in the C arrays rte_flow takes: rte_flow_attr, the
// rte_flow_item pattern and the rte_flow_action list, each END-terminated,
// with their spec/mask/last and configuration structures. It owns that C
// memory until Free. The PMD copies what it needs, so a FlowSpec may be
// freed once the call that used it returned. A FlowSpec is not safe for
// concurrent use.
type FlowSpec struct {
	attr     *C.struct_rte_flow_attr
	items    *C.struct_rte_flow_item
	nItems   int // END included
	actions  *C.struct_rte_flow_action
	nActions int // END included
	allocs   []unsafe.Pointer
}

func (s *FlowSpec) alloc(n uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(n))
	if p == nil {
		panic(fmt.Sprintf("dpdk: out of memory allocating %d bytes", n))
	}
	s.allocs = append(s.allocs, p)
	return p
}

// Free releases the C memory. The FlowSpec is empty afterwards; Free may be
// called again.
func (s *FlowSpec) Free() {
	if s == nil {
		return
	}
	for _, p := range s.allocs {
		C.free(p)
	}
	*s = FlowSpec{}
}

func (s *FlowSpec) freed() bool { return s == nil || s.attr == nil }

func (s *FlowSpec) itemSlice() []C.struct_rte_flow_item {
	return unsafe.Slice(s.items, s.nItems)
}

func (s *FlowSpec) actionSlice() []C.struct_rte_flow_action {
	return unsafe.Slice(s.actions, s.nActions)
}

// NewFlowSpec lays out a rule in rte_flow's C structures: the attributes,
// one rte_flow_item per pattern entry and one rte_flow_action per action,
// each list ending with an END that NewFlowSpec appends.
//
// It refuses what the binding cannot lay out: item and action types other
// than the constants above (META and the like, and METER, whose
// configuration names an rte_mtr object this binding does not create), an
// item structure of another type than its item's, and a DSCP above 63. It
// does not judge whether a PMD accepts the rule: FlowValidate asks the PMD.
func NewFlowSpec(attr FlowAttr, pattern []FlowItem, actions []FlowAction) (*FlowSpec, error) {
	s := &FlowSpec{}
	ok := false
	defer func() {
		if !ok {
			s.Free()
		}
	}()

	s.attr = (*C.struct_rte_flow_attr)(s.alloc(C.sizeof_struct_rte_flow_attr))
	view := C.struct_rf_flow_attr_view{
		group: C.uint32_t(attr.Group), priority: C.uint32_t(attr.Priority),
		ingress: cbool(attr.Ingress), egress: cbool(attr.Egress), transfer: cbool(attr.Transfer),
	}
	C.rf_flow_attr_set(s.attr, &view)

	s.nItems = len(pattern) + 1
	s.items = (*C.struct_rte_flow_item)(s.alloc(uintptr(s.nItems) * C.sizeof_struct_rte_flow_item))
	items := s.itemSlice()
	for i := range pattern {
		if err := s.setItem(&items[i], &pattern[i]); err != nil {
			return nil, fmt.Errorf("flow spec: pattern item %d (%s): %w", i, pattern[i].Type, err)
		}
	}
	items[s.nItems-1]._type = C.RTE_FLOW_ITEM_TYPE_END

	s.nActions = len(actions) + 1
	s.actions = (*C.struct_rte_flow_action)(s.alloc(uintptr(s.nActions) * C.sizeof_struct_rte_flow_action))
	acts := s.actionSlice()
	for i := range actions {
		if err := s.setAction(&acts[i], &actions[i]); err != nil {
			return nil, fmt.Errorf("flow spec: action %d (%s): %w", i, actions[i].Type, err)
		}
	}
	acts[s.nActions-1]._type = C.RTE_FLOW_ACTION_TYPE_END
	ok = true
	return s, nil
}

func cbool(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

func cint(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func u8p(b []byte) *C.uint8_t { return (*C.uint8_t)(unsafe.Pointer(&b[0])) }

// setItem fills item from it, allocating its spec, last and mask.
func (s *FlowSpec) setItem(item *C.struct_rte_flow_item, it *FlowItem) error {
	size := uintptr(C.rf_flow_item_size(C.int(it.Type)))
	if size == 0 {
		if it.Type == FlowItemEnd {
			return errors.New("END is appended by NewFlowSpec, not given")
		}
		return errors.New("item type not supported by this binding")
	}
	item._type = uint32(it.Type)
	for _, f := range []struct {
		name string
		h    FlowItemSpec
		dst  *unsafe.Pointer
	}{{"spec", it.Spec, &item.spec}, {"last", it.Last, &item.last}, {"mask", it.Mask, &item.mask}} {
		if f.h == nil {
			continue
		}
		if t := f.h.ItemType(); t != it.Type {
			return fmt.Errorf("%s is a %s structure", f.name, t)
		}
		*f.dst = s.alloc(size)
		f.h.fill(*f.dst)
	}
	return nil
}

// setAction fills a from act, allocating its configuration.
func (s *FlowSpec) setAction(a *C.struct_rte_flow_action, act *FlowAction) error {
	switch act.Type {
	case FlowActionQueue:
		c := (*C.struct_rte_flow_action_queue)(s.alloc(C.sizeof_struct_rte_flow_action_queue))
		c.index = C.uint16_t(act.Index)
		a.conf = unsafe.Pointer(c)
	case FlowActionRSS:
		c := (*C.struct_rte_flow_action_rss)(s.alloc(C.sizeof_struct_rte_flow_action_rss))
		c._func = C.RTE_ETH_HASH_FUNCTION_DEFAULT
		c.level = 0
		c.types = 0 // the PMD's default hash fields
		if n := len(act.Queues); n > 0 {
			q := (*C.uint16_t)(s.alloc(uintptr(n) * C.sizeof_uint16_t))
			qs := unsafe.Slice(q, n)
			for i, v := range act.Queues {
				qs[i] = C.uint16_t(v)
			}
			c.queue, c.queue_num = q, C.uint32_t(n)
		}
		a.conf = unsafe.Pointer(c)
	case FlowActionMark:
		c := (*C.struct_rte_flow_action_mark)(s.alloc(C.sizeof_struct_rte_flow_action_mark))
		c.id = C.uint32_t(act.ID)
		a.conf = unsafe.Pointer(c)
	case FlowActionCount:
		c := (*C.struct_rte_flow_action_count)(s.alloc(C.sizeof_struct_rte_flow_action_count))
		c.id = C.uint32_t(act.ID)
		a.conf = unsafe.Pointer(c)
	case FlowActionJump:
		c := (*C.struct_rte_flow_action_jump)(s.alloc(C.sizeof_struct_rte_flow_action_jump))
		c.group = C.uint32_t(act.Group)
		a.conf = unsafe.Pointer(c)
	case FlowActionSetIPv4DSCP, FlowActionSetIPv6DSCP:
		if act.DSCP > 63 {
			return fmt.Errorf("dscp %d does not fit in 6 bits", act.DSCP)
		}
		c := (*C.struct_rte_flow_action_set_dscp)(s.alloc(C.sizeof_struct_rte_flow_action_set_dscp))
		c.dscp = C.uint8_t(act.DSCP)
		a.conf = unsafe.Pointer(c)
	case FlowActionFlag, FlowActionDrop:
		// No configuration.
	case FlowActionEnd:
		return errors.New("END is appended by NewFlowSpec, not given")
	case FlowActionMeter:
		return errors.New("an rte_flow meter action points at an rte_mtr meter object " +
			"(profile, policy and meter created on the port beforehand), and this binding does not create them yet")
	default:
		return errors.New("action type not supported by this binding")
	}
	a._type = uint32(act.Type)
	return nil
}

// FlowDescription is a FlowSpec read back from its C memory.
type FlowDescription struct {
	Group, Priority           uint32
	Ingress, Egress, Transfer bool
	Items                     []FlowItemDescription   // END included
	Actions                   []FlowActionDescription // END included
}

// FlowItemDescription is one rte_flow_item: its type and the bytes of the
// structures spec, mask and last point at (nil for NULL), as rte_flow reads
// them (struct rte_flow_item_eth and so on, big-endian fields included).
type FlowItemDescription struct {
	Type             FlowItemType
	Spec, Mask, Last []byte
}

// FlowActionDescription is one rte_flow_action: its type, the bytes of its
// configuration (nil for NULL) and the configuration's fields.
type FlowActionDescription struct {
	Type  FlowActionType
	Conf  []byte // sizeof the type's configuration structure
	Index uint16 // queue
	ID    uint32 // mark, count
	Group uint32 // jump
	DSCP  uint8  // set_ipv4_dscp, set_ipv6_dscp
	// rss
	RSSFunc   int
	RSSLevel  uint32
	RSSTypes  uint64
	RSSKeyLen uint32
	RSSKeyNil bool
	RSSQueues []uint16
}

// Describe reads the C arrays back. A freed FlowSpec describes as
// the zero FlowDescription.
func (s *FlowSpec) Describe() FlowDescription {
	if s.freed() {
		return FlowDescription{}
	}
	var v C.struct_rf_flow_attr_view
	C.rf_flow_attr_get(s.attr, &v)
	d := FlowDescription{
		Group: uint32(v.group), Priority: uint32(v.priority),
		Ingress: v.ingress != 0, Egress: v.egress != 0, Transfer: v.transfer != 0,
	}
	bytesAt := func(p unsafe.Pointer, n C.size_t) []byte {
		if p == nil {
			return nil
		}
		return C.GoBytes(p, C.int(n))
	}
	for _, it := range s.itemSlice() {
		size := C.rf_flow_item_size(C.int(it._type))
		d.Items = append(d.Items, FlowItemDescription{
			Type: FlowItemType(it._type),
			Spec: bytesAt(it.spec, size), Mask: bytesAt(it.mask, size), Last: bytesAt(it.last, size),
		})
	}
	for _, a := range s.actionSlice() {
		ad := FlowActionDescription{Type: FlowActionType(a._type), Conf: bytesAt(a.conf, C.rf_flow_conf_size(C.int(a._type)))}
		if a.conf != nil {
			switch FlowActionType(a._type) {
			case FlowActionQueue:
				ad.Index = uint16((*C.struct_rte_flow_action_queue)(a.conf).index)
			case FlowActionMark:
				ad.ID = uint32((*C.struct_rte_flow_action_mark)(a.conf).id)
			case FlowActionCount:
				ad.ID = uint32((*C.struct_rte_flow_action_count)(a.conf).id)
			case FlowActionJump:
				ad.Group = uint32((*C.struct_rte_flow_action_jump)(a.conf).group)
			case FlowActionSetIPv4DSCP, FlowActionSetIPv6DSCP:
				ad.DSCP = uint8((*C.struct_rte_flow_action_set_dscp)(a.conf).dscp)
			case FlowActionRSS:
				c := (*C.struct_rte_flow_action_rss)(a.conf)
				ad.RSSFunc, ad.RSSLevel, ad.RSSTypes = int(c._func), uint32(c.level), uint64(c.types)
				ad.RSSKeyLen, ad.RSSKeyNil = uint32(c.key_len), c.key == nil
				if c.queue != nil {
					for _, q := range unsafe.Slice(c.queue, int(c.queue_num)) {
						ad.RSSQueues = append(ad.RSSQueues, uint16(q))
					}
				}
			}
		}
		d.Actions = append(d.Actions, ad)
	}
	return d
}

// FlowErrorType is rte_flow_error.type: what the PMD blames.
type FlowErrorType int

// The rte_flow_error types.
const (
	FlowErrNone         FlowErrorType = C.RTE_FLOW_ERROR_TYPE_NONE
	FlowErrUnspecified  FlowErrorType = C.RTE_FLOW_ERROR_TYPE_UNSPECIFIED
	FlowErrHandle       FlowErrorType = C.RTE_FLOW_ERROR_TYPE_HANDLE
	FlowErrAttrGroup    FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR_GROUP
	FlowErrAttrPriority FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR_PRIORITY
	FlowErrAttrIngress  FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR_INGRESS
	FlowErrAttrEgress   FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR_EGRESS
	FlowErrAttrTransfer FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR_TRANSFER
	FlowErrAttr         FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ATTR
	FlowErrItemNum      FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ITEM_NUM
	FlowErrItemSpec     FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ITEM_SPEC
	FlowErrItemLast     FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ITEM_LAST
	FlowErrItemMask     FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ITEM_MASK
	FlowErrItem         FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ITEM
	FlowErrActionNum    FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ACTION_NUM
	FlowErrActionConf   FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ACTION_CONF
	FlowErrAction       FlowErrorType = C.RTE_FLOW_ERROR_TYPE_ACTION
	FlowErrState        FlowErrorType = C.RTE_FLOW_ERROR_TYPE_STATE
)

var flowErrNames = [...]string{"none", "unspecified", "handle", "attr group", "attr priority",
	"attr ingress", "attr egress", "attr transfer", "attr", "item num", "item spec", "item last",
	"item mask", "item", "action num", "action conf", "action", "state"}

func (t FlowErrorType) String() string {
	if t >= 0 && int(t) < len(flowErrNames) {
		return flowErrNames[t]
	}
	return fmt.Sprintf("flow-error-type-%d", int(t))
}

// FlowError is a failed rte_flow call: the errno, and what the PMD put in
// rte_flow_error. errors.Is(err, syscall.ENOSYS) and errors.As to *Error
// work on it.
type FlowError struct {
	Op      string
	Errno   int           // positive errno
	Type    FlowErrorType // what the error is about
	Message string        // the PMD's message; "" when it gave none
	// Item and Action locate the cause in the FlowSpec: the index of the
	// pattern item or action (or of the one whose spec, mask, last or
	// configuration the cause points at); -1 when the cause is elsewhere.
	Item, Action int
	ItemName     string // type name of the item at Item ("ipv4"; "end" for END)
	ActionName   string // type name of the action at Action ("queue")
	Driver       string // the port's driver
	hint         string
}

func (e *FlowError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteString(": ")
	switch {
	case e.Item >= 0:
		fmt.Fprintf(&b, "pattern item %d (%s): ", e.Item, e.ItemName)
	case e.Action >= 0:
		fmt.Fprintf(&b, "action %d (%s): ", e.Action, e.ActionName)
	}
	if e.Message != "" && e.Message != StrError(e.Errno) {
		b.WriteString(e.Message)
		b.WriteString(": ")
	}
	b.WriteString(StrError(e.Errno))
	fmt.Fprintf(&b, " (errno %d", e.Errno)
	if e.Type != FlowErrNone && e.Type != FlowErrUnspecified {
		fmt.Fprintf(&b, ", error type %s", e.Type)
	}
	b.WriteString(")")
	if e.hint != "" {
		b.WriteString("; ")
		b.WriteString(e.hint)
	}
	return b.String()
}

// Is lets errors.Is(err, syscall.ENOSYS) work.
func (e *FlowError) Is(target error) bool {
	en, ok := target.(syscall.Errno)
	return ok && int(en) == e.Errno
}

// Unwrap gives the error as an *Error.
func (e *FlowError) Unwrap() error { return &Error{Op: e.Op, Errno: e.Errno} }

// flowErr turns a failed call's status into a *FlowError, locating the
// cause in s (which may be nil).
func (p Port) flowErr(op string, st *C.struct_rf_flow_status, s *FlowSpec) *FlowError {
	e := &FlowError{
		Op: p.op(op), Errno: int(-st.rc), Type: FlowErrorType(st._type),
		Item: -1, Action: -1,
	}
	if st.has_message != 0 {
		e.Message = C.GoString(&st.message[0])
	}
	if C.rte_eth_dev_is_valid_port(C.uint16_t(p)) != 0 {
		if info, err := p.Info(); err == nil {
			e.Driver = info.Driver
		}
	}
	if s != nil && !s.freed() && st.cause != 0 {
		e.Item, e.Action = s.locate(uintptr(st.cause))
		if e.Item >= 0 {
			e.ItemName = FlowItemType(s.itemSlice()[e.Item]._type).String()
		}
		if e.Action >= 0 {
			e.ActionName = FlowActionType(s.actionSlice()[e.Action]._type).String()
		}
	}
	// ethdev's own refusals carry no message of their own (or just the
	// errno's text): say what they mean.
	generic := e.Message == "" || e.Message == StrError(e.Errno)
	if generic && e.Driver != "" && e.Item < 0 && e.Action < 0 && (e.Type == FlowErrNone || e.Type == FlowErrUnspecified) {
		switch e.Errno {
		case int(syscall.ENOSYS):
			e.hint = e.Driver + " does not implement this rte_flow operation"
		case int(syscall.ENOTSUP):
			e.hint = e.Driver + " does not support this rte_flow operation"
		}
	}
	if generic && e.Type == FlowErrState {
		e.hint = "the port's flow engine was not set up with rte_flow_configure"
	}
	return e
}

// locate finds which item or action a cause pointer designates.
func (s *FlowSpec) locate(cause uintptr) (item, action int) {
	within := func(p unsafe.Pointer, n uintptr) bool {
		return p != nil && cause >= uintptr(p) && cause < uintptr(p)+n
	}
	for i, it := range s.itemSlice() {
		size := uintptr(C.rf_flow_item_size(C.int(it._type)))
		if within(unsafe.Pointer(&s.itemSlice()[i]), C.sizeof_struct_rte_flow_item) ||
			within(it.spec, size) || within(it.mask, size) || within(it.last, size) {
			return i, -1
		}
	}
	for i, a := range s.actionSlice() {
		if within(unsafe.Pointer(&s.actionSlice()[i]), C.sizeof_struct_rte_flow_action) ||
			within(a.conf, uintptr(C.rf_flow_conf_size(C.int(a._type)))) {
			return -1, i
		}
		if FlowActionType(a._type) == FlowActionRSS && a.conf != nil {
			c := (*C.struct_rte_flow_action_rss)(a.conf)
			if within(unsafe.Pointer(c.queue), uintptr(c.queue_num)*C.sizeof_uint16_t) {
				return -1, i
			}
		}
	}
	return -1, -1
}

func errSpec(op string) error {
	return &Error{Op: op + ": no flow spec (nil or freed)", Errno: int(syscall.EINVAL)}
}

// FlowValidate asks the PMD whether it would create the rule
// (rte_flow_validate). A port without a flow engine gives ENOSYS.
func (p Port) FlowValidate(s *FlowSpec) error {
	if s.freed() {
		return errSpec(p.op("flow validate"))
	}
	var st C.struct_rf_flow_status
	if C.rf_flow_validate(C.uint16_t(p), s.attr, s.items, s.actions, &st) < 0 {
		return p.flowErr("flow validate", &st, s)
	}
	return nil
}

// Flow is a flow rule created on a port. It holds the PMD's handle as an
// integer; it is invalid after FlowDestroy, FlowFlush or closing the port.
type Flow struct {
	port  Port
	h     uintptr
	table *FlowTable // for rules created through a template table
}

// Port is the port the rule lives on.
func (f *Flow) Port() Port { return f.port }

// live tracks the rules created through this package, so that a flush
// invalidates their handles instead of leaving them dangling.
var live struct {
	sync.Mutex
	flows map[Port]map[*Flow]struct{}
}

func track(f *Flow) {
	live.Lock()
	defer live.Unlock()
	if live.flows == nil {
		live.flows = map[Port]map[*Flow]struct{}{}
	}
	if live.flows[f.port] == nil {
		live.flows[f.port] = map[*Flow]struct{}{}
	}
	live.flows[f.port][f] = struct{}{}
}

func untrack(f *Flow) {
	live.Lock()
	defer live.Unlock()
	delete(live.flows[f.port], f)
	f.h = 0
}

// FlowCreate creates the rule (rte_flow_create).
func (p Port) FlowCreate(s *FlowSpec) (*Flow, error) {
	if s.freed() {
		return nil, errSpec(p.op("flow create"))
	}
	var st C.struct_rf_flow_status
	h := C.rf_flow_create(C.uint16_t(p), s.attr, s.items, s.actions, &st)
	if h == 0 {
		return nil, p.flowErr("flow create", &st, s)
	}
	f := &Flow{port: p, h: uintptr(h)}
	track(f)
	return f, nil
}

func (p Port) checkFlow(op string, f *Flow) error {
	if f == nil || f.h == 0 {
		return &Error{Op: p.op(op + ": no such flow (nil or destroyed)"), Errno: int(syscall.EINVAL)}
	}
	if f.port != p {
		return &Error{Op: p.op(fmt.Sprintf("%s: the flow belongs to port %d", op, f.port)), Errno: int(syscall.EINVAL)}
	}
	return nil
}

// FlowDestroy destroys the rule (rte_flow_destroy). The handle is invalid
// afterwards, whatever the PMD answered: a PMD frees the rule even when it
// reports a failure to remove it from the hardware.
func (p Port) FlowDestroy(f *Flow) error {
	if err := p.checkFlow("flow destroy", f); err != nil {
		return err
	}
	var st C.struct_rf_flow_status
	rc := C.rf_flow_destroy(C.uint16_t(p), C.uintptr_t(f.h), &st)
	untrack(f)
	if rc < 0 {
		return p.flowErr("flow destroy", &st, nil)
	}
	return nil
}

// FlowQueryCount reads the counter of a rule with a count action
// (rte_flow_query with RTE_FLOW_ACTION_TYPE_COUNT, counter id 0), and
// resets it if reset. hitsSet and bytesSet say which values the PMD filled.
func (p Port) FlowQueryCount(f *Flow, reset bool) (hits, bytes uint64, hitsSet, bytesSet bool, err error) {
	if err := p.checkFlow("flow query count", f); err != nil {
		return 0, 0, false, false, err
	}
	var st C.struct_rf_flow_status
	var c C.struct_rf_flow_count
	if C.rf_flow_query_count(C.uint16_t(p), C.uintptr_t(f.h), cint(reset), &c, &st) < 0 {
		return 0, 0, false, false, p.flowErr("flow query count", &st, nil)
	}
	return uint64(c.hits), uint64(c.bytes), c.hits_set != 0, c.bytes_set != 0, nil
}

// FlowFlush destroys every rule of the port (rte_flow_flush). The Flows
// created on it are invalid afterwards.
func (p Port) FlowFlush() error {
	var st C.struct_rf_flow_status
	rc := C.rf_flow_flush(C.uint16_t(p), &st)
	if rc == 0 {
		live.Lock()
		for f := range live.flows[p] {
			f.h = 0
		}
		delete(live.flows, p)
		live.Unlock()
		return nil
	}
	return p.flowErr("flow flush", &st, nil)
}

// FlowIsolate restricts (on) the port's ingress traffic to what flow rules
// select, or lifts the restriction (rte_flow_isolate). PMDs want it before
// the port is configured or started.
func (p Port) FlowIsolate(on bool) error {
	var st C.struct_rf_flow_status
	if C.rf_flow_isolate(C.uint16_t(p), cint(on), &st) < 0 {
		return p.flowErr(fmt.Sprintf("flow isolate %v", on), &st, nil)
	}
	return nil
}

// FlowInfo is what rte_flow_info_get reports about a port's flow engine
// for the template API; zero means not supported.
type FlowInfo struct {
	MaxQueues       uint32 // asynchronous flow queues
	MaxQueueSize    uint32 // operations a flow queue holds
	MaxCounters     uint32
	MaxAgingObjects uint32
	MaxMeters       uint32
	MaxConnTracks   uint32
	SupportedFlags  uint32 // RTE_FLOW_PORT_FLAG_*
}

// FlowInfo is rte_flow_info_get on a configured port. Its error tells the
// flow engine apart: nil means the template (asynchronous) API is there;
// ENOTSUP a flow engine with the synchronous API only; ENOSYS no flow
// engine at all. EINVAL means the port is not configured.
func (p Port) FlowInfo() (FlowInfo, error) {
	var st C.struct_rf_flow_status
	var fi C.struct_rf_flow_info
	if C.rf_flow_info_get(C.uint16_t(p), &fi, &st) < 0 {
		e := p.flowErr("flow info", &st, nil)
		if e.Errno == int(syscall.EINVAL) && (e.Message == "" || e.Message == StrError(e.Errno)) {
			e.hint = "rte_flow_info_get needs a configured port"
		}
		return FlowInfo{}, e
	}
	return FlowInfo{
		MaxQueues: uint32(fi.max_nb_queues), MaxQueueSize: uint32(fi.max_queue_size),
		MaxCounters: uint32(fi.max_nb_counters), MaxAgingObjects: uint32(fi.max_nb_aging_objects),
		MaxMeters: uint32(fi.max_nb_meters), MaxConnTracks: uint32(fi.max_nb_conn_tracks),
		SupportedFlags: uint32(fi.supported_flags),
	}, nil
}

// FlowEngineConfig is what rte_flow_configure pre-allocates.
type FlowEngineConfig struct {
	Queues    int    // asynchronous flow queues, 1 to 65535
	QueueSize uint32 // operations each queue holds
	// Objects to reserve for the rules' actions (0: none).
	Counters, AgingObjects, Meters, ConnTracks uint32
	Flags                                      uint32 // RTE_FLOW_PORT_FLAG_*
}

// engines records the flow queues of ports whose engine FlowConfigure set
// up: the asynchronous calls of DPDK 22.11 do not check the port.
var engines struct {
	sync.Mutex
	queues map[Port]int
}

// FlowConfigure sets up the port's flow engine for the template API with
// queues flow queues of queueSize operations each and no pre-allocated
// objects (rte_flow_configure). The port must be configured and stopped.
// PMDs without the template API refuse: ENOTSUP when they have a flow
// engine, ENOSYS when they have none.
func (p Port) FlowConfigure(queues, queueSize int) error {
	if queueSize < 0 || uint64(queueSize) > 1<<32-1 {
		return &Error{Op: p.op(fmt.Sprintf("flow configure: queue size %d", queueSize)), Errno: int(syscall.EINVAL)}
	}
	return p.FlowConfigureEngine(FlowEngineConfig{Queues: queues, QueueSize: uint32(queueSize)})
}

// FlowConfigureEngine is FlowConfigure with every rte_flow_port_attr field.
func (p Port) FlowConfigureEngine(c FlowEngineConfig) error {
	op := fmt.Sprintf("flow configure (%d queues of %d)", c.Queues, c.QueueSize)
	if c.Queues < 1 || c.Queues > 65535 {
		return &Error{Op: p.op(op + ": queue count out of range"), Errno: int(syscall.EINVAL)}
	}
	cfg := C.struct_rf_flow_engine{
		nb_counters: C.uint32_t(c.Counters), nb_aging_objects: C.uint32_t(c.AgingObjects),
		nb_meters: C.uint32_t(c.Meters), nb_conn_tracks: C.uint32_t(c.ConnTracks),
		flags: C.uint32_t(c.Flags), nb_queues: C.uint16_t(c.Queues), queue_size: C.uint32_t(c.QueueSize),
	}
	var st C.struct_rf_flow_status
	if C.rf_flow_configure(C.uint16_t(p), &cfg, &st) < 0 {
		e := p.flowErr(op, &st, nil)
		if e.Errno == int(syscall.EINVAL) && (e.Message == "" || e.Message == StrError(e.Errno)) {
			e.hint = "rte_flow_configure needs a configured, stopped port"
		}
		return e
	}
	engines.Lock()
	if engines.queues == nil {
		engines.queues = map[Port]int{}
	}
	engines.queues[p] = c.Queues
	engines.Unlock()
	return nil
}

func configuredQueues(p Port) int {
	engines.Lock()
	defer engines.Unlock()
	return engines.queues[p]
}

// FlowTable is a template table (template API): one pattern template made
// from a FlowSpec's pattern masks and one actions template with that
// FlowSpec's actions, configuration included. Rules enter it with
// AsyncCreate on a flow queue and take effect once pushed; Pull collects
// the outcomes.
type FlowTable struct {
	port    Port
	queues  int
	pt, at  uintptr // the templates
	tbl     uintptr
	items   []FlowItemType   // item types of the pattern template, END excluded
	actions []FlowActionType // action types of the actions template, END excluded
}

// FlowTableCreate creates the templates and a table for nbFlows rules from
// s's attributes, pattern and actions (rte_flow_pattern_template_create,
// rte_flow_actions_template_create, rte_flow_template_table_create). The
// port's flow engine must have been set up with FlowConfigure.
func (p Port) FlowTableCreate(s *FlowSpec, nbFlows uint32) (*FlowTable, error) {
	if s.freed() {
		return nil, errSpec(p.op("flow table create"))
	}
	var st C.struct_rf_flow_status
	var h C.struct_rf_flow_table
	if C.rf_flow_table_create(C.uint16_t(p), s.attr, s.items, s.actions, C.uint32_t(nbFlows), 0, &h, &st) < 0 {
		return nil, p.flowErr(fmt.Sprintf("flow table create (%d rules)", nbFlows), &st, s)
	}
	t := &FlowTable{port: p, queues: configuredQueues(p),
		pt: uintptr(h.pattern_template), at: uintptr(h.actions_template), tbl: uintptr(h.table)}
	t.items, t.actions = s.types()
	return t, nil
}

// types lists the item and action types, END excluded.
func (s *FlowSpec) types() (items []FlowItemType, actions []FlowActionType) {
	for _, it := range s.itemSlice()[:s.nItems-1] {
		items = append(items, FlowItemType(it._type))
	}
	for _, a := range s.actionSlice()[:s.nActions-1] {
		actions = append(actions, FlowActionType(a._type))
	}
	return items, actions
}

// Destroy destroys the table and its templates. Its rules must have been
// destroyed.
func (t *FlowTable) Destroy() error {
	if t == nil || t.tbl == 0 {
		return nil
	}
	h := C.struct_rf_flow_table{pattern_template: C.uintptr_t(t.pt), actions_template: C.uintptr_t(t.at), table: C.uintptr_t(t.tbl)}
	var st C.struct_rf_flow_status
	if C.rf_flow_table_destroy(C.uint16_t(t.port), &h, &st) < 0 {
		return t.port.flowErr("flow table destroy", &st, nil)
	}
	t.pt, t.at, t.tbl = 0, 0, 0
	return nil
}

func (t *FlowTable) checkQueue(op string, queue int) error {
	if t == nil || t.tbl == 0 {
		return &Error{Op: op + ": no template table (nil or destroyed)", Errno: int(syscall.EINVAL)}
	}
	if t.queues == 0 {
		return &Error{Op: t.port.op(op + ": the flow engine was not set up with FlowConfigure"), Errno: int(syscall.EINVAL)}
	}
	if queue < 0 || queue >= t.queues {
		return &Error{Op: t.port.op(fmt.Sprintf("%s: flow queue %d of %d", op, queue, t.queues)), Errno: int(syscall.EINVAL)}
	}
	return nil
}

// AsyncCreate enqueues the creation of a rule in the table on a flow queue
// (rte_flow_async_create): s gives the item values (its pattern must have
// the table's item types), the actions come from the table's template.
// With postpone the operation waits for Push. The Flow is usable once Pull
// reported userData's operation as done.
func (t *FlowTable) AsyncCreate(queue int, s *FlowSpec, postpone bool, userData uint64) (*Flow, error) {
	if err := t.checkQueue("flow async create", queue); err != nil {
		return nil, err
	}
	if s.freed() {
		return nil, errSpec(t.port.op("flow async create"))
	}
	items, actions := s.types()
	if !slices.Equal(items, t.items) || !slices.Equal(actions, t.actions) {
		return nil, &Error{Op: t.port.op("flow async create: the rule's item or action types differ from the table's templates"),
			Errno: int(syscall.EINVAL)}
	}
	var st C.struct_rf_flow_status
	h := C.rf_flow_async_create(C.uint16_t(t.port), C.uint32_t(queue), cint(postpone), C.uintptr_t(t.tbl),
		s.items, s.actions, C.uint64_t(userData), &st)
	if h == 0 {
		return nil, t.port.flowErr(fmt.Sprintf("flow async create on queue %d", queue), &st, s)
	}
	f := &Flow{port: t.port, h: uintptr(h), table: t}
	track(f)
	return f, nil
}

// AsyncDestroy enqueues the destruction of a rule created by AsyncCreate
// (rte_flow_async_destroy). The Flow is invalid afterwards.
func (t *FlowTable) AsyncDestroy(queue int, f *Flow, postpone bool, userData uint64) error {
	if err := t.checkQueue("flow async destroy", queue); err != nil {
		return err
	}
	if err := t.port.checkFlow("flow async destroy", f); err != nil {
		return err
	}
	if f.table != t {
		return &Error{Op: t.port.op("flow async destroy: the flow is not in this table"), Errno: int(syscall.EINVAL)}
	}
	var st C.struct_rf_flow_status
	rc := C.rf_flow_async_destroy(C.uint16_t(t.port), C.uint32_t(queue), cint(postpone), C.uintptr_t(f.h), C.uint64_t(userData), &st)
	if rc < 0 {
		return t.port.flowErr(fmt.Sprintf("flow async destroy on queue %d", queue), &st, nil)
	}
	untrack(f)
	return nil
}

// Push sends the postponed operations of a flow queue to the device
// (rte_flow_push).
func (t *FlowTable) Push(queue int) error {
	if err := t.checkQueue("flow push", queue); err != nil {
		return err
	}
	var st C.struct_rf_flow_status
	if C.rf_flow_push(C.uint16_t(t.port), C.uint32_t(queue), &st) < 0 {
		return t.port.flowErr(fmt.Sprintf("flow push on queue %d", queue), &st, nil)
	}
	return nil
}

// FlowOpResult is the outcome of one asynchronous operation.
type FlowOpResult struct {
	OK       bool // RTE_FLOW_OP_SUCCESS
	UserData uint64
}

// Pull collects up to max (at most 64) completed operations of a flow
// queue (rte_flow_pull).
func (t *FlowTable) Pull(queue, max int) ([]FlowOpResult, error) {
	if err := t.checkQueue("flow pull", queue); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	if max > 64 {
		max = 64
	}
	res := make([]C.struct_rf_flow_op_result, max)
	var st C.struct_rf_flow_status
	n := C.rf_flow_pull(C.uint16_t(t.port), C.uint32_t(queue), &res[0], C.uint16_t(max), &st)
	if n < 0 {
		return nil, t.port.flowErr(fmt.Sprintf("flow pull on queue %d", queue), &st, nil)
	}
	out := make([]FlowOpResult, n)
	for i := range out {
		out[i] = FlowOpResult{OK: res[i].status == C.RTE_FLOW_OP_SUCCESS, UserData: uint64(res[i].user_data)}
	}
	return out, nil
}
