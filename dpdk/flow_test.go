package dpdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"roce-fwd/flowrule"
	"roce-fwd/pcapio"
)

// DPDK 22.11's enum values (rte_flow.h), written out by hand.
const (
	itEnd, itEth, itVLAN, itIPv4, itIPv6, itUDP, itTCP = 0, 6, 7, 8, 9, 11, 12

	atEnd, atJump, atMark, atFlag, atQueue, atDrop, atCount, atRSS = 0, 3, 4, 5, 6, 7, 8, 9
	atSetIPv4DSCP, atSetIPv6DSCP                                   = 45, 46
)

// compile parses a testpmd flow command and compiles its rule.
func compile(t *testing.T, line string) *FlowSpec {
	t.Helper()
	c, err := flowrule.Parse(line)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	s, err := CompileFlow(&c.Rule)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	t.Cleanup(s.Free)
	return s
}

// describe compiles a rule and reads it back.
func describe(t *testing.T, line string) FlowDescription {
	t.Helper()
	return compile(t, line).Describe()
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

func TestFlowTypeNumbers(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"item end", FlowItemEnd, itEnd}, {"item eth", FlowItemEth, itEth}, {"item vlan", FlowItemVLAN, itVLAN},
		{"item ipv4", FlowItemIPv4, itIPv4}, {"item ipv6", FlowItemIPv6, itIPv6}, {"item udp", FlowItemUDP, itUDP},
		{"item tcp", FlowItemTCP, itTCP},
		{"action end", FlowActionEnd, atEnd}, {"action jump", FlowActionJump, atJump}, {"action mark", FlowActionMark, atMark},
		{"action flag", FlowActionFlag, atFlag}, {"action queue", FlowActionQueue, atQueue}, {"action drop", FlowActionDrop, atDrop},
		{"action count", FlowActionCount, atCount}, {"action rss", FlowActionRSS, atRSS}, {"action meter", FlowActionMeter, 13},
		{"action set_ipv4_dscp", FlowActionSetIPv4DSCP, atSetIPv4DSCP}, {"action set_ipv6_dscp", FlowActionSetIPv6DSCP, atSetIPv6DSCP},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, rte_flow.h of 22.11 has %d", c.name, c.got, c.want)
		}
	}
}

func TestCompileFlowAttrAndShape(t *testing.T) {
	d := describe(t, "flow create 0 group 3 priority 7 egress pattern eth / end actions drop / end")
	if d.Group != 3 || d.Priority != 7 || !d.Egress || d.Ingress || d.Transfer {
		t.Errorf("attr %+v, want group 3 priority 7 egress", d)
	}
	if len(d.Items) != 2 || d.Items[0].Type != itEth || d.Items[1].Type != itEnd {
		t.Fatalf("items %+v, want eth, end", d.Items)
	}
	// "eth" alone has no field: NULL spec, mask and last.
	if d.Items[0].Spec != nil || d.Items[0].Mask != nil || d.Items[0].Last != nil {
		t.Errorf("eth without fields: %+v, want NULL spec/mask/last", d.Items[0])
	}
	if len(d.Actions) != 2 || d.Actions[0].Type != atDrop || d.Actions[0].Conf != nil || d.Actions[1].Type != atEnd {
		t.Errorf("actions %+v, want drop (no conf), end", d.Actions)
	}

	d = describe(t, "flow create 0 ingress transfer pattern end actions end")
	if !d.Ingress || !d.Transfer || d.Egress || d.Group != 0 || d.Priority != 0 {
		t.Errorf("attr %+v, want ingress transfer", d)
	}
	if len(d.Items) != 1 || d.Items[0].Type != itEnd || len(d.Actions) != 1 || d.Actions[0].Type != atEnd {
		t.Errorf("empty rule: items %+v actions %+v, want END only", d.Items, d.Actions)
	}
}

