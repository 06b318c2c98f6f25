package dpdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// DPDK 22.11's enum values (rte_flow.h), written out by hand.
const (
	itEnd, itEth, itVLAN, itIPv4, itIPv6, itUDP, itTCP = 0, 6, 7, 8, 9, 11, 12

	atEnd, atJump, atMark, atFlag, atQueue, atDrop, atCount, atRSS = 0, 3, 4, 5, 6, 7, 8, 9
	atSetIPv4DSCP, atSetIPv6DSCP                                   = 45, 46
)

// newSpec lays out a rule, failing the test on error; the spec is freed
// when the test ends.
func newSpec(t *testing.T, attr FlowAttr, pattern []FlowItem, actions ...FlowAction) *FlowSpec {
	t.Helper()
	s, err := NewFlowSpec(attr, pattern, actions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Free)
	return s
}

// describe lays out a rule and reads it back.
func describe(t *testing.T, attr FlowAttr, pattern []FlowItem, actions ...FlowAction) FlowDescription {
	t.Helper()
	return newSpec(t, attr, pattern, actions...).Describe()
}

// Pieces of the rules below, as testpmd's grammar would give them: a
// field matched with "is" has a spec and a mask of all ones for that field.
var (
	ingress = FlowAttr{Ingress: true}
	anyEth  = FlowItem{Type: FlowItemEth}
	anyIPv4 = FlowItem{Type: FlowItemIPv4}
)

func udpDst(port uint16) FlowItem {
	return FlowItem{Type: FlowItemUDP, Spec: FlowUDP{DstPort: port}, Mask: FlowUDP{DstPort: 0xffff}}
}

// roceV4 is "eth / ipv4 / udp dst is 4791".
func roceV4() []FlowItem { return []FlowItem{anyEth, anyIPv4, udpDst(4791)} }

func queue(i uint16) FlowAction { return FlowAction{Type: FlowActionQueue, Index: i} }

var drop = FlowAction{Type: FlowActionDrop}

// zeroExcept reports whether b is zero outside [from, to).
func zeroExcept(b []byte, from, to int) bool {
	for i, v := range b {
		if (i < from || i >= to) && v != 0 {
			return false
		}
	}
	return true
}

func TestFlowTypeNumbers(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"item end", int(FlowItemEnd), itEnd}, {"item eth", int(FlowItemEth), itEth}, {"item vlan", int(FlowItemVLAN), itVLAN},
		{"item ipv4", int(FlowItemIPv4), itIPv4}, {"item ipv6", int(FlowItemIPv6), itIPv6}, {"item udp", int(FlowItemUDP), itUDP},
		{"item tcp", int(FlowItemTCP), itTCP},
		{"action end", int(FlowActionEnd), atEnd}, {"action jump", int(FlowActionJump), atJump}, {"action mark", int(FlowActionMark), atMark},
		{"action flag", int(FlowActionFlag), atFlag}, {"action queue", int(FlowActionQueue), atQueue}, {"action drop", int(FlowActionDrop), atDrop},
		{"action count", int(FlowActionCount), atCount}, {"action rss", int(FlowActionRSS), atRSS}, {"action meter", int(FlowActionMeter), 13},
		{"action set_ipv4_dscp", int(FlowActionSetIPv4DSCP), atSetIPv4DSCP}, {"action set_ipv6_dscp", int(FlowActionSetIPv6DSCP), atSetIPv6DSCP},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, rte_flow.h of 22.11 has %d", c.name, c.got, c.want)
		}
		// The names are testpmd's: what FlowError reports.
		var name string
		if kind, n, _ := strings.Cut(c.name, " "); kind == "item" {
			name = FlowItemType(c.want).String()
			if name != n {
				t.Errorf("item type %d is named %q, want %q", c.want, name, n)
			}
		} else if name = FlowActionType(c.want).String(); name != n {
			t.Errorf("action type %d is named %q, want %q", c.want, name, n)
		}
	}
	if got := FlowItemType(99).String(); got != "item-type-99" {
		t.Errorf("item type 99 is named %q", got)
	}
	if got := FlowActionType(99).String(); got != "action-type-99" {
		t.Errorf("action type 99 is named %q", got)
	}
}

