package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
)

// compileLine parses a testpmd flow command and compiles its rule; the
// spec is freed when the test ends.
func compileLine(t *testing.T, line string) *dpdk.FlowSpec {
	t.Helper()
	c, err := flowrule.Parse(line)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	s, err := compile(&c.Rule)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	t.Cleanup(s.Free)
	return s
}

// describe compiles a rule and reads its C structures back.
func describe(t *testing.T, line string) dpdk.FlowDescription {
	t.Helper()
	return compileLine(t, line).Describe()
}

// zeroExcept reports whether b is zero outside [from, to).
func zeroExcept(b []byte, from, to int) bool {
	for i, v := range b {
		if (i < from || i >= to) && v != 0 {
			return false
		}
	}
	return true
}

func TestCompileAttrAndShape(t *testing.T) {
	d := describe(t, "flow create 0 group 3 priority 7 egress pattern eth / end actions drop / end")
	if d.Group != 3 || d.Priority != 7 || !d.Egress || d.Ingress || d.Transfer {
		t.Errorf("attr %+v, want group 3 priority 7 egress", d)
	}
	if len(d.Items) != 2 || d.Items[0].Type != dpdk.FlowItemEth || d.Items[1].Type != dpdk.FlowItemEnd {
		t.Fatalf("items %+v, want eth, end", d.Items)
	}
	// "eth" alone has no field: NULL spec, mask and last.
	if d.Items[0].Spec != nil || d.Items[0].Mask != nil || d.Items[0].Last != nil {
		t.Errorf("eth without fields: %+v, want NULL spec/mask/last", d.Items[0])
	}
	if len(d.Actions) != 2 || d.Actions[0].Type != dpdk.FlowActionDrop || d.Actions[0].Conf != nil || d.Actions[1].Type != dpdk.FlowActionEnd {
		t.Errorf("actions %+v, want drop (no conf), end", d.Actions)
	}

	d = describe(t, "flow create 0 ingress transfer pattern end actions end")
	if !d.Ingress || !d.Transfer || d.Egress || d.Group != 0 || d.Priority != 0 {
		t.Errorf("attr %+v, want ingress transfer", d)
	}
	if len(d.Items) != 1 || d.Items[0].Type != dpdk.FlowItemEnd || len(d.Actions) != 1 || d.Actions[0].Type != dpdk.FlowActionEnd {
		t.Errorf("empty rule: items %+v actions %+v, want END only", d.Items, d.Actions)
	}
}

func TestCompileIPv4UDP(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth / ipv4 dst is 10.0.0.1 / udp dst is 4791 / end actions queue index 3 / end")
	if len(d.Items) != 4 || d.Items[0].Type != dpdk.FlowItemEth || d.Items[1].Type != dpdk.FlowItemIPv4 ||
		d.Items[2].Type != dpdk.FlowItemUDP || d.Items[3].Type != dpdk.FlowItemEnd {
		t.Fatalf("items %+v", d.Items)
	}
	ip := d.Items[1]
	// struct rte_flow_item_ipv4 is struct rte_ipv4_hdr: the 20-byte header
	// as on the wire; dst_addr at offset 16.
	if len(ip.Spec) != 20 || len(ip.Mask) != 20 || ip.Last != nil {
		t.Fatalf("ipv4 spec %d bytes, mask %d bytes, last %v", len(ip.Spec), len(ip.Mask), ip.Last)
	}
	if got := binary.BigEndian.Uint32(ip.Spec[16:]); got != 0x0a000001 || !zeroExcept(ip.Spec, 16, 20) {
		t.Errorf("ipv4 spec % x, want dst_addr 0a 00 00 01 (big-endian) and nothing else", ip.Spec)
	}
	if got := binary.BigEndian.Uint32(ip.Mask[16:]); got != 0xffffffff || !zeroExcept(ip.Mask, 16, 20) {
		t.Errorf("ipv4 mask % x, want dst_addr ff ff ff ff only", ip.Mask)
	}
	udp := d.Items[2]
	// rte_udp_hdr: src_port, dst_port, dgram_len, dgram_cksum.
	if len(udp.Spec) != 8 || !bytes.Equal(udp.Spec[2:4], []byte{0x12, 0xb7}) || !zeroExcept(udp.Spec, 2, 4) {
		t.Errorf("udp spec % x, want dst_port htons(4791) = 12 b7", udp.Spec)
	}
	if !bytes.Equal(udp.Mask, []byte{0, 0, 0xff, 0xff, 0, 0, 0, 0}) {
		t.Errorf("udp mask % x, want dst_port ffff", udp.Mask)
	}
	q := d.Actions[0]
	if q.Type != dpdk.FlowActionQueue || q.Index != 3 || len(q.Conf) != 2 || binary.NativeEndian.Uint16(q.Conf) != 3 {
		t.Errorf("queue action %+v, want index 3 (host order)", q)
	}
}