func TestCompileFlowIPv4UDP(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth / ipv4 dst is 10.0.0.1 / udp dst is 4791 / end actions queue index 3 / end")
	if len(d.Items) != 4 || d.Items[0].Type != itEth || d.Items[1].Type != itIPv4 || d.Items[2].Type != itUDP || d.Items[3].Type != itEnd {
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
	if q.Type != atQueue || q.Index != 3 || len(q.Conf) != 2 || binary.NativeEndian.Uint16(q.Conf) != 3 {
		t.Errorf("queue action %+v, want index 3 (host order)", q)
	}
}

func TestCompileFlowDSCPMatchAndRange(t *testing.T) {
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

func TestCompileFlowEthVLANIPv6TCP(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth dst is 02:00:00:00:00:0b src is 02:00:00:00:00:0a type is 0x8100 has_vlan is 1 / "+
		"vlan tci is 0x6064 inner_type is 0x86dd has_more_vlan is 1 / ipv6 src is 2001:db8::1 dst is 2001:db8::2 tc is 0xb8 proto is 6 hop is 64 / "+
		"tcp src is 22 dst is 65535 / end actions drop / end")
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
}

func TestCompileFlowActions(t *testing.T) {
	// Built by hand: flowrule's grammar keeps one fate per rule and wants an
	// ip item for the DSCP rewrites; CompileFlow translates whatever it gets.
	r := flowrule.Rule{Ingress: true, Items: []flowrule.Item{{Type: flowrule.ItemEth}}, Actions: []flowrule.Action{
		{Type: flowrule.ActRSS, Queues: []uint16{0, 1}},
		{Type: flowrule.ActMark, ID: 0x1234},
		{Type: flowrule.ActFlag},
		{Type: flowrule.ActCount},
		{Type: flowrule.ActJump, Group: 2},
		{Type: flowrule.ActSetIPv4DSCP, DSCP: 46},
		{Type: flowrule.ActSetIPv6DSCP, DSCP: 10},
	}}
	s, err := CompileFlow(&r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	d := s.Describe()
	if len(d.Actions) != 8 {
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
	if d.Actions[7].Type != atEnd {
		t.Errorf("last action %+v, want END", d.Actions[7])
	}
}

func TestCompileFlowRSSFromGrammar(t *testing.T) {
	d := describe(t, "flow create 0 ingress pattern eth / ipv4 / udp / end actions rss queues 0 1 end / end")
	if a := d.Actions[0]; a.Type != atRSS || len(a.RSSQueues) != 2 || a.RSSQueues[0] != 0 || a.RSSQueues[1] != 1 || a.RSSTypes != 0 {
		t.Errorf("rss %+v, want queues [0 1], types 0", a)
	}
	d = describe(t, "flow create 0 ingress pattern eth / ipv4 / end actions set_ipv4_dscp dscp_value 46 / end")
	if a := d.Actions[0]; a.Type != atSetIPv4DSCP || !bytes.Equal(a.Conf, []byte{46}) {
		t.Errorf("set_ipv4_dscp %+v, want conf {46}", a)
	}
}

func TestCompileFlowNotOffloadable(t *testing.T) {
	for _, line := range []string{
		"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / ib_bth opcode is 0x81 / end actions drop / end",
		"flow create 0 ingress pattern eth / end actions meter srtcm cir 1000000 cbs 1500 ebs 1500 / end",
	} {
		c, err := flowrule.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		s, err := CompileFlow(&c.Rule)
		if !errors.Is(err, ErrFlowNotOffloadable) || s != nil {
			t.Errorf("%s: %v, want ErrFlowNotOffloadable", line, err)
		}
		t.Log(err)
	}
	if _, err := CompileFlow(nil); err == nil {
		t.Error("nil rule compiled")
	}
	// A match of another type than the item's.
	bad := flowrule.Rule{Items: []flowrule.Item{{Type: flowrule.ItemIPv4, UDP: &flowrule.Match[flowrule.UDPHeader]{}}}}
	if _, err := CompileFlow(&bad); err == nil {
		t.Error("ipv4 item with a udp match compiled")
	}
	bad = flowrule.Rule{Actions: []flowrule.Action{{Type: flowrule.ActSetIPv4DSCP, DSCP: 64}}}
	if _, err := CompileFlow(&bad); err == nil {
		t.Error("dscp 64 compiled")
	}
}

func TestFlowSpecFree(t *testing.T) {
	s := compile(t, "flow create 0 ingress pattern eth / ipv4 / end actions queue index 0 / end")
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
	if err := p.Configure(1, 1, 0); err != nil {
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
	pool, err := NewPktmbufPool("t_flow_none", 1023, 0, 2176, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	if err := pcapio.WriteFile(in, nil); err != nil {
		t.Fatal(err)
	}
	rule := "flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end"
	for _, c := range []struct{ devargs, driver string }{
		{"net_null_flow0", "net_null"},
		{"net_ring_flow0", "net_ring"},
		{"net_pcap_flow0,rx_pcap=" + in + ",tx_pcap=" + filepath.Join(dir, "out.pcap"), "net_pcap"},
	} {
		t.Run(c.driver, func(t *testing.T) {
			p := flowPort(t, c.devargs, pool)
			s := compile(t, rule)

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
	s := compile(t, "flow create 0 ingress pattern eth / end actions drop / end")
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
	other := compile(t, "flow create 0 ingress pattern eth / ipv4 / end actions drop / end")
	two.items, two.actions = []int{itEth}, []int{atDrop}
	if _, err := two.AsyncCreate(0, other, false, 1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "template") {
		t.Errorf("async create with another pattern: %v", err)
	}
	two.items, two.actions = []int{itEth, itIPv4}, []int{atQueue}
	if _, err := two.AsyncCreate(0, other, false, 1); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "template") {
		t.Errorf("async create with other actions: %v", err)
	}
}

// net_tap has a synchronous flow engine that turns rules into TC flower
// filters; it needs root and /dev/net/tun.
func TestFlowTap(t *testing.T) {
	pool, err := NewPktmbufPool("t_flow_tap", 1023, 0, 2176, -1)
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
	tmpl := compile(t, "flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end")
	_, err = p.FlowTableCreate(tmpl, 16)
	if fe := wantFlowErr(t, "flow table create", err, syscall.EINVAL); fe.Type != FlowErrState {
		t.Errorf("table create error type %v, want state", fe.Type)
	}

	good := []string{
		"flow validate 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end",
		"flow validate 0 group 1 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end",
		"flow validate 0 ingress pattern eth / ipv4 dst is 10.0.0.1 / udp dst is 4791 / end actions drop / end",
	}
	for _, l := range good {
		if err := p.FlowValidate(compile(t, l)); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	for _, c := range []struct {
		line         string
		errno        syscall.Errno
		typ          FlowErrorType
		item, action int
		msg          string
	}{
		{"flow validate 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions set_ipv4_dscp dscp_value 46 / end",
			syscall.ENOTSUP, FlowErrAction, -1, 0, "action not supported"},
		{"flow validate 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions mark id 1 / queue index 0 / end",
			syscall.ENOTSUP, FlowErrAction, -1, 0, "action not supported"},
		{"flow validate 0 ingress pattern eth / ipv4 dscp is 26 / udp dst is 4791 / end actions queue index 0 / end",
			syscall.ENOTSUP, FlowErrItem, 1, -1, "item not supported"},
		{"flow validate 0 group 16 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end",
			syscall.EINVAL, FlowErrAttrGroup, -1, -1, "cannot exceed 15"},
		{"flow validate 0 transfer pattern eth / ipv4 / udp dst is 4791 / end actions drop / end",
			syscall.ENOTSUP, FlowErrAttrTransfer, -1, -1, "transfer"},
	} {
		fe := wantFlowErr(t, c.line, p.FlowValidate(compile(t, c.line)), c.errno)
		if fe.Type != c.typ || fe.Item != c.item || fe.Action != c.action || !strings.Contains(fe.Message, c.msg) {
			t.Errorf("%s: type %v item %d action %d message %q, want %v, %d, %d, %q",
				c.line, fe.Type, fe.Item, fe.Action, fe.Message, c.typ, c.item, c.action, c.msg)
		}
	}
	// A queue the port does not have: tap blames the queue action.
	fe := func() *FlowError {
		err := p.FlowValidate(compile(t, "flow validate 0 ingress pattern eth / end actions queue index 5 / end"))
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
	s := compile(t, "flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end")
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
