package flowrule

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"roce-fwd/roce"
)

var macA = roce.MAC{0x02, 0, 0, 0, 0, 0x01}

func full6() roce.MAC { return roce.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} }

func ones16() (b [16]byte) {
	for i := range b {
		b[i] = 0xff
	}
	return
}

func v6(s string) [16]byte {
	var b [16]byte
	// Hand-rolled for the few fixed addresses used below.
	switch s {
	case "2001:db8::1":
		b = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	case "2001:db8::":
		b = [16]byte{0x20, 0x01, 0x0d, 0xb8}
	case "::ffff:1.2.3.4":
		b = [16]byte{10: 0xff, 11: 0xff, 12: 1, 13: 2, 14: 3, 15: 4}
	case "ffff:ffff::":
		b = [16]byte{0xff, 0xff, 0xff, 0xff}
	}
	return b
}

func u16p(v uint16) *uint16 { return &v }

// TestParseItemFields parses each item field in each value form and
// checks the resulting spec/mask/last against values worked out from the
// header layouts (TCI = PCP<<13|DEI<<12|VID, vtc_flow = TC<<20|flow,
// TOS = DSCP<<2|ECN).
func TestParseItemFields(t *testing.T) {
	ipv4Def := IPv4Header{Src: [4]byte{255, 255, 255, 255}, Dst: [4]byte{255, 255, 255, 255}}
	ipv6Def := IPv6Header{Src: ones16(), Dst: ones16()}
	cases := []struct {
		pattern string
		want    Item
	}{
		// eth
		{"eth dst is 02:00:00:00:00:01", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Dst: macA}, Mask: EthHeader{Dst: full6()}}}},
		{"eth src spec 02:00:00:00:AB:cd src mask ff:ff:ff:00:00:00", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Src: roce.MAC{2, 0, 0, 0, 0xab, 0xcd}}, Mask: EthHeader{Src: roce.MAC{0xff, 0xff, 0xff}}}}},
		{"eth src prefix 24", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Mask: EthHeader{Src: roce.MAC{0xff, 0xff, 0xff}}}}},
		{"eth type is 0x0800", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Type: 0x0800}, Mask: EthHeader{Type: 0xffff}}}},
		{"eth type is 34525", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Type: 0x86dd}, Mask: EthHeader{Type: 0xffff}}}},
		// spec without any mask: rte_flow_item_eth_mask (addresses only).
		{"eth type spec 0X86DD", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Type: 0x86dd}, Mask: EthHeader{Dst: full6(), Src: full6()}}}},
		{"eth has_vlan is 1", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{HasVLAN: true}, Mask: EthHeader{HasVLAN: true}}}},
		{"eth has_vlan spec 0 has_vlan mask 1", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Mask: EthHeader{HasVLAN: true}}}},
		{"eth type spec 0x8000 type mask 0xf000 type last 0x9000", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Type: 0x8000}, Mask: EthHeader{Type: 0xf000}, Last: &EthHeader{Type: 0x9000}}}},
		// Later assignments override earlier ones.
		{"eth type is 1 type is 2", Item{Type: ItemEth, Eth: &Match[EthHeader]{
			Spec: EthHeader{Type: 2}, Mask: EthHeader{Type: 0xffff}}}},
		// vlan
		{"vlan tci is 0x2064", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 0x2064}, Mask: VLANHeader{TCI: 0xffff}}}},
		{"vlan pcp is 3", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 3 << 13}, Mask: VLANHeader{TCI: 7 << 13}}}},
		{"vlan dei is 1", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 1 << 12}, Mask: VLANHeader{TCI: 1 << 12}}}},
		{"vlan vid is 100", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 100}, Mask: VLANHeader{TCI: 0x0fff}}}},
		{"vlan pcp is 5 vid is 4095", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 5<<13 | 4095}, Mask: VLANHeader{TCI: 0xefff}}}},
		{"vlan vid spec 0x64 vid mask 0xff0", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 100}, Mask: VLANHeader{TCI: 0x0ff0}}}},
		{"vlan vid spec 10", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{ // default mask: tci 0x0fff
			Spec: VLANHeader{TCI: 10}, Mask: VLANHeader{TCI: 0x0fff}}}},
		{"vlan vid is 10 vid last 20", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{TCI: 10}, Mask: VLANHeader{TCI: 0x0fff}, Last: &VLANHeader{TCI: 20}}}},
		{"vlan pcp prefix 1", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Mask: VLANHeader{TCI: 0x8000}}}},
		{"vlan inner_type is 0x86dd", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{InnerType: 0x86dd}, Mask: VLANHeader{InnerType: 0xffff}}}},
		{"vlan has_more_vlan is 1", Item{Type: ItemVLAN, VLAN: &Match[VLANHeader]{
			Spec: VLANHeader{HasMoreVLAN: true}, Mask: VLANHeader{HasMoreVLAN: true}}}},
		// ipv4
		{"ipv4 src is 10.0.0.1", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Src: [4]byte{10, 0, 0, 1}}, Mask: IPv4Header{Src: [4]byte{255, 255, 255, 255}}}}},
		{"ipv4 dst spec 192.168.0.0 dst prefix 16", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Dst: [4]byte{192, 168}}, Mask: IPv4Header{Dst: [4]byte{255, 255}}}}},
		{"ipv4 dst spec 192.168.0.0 dst mask 255.255.0.255", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Dst: [4]byte{192, 168}}, Mask: IPv4Header{Dst: [4]byte{255, 255, 0, 255}}}}},
		{"ipv4 src is 10.1.1.1 src prefix 24 src prefix 16", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Src: [4]byte{10, 1, 1, 1}}, Mask: IPv4Header{Src: [4]byte{255, 255}}}}},
		{"ipv4 src is 10.1.1.1 src last 10.2.3.4", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Src: [4]byte{10, 1, 1, 1}}, Mask: IPv4Header{Src: [4]byte{255, 255, 255, 255}},
			Last: &IPv4Header{Src: [4]byte{10, 2, 3, 4}}}}},
		{"ipv4 src is 10.1.1.1 src last 0.0.0.0", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{ // 0 disables the range
			Spec: IPv4Header{Src: [4]byte{10, 1, 1, 1}}, Mask: IPv4Header{Src: [4]byte{255, 255, 255, 255}}}}},
		{"ipv4 tos is 0x68", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TOS: 0x68}, Mask: IPv4Header{TOS: 0xff}}}},
		{"ipv4 dscp is 26", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TOS: 0x68}, Mask: IPv4Header{TOS: 0xfc}}}},
		{"ipv4 ecn is 3", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TOS: 3}, Mask: IPv4Header{TOS: 3}}}},
		{"ipv4 dscp is 46 ecn is 2", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TOS: 46<<2 | 2}, Mask: IPv4Header{TOS: 0xff}}}},
		{"ipv4 dscp spec 10 dscp last 20 dscp mask 63", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TOS: 40}, Mask: IPv4Header{TOS: 0xfc}, Last: &IPv4Header{TOS: 80}}}},
		{"ipv4 proto is 17", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{Proto: 17}, Mask: IPv4Header{Proto: 0xff}}}},
		{"ipv4 ttl is 0xff", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TTL: 255}, Mask: IPv4Header{TTL: 0xff}}}},
		{"ipv4 ttl spec 1", Item{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
			Spec: IPv4Header{TTL: 1}, Mask: ipv4Def}}},
		// ipv6
		{"ipv6 src is 2001:db8::1", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Src: v6("2001:db8::1")}, Mask: IPv6Header{Src: ones16()}}}},
		{"ipv6 dst is 2001:0db8:0000:0000:0000:0000:0000:0001", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Dst: v6("2001:db8::1")}, Mask: IPv6Header{Dst: ones16()}}}},
		{"ipv6 dst is ::ffff:1.2.3.4", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Dst: v6("::ffff:1.2.3.4")}, Mask: IPv6Header{Dst: ones16()}}}},
		{"ipv6 src spec 2001:db8:: src prefix 32", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Src: v6("2001:db8::")}, Mask: IPv6Header{Src: v6("ffff:ffff::")}}}},
		{"ipv6 src spec 2001:db8:: src mask ffff:ffff::", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Src: v6("2001:db8::")}, Mask: IPv6Header{Src: v6("ffff:ffff::")}}}},
		{"ipv6 tc is 0xb8", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{VTCFlow: 0xb8 << 20}, Mask: IPv6Header{VTCFlow: 0xff << 20}}}},
		{"ipv6 dscp is 46", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{VTCFlow: 46 << 22}, Mask: IPv6Header{VTCFlow: 0x3f << 22}}}},
		{"ipv6 ecn is 1", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{VTCFlow: 1 << 20}, Mask: IPv6Header{VTCFlow: 3 << 20}}}},
		{"ipv6 flow is 0x12345", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{VTCFlow: 0x12345}, Mask: IPv6Header{VTCFlow: 0xfffff}}}},
		{"ipv6 proto is 6 hop is 64", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{Proto: 6, HopLimit: 64}, Mask: IPv6Header{Proto: 0xff, HopLimit: 0xff}}}},
		{"ipv6 hop spec 2", Item{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
			Spec: IPv6Header{HopLimit: 2}, Mask: ipv6Def}}},
		// udp, tcp
		{"udp dst is 4791", Item{Type: ItemUDP, UDP: &Match[UDPHeader]{
			Spec: UDPHeader{DstPort: 4791}, Mask: UDPHeader{DstPort: 0xffff}}}},
		{"udp src spec 0x1234 src mask 0xff00", Item{Type: ItemUDP, UDP: &Match[UDPHeader]{
			Spec: UDPHeader{SrcPort: 0x1234}, Mask: UDPHeader{SrcPort: 0xff00}}}},
		{"udp src spec 1000 src last 2000", Item{Type: ItemUDP, UDP: &Match[UDPHeader]{ // default mask: both ports
			Spec: UDPHeader{SrcPort: 1000}, Mask: UDPHeader{0xffff, 0xffff}, Last: &UDPHeader{SrcPort: 2000}}}},
		{"tcp src is 22 dst is 65535", Item{Type: ItemTCP, TCP: &Match[TCPHeader]{
			Spec: TCPHeader{22, 65535}, Mask: TCPHeader{0xffff, 0xffff}}}},
		{"tcp dst prefix 6", Item{Type: ItemTCP, TCP: &Match[TCPHeader]{
			Mask: TCPHeader{DstPort: 0xfc00}}}},
		// ib_bth
		{"ib_bth opcode is 0x81", Item{Type: ItemIBBTH, BTH: &Match[BTHHeader]{
			Spec: BTHHeader{Opcode: 0x81}, Mask: BTHHeader{Opcode: 0xff}}}},
		{"ib_bth dst_qp is 0x123456", Item{Type: ItemIBBTH, BTH: &Match[BTHHeader]{
			Spec: BTHHeader{DestQP: 0x123456}, Mask: BTHHeader{DestQP: 0xffffff}}}},
		{"ib_bth dst_qp spec 5", Item{Type: ItemIBBTH, BTH: &Match[BTHHeader]{
			Spec: BTHHeader{DestQP: 5}, Mask: BTHHeader{Opcode: 0xff, DestQP: 0xffffff}}}},
		// Items without an effective field are NULL spec.
		{"eth", Item{Type: ItemEth}},
		{"udp src mask 0", Item{Type: ItemUDP}},
	}
	for _, c := range cases {
		line := "flow create 0 ingress pattern " + c.pattern + " / end actions drop / end"
		cmd, err := Parse(line)
		if err != nil {
			t.Errorf("%s: %v", c.pattern, err)
			continue
		}
		if len(cmd.Rule.Items) != 1 || !reflect.DeepEqual(cmd.Rule.Items[0], c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.pattern, fmtItems(cmd.Rule.Items), fmtItems([]Item{c.want}))
		}
	}
}