func TestCompileDSCPMatchAndRange(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth / ipv4 dscp is 26 / udp src spec 1000 src last 2000 / end actions drop / end")
	ip := d.Items[1]
	// type_of_service is byte 1: DSCP 26 << 2 = 0x68, mask the six DSCP bits.
	if ip.Spec[1] != 0x68 || !zeroExcept(ip.Spec, 1, 2) || ip.Mask[1] != 0xfc || !zeroExcept(ip.Mask, 1, 2) {
		t.Errorf("ipv4 tos spec % x mask % x, want 0x68/0xfc", ip.Spec, ip.Mask)
	}
	udp := d.Items[2]
	if !bytes.Equal(udp.Spec[:4], []byte{0x03, 0xe8, 0, 0}) || udp.Last == nil || !bytes.Equal(udp.Last[:4], []byte{0x07, 0xd0, 0, 0}) {
		t.Errorf("udp spec % x last % x, want src_port 1000..2000 big-endian", udp.Spec, udp.Last)
	}
	// No mask given: testpmd's default mask (both ports).
	if !bytes.Equal(udp.Mask[:4], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("udp mask % x, want the default ffff ffff", udp.Mask)
	}
}

func TestCompileEthVLANIPv6TCP(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth dst is 02:00:00:00:00:0b src is 02:00:00:00:00:0a type is 0x8100 has_vlan is 1 / "+
		"vlan tci is 0x6064 inner_type is 0x86dd has_more_vlan is 1 / ipv6 src is 2001:db8::1 dst is 2001:db8::2 tc is 0xb8 proto is 6 hop is 64 / "+
		"tcp src is 22 dst is 65535 / end actions drop / end")
	if len(d.Items) != 5 {
		t.Fatalf("items %+v", d.Items)
	}
	eth := d.Items[0]
	// rte_flow_item_eth: dst(6) src(6) ether_type(2, big-endian), then the
	// has_vlan bit (bit 0 of byte 14; see the dpdk package's layout test).
	want := []byte{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 0x81, 0x00, 1, 0, 0, 0, 0, 0}
	if eth.Type != dpdk.FlowItemEth || !bytes.Equal(eth.Spec, want) {
		t.Errorf("eth spec % x, want % x", eth.Spec, want)
	}
	wantMask := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0}
	if !bytes.Equal(eth.Mask, wantMask) {
		t.Errorf("eth mask % x, want % x", eth.Mask, wantMask)
	}
	vlan := d.Items[1]
	// rte_flow_item_vlan: vlan_tci, eth_proto (big-endian), then the uint32
	// holding has_more_vlan as bit 0.
	if vlan.Type != dpdk.FlowItemVLAN || !bytes.Equal(vlan.Spec, []byte{0x60, 0x64, 0x86, 0xdd, 1, 0, 0, 0}) ||
		!bytes.Equal(vlan.Mask, []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}) {
		t.Errorf("vlan spec % x mask % x", vlan.Spec, vlan.Mask)
	}
	ip6 := d.Items[2]
	// rte_flow_item_ipv6: the 40-byte header (vtc_flow, payload_len, proto,
	// hop_limits, src, dst) and a uint32 of extension-header flags.
	if ip6.Type != dpdk.FlowItemIPv6 || len(ip6.Spec) != 44 {
		t.Fatalf("ipv6 item %+v", ip6)
	}
	wantSpec := make([]byte, 44)
	copy(wantSpec, []byte{0x0b, 0x80, 0, 0, 0, 0, 6, 64})
	copy(wantSpec[8:], []byte{0x20, 0x01, 0x0d, 0xb8, 12: 0, 15: 1})
	copy(wantSpec[24:], []byte{0x20, 0x01, 0x0d, 0xb8, 12: 0, 15: 2})
	if !bytes.Equal(ip6.Spec, wantSpec) {
		t.Errorf("ipv6 spec\n % x, want\n % x", ip6.Spec, wantSpec)
	}
	wantMask = make([]byte, 44)
	copy(wantMask, []byte{0x0f, 0xf0, 0, 0, 0, 0, 0xff, 0xff})
	for i := 8; i < 40; i++ {
		wantMask[i] = 0xff
	}
	if !bytes.Equal(ip6.Mask, wantMask) {
		t.Errorf("ipv6 mask\n % x, want\n % x", ip6.Mask, wantMask)
	}
	tcp := d.Items[3]
	if tcp.Type != dpdk.FlowItemTCP || len(tcp.Spec) != 20 || !bytes.Equal(tcp.Spec[:4], []byte{0, 22, 0xff, 0xff}) || !zeroExcept(tcp.Spec, 0, 4) {
		t.Errorf("tcp spec % x, want ports 22 and 65535 big-endian", tcp.Spec)
	}
}

