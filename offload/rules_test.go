package offload

import (
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"roce-fwd/config"
	"roce-fwd/flowrule"
	"roce-fwd/internal/testenv"
	"roce-fwd/roce"
)

const rulesPorts = `
[[port]]
name = "in"
vdev = "net_null0"
rx_queues = 4
[[port]]
name = "out"
vdev = "net_null1"
[[port]]
name = "spare"
vdev = "net_null2"
[[forward]]
from = "in"
to = "out"
`

func parseConfig(t *testing.T, offload string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(rulesPorts+offload))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func configRules(t *testing.T, offload string) []PortRules {
	t.Helper()
	prs, err := ConfigRules(parseConfig(t, offload))
	if err != nil {
		t.Fatal(err)
	}
	return prs
}

// textRule parses what follows "flow create <port>".
func textRule(t *testing.T, text string) flowrule.Rule {
	t.Helper()
	cmd, err := flowrule.Parse("flow create 0 " + text)
	if err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return cmd.Rule
}

// The expected rules are the layout of ConfigRules' documentation written
// out by hand for this config.
func TestConfigRulesLayout(t *testing.T) {
	prs := configRules(t, `
[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / tcp / end actions count / end"
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52
[[offload.rule]]
port = "in"
preset = "cnp-queue"
queue = 3
[[offload.rule]]
port = "out"
preset = "drop"
dst = "2001:db8::/48"
proto = 6
dst_port = 22
[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [26, 48]
[[offload.rule]]
port = "in"
preset = "meter"
src = "10.1.2.3/16"
algorithm = "srtcm"
cir = 1000000
cbs = 2000
ebs = 0
red = "drop"
[[offload.rule]]
port = "in"
flow = "priority 3 ingress pattern eth / ipv4 / udp dst is 7 / end actions meter srtcm id 2 cir 10 cbs 10 ebs 10 / end"
[[offload.rule]]
port = "in"
preset = "drop"
src = "10.0.0.1"
proto = "udp"
src_port = 1000
dst_port = 4791
[[offload.rule]]
port = "in"
preset = "meter"
proto = "udp"
dst_port = 9
algorithm = "trtcm"
cir = 100
pir = 200
cbs = 300
pbs = 400
yellow = "drop"
[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [0]
`)
	want := map[string][]string{
		"in": {
			"group 0 priority 0 ingress pattern eth / ipv4 dscp is 26 / end actions count / jump group 1 / end",
			"group 0 priority 0 ingress pattern eth / ipv6 dscp is 26 / end actions count / jump group 1 / end",
			"group 0 priority 0 ingress pattern eth / ipv4 dscp is 48 / end actions count / jump group 1 / end",
			"group 0 priority 0 ingress pattern eth / ipv6 dscp is 48 / end actions count / jump group 1 / end",
			"group 0 priority 0 ingress pattern eth / ipv4 dscp is 0 / end actions count / jump group 1 / end",
			"group 0 priority 0 ingress pattern eth / ipv6 dscp is 0 / end actions count / jump group 1 / end",
			"group 0 priority 1 ingress pattern eth / end actions jump group 1 / end",
			// Meter ids skip 2, the flow rule's.
			"group 1 priority 0 ingress pattern eth / ipv4 src spec 10.1.0.0 src prefix 16 / end actions count / meter srtcm id 1 cir 1000000 cbs 2000 ebs 0 / end",
			"group 1 priority 0 ingress pattern eth / ipv4 src is 10.0.0.1 proto is 17 / udp src is 1000 dst is 4791 / end actions count / drop / end",
			"group 1 priority 0 ingress pattern eth / ipv4 proto is 17 / udp dst is 9 / end actions count / meter trtcm id 3 cir 100 pir 200 cbs 300 pbs 400 yellow drop / end",
			"group 1 priority 0 ingress pattern eth / ipv6 proto is 17 / udp dst is 9 / end actions count / meter trtcm id 4 cir 100 pir 200 cbs 300 pbs 400 yellow drop / end",
			"group 1 priority 1 ingress pattern eth / ipv4 dscp is 48 / udp dst is 4791 / end actions mark id 0x52 / count / queue index 3 / end",
			"group 1 priority 1 ingress pattern eth / ipv6 dscp is 48 / udp dst is 4791 / end actions mark id 0x52 / count / queue index 3 / end",
			"group 1 priority 2 ingress pattern eth / ipv4 / udp dst is 4791 / end actions mark id 0x52 / count / end",
			"group 1 priority 2 ingress pattern eth / ipv6 / udp dst is 4791 / end actions mark id 0x52 / count / end",
			"ingress pattern eth / ipv4 / tcp / end actions count / end",
			"priority 3 ingress pattern eth / ipv4 / udp dst is 7 / end actions meter srtcm id 2 cir 10 cbs 10 ebs 10 / end",
		},
		// No dscp-count: the base group is 0.
		"out": {
			"ingress pattern eth / ipv6 dst spec 2001:db8:: dst prefix 48 proto is 6 / tcp dst is 22 / end actions count / drop / end",
		},
	}
	if len(prs) != 2 || prs[0].Port != "in" || prs[1].Port != "out" {
		t.Fatalf("ports %+v, want in and out (spare has no rules)", prs)
	}
	for _, pr := range prs {
		w := want[pr.Port]
		if len(pr.Rules) != len(w) {
			t.Errorf("port %s: %d rules, want %d", pr.Port, len(pr.Rules), len(w))
		}
		for i := range min(len(w), len(pr.Rules)) {
			exp := textRule(t, w[i])
			exp.ID = uint32(i)
			if !reflect.DeepEqual(pr.Rules[i], exp) {
				t.Errorf("port %s rule %d:\n got %s\nwant %s", pr.Port, i,
					flowrule.Command{Kind: flowrule.CmdCreate, Port: pr.Port, Rule: pr.Rules[i]}, w[i])
			}
		}
		if _, err := flowrule.Compile(pr.Rules); err != nil {
			t.Errorf("port %s: Compile: %v", pr.Port, err)
		}
	}
}