func TestFlowSpecAttrAndShape(t *testing.T) {
	d := describe(t, FlowAttr{Group: 3, Priority: 7, Egress: true}, []FlowItem{anyEth}, drop)
	if d.Group != 3 || d.Priority != 7 || !d.Egress || d.Ingress || d.Transfer {
		t.Errorf("attr %+v, want group 3 priority 7 egress", d)
	}
	if len(d.Items) != 2 || d.Items[0].Type != itEth || d.Items[1].Type != itEnd {
		t.Fatalf("items %+v, want eth, end", d.Items)
	}
	// An item without spec, mask or last: NULL pointers.
	if d.Items[0].Spec != nil || d.Items[0].Mask != nil || d.Items[0].Last != nil {
		t.Errorf("eth without fields: %+v, want NULL spec/mask/last", d.Items[0])
	}
	if len(d.Actions) != 2 || d.Actions[0].Type != atDrop || d.Actions[0].Conf != nil || d.Actions[1].Type != atEnd {
		t.Errorf("actions %+v, want drop (no conf), end", d.Actions)
	}

	d = describe(t, FlowAttr{Ingress: true, Transfer: true}, nil)
	if !d.Ingress || !d.Transfer || d.Egress || d.Group != 0 || d.Priority != 0 {
		t.Errorf("attr %+v, want ingress transfer", d)
	}
	if len(d.Items) != 1 || d.Items[0].Type != itEnd || len(d.Actions) != 1 || d.Actions[0].Type != atEnd {
		t.Errorf("empty rule: items %+v actions %+v, want END only", d.Items, d.Actions)
	}
}