func TestCompileActions(t *testing.T) {
	// Built by hand: flowrule's grammar keeps one fate per rule and wants an
	// ip item for the DSCP rewrites; compile translates whatever it gets.
	r := flowrule.Rule{Ingress: true, Items: []flowrule.Item{{Type: flowrule.ItemEth}}, Actions: []flowrule.Action{
		{Type: flowrule.ActRSS, Queues: []uint16{0, 1}},
		{Type: flowrule.ActMark, ID: 0x1234},
		{Type: flowrule.ActFlag},
		{Type: flowrule.ActCount},
		{Type: flowrule.ActJump, Group: 2},
		{Type: flowrule.ActSetIPv4DSCP, DSCP: 46},
		{Type: flowrule.ActSetIPv6DSCP, DSCP: 10},
	}}
	s, err := compile(&r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	d := s.Describe()
	if len(d.Actions) != 8 {
		t.Fatalf("actions %+v", d.Actions)
	}
	rss := d.Actions[0]
	if rss.Type != dpdk.FlowActionRSS || len(rss.Conf) != 40 || rss.RSSFunc != 0 || rss.RSSLevel != 0 || rss.RSSTypes != 0 ||
		rss.RSSKeyLen != 0 || !rss.RSSKeyNil || len(rss.RSSQueues) != 2 || rss.RSSQueues[0] != 0 || rss.RSSQueues[1] != 1 {
		t.Errorf("rss %+v, want default func/level/types/key and queues [0 1]", rss)
	}
	if a := d.Actions[1]; a.Type != dpdk.FlowActionMark || a.ID != 0x1234 || binary.NativeEndian.Uint32(a.Conf) != 0x1234 {
		t.Errorf("mark %+v", a)
	}
	if a := d.Actions[2]; a.Type != dpdk.FlowActionFlag || a.Conf != nil {
		t.Errorf("flag %+v, want no conf", a)
	}
	if a := d.Actions[3]; a.Type != dpdk.FlowActionCount || !bytes.Equal(a.Conf, []byte{0, 0, 0, 0}) {
		t.Errorf("count %+v, want conf with id 0", a)
	}
	if a := d.Actions[4]; a.Type != dpdk.FlowActionJump || a.Group != 2 || binary.NativeEndian.Uint32(a.Conf) != 2 {
		t.Errorf("jump %+v", a)
	}
	if a := d.Actions[5]; a.Type != dpdk.FlowActionSetIPv4DSCP || !bytes.Equal(a.Conf, []byte{46}) || a.DSCP != 46 {
		t.Errorf("set_ipv4_dscp %+v", a)
	}
	if a := d.Actions[6]; a.Type != dpdk.FlowActionSetIPv6DSCP || !bytes.Equal(a.Conf, []byte{10}) {
		t.Errorf("set_ipv6_dscp %+v", a)
	}
	if d.Actions[7].Type != dpdk.FlowActionEnd {
		t.Errorf("last action %+v, want END", d.Actions[7])
	}
}

func TestCompileRSSFromGrammar(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth / ipv4 / udp / end actions rss queues 0 1 end / end")
	if a := d.Actions[0]; a.Type != dpdk.FlowActionRSS || len(a.RSSQueues) != 2 || a.RSSQueues[0] != 0 || a.RSSQueues[1] != 1 || a.RSSTypes != 0 {
		t.Errorf("rss %+v, want queues [0 1], types 0", a)
	}
	d = describe(t, "flow create 0 ingress pattern eth / ipv4 / end actions set_ipv4_dscp dscp_value 46 / end")
	if a := d.Actions[0]; a.Type != dpdk.FlowActionSetIPv4DSCP || !bytes.Equal(a.Conf, []byte{46}) {
		t.Errorf("set_ipv4_dscp %+v, want conf {46}", a)
	}
}

// nicFlow hands the binding typed structures: the Match's spec, mask and
// last, each one the item's own, and a nil Last stays nil.
func TestNICFlowDescription(t *testing.T) {
	c, err := flowrule.Parse("flow create 0 group 2 priority 1 ingress pattern eth / vlan tci is 0x6064 / ipv4 src is 10.0.0.1 / " +
		"udp dst spec 4791 dst last 4792 / end actions mark id 7 / count / jump group 3 / end")
	if err != nil {
		t.Fatal(err)
	}
	attr, pattern, actions, err := nicFlow(&c.Rule)
	if err != nil {
		t.Fatal(err)
	}
	if attr != (dpdk.FlowAttr{Group: 2, Priority: 1, Ingress: true}) {
		t.Errorf("attr %+v", attr)
	}
	want := []dpdk.FlowItem{
		{Type: dpdk.FlowItemEth},
		{Type: dpdk.FlowItemVLAN, Spec: dpdk.FlowVLAN{TCI: 0x6064}, Mask: dpdk.FlowVLAN{TCI: 0xffff}},
		{Type: dpdk.FlowItemIPv4, Spec: dpdk.FlowIPv4{Src: [4]byte{10, 0, 0, 1}}, Mask: dpdk.FlowIPv4{Src: [4]byte{255, 255, 255, 255}}},
		{Type: dpdk.FlowItemUDP, Spec: dpdk.FlowUDP{DstPort: 4791}, Last: dpdk.FlowUDP{DstPort: 4792}, Mask: dpdk.FlowUDP{SrcPort: 0xffff, DstPort: 0xffff}},
	}
	if len(pattern) != len(want) {
		t.Fatalf("pattern %+v", pattern)
	}
	for i := range want {
		if pattern[i] != want[i] {
			t.Errorf("item %d: %+v, want %+v", i, pattern[i], want[i])
		}
	}
	if pattern[2].Last != nil {
		t.Errorf("ipv4 without a range has last %+v", pattern[2].Last)
	}
	wantActs := []dpdk.FlowAction{{Type: dpdk.FlowActionMark, ID: 7}, {Type: dpdk.FlowActionCount}, {Type: dpdk.FlowActionJump, Group: 3}}
	if len(actions) != len(wantActs) {
		t.Fatalf("actions %+v", actions)
	}
	for i := range wantActs {
		if actions[i].Type != wantActs[i].Type || actions[i].ID != wantActs[i].ID || actions[i].Group != wantActs[i].Group || actions[i].Queues != nil {
			t.Errorf("action %d: %+v, want %+v", i, actions[i], wantActs[i])
		}
	}
	// The same rule laid out by the binding from the description.
	s, err := dpdk.NewFlowSpec(attr, pattern, actions)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	if udp := s.Describe().Items[3]; !bytes.Equal(udp.Spec[:4], []byte{0, 0, 0x12, 0xb7}) || !bytes.Equal(udp.Last[:4], []byte{0, 0, 0x12, 0xb8}) {
		t.Errorf("udp spec % x last % x", udp.Spec, udp.Last)
	}
}

func TestCompileNotOffloadable(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / ib_bth opcode is 0x81 / end actions drop / end",
			"compile flow: pattern item 3 (ib_bth): not offloadable with DPDK 22.11 rte_flow: the InfiniBand BTH item (RTE_FLOW_ITEM_TYPE_IB_BTH) only exists from DPDK 23.07"},
		{"flow create 0 ingress pattern eth / end actions meter srtcm cir 1000000 cbs 1500 ebs 1500 / end",
			"compile flow: action 0 (meter): not offloadable with DPDK 22.11 rte_flow: an rte_flow meter action points at an rte_mtr meter object"},
	} {
		p, err := flowrule.Parse(c.line)
		if err != nil {
			t.Fatal(err)
		}
		s, err := compile(&p.Rule)
		if !errors.Is(err, ErrNotOffloadable) || s != nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrNotOffloadable: %s...", c.line, err, c.want)
		}
		t.Log(err)
	}
	if _, err := compile(nil); err == nil {
		t.Error("nil rule compiled")
	}
	// A match of another type than the item's.
	bad := flowrule.Rule{Items: []flowrule.Item{{Type: flowrule.ItemIPv4, UDP: &flowrule.Match[flowrule.UDPHeader]{}}}}
	if _, err := compile(&bad); err == nil || !strings.Contains(err.Error(), "not the item type's") {
		t.Errorf("ipv4 item with a udp match: %v", err)
	}
	bad = flowrule.Rule{Items: []flowrule.Item{{Type: flowrule.ItemUDP, UDP: &flowrule.Match[flowrule.UDPHeader]{},
		TCP: &flowrule.Match[flowrule.TCPHeader]{}}}}
	if _, err := compile(&bad); err == nil || !strings.Contains(err.Error(), "more than one header match") {
		t.Errorf("udp item with udp and tcp matches: %v", err)
	}
	bad = flowrule.Rule{Items: []flowrule.Item{{Type: flowrule.ItemType(200)}}}
	if _, err := compile(&bad); err == nil || !strings.Contains(err.Error(), "unknown item type") {
		t.Errorf("item type 200: %v", err)
	}
	bad = flowrule.Rule{Actions: []flowrule.Action{{Type: flowrule.ActionType(200)}}}
	if _, err := compile(&bad); err == nil || !strings.Contains(err.Error(), "unknown action type") {
		t.Errorf("action type 200: %v", err)
	}
	bad = flowrule.Rule{Actions: []flowrule.Action{{Type: flowrule.ActSetIPv4DSCP, DSCP: 64}}}
	if _, err := compile(&bad); err == nil {
		t.Error("dscp 64 compiled")
	}
}

// A rule 22.11 cannot express runs in software and says why, in the
// sentence the console shows.
func TestNotOffloadableRunsInSoftware(t *testing.T) {
	nic := newFake()
	m, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "p0", Driver: "net_tap"}, nic)
	where, why, err := m.Validate(0, mustRule(t, "ingress pattern eth / ipv4 / udp dst is 4791 / ib_bth opcode is 0x81 / end actions count / end"))
	if err != nil {
		t.Fatal(err)
	}
	want := "compile flow: pattern item 3 (ib_bth): not offloadable with DPDK 22.11 rte_flow: " +
		"the InfiniBand BTH item (RTE_FLOW_ITEM_TYPE_IB_BTH) only exists from DPDK 23.07; rule runs in software"
	if where != InSoftware || why != want {
		t.Errorf("ib_bth rule: %v %q, want sw %q", where, why, want)
	}
}