func TestConfigRulesEachPresetCompiles(t *testing.T) {
	for name, body := range map[string]string{
		"cnp-queue":  `queue = 1`,
		"mark-roce":  `mark = 0xFFFFEF`,
		"dscp-count": `dscp = [0, 63]`,
		"drop":       `dst = "192.0.2.0/24"`,
		"meter":      `src_port = 4791` + "\n" + `proto = 17` + "\n" + `algorithm = "srtcm"` + "\n" + `cir = 1` + "\n" + `cbs = 1` + "\n" + `ebs = 1`,
	} {
		t.Run(name, func(t *testing.T) {
			prs := configRules(t, "[[offload.rule]]\nport = \"in\"\npreset = \""+name+"\"\n"+body+"\n")
			if len(prs) != 1 || prs[0].Port != "in" || len(prs[0].Rules) == 0 {
				t.Fatalf("%+v", prs)
			}
			if _, err := flowrule.Compile(prs[0].Rules); err != nil {
				t.Fatal(err)
			}
			for i, r := range prs[0].Rules {
				if r.ID != uint32(i) || !r.Ingress || r.Egress || r.Transfer {
					t.Errorf("rule %d: ID %d, attributes %v %v %v", i, r.ID, r.Ingress, r.Egress, r.Transfer)
				}
				// Only dscp-count chains to group 1; the rest sit in group 0.
				if r.Group != 0 || hasJump(r) != (name == "dscp-count") {
					t.Errorf("rule %d: group %d, jump %v", i, r.Group, hasJump(r))
				}
			}
		})
	}
}

func hasJump(r flowrule.Rule) bool {
	for _, a := range r.Actions {
		if a.Type == flowrule.ActJump {
			return true
		}
	}
	return false
}

func TestConfigRulesErrors(t *testing.T) {
	cfg := parseConfig(t, "")
	cfg.Offload.Rules = []config.OffloadRule{{Port: "nowhere", Preset: "drop"}}
	if _, err := ConfigRules(cfg); err == nil || !strings.Contains(err.Error(), `offload.rule[0]: unknown port "nowhere"`) {
		t.Errorf("unknown port: %v", err)
	}
	q := 1
	cfg.Offload.Rules = []config.OffloadRule{{Port: "in", Preset: "cnp-queue", Queue: &q}, {Port: "in", Flow: "ingress pattern eth / end actions bogus / end"}}
	if _, err := ConfigRules(cfg); err == nil || !strings.Contains(err.Error(), `t.toml: offload.rule[1]: unknown action "bogus"`) {
		t.Errorf("bad flow: %v", err)
	}
	cfg.Offload.Rules = []config.OffloadRule{{Port: "in", Preset: "drop", SrcPort: &q}}
	if _, err := ConfigRules(cfg); err == nil || !strings.Contains(err.Error(), "need proto") {
		t.Errorf("ports without proto: %v", err)
	}
}