func TestFlowSpecIPv4UDP(t *testing.T) {
	ip := FlowItem{Type: FlowItemIPv4, Spec: FlowIPv4{Dst: [4]byte{10, 0, 0, 1}}, Mask: FlowIPv4{Dst: [4]byte{255, 255, 255, 255}}}
	d := describe(t, ingress, []FlowItem{anyEth, ip, udpDst(4791)}, queue(3))
	if len(d.Items) != 4 || d.Items[0].Type != itEth || d.Items[1].Type != itIPv4 || d.Items[2].Type != itUDP || d.Items[3].Type != itEnd {
		t.Fatalf("items %+v", d.Items)
	}
	ipd := d.Items[1]
	// struct rte_flow_item_ipv4 is struct rte_ipv4_hdr: the 20-byte header
	// as on the wire; dst_addr at offset 16.
	if len(ipd.Spec) != 20 || len(ipd.Mask) != 20 || ipd.Last != nil {
		t.Fatalf("ipv4 spec %d bytes, mask %d bytes, last %v", len(ipd.Spec), len(ipd.Mask), ipd.Last)
	}
	if got := binary.BigEndian.Uint32(ipd.Spec[16:]); got != 0x0a000001 || !zeroExcept(ipd.Spec, 16, 20) {
		t.Errorf("ipv4 spec % x, want dst_addr 0a 00 00 01 (big-endian) and nothing else", ipd.Spec)
	}
	if got := binary.BigEndian.Uint32(ipd.Mask[16:]); got != 0xffffffff || !zeroExcept(ipd.Mask, 16, 20) {
		t.Errorf("ipv4 mask % x, want dst_addr ff ff ff ff only", ipd.Mask)
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
	if q.Type != atQueue || q.Index != 3 || len(q.Conf) != 2 || binary.NativeEndian.Uint16(q.Conf) != 3 {
		t.Errorf("queue action %+v, want index 3 (host order)", q)
	}
}

func TestFlowSpecTOSAndRange(t *testing.T) {
	ip := FlowItem{Type: FlowItemIPv4, Spec: FlowIPv4{TOS: 26 << 2}, Mask: FlowIPv4{TOS: 0xfc}}
	udp := FlowItem{Type: FlowItemUDP, Spec: FlowUDP{SrcPort: 1000}, Last: FlowUDP{SrcPort: 2000},
		Mask: FlowUDP{SrcPort: 0xffff, DstPort: 0xffff}}
	d := describe(t, ingress, []FlowItem{anyEth, ip, udp}, drop)
	ipd := d.Items[1]
	// type_of_service is byte 1: DSCP 26 << 2 = 0x68, mask the six DSCP bits.
	if ipd.Spec[1] != 0x68 || !zeroExcept(ipd.Spec, 1, 2) || ipd.Mask[1] != 0xfc || !zeroExcept(ipd.Mask, 1, 2) {
		t.Errorf("ipv4 tos spec % x mask % x, want 0x68/0xfc", ipd.Spec, ipd.Mask)
	}
	ud := d.Items[2]
	if !bytes.Equal(ud.Spec[:4], []byte{0x03, 0xe8, 0, 0}) || ud.Last == nil || !bytes.Equal(ud.Last[:4], []byte{0x07, 0xd0, 0, 0}) {
		t.Errorf("udp spec % x last % x, want src_port 1000..2000 big-endian", ud.Spec, ud.Last)
	}
	if !bytes.Equal(ud.Mask[:4], []byte{0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("udp mask % x, want ffff ffff", ud.Mask)
	}
}

func TestFlowSpecEthVLANIPv6TCP(t *testing.T) {
	full6 := [16]byte{}
	for i := range full6 {
		full6[i] = 0xff
	}
	pattern := []FlowItem{
		{Type: FlowItemEth,
			Spec: FlowEth{Dst: [6]byte{2, 0, 0, 0, 0, 0xb}, Src: [6]byte{2, 0, 0, 0, 0, 0xa}, Type: 0x8100, HasVLAN: true},
			Mask: FlowEth{Dst: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Type: 0xffff, HasVLAN: true}},
		{Type: FlowItemVLAN,
			Spec: FlowVLAN{TCI: 0x6064, InnerType: 0x86dd, HasMoreVLAN: true},
			Mask: FlowVLAN{TCI: 0xffff, InnerType: 0xffff, HasMoreVLAN: true}},
		{Type: FlowItemIPv6,
			Spec: FlowIPv6{VTCFlow: 0xb8 << 20, Proto: 6, HopLimit: 64,
				Src: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, Dst: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}},
			Mask: FlowIPv6{VTCFlow: 0xff << 20, Proto: 0xff, HopLimit: 0xff, Src: full6, Dst: full6}},
		{Type: FlowItemTCP, Spec: FlowTCP{SrcPort: 22, DstPort: 65535}, Mask: FlowTCP{SrcPort: 0xffff, DstPort: 0xffff}},
	}
	d := describe(t, ingress, pattern, drop)
	if len(d.Items) != 5 {
		t.Fatalf("items %+v", d.Items)
	}
	eth := d.Items[0]
	// rte_flow_item_eth: dst(6) src(6) ether_type(2, big-endian), then the
	// has_vlan bitfield. Its uint32 storage unit is the one at offset 12
	// (x86-64 SysV ABI: a bitfield takes the next free bit of an aligned
	// unit of its type), whose bits 16..31 are still free: has_vlan is bit 0
	// of byte 14; reserved:31 no longer fits there and takes bytes 16..19.
	want := []byte{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 0x81, 0x00, 1, 0, 0, 0, 0, 0}
	if eth.Type != itEth || !bytes.Equal(eth.Spec, want) {
		t.Errorf("eth spec % x, want % x", eth.Spec, want)
	}
	wantMask := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0}
	if !bytes.Equal(eth.Mask, wantMask) {
		t.Errorf("eth mask % x, want % x", eth.Mask, wantMask)
	}
	vlan := d.Items[1]
	// rte_flow_item_vlan: vlan_tci, eth_proto (big-endian), then the uint32
	// holding has_more_vlan as bit 0.
	if vlan.Type != itVLAN || !bytes.Equal(vlan.Spec, []byte{0x60, 0x64, 0x86, 0xdd, 1, 0, 0, 0}) ||
		!bytes.Equal(vlan.Mask, []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0}) {
		t.Errorf("vlan spec % x mask % x", vlan.Spec, vlan.Mask)
	}
	ip6 := d.Items[2]
	// rte_flow_item_ipv6: the 40-byte header (vtc_flow, payload_len, proto,
	// hop_limits, src, dst) and a uint32 of extension-header flags.
	if ip6.Type != itIPv6 || len(ip6.Spec) != 44 {
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
	if tcp.Type != itTCP || len(tcp.Spec) != 20 || !bytes.Equal(tcp.Spec[:4], []byte{0, 22, 0xff, 0xff}) || !zeroExcept(tcp.Spec, 0, 4) {
		t.Errorf("tcp spec % x, want ports 22 and 65535 big-endian", tcp.Spec)
	}
	if !bytes.Equal(tcp.Mask[:4], []byte{0xff, 0xff, 0xff, 0xff}) || !zeroExcept(tcp.Mask, 0, 4) {
		t.Errorf("tcp mask % x, want both ports", tcp.Mask)
	}
}