func fmtItems(items []Item) string {
	var s []string
	for _, it := range items {
		spec, mask, last, hasLast, ok := it.images()
		d := itemDescs[it.Type]
		if !ok || d == nil {
			s = append(s, it.Type.String()+"(nil)")
			continue
		}
		n := d.size
		str := it.Type.String() + " spec " + hexb(spec[:n]) + " mask " + hexb(mask[:n])
		if hasLast {
			str += " last " + hexb(last[:n])
		}
		s = append(s, str)
	}
	return strings.Join(s, "; ")
}

func hexb(b []byte) string {
	const h = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, h[c>>4], h[c&15])
	}
	return string(out)
}

func TestParseCommands(t *testing.T) {
	cases := []struct {
		line string
		want Command
	}{
		{"flow list 0", Command{Kind: CmdList, Port: "0"}},
		{"flow list eth1 group 1 group 0x2", Command{Kind: CmdList, Port: "eth1", Groups: []uint32{1, 2}}},
		{"flow query 3 17 count", Command{Kind: CmdQuery, Port: "3", Rules: []uint32{17}}},
		{"flow destroy 0", Command{Kind: CmdDestroy, Port: "0"}},
		{"flow destroy 0 rule 1 rule 4294967295", Command{Kind: CmdDestroy, Port: "0", Rules: []uint32{1, 4294967295}}},
		{"  flow   flush\t0 ", Command{Kind: CmdFlush, Port: "0"}},
		{"flow validate 1 pattern end actions end", Command{Kind: CmdValidate, Port: "1"}},
		{"flow create 0 group 42 group 4 priority 3 ingress egress transfer pattern end actions end",
			Command{Kind: CmdCreate, Port: "0", Rule: Rule{Group: 4, Priority: 3, Ingress: true, Egress: true, Transfer: true}}},
		{"flow create 0 ingress pattern end actions queue / mark / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActQueue}, {Type: ActMark}}}}},
		{"flow create 0 ingress pattern end actions queue index 7 / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActQueue, Index: 7}}}}},
		{"flow create 0 ingress pattern end actions rss queues 0 1 3 end / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActRSS, Queues: []uint16{0, 1, 3}}}}}},
		{"flow create 0 ingress pattern end actions rss / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActRSS}}}}},
		{"flow create 0 ingress pattern end actions mark id 0xdeadbeef / flag / count / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActMark, ID: 0xdeadbeef}, {Type: ActFlag}, {Type: ActCount}}}}},
		{"flow create 0 ingress pattern end actions jump group 3 / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActJump, Group: 3}}}}},
		{"flow create 0 ingress pattern ipv4 / end actions set_ipv4_dscp dscp_value 26 / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Items: []Item{{Type: ItemIPv4}}, Actions: []Action{{Type: ActSetIPv4DSCP, DSCP: 26}}}}},
		{"flow create 0 ingress pattern ipv6 / end actions set_ipv6_dscp dscp 63 / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Items: []Item{{Type: ItemIPv6}}, Actions: []Action{{Type: ActSetIPv6DSCP, DSCP: 63}}}}},
		{"flow create 0 ingress pattern end actions meter srtcm cir 125000000 cbs 65536 ebs 0 / end", Command{Kind: CmdCreate, Port: "0",
			Rule: Rule{Ingress: true, Actions: []Action{{Type: ActMeter, Meter: &Meter{
				Algorithm: SrTCM, CIR: 125000000, CBS: 65536, Red: ColorAction{Kind: ColorDrop}}}}}}},
		{"flow create 0 ingress pattern end actions meter trtcm red pass id 9 pbs 2000 cbs 1000 pir 20 cir 10 yellow mark 5 green drop / drop / end",
			Command{Kind: CmdCreate, Port: "0", Rule: Rule{Ingress: true, Actions: []Action{{Type: ActMeter, Meter: &Meter{
				ID: 9, Algorithm: TrTCM, CIR: 10, PIR: 20, CBS: 1000, PBS: 2000,
				Green: ColorAction{Kind: ColorDrop}, Yellow: ColorAction{Kind: ColorMark, Mark: 5}}}, {Type: ActDrop}}}}},
	}
	for _, c := range cases {
		got, err := Parse(c.line)
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.line, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const pre = "flow create 0 ingress pattern "
	const act = " / end actions drop / end"
	cases := []struct {
		line, msg string
		pos       int // index of the token blamed; -1 for the rule as a whole
	}{
		{"", `expected "flow"`, 0},
		{"flaw create 0", `unknown command "flaw"`, 0},
		{"flow", "expected a flow command", 1},
		{"flow make 0", `unknown flow command "make"`, 1},
		{"flow create", "expected a port id or name", 2},
		{"flow create 0 ingres pattern end actions end", `unknown attribute "ingres"`, 3},
		{"flow create 0 group x pattern end actions end", `group id after "group": "x" is not a number`, 4},
		{"flow create 0 group 4294967296 pattern end actions end", "above the maximum 4294967295", 4},
		{"flow create 0 priority -1 pattern end actions end", `"-1" is not a number`, 4},
		{pre + "ipv5" + act, `unknown item "ipv5" (items: eth, vlan, ipv4, ipv6, udp, tcp, ib_bth, end)`, 5},
		{pre + "ipv4 dsp is 3" + act, `item ipv4: unknown field "dsp" (fields: src, dst, tos, dscp, ecn, proto, ttl)`, 6},
		{pre + "ipv6 dsp is 3" + act, `item ipv6: unknown field "dsp" (fields: src, dst, tc, dscp, ecn, flow, proto, hop)`, 6},
		{pre + "ipv4 src 1.2.3.4" + act, `field src: expected is, spec, mask, last or prefix, got "1.2.3.4"`, 7},
		{pre + "ipv4 src is 1.2.3" + act, `field src: "1.2.3" is not an IPv4 address`, 8},
		{pre + "ipv4 src is ::1" + act, `"::1" is not an IPv4 address`, 8},
		{pre + "ipv6 src is 1.2.3.4" + act, `"1.2.3.4" is not an IPv6 address`, 8},
		{pre + "ipv6 src is fe80::1%eth0" + act, `is not an IPv6 address`, 8},
		{pre + "eth dst is 00:11:22:33:44" + act, `is not a MAC address`, 8},
		{pre + "eth dst is 00-11-22-33-44-55" + act, `is not a MAC address`, 8},
		{pre + "eth dst is 0g:11:22:33:44:55" + act, `is not a MAC address`, 8},
		{pre + "udp dst is 65536" + act, "item udp: field dst: a value: 65536 is above the maximum 65535", 8},
		{pre + "vlan pcp is 8" + act, "above the maximum 7", 8},
		{pre + "ipv4 dscp is 64" + act, "above the maximum 63", 8},
		{pre + "eth has_vlan is 2" + act, "above the maximum 1", 8},
		{pre + "ib_bth dst_qp is 0x1000000" + act, "above the maximum 16777215", 8},
		{pre + "udp dst is 010" + act, "leading zero", 8},
		{pre + "udp dst is abc" + act, `"abc" is not a number`, 8},
		{pre + "udp dst is 0x" + act, `"0x" is not a number`, 8},
		{pre + "udp dst is 0xg1" + act, "is not a number", 8},
		{pre + "udp dst is 99999999999999999999999" + act, "too large", 8},
		{pre + "ipv4 src prefix 33" + act, "a prefix length: 33 is above the maximum 32", 8},
		{pre + "ipv6 src prefix 129" + act, "above the maximum 128", 8},
		{pre + "vlan vid prefix 13" + act, "above the maximum 12", 8},
		{pre + "eth", `unexpected end of command, expected a field of eth or "/"`, 6},
		{pre + "eth dst", "expected is, spec, mask, last or prefix", 7},
		{pre + "eth dst is", "expected item eth: field dst: a MAC address", 8},
		{pre + "eth / end drop / end", `expected "actions"`, 8},
		{pre + "end actions dorp / end", `unknown action "dorp"`, 7},
		{pre + "end actions queue idx 3 / end", `action queue: unknown argument "idx" (arguments: index;`, 8},
		{pre + "end actions queue index 65536 / end", "above the maximum 65535", 9},
		{pre + "end actions rss queues 1 x end / end", `"x" is not a number`, 10},
		{pre + "end actions rss queues 1", `expected a queue index or "end"`, 10},
		{pre + "end actions rss types ipv4 end / end", `unknown argument "types"`, 8},
		{pre + "end actions mark id -3 / end", "is not a number", 9},
		{pre + "end actions jump group / end", `"/" is not a number`, 9},
		{pre + "ipv4 / end actions set_ipv4_dscp dscp_value 64 / end", "above the maximum 63", 11},
		{pre + "end actions drop", `expected an argument of drop or "/"`, 8},
		{pre + "end actions meter / end", "action meter: unknown algorithm", 8},
		{pre + "end actions meter mtr_id 3 / end", `"mtr_id" refers to a meter made elsewhere`, 8},
		{pre + "end actions meter srtcm cir 100 / end", "missing cbs, ebs", 11},
		{pre + "end actions meter trtcm cir 1 cbs 1 / end", "missing pir, pbs", 13},
		{pre + "end actions meter srtcm pir 5 / end", `action meter srtcm: unknown argument "pir"`, 9},
		{pre + "end actions meter srtcm cir 1 cbs 1 ebs 1 green blue / end", `unknown colour action "blue"`, 16},
		{pre + "end actions end extra", `unexpected "extra" after the end of the command`, 8},
		{"flow query 0 1 age", `only "count"`, 4},
		{"flow query 0 x count", `"x" is not a number`, 3},
		{"flow destroy 0 rule x", `"x" is not a number`, 4},
		{"flow destroy 0 rules 1", `expected "rule"`, 3},
		{"flow list 0 grp 1", `expected "group"`, 3},
		{"flow flush 0 1", `unexpected "1"`, 3},
		// Validation: the rule as a whole.
		{pre + "udp / ipv4" + act, "item ipv4 cannot follow item udp", -1},
		{pre + "tcp / ib_bth" + act, "item ib_bth cannot follow item tcp", -1},
		{pre + "ipv4 / ipv6" + act, "item ipv6 cannot follow item ipv4", -1},
		{pre + "eth / eth" + act, "item eth cannot follow item eth", -1},
		{pre + "vlan / vlan / vlan" + act, "at most two vlan items", -1},
		{pre + "udp dst spec 200 dst last 100" + act, "item udp: field dst: last is below spec", -1},
		{pre + "end actions drop / queue index 1 / end", "actions drop and queue both decide", -1},
		{pre + "end actions count / count / end", "action count given twice", -1},
		{"flow create 0 group 2 pattern end actions jump group 2 / end", "the rule's own group", -1},
		{pre + "ipv6 / end actions set_ipv4_dscp dscp_value 1 / end", "needs an ipv4 item", -1},
		{pre + "end actions meter trtcm cir 2000 pir 1000 cbs 1 pbs 1 / end", "pir 1000 is below cir 2000", -1},
		{pre + "end actions meter srtcm cir 1 cbs 0 ebs 0 / end", "cbs or ebs above 0", -1},
		{pre + "end actions meter srtcm cir 1 cbs 8589934593 ebs 0 / end", "burst sizes are limited", -1},
	}
	for _, c := range cases {
		_, err := Parse(c.line)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want a ParseError", c.line, err)
			continue
		}
		if !strings.Contains(pe.Error(), c.msg) {
			t.Errorf("%q:\n got %q\nwant it to contain %q", c.line, pe.Error(), c.msg)
		}
		if pe.Pos != c.pos {
			t.Errorf("%q: error at token %d (%q), want %d", c.line, pe.Pos, pe.Token, c.pos)
		}
	}
}

func TestValidateGoRules(t *testing.T) {
	cases := []struct {
		r   Rule
		msg string
	}{
		{Rule{Items: []Item{{Type: ItemIPv6, IPv6: &Match[IPv6Header]{Mask: IPv6Header{VTCFlow: 0xf0000000}}}}}, "version bits"},
		{Rule{Items: []Item{{Type: ItemIBBTH, BTH: &Match[BTHHeader]{Spec: BTHHeader{DestQP: 1 << 24}}}}}, "24 bits"},
		{Rule{Items: []Item{{Type: ItemEth, IPv4: &Match[IPv4Header]{}}}}, "another item type"},
		{Rule{Items: []Item{{Type: 99}}}, "unknown item type"},
		{Rule{Actions: []Action{{Type: ActMeter}}}, "no meter parameters"},
		{Rule{Actions: []Action{{Type: ActDrop, Meter: &Meter{}}}}, "Meter set on a non-meter action"},
		{Rule{Actions: []Action{{Type: ActRSS, Queues: make([]uint16, 129)}}}, "more than 128 queues"},
		{Rule{Actions: []Action{{Type: ActMeter, Meter: &Meter{Algorithm: SrTCM, CBS: 1, Green: ColorAction{Kind: ColorDrop, Mark: 3}}}}}, "not mark"},
	}
	for _, c := range cases {
		err := c.r.Validate()
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: got %v, want %q", c.r, err, c.msg)
		}
	}
}

// roundTripRules covers every item, field shape (is, spec+mask, prefix,
// range) and action.
func roundTripRules() []Rule {
	last := func(h UDPHeader) *UDPHeader { return &h }
	return []Rule{
		{},
		{Ingress: true, Group: 7, Priority: 9, Egress: true, Transfer: true},
		{Ingress: true, Items: []Item{
			{Type: ItemEth, Eth: &Match[EthHeader]{Spec: EthHeader{Dst: macA, Type: 0x8100, HasVLAN: true},
				Mask: EthHeader{Dst: full6(), Src: roce.MAC{0xff}, Type: 0xffff, HasVLAN: true}}},
			{Type: ItemVLAN, VLAN: &Match[VLANHeader]{Spec: VLANHeader{TCI: 0x3064, InnerType: 0x88a8, HasMoreVLAN: true},
				Mask: VLANHeader{TCI: 0xffff, InnerType: 0xffff, HasMoreVLAN: true}}},
			{Type: ItemVLAN, VLAN: &Match[VLANHeader]{Spec: VLANHeader{TCI: 5}, Mask: VLANHeader{TCI: 0x0ff7},
				Last: &VLANHeader{TCI: 0x0ff0}}},
			{Type: ItemIPv4, IPv4: &Match[IPv4Header]{
				Spec: IPv4Header{TOS: 0x6a, TTL: 3, Proto: 17, Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 0}},
				Mask: IPv4Header{TOS: 0xfc, TTL: 0xff, Proto: 0xff, Src: [4]byte{255, 255, 255, 255}, Dst: [4]byte{255, 0, 255, 0}},
				Last: &IPv4Header{TTL: 9, Src: [4]byte{10, 0, 0, 9}}}},
			{Type: ItemUDP, UDP: &Match[UDPHeader]{Spec: UDPHeader{DstPort: 4791, SrcPort: 1}, Mask: UDPHeader{0xf0f0, 0xffff},
				Last: last(UDPHeader{SrcPort: 0x7000})}},
			{Type: ItemIBBTH, BTH: &Match[BTHHeader]{Spec: BTHHeader{Opcode: 0x81, DestQP: 0xabcdef},
				Mask: BTHHeader{Opcode: 0xff, DestQP: 0xff0000}}},
		}, Actions: []Action{{Type: ActMark, ID: 1}, {Type: ActQueue, Index: 3}, {Type: ActCount}, {Type: ActFlag},
			{Type: ActSetIPv4DSCP, DSCP: 46}}},
		{Ingress: true, Items: []Item{
			{Type: ItemEth},
			{Type: ItemIPv6, IPv6: &Match[IPv6Header]{
				Spec: IPv6Header{VTCFlow: 0x0b812345, Proto: 6, HopLimit: 1, Src: v6("2001:db8::1"), Dst: v6("::ffff:1.2.3.4")},
				Mask: IPv6Header{VTCFlow: 0x0fcfffff, Proto: 0xff, Src: v6("ffff:ffff::"), Dst: ones16()}}},
			{Type: ItemTCP, TCP: &Match[TCPHeader]{Mask: TCPHeader{SrcPort: 0xffff}}},
		}, Actions: []Action{{Type: ActSetIPv6DSCP}, {Type: ActRSS, Queues: []uint16{4, 0, 65535}},
			{Type: ActMeter, Meter: &Meter{ID: 4, Algorithm: TrTCM, CIR: 1e9, PIR: 2e9, CBS: 1 << 20, PBS: 1 << 21,
				Green: ColorAction{Kind: ColorMark, Mark: 1}, Yellow: ColorAction{Kind: ColorMark, Mark: 2}, Red: ColorAction{Kind: ColorDrop}}}}},
		{Group: 1, Items: []Item{{Type: ItemUDP}, {Type: ItemIBBTH}},
			Actions: []Action{{Type: ActJump, Group: 2}, {Type: ActMeter, Meter: &Meter{Algorithm: SrTCM, CIR: 0, CBS: 1,
				Yellow: ColorAction{Kind: ColorDrop}}}}},
		{Items: []Item{{Type: ItemIPv4, IPv4: &Match[IPv4Header]{Spec: IPv4Header{Src: [4]byte{1, 2, 3, 4}}}}}}, // spec without mask
		{Actions: []Action{{Type: ActDrop}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for i, r := range roundTripRules() {
		if err := r.Validate(); err != nil {
			t.Fatalf("rule %d: %v", i, err)
		}
		line := Command{Kind: CmdCreate, Port: "0", Rule: r}.String()
		c, err := Parse(line)
		if err != nil {
			t.Errorf("rule %d: %s: %v", i, line, err)
			continue
		}
		if !reflect.DeepEqual(c.Rule, r) {
			t.Errorf("rule %d: %s\n got %s\nwant %s", i, line, fmtItems(c.Rule.Items), fmtItems(r.Items))
		}
		// Without meters the testpmd line is the same line.
		hasMeter := false
		for _, a := range r.Actions {
			hasMeter = hasMeter || a.Type == ActMeter
		}
		if tp := r.Testpmd("0"); !hasMeter && (len(tp) != 1 || tp[0] != line) {
			t.Errorf("rule %d: Testpmd %q, want [%q]", i, tp, line)
		}
	}
	for _, line := range []string{"flow list 0 group 1 group 2", "flow query p0 3 count", "flow destroy 0 rule 1 rule 2", "flow flush 0", "flow destroy 0"} {
		c, err := Parse(line)
		if err != nil || c.String() != line {
			t.Errorf("%q: %v, printed %q", line, err, c.String())
		}
	}
}

// TestTestpmdLines checks the printed forms against testpmd's documented
// syntax.
func TestTestpmdLines(t *testing.T) {
	c, err := Parse("flow create 0 priority 1 ingress pattern eth / ipv4 dscp is 26 / udp dst is 4791 / end " +
		"actions meter srtcm id 7 cir 1250000 cbs 20000 ebs 10000 yellow mark 9 / count / end")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"add port meter profile srtcm_rfc2697 1 7 1250000 20000 10000 0",
		"add port meter policy 1 7 g_actions end y_actions mark id 9 / end r_actions drop / end",
		"create port meter 1 7 7 7 yes 0xffff 0 g 0",
		"flow create 1 priority 1 ingress pattern eth / ipv4 tos spec 0x68 tos mask 0xfc / udp dst is 4791 / end actions meter mtr_id 7 / count / end",
	}
	if got := c.Rule.Testpmd("1"); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c, err = Parse("flow create 0 ingress pattern vlan pcp is 3 vid spec 100 vid mask 0xff0 / ipv6 dscp is 46 / end actions meter trtcm cir 10 pir 20 cbs 30 pbs 40 green drop / end")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"add port meter profile trtcm_rfc2698 0 0 10 20 30 40 0",
		"add port meter policy 0 0 g_actions drop / end y_actions end r_actions drop / end",
		"create port meter 0 0 0 0 yes 0xffff 0 g 0",
		"flow create 0 ingress pattern vlan pcp is 3 vid spec 100 vid mask 0xff0 / ipv6 tc spec 0xb8 tc mask 0xfc / end actions meter mtr_id 0 / end",
	}
	if got := c.Rule.Testpmd("0"); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestComplete(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{"", []string{"flow"}},
		{"flow", subcommands},
		{"flow create", nil}, // a port
		{"flow create 0", attrWords},
		{"flow create 0 group", nil},
		{"flow create 0 group 1", attrWords},
		{"flow create 0 pattern", itemWords},
		{"flow create 0 pattern eth", []string{"dst", "src", "type", "has_vlan", "/"}},
		{"flow create 0 pattern vlan", []string{"tci", "pcp", "dei", "vid", "inner_type", "has_more_vlan", "/"}},
		{"flow create 0 pattern ib_bth", []string{"opcode", "dst_qp", "/"}},
		{"flow create 0 pattern ipv4 src", opWords},
		{"flow create 0 pattern ipv4 src is", nil},
		{"flow create 0 pattern ipv4 src is 1.1.1.1", []string{"src", "dst", "tos", "dscp", "ecn", "proto", "ttl", "/"}},
		{"flow create 0 pattern ipv4 /", itemWords},
		{"flow create 0 pattern end", []string{"actions"}},
		{"flow create 0 pattern end actions", actionWords},
		{"flow create 0 pattern end actions queue", []string{"index", "/"}},
		{"flow create 0 pattern end actions rss queues 1", []string{"end"}},
		{"flow create 0 pattern end actions set_ipv4_dscp", []string{"dscp_value", "/"}},
		{"flow create 0 pattern end actions meter", []string{"srtcm", "trtcm"}},
		{"flow create 0 pattern end actions meter trtcm", trtcmParams},
		{"flow create 0 pattern end actions meter srtcm red", []string{"pass", "drop", "mark"}},
		{"flow create 0 pattern end actions drop /", actionWords},
		{"flow create 0 pattern end actions end", nil},
		{"flow destroy 0", []string{"rule"}},
		{"flow destroy 0 rule 1", []string{"rule"}},
		{"flow list 0", []string{"group"}},
		{"flow query 0 1", []string{"count"}},
		{"flow flush 0", nil},
		{"flow create 0 pattern bogus", nil}, // does not parse
	}
	for _, c := range cases {
		got := Complete(strings.Fields(c.line))
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.line, got, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, r := range roundTripRules() {
		f.Add(Command{Kind: CmdCreate, Port: "0", Rule: r}.String())
	}
	for _, s := range []string{
		"flow create 0 ingress pattern eth type spec 0x8100 / vlan vid is 5 / ipv4 dscp spec 3 / udp src last 9 / end actions drop / end",
		"flow validate 1 pattern ipv6 tc spec 1 flow mask 0x3 dscp last 4 / tcp / end actions rss queues 1 end / end",
		"flow list 0 group 1", "flow destroy 0 rule 1", "flow query 0 1 count", "flow flush x",
		"flow create 0 pattern ib_bth dst_qp prefix 3 / end actions meter srtcm cir 1 cbs 2 ebs 3 green mark 4 / end",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := Parse(line)
		Complete(strings.Fields(line))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: error %v is not a ParseError", line, err)
			}
			return
		}
		s := c.String()
		c2, err := Parse(s)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", line, s, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("%q printed as %q parses differently:\n%#v\n%#v", line, s, c, c2)
		}
		if s2 := c2.String(); s2 != s {
			t.Fatalf("printing is not stable: %q then %q", s, s2)
		}
		if c.Kind == CmdCreate || c.Kind == CmdValidate {
			if _, err := Compile([]Rule{c.Rule}); err != nil && !strings.Contains(err.Error(), "jump") {
				t.Fatalf("%q parses but does not compile: %v", line, err)
			}
		}
	})
}