// l4Frame is a plain TCP or UDP frame, built with gopacket.
func l4Frame(t *testing.T, src, dst string, tcp bool, sport, dport uint16, dscp uint8, payload int) []byte {
	t.Helper()
	srcIP, dstIP := net.ParseIP(src), net.ParseIP(dst)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	proto := layers.IPProtocolUDP
	if tcp {
		proto = layers.IPProtocolTCP
	}
	var ip gopacket.NetworkLayer
	var ipL gopacket.SerializableLayer
	if v4 := srcIP.To4(); v4 != nil {
		eth.EthernetType = layers.EthernetTypeIPv4
		l := &layers.IPv4{Version: 4, TTL: 64, TOS: dscp << 2, Protocol: proto, SrcIP: v4, DstIP: dstIP.To4()}
		ip, ipL = l, l
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		l := &layers.IPv6{Version: 6, HopLimit: 64, TrafficClass: dscp << 2, NextHeader: proto, SrcIP: srcIP, DstIP: dstIP}
		ip, ipL = l, l
	}
	var l4 gopacket.SerializableLayer
	if tcp {
		l := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: true, Window: 1024}
		if err := l.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		l4 = l
	} else {
		l := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
		if err := l.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		l4 = l
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ipL, l4, gopacket.Payload(make([]byte, payload))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func roceTestFrame(t *testing.T, s roce.FrameSpec) []byte {
	t.Helper()
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// swPort runs one port's rules in the software table.
type swPort struct {
	t     *testing.T
	rules []flowrule.Rule
	tab   *flowrule.Table
	st    *flowrule.State
}

func newSWPort(t *testing.T, rules []flowrule.Rule) *swPort {
	tab, err := flowrule.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return &swPort{t: t, rules: rules, tab: tab, st: flowrule.NewState(tab)}
}

// idx is the index of the rule text describes.
func (p *swPort) idx(text string) int {
	p.t.Helper()
	want := textRule(p.t, text)
	for i, r := range p.rules {
		r.ID = 0
		if reflect.DeepEqual(r, want) {
			return i
		}
	}
	p.t.Fatalf("no rule %s", text)
	return -1
}

// send matches and applies frame and returns the rules it went through.
func (p *swPort) send(frame []byte, now int64) (path []int, v flowrule.Verdict) {
	var r roce.Result
	roce.Classify(frame, nil, false, &r)
	var pa flowrule.Path
	p.tab.MatchPath(frame, &r, &pa)
	v = p.tab.ApplyPath(&pa, frame, &r, p.st, now, len(frame))
	for _, i := range pa.Rules[:pa.N] {
		path = append(path, int(i))
	}
	return path, v
}

func TestConfigRulesInSoftware(t *testing.T) {
	prs := configRules(t, `
[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [0, 26, 48]
[[offload.rule]]
port = "in"
preset = "cnp-queue"
queue = 1
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52
[[offload.rule]]
port = "in"
preset = "drop"
src = "198.51.100.7"
proto = "tcp"
dst_port = 80
[[offload.rule]]
port = "in"
preset = "meter"
proto = "udp"
dst_port = 9000
algorithm = "srtcm"
cir = 1
cbs = 1000
ebs = 0
`)
	p := newSWPort(t, prs[0].Rules)
	const queueBit = 1 << flowrule.ActQueue
	count := func(ip string, dscp int) int {
		return p.idx("group 0 priority 0 ingress pattern eth / " + ip + " dscp is " + strconv.Itoa(dscp) + " / end actions count / jump group 1 / end")
	}
	catchAll := p.idx("group 0 priority 1 ingress pattern eth / end actions jump group 1 / end")
	cnp := func(ip string) int {
		return p.idx("group 1 priority 1 ingress pattern eth / " + ip + " dscp is 48 / udp dst is 4791 / end actions mark id 0x52 / count / queue index 1 / end")
	}
	mark := func(ip string) int {
		return p.idx("group 1 priority 2 ingress pattern eth / " + ip + " / udp dst is 4791 / end actions mark id 0x52 / count / end")
	}
	drop := p.idx("group 1 priority 0 ingress pattern eth / ipv4 src is 198.51.100.7 proto is 6 / tcp dst is 80 / end actions count / drop / end")

	check := func(name string, frame []byte, wantPath []int, wantMark, wantQueue, wantDrop bool) flowrule.Verdict {
		t.Helper()
		path, v := p.send(frame, 0)
		if !reflect.DeepEqual(path, wantPath) {
			t.Errorf("%s: path %v, want %v", name, path, wantPath)
		}
		if (v.HasMark && v.Mark == 0x52) != wantMark || v.HasMark != wantMark {
			t.Errorf("%s: mark %v %#x, want marked %v", name, v.HasMark, v.Mark, wantMark)
		}
		if (v.NotInSoftware&queueBit != 0) != wantQueue {
			t.Errorf("%s: NotInSoftware %#x, want the queue bit %v", name, v.NotInSoftware, wantQueue)
		}
		if v.Drop != wantDrop {
			t.Errorf("%s: drop %v (reason %d), want %v", name, v.Drop, v.Reason, wantDrop)
		}
		return v
	}

	// A CNP is counted under DSCP 48, marked and steered to its queue.
	check("IPv4 CNP", testenv.QoSFrame(t, testenv.QPCNP, 1, 0), []int{count("ipv4", 48), cnp("ipv4")}, true, true, false)
	cnp6 := roceTestFrame(t, roce.FrameSpec{IPv6: true, DSCP: 48, BTH: roce.BTHFields{Opcode: roce.OpCNP, DestQP: 9, PKey: 0xffff, BECN: true}, Payload: make([]byte, 16)})
	check("IPv6 CNP", cnp6, []int{count("ipv6", 48), cnp("ipv6")}, true, true, false)
	// RoCE data is marked only, whether its DSCP is counted or not.
	check("RoCE DSCP 26", testenv.QoSFrame(t, testenv.QPECT, 1, 64), []int{count("ipv4", 26), mark("ipv4")}, true, false, false)
	data10 := roceTestFrame(t, roce.FrameSpec{DSCP: 10, BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpWriteOnly, DestQP: 9, PKey: 0xffff}, Ext: roce.ExtFields{DMALength: 8}, Payload: make([]byte, 8)})
	check("RoCE DSCP 10", data10, []int{catchAll, mark("ipv4")}, true, false, false)
	data6 := roceTestFrame(t, roce.FrameSpec{IPv6: true, DSCP: 26, BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpSendOnly, DestQP: 9, PKey: 0xffff}, Payload: make([]byte, 8)})
	check("IPv6 RoCE DSCP 26", data6, []int{count("ipv6", 26), mark("ipv6")}, true, false, false)

	// The five-tuple drop takes its flow only.
	v := check("dropped flow", l4Frame(t, "198.51.100.7", "192.0.2.2", true, 40000, 80, 0, 0), []int{count("ipv4", 0), drop}, false, false, true)
	if v.Reason != flowrule.DropRule {
		t.Errorf("drop reason %d", v.Reason)
	}
	check("other port", l4Frame(t, "198.51.100.7", "192.0.2.2", true, 40000, 81, 0, 0), []int{count("ipv4", 0)}, false, false, false)
	check("other source", l4Frame(t, "198.51.100.8", "192.0.2.2", true, 40000, 80, 0, 0), []int{count("ipv4", 0)}, false, false, false)
	check("UDP to port 80", l4Frame(t, "198.51.100.7", "192.0.2.2", false, 40000, 80, 0, 0), []int{count("ipv4", 0)}, false, false, false)
	check("DSCP 5, other port", l4Frame(t, "198.51.100.7", "192.0.2.2", true, 40000, 81, 5, 0), []int{catchAll}, false, false, false)

	// The meter passes cbs bytes at once, then drops red; IPv4 and IPv6
	// have meters of their own.
	for _, src := range []string{"192.0.2.1", "2001:db8::1"} {
		dst := "192.0.2.2"
		if strings.Contains(src, ":") {
			dst = "2001:db8::2"
		}
		f := l4Frame(t, src, dst, false, 1, 9000, 0, 100)
		per := 1000 / len(f)
		for i := range per + 1 {
			_, v := p.send(f, 0)
			if red := i == per; v.Drop != red || red && (v.Color != flowrule.Red || v.Reason != flowrule.DropMeter) || !red && v.Color != flowrule.Green {
				t.Errorf("%s packet %d of %d bytes: %+v", src, i, len(f), v)
			}
		}
	}

	// Counters: each rule on the path counted its packets.
	for _, c := range []struct {
		idx  int
		want uint64
	}{
		{count("ipv4", 48), 1}, {count("ipv6", 48), 1}, {cnp("ipv4"), 1}, {cnp("ipv6"), 1},
		{count("ipv4", 26), 1}, {count("ipv6", 26), 1}, {mark("ipv4"), 2}, {mark("ipv6"), 1},
		{drop, 1}, {catchAll, 2},
	} {
		if n, _ := p.st.Counters(c.idx); n != c.want {
			t.Errorf("rule %d (%s): %d packets, want %d", c.idx,
				flowrule.Command{Kind: flowrule.CmdCreate, Port: "in", Rule: p.rules[c.idx]}, n, c.want)
		}
	}
}