// Spec, last and mask are separate pointers: each one given is laid out,
// each one left nil stays NULL.
func TestFlowSpecPointersApart(t *testing.T) {
	d := describe(t, ingress, []FlowItem{
		{Type: FlowItemUDP, Spec: FlowUDP{DstPort: 4791}},
		{Type: FlowItemTCP, Mask: FlowTCP{SrcPort: 0xff00}},
		{Type: FlowItemVLAN, Last: FlowVLAN{TCI: 0x0fff}},
	}, drop)
	udp, tcp, vlan := d.Items[0], d.Items[1], d.Items[2]
	if !bytes.Equal(udp.Spec, []byte{0, 0, 0x12, 0xb7, 0, 0, 0, 0}) || udp.Mask != nil || udp.Last != nil {
		t.Errorf("udp with a spec alone: %+v", udp)
	}
	if tcp.Spec != nil || tcp.Last != nil || len(tcp.Mask) != 20 || !bytes.Equal(tcp.Mask[:2], []byte{0xff, 0}) || !zeroExcept(tcp.Mask, 0, 1) {
		t.Errorf("tcp with a mask alone: %+v", tcp)
	}
	if vlan.Spec != nil || vlan.Mask != nil || !bytes.Equal(vlan.Last, []byte{0x0f, 0xff, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("vlan with a last alone: %+v", vlan)
	}
}

func TestFlowSpecActions(t *testing.T) {
	// Several fates in one list: the binding lays out whatever it gets and
	// leaves judging the rule to the PMD.
	d := describe(t, ingress, []FlowItem{anyEth},
		FlowAction{Type: FlowActionRSS, Queues: []uint16{0, 1}},
		FlowAction{Type: FlowActionMark, ID: 0x1234},
		FlowAction{Type: FlowActionFlag},
		FlowAction{Type: FlowActionCount},
		FlowAction{Type: FlowActionJump, Group: 2},
		FlowAction{Type: FlowActionSetIPv4DSCP, DSCP: 46},
		FlowAction{Type: FlowActionSetIPv6DSCP, DSCP: 10},
		FlowAction{Type: FlowActionCount, ID: 7},
		FlowAction{Type: FlowActionRSS},
	)
	if len(d.Actions) != 10 {
		t.Fatalf("actions %+v", d.Actions)
	}
	rss := d.Actions[0]
	if rss.Type != atRSS || len(rss.Conf) != 40 || rss.RSSFunc != 0 || rss.RSSLevel != 0 || rss.RSSTypes != 0 ||
		rss.RSSKeyLen != 0 || !rss.RSSKeyNil || len(rss.RSSQueues) != 2 || rss.RSSQueues[0] != 0 || rss.RSSQueues[1] != 1 {
		t.Errorf("rss %+v, want default func/level/types/key and queues [0 1]", rss)
	}
	if a := d.Actions[1]; a.Type != atMark || a.ID != 0x1234 || binary.NativeEndian.Uint32(a.Conf) != 0x1234 {
		t.Errorf("mark %+v", a)
	}
	if a := d.Actions[2]; a.Type != atFlag || a.Conf != nil {
		t.Errorf("flag %+v, want no conf", a)
	}
	if a := d.Actions[3]; a.Type != atCount || !bytes.Equal(a.Conf, []byte{0, 0, 0, 0}) {
		t.Errorf("count %+v, want conf with id 0", a)
	}
	if a := d.Actions[4]; a.Type != atJump || a.Group != 2 || binary.NativeEndian.Uint32(a.Conf) != 2 {
		t.Errorf("jump %+v", a)
	}
	if a := d.Actions[5]; a.Type != atSetIPv4DSCP || !bytes.Equal(a.Conf, []byte{46}) || a.DSCP != 46 {
		t.Errorf("set_ipv4_dscp %+v", a)
	}
	if a := d.Actions[6]; a.Type != atSetIPv6DSCP || !bytes.Equal(a.Conf, []byte{10}) {
		t.Errorf("set_ipv6_dscp %+v", a)
	}
	if a := d.Actions[7]; a.Type != atCount || a.ID != 7 || binary.NativeEndian.Uint32(a.Conf) != 7 {
		t.Errorf("count id 7: %+v", a)
	}
	if a := d.Actions[8]; a.Type != atRSS || a.RSSQueues != nil || len(a.Conf) != 40 {
		t.Errorf("rss without queues %+v, want an empty queue list", a)
	}
	if d.Actions[9].Type != atEnd {
		t.Errorf("last action %+v, want END", d.Actions[9])
	}
}

func TestNewFlowSpecRefuses(t *testing.T) {
	for _, c := range []struct {
		name    string
		pattern []FlowItem
		actions []FlowAction
		want    string
	}{
		{"spec of another item type", []FlowItem{{Type: FlowItemIPv4, Spec: FlowUDP{DstPort: 1}}}, nil,
			"pattern item 0 (ipv4): spec is a udp structure"},
		{"mask of another item type", []FlowItem{anyEth, {Type: FlowItemUDP, Mask: FlowTCP{}}}, nil,
			"pattern item 1 (udp): mask is a tcp structure"},
		{"last of another item type", []FlowItem{{Type: FlowItemEth, Last: FlowVLAN{}}}, nil,
			"pattern item 0 (eth): last is a vlan structure"},
		{"item type without a layout", []FlowItem{{Type: FlowItemType(40)}}, nil,
			"pattern item 0 (item-type-40): item type not supported"},
		{"END item", []FlowItem{anyEth, {Type: FlowItemEnd}}, nil, "pattern item 1 (end): END is appended"},
		{"dscp 64", nil, []FlowAction{{Type: FlowActionSetIPv4DSCP, DSCP: 64}},
			"action 0 (set_ipv4_dscp): dscp 64 does not fit in 6 bits"},
		{"meter", nil, []FlowAction{{Type: FlowActionCount}, {Type: FlowActionMeter}}, "action 1 (meter): an rte_flow meter action"},
		{"END action", nil, []FlowAction{{Type: FlowActionEnd}}, "action 0 (end): END is appended"},
		{"action type without a layout", nil, []FlowAction{{Type: FlowActionType(1000)}}, "action 0 (action-type-1000): action type not supported"},
	} {
		s, err := NewFlowSpec(ingress, c.pattern, c.actions)
		if err == nil || s != nil {
			s.Free()
			t.Errorf("%s: laid out, want an error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestFlowSpecFree(t *testing.T) {
	s := newSpec(t, ingress, []FlowItem{anyEth, anyIPv4}, queue(0))
	s.Free()
	s.Free()
	if d := s.Describe(); d.Items != nil || d.Actions != nil {
		t.Errorf("freed spec describes as %+v", d)
	}
	if err := Port(0).FlowValidate(s); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("validate with a freed spec: %v, want EINVAL", err)
	}
	if err := Port(0).FlowValidate(nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("validate with a nil spec: %v, want EINVAL", err)
	}
}

// writeEmptyPcap writes a pcap file header and no packet.
func writeEmptyPcap(t *testing.T, path string) {
	t.Helper()
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4) // microsecond timestamps
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535) // snaplen
	binary.LittleEndian.PutUint32(h[20:], 1)     // Ethernet
	if err := os.WriteFile(path, h, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flowPort probes devargs and configures one rx and one tx queue, and
// leaves the port stopped. The port is stopped and closed when the test ends.
func flowPort(t *testing.T, devargs string, pool *Mempool) Port {
	t.Helper()
	p, err := ProbeDevice(devargs)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, p)
	setupQueues(t, p, pool)
	return p
}

func closeAtEnd(t *testing.T, p Port) {
	t.Cleanup(func() {
		_ = p.Stop() // may be stopped already
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
}

// setupQueues configures one rx and one tx queue of 256 descriptors.
func setupQueues(t *testing.T, p Port, pool *Mempool) {
	t.Helper()
	if err := p.Configure(PortConf{RxQueues: 1, TxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.RxQueueSetup(0, 256, p.Socket(), pool); err != nil {
		t.Fatal(err)
	}
	if err := p.TxQueueSetup(0, 256, p.Socket()); err != nil {
		t.Fatal(err)
	}
}

// wantFlowErr checks that err is a *FlowError with errno want that also
// unwraps to a *dpdk.Error.
func wantFlowErr(t *testing.T, what string, err error, want syscall.Errno) *FlowError {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want %v", what, want)
	}
	var fe *FlowError
	if !errors.As(err, &fe) {
		t.Fatalf("%s: %T %v is not a *FlowError", what, err, err)
	}
	var de *Error
	if !errors.Is(err, want) || fe.Errno != int(want) || !errors.As(err, &de) || de.Errno != int(want) {
		t.Fatalf("%s: %v (errno %d), want %v (errno %d)", what, err, fe.Errno, want, int(want))
	}
	t.Logf("%s: %v", what, err)
	return fe
}

// net_null, net_ring and net_pcap have no flow engine: every rte_flow call
// answers ENOSYS (rte_flow_ops_get), template API included.
func TestFlowNoEngine(t *testing.T) {
	pool, err := NewPktmbufPool("t_flow_none", 1023, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	writeEmptyPcap(t, in)
	for _, c := range []struct{ devargs, driver string }{
		{"net_null_flow0", "net_null"},
		{"net_ring_flow0", "net_ring"},
		{"net_pcap_flow0,rx_pcap=" + in + ",tx_pcap=" + filepath.Join(dir, "out.pcap"), "net_pcap"},
	} {
		t.Run(c.driver, func(t *testing.T) {
			p := flowPort(t, c.devargs, pool)
			s := newSpec(t, ingress, roceV4(), queue(0))

			_, err := p.FlowInfo()
			fe := wantFlowErr(t, "flow info", err, syscall.ENOSYS)
			if fe.Driver != c.driver || !strings.Contains(err.Error(), c.driver) || fe.Item != -1 || fe.Action != -1 {
				t.Errorf("flow info error %#v lacks the driver or points into a rule", fe)
			}
			fe = wantFlowErr(t, "flow validate", p.FlowValidate(s), syscall.ENOSYS)
			if fe.Type != FlowErrUnspecified || !strings.Contains(err.Error(), "not implement") {
				t.Errorf("validate error %q (type %v), want an unspecified ENOSYS saying it is not implemented", fe, fe.Type)
			}
			// Configured and stopped, as rte_flow_configure wants it.
			wantFlowErr(t, "flow configure", p.FlowConfigure(1, 64), syscall.ENOSYS)
			_, err = p.FlowTableCreate(s, 16)
			wantFlowErr(t, "flow table create", err, syscall.ENOSYS)

			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			f, err := p.FlowCreate(s)
			if f != nil {
				t.Fatal("flow created on a port without flow engine")
			}
			wantFlowErr(t, "flow create", err, syscall.ENOSYS)
			wantFlowErr(t, "flow validate (started)", p.FlowValidate(s), syscall.ENOSYS)
			wantFlowErr(t, "flow flush", p.FlowFlush(), syscall.ENOSYS)
			wantFlowErr(t, "flow isolate", p.FlowIsolate(false), syscall.ENOSYS)
		})
	}
}

func TestFlowBadHandles(t *testing.T) {
	s := newSpec(t, ingress, []FlowItem{anyEth}, drop)
	// A port id that does not exist: rte_flow_ops_get says ENODEV.
	wantFlowErr(t, "validate on port 0xffff", Port(0xFFFF).FlowValidate(s), syscall.ENODEV)
	_, err := Port(0xFFFF).FlowInfo()
	wantFlowErr(t, "info on port 0xffff", err, syscall.ENODEV)

	// No call reaches DPDK without a live handle.
	if err := Port(0).FlowDestroy(nil); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroy nil: %v", err)
	}
	if err := Port(0).FlowDestroy(&Flow{port: 0}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroy a destroyed flow: %v", err)
	}
	if err := Port(1).FlowDestroy(&Flow{port: 0, h: 1}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroy another port's flow: %v", err)
	}
	if _, _, _, _, err := Port(0).FlowQueryCount(nil, false); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("query nil: %v", err)
	}
	if err := Port(0).FlowConfigure(0, 64); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("configure 0 queues: %v", err)
	}
	if err := Port(0).FlowConfigure(1, -1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("configure queue size -1: %v", err)
	}

	// The asynchronous calls of 22.11 trust the port: they are only
	// reachable through a table that was created, on a queue FlowConfigure
	// set up.
	var nilTable *FlowTable
	if _, err := nilTable.AsyncCreate(0, s, false, 1); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("async create on nil table: %v", err)
	}
	if err := nilTable.Push(0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("push on nil table: %v", err)
	}
	if _, err := nilTable.Pull(0, 8); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("pull on nil table: %v", err)
	}
	if err := nilTable.Destroy(); err != nil {
		t.Errorf("destroy nil table: %v", err)
	}
	unconfigured := &FlowTable{port: 0, tbl: 1}
	if err := unconfigured.Push(0); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "FlowConfigure") {
		t.Errorf("push without FlowConfigure: %v", err)
	}
	two := &FlowTable{port: 0, queues: 2, tbl: 1}
	if _, err := two.Pull(2, 8); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("pull on queue 2 of 2: %v", err)
	}
	other := newSpec(t, ingress, []FlowItem{anyEth, anyIPv4}, drop)
	two.items, two.actions = []FlowItemType{itEth}, []FlowActionType{atDrop}
	if _, err := two.AsyncCreate(0, other, false, 1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "template") {
		t.Errorf("async create with another pattern: %v", err)
	}
	two.items, two.actions = []FlowItemType{itEth, itIPv4}, []FlowActionType{atQueue}
	if _, err := two.AsyncCreate(0, other, false, 1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "template") {
		t.Errorf("async create with other actions: %v", err)
	}
}

// net_tap has a synchronous flow engine that turns rules into TC flower
// filters; it needs root and /dev/net/tun.
func TestFlowTap(t *testing.T) {
	pool, err := NewPktmbufPool("t_flow_tap", 1023, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	p, err := ProbeDevice("net_tap0,iface=rftap0")
	if err != nil {
		t.Skipf("no net_tap: %v", err)
	}
	closeAtEnd(t, p)
	// rte_flow_info_get wants a configured port, and says so with a bare
	// EINVAL.
	_, err = p.FlowInfo()
	if fe := wantFlowErr(t, "flow info before configure", err, syscall.EINVAL); !strings.Contains(fe.Error(), "configured port") {
		t.Errorf("flow info before configure: %q does not say the port must be configured", fe)
	}
	setupQueues(t, p, pool)

	// A flow engine without the template API.
	_, err = p.FlowInfo()
	wantFlowErr(t, "flow info", err, syscall.ENOTSUP)
	wantFlowErr(t, "flow configure", p.FlowConfigure(1, 64), syscall.ENOTSUP)
	// Templates need rte_flow_configure first: ethdev refuses before
	// asking the PMD.
	tmpl := newSpec(t, ingress, roceV4(), queue(0))
	_, err = p.FlowTableCreate(tmpl, 16)
	if fe := wantFlowErr(t, "flow table create", err, syscall.EINVAL); fe.Type != FlowErrState {
		t.Errorf("table create error type %v, want state", fe.Type)
	}

	// The rules as testpmd's grammar would give them, named by that grammar.
	dst10001 := FlowItem{Type: FlowItemIPv4, Spec: FlowIPv4{Dst: [4]byte{10, 0, 0, 1}}, Mask: FlowIPv4{Dst: [4]byte{255, 255, 255, 255}}}
	dscp26 := FlowItem{Type: FlowItemIPv4, Spec: FlowIPv4{TOS: 26 << 2}, Mask: FlowIPv4{TOS: 0xfc}}
	type rule struct {
		name    string
		attr    FlowAttr
		pattern []FlowItem
		actions []FlowAction
	}
	for _, r := range []rule{
		{"ingress eth / ipv4 / udp dst is 4791 -> queue 0", ingress, roceV4(), []FlowAction{queue(0)}},
		{"group 1 ingress eth / ipv4 / udp dst is 4791 -> queue 0", FlowAttr{Group: 1, Ingress: true}, roceV4(), []FlowAction{queue(0)}},
		{"ingress eth / ipv4 dst is 10.0.0.1 / udp dst is 4791 -> drop", ingress, []FlowItem{anyEth, dst10001, udpDst(4791)}, []FlowAction{drop}},
	} {
		if err := p.FlowValidate(newSpec(t, r.attr, r.pattern, r.actions...)); err != nil {
			t.Errorf("%s: %v", r.name, err)
		}
	}
	for _, c := range []struct {
		rule
		errno        syscall.Errno
		typ          FlowErrorType
		item, action int
		msg          string
	}{
		{rule{"ingress eth / ipv4 / udp dst is 4791 -> set_ipv4_dscp 46", ingress, roceV4(),
			[]FlowAction{{Type: FlowActionSetIPv4DSCP, DSCP: 46}}},
			syscall.ENOTSUP, FlowErrAction, -1, 0, "action not supported"},
		{rule{"ingress eth / ipv4 / udp dst is 4791 -> mark 1, queue 0", ingress, roceV4(),
			[]FlowAction{{Type: FlowActionMark, ID: 1}, queue(0)}},
			syscall.ENOTSUP, FlowErrAction, -1, 0, "action not supported"},
		{rule{"ingress eth / ipv4 dscp is 26 / udp dst is 4791 -> queue 0", ingress, []FlowItem{anyEth, dscp26, udpDst(4791)},
			[]FlowAction{queue(0)}},
			syscall.ENOTSUP, FlowErrItem, 1, -1, "item not supported"},
		{rule{"group 16 ingress eth / ipv4 / udp dst is 4791 -> queue 0", FlowAttr{Group: 16, Ingress: true}, roceV4(),
			[]FlowAction{queue(0)}},
			syscall.EINVAL, FlowErrAttrGroup, -1, -1, "cannot exceed 15"},
		{rule{"transfer eth / ipv4 / udp dst is 4791 -> drop", FlowAttr{Transfer: true}, roceV4(), []FlowAction{drop}},
			syscall.ENOTSUP, FlowErrAttrTransfer, -1, -1, "transfer"},
	} {
		fe := wantFlowErr(t, c.name, p.FlowValidate(newSpec(t, c.attr, c.pattern, c.actions...)), c.errno)
		if fe.Type != c.typ || fe.Item != c.item || fe.Action != c.action || !strings.Contains(fe.Message, c.msg) {
			t.Errorf("%s: type %v item %d action %d message %q, want %v, %d, %d, %q",
				c.name, fe.Type, fe.Item, fe.Action, fe.Message, c.typ, c.item, c.action, c.msg)
		}
		// The error names what it points at by type.
		if c.item == 1 && (fe.ItemName != "ipv4" || !strings.Contains(fe.Error(), "pattern item 1 (ipv4)")) {
			t.Errorf("%s: item name %q in %q, want ipv4", c.name, fe.ItemName, fe)
		}
		if c.action == 0 && fe.ActionName != c.actions[0].Type.String() {
			t.Errorf("%s: action name %q, want %q", c.name, fe.ActionName, c.actions[0].Type)
		}
	}
	// A queue the port does not have: tap blames the queue action.
	fe := func() *FlowError {
		err := p.FlowValidate(newSpec(t, ingress, []FlowItem{anyEth}, queue(5)))
		var fe *FlowError
		if !errors.As(err, &fe) {
			t.Fatalf("queue 5 of 1: %v, want a *FlowError", err)
		}
		t.Logf("queue 5 of 1: %v", err)
		return fe
	}()
	if fe.Action != 0 || fe.ActionName != "queue" || fe.Message == "" {
		t.Errorf("queue 5 of 1: %#v, want tap's message about action 0", fe)
	}

	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	wantFlowErr(t, "flow configure on a started port", p.FlowConfigure(1, 64), syscall.EINVAL)
	s := newSpec(t, ingress, roceV4(), queue(0))
	f, err := p.FlowCreate(s)
	if err != nil {
		// Without the kernel's TC flower classifier and multiq qdisc, tap
		// validates but cannot install.
		var fe *FlowError
		if !errors.As(err, &fe) || fe.Message == "" || f != nil {
			t.Fatalf("create: %v (%#v), want a *FlowError with tap's message", err, fe)
		}
		t.Logf("create refused: %v", err)
	} else {
		t.Log("create succeeded")
		if _, _, _, _, err := p.FlowQueryCount(f, false); err == nil {
			t.Error("count query on a rule without count succeeded")
		}
		if err := p.FlowDestroy(f); err != nil {
			t.Error(err)
		}
		if err := p.FlowDestroy(f); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second destroy: %v, want EINVAL", err)
		}
	}
	// Flush invalidates every handle of the port: a stale one never
	// reaches the PMD.
	stale := &Flow{port: p, h: 0xdead0000}
	track(stale)
	if err := p.FlowFlush(); err != nil {
		t.Errorf("flush: %v", err)
	}
	if err := p.FlowDestroy(stale); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroy after flush: %v, want EINVAL", err)
	}
}
