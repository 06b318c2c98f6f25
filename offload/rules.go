package offload

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"roce-fwd/config"
	"roce-fwd/flowrule"
)

// PortRules is the rule set [offload] gives one port. Rules[i].ID is i.
type PortRules struct {
	Port  string
	Rules []flowrule.Rule
}

// ConfigRules builds every port's rules from the [[offload.rule]] tables,
// one PortRules per port that has rules, in config port order.
//
// rte_flow applies one rule per group to a packet, so presets that must
// all apply to the same packet are chained through groups. Per port, with
// IDs 0, 1, ... in this order:
//
//	group 0, priority 0   dscp-count: for each DSCP D, IPv4 then IPv6:
//	                      eth / ipv4 dscp is D / end -> count / jump group 1
//	group 0, priority 1   (with any dscp-count) eth / end -> jump group 1,
//	                      so that every other packet reaches group 1 too
//	base, priority 0      drop and meter, in config order:
//	                      eth / ipv4|ipv6 [src] [dst] [proto] / [udp|tcp [src] [dst]] / end
//	                      -> count / drop, or count / meter (ids 1, 2, ...)
//	base, priority 1      cnp-queue: eth / ipv4|ipv6 dscp is 48 / udp dst is 4791 / end
//	                      -> [mark id M /] count / queue index Q (M: the port's mark-roce)
//	base, priority 2      mark-roce: eth / ipv4|ipv6 / udp dst is 4791 / end
//	                      -> mark id M / count
//	as written            the port's flow rules, in config order
//
// The base group is 1 when the port has a dscp-count preset and 0 otherwise.
// A five-tuple without an address gets an IPv4 and an IPv6 rule, each with
// its own meter. Preset meter ids skip those of the port's flow rules. A
// CNP is told by DSCP 48, the CNP DSCP of NVIDIA's RoCE defaults, because
// DPDK 22.11 rte_flow cannot match the BTH opcode.
//
// Every rule is written as testpmd text and read back with flowrule.Parse,
// so the presets and the flow rules share one grammar and one printer.
func ConfigRules(cfg *config.Config) ([]PortRules, error) {
	byPort := map[string][]int{}
	for i, r := range cfg.Offload.Rules {
		if _, ok := cfg.PortByName(r.Port); !ok {
			return nil, fmt.Errorf("%s: offload.rule[%d]: unknown port %q", cfg.File, i, r.Port)
		}
		byPort[r.Port] = append(byPort[r.Port], i)
	}
	var out []PortRules
	for _, pt := range cfg.Ports {
		if len(byPort[pt.Name]) == 0 {
			continue
		}
		b := &builder{cfg: cfg, port: pt.Name}
		b.build(byPort[pt.Name])
		if b.err != nil {
			return nil, b.err
		}
		out = append(out, PortRules{Port: pt.Name, Rules: b.rules})
	}
	return out, nil
}

type builder struct {
	cfg   *config.Config
	port  string
	rules []flowrule.Rule
	err   error
}

// add parses text, what follows "flow create <port>", as the next rule;
// i is the [[offload.rule]] it comes from.
func (b *builder) add(i int, text string) {
	if b.err != nil {
		return
	}
	cmd, err := flowrule.Parse("flow create " + b.port + " " + text)
	if err != nil {
		b.fail(i, "%v (in %q)", err, text)
		return
	}
	cmd.Rule.ID = uint32(len(b.rules))
	b.rules = append(b.rules, cmd.Rule)
}

func (b *builder) fail(i int, format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: offload.rule[%d]: %s", b.cfg.File, i, fmt.Sprintf(format, args...))
	}
}

var ipItems = []string{"ipv4", "ipv6"}

func (b *builder) build(idx []int) {
	rules := b.cfg.Offload.Rules
	var dscp, fiveTuple, flows []int
	cnp, mark := -1, -1
	usedMeters := map[uint32]bool{}
	for _, i := range idx {
		r := &rules[i]
		switch {
		case r.Flow != "":
			flows = append(flows, i)
			if cmd, err := flowrule.Parse("flow create " + b.port + " " + r.Flow); err == nil {
				for _, a := range cmd.Rule.Actions {
					if a.Meter != nil {
						usedMeters[a.Meter.ID] = true
					}
				}
			}
		case r.Preset == "dscp-count":
			dscp = append(dscp, i)
		case r.Preset == "drop" || r.Preset == "meter":
			fiveTuple = append(fiveTuple, i)
		case r.Preset == "cnp-queue":
			cnp = i
		case r.Preset == "mark-roce":
			mark = i
		default:
			b.fail(i, "neither flow nor a known preset (preset %q)", r.Preset)
			return
		}
	}

	base := 0
	if len(dscp) > 0 {
		base = 1
	}
	for _, i := range dscp {
		for _, d := range rules[i].DSCP {
			for _, ip := range ipItems {
				b.add(i, fmt.Sprintf("group 0 priority 0 ingress pattern eth / %s dscp is %d / end actions count / jump group 1 / end", ip, d))
			}
		}
	}
	if base == 1 {
		b.add(dscp[0], "group 0 priority 1 ingress pattern eth / end actions jump group 1 / end")
	}

	nextMeter := uint32(1)
	for _, i := range fiveTuple {
		r := &rules[i]
		pats, err := fiveTuplePatterns(r)
		if err != nil {
			b.fail(i, "%v", err)
			return
		}
		for _, pat := range pats {
			act := "count / drop"
			if r.Preset == "meter" {
				for usedMeters[nextMeter] {
					nextMeter++
				}
				usedMeters[nextMeter] = true
				act = "count / meter " + config.OffloadMeterArgs(r, nextMeter)
			}
			b.add(i, fmt.Sprintf("group %d priority 0 ingress pattern %s end actions %s / end", base, pat, act))
		}
	}

	markID := -1
	if mark >= 0 {
		if rules[mark].Mark == nil {
			b.fail(mark, "mark-roce without mark")
			return
		}
		markID = *rules[mark].Mark
	}
	if cnp >= 0 {
		if rules[cnp].Queue == nil {
			b.fail(cnp, "cnp-queue without queue")
			return
		}
		markAct := ""
		if markID >= 0 {
			markAct = "mark id " + strconv.Itoa(markID) + " / "
		}
		for _, ip := range ipItems {
			b.add(cnp, fmt.Sprintf("group %d priority 1 ingress pattern eth / %s dscp is 48 / udp dst is 4791 / end actions %scount / queue index %d / end",
				base, ip, markAct, *rules[cnp].Queue))
		}
	}
	if markID >= 0 {
		for _, ip := range ipItems {
			b.add(mark, fmt.Sprintf("group %d priority 2 ingress pattern eth / %s / udp dst is 4791 / end actions mark id %d / count / end", base, ip, markID))
		}
	}

	for _, i := range flows {
		b.add(i, rules[i].Flow)
	}
}

// fiveTuplePatterns is the pattern of a drop or meter preset, up to and
// including the "/" before "end": one per IP version, both when no address
// says which.
func fiveTuplePatterns(r *config.OffloadRule) ([]string, error) {
	var src, dst netip.Prefix
	for _, a := range []struct {
		s *string
		p *netip.Prefix
	}{{r.Src, &src}, {r.Dst, &dst}} {
		if a.s == nil {
			continue
		}
		p, err := config.OffloadAddr(*a.s)
		if err != nil {
			return nil, err
		}
		*a.p = p
	}
	versions := ipItems
	switch {
	case src.IsValid() && dst.IsValid() && src.Addr().Is4() != dst.Addr().Is4():
		return nil, fmt.Errorf("src %s and dst %s are not the same IP version", src, dst)
	case src.IsValid() && src.Addr().Is4(), dst.IsValid() && dst.Addr().Is4():
		versions = ipItems[:1]
	case src.IsValid(), dst.IsValid():
		versions = ipItems[1:]
	}
	ipFields := addrField("src", src) + addrField("dst", dst)
	l4 := ""
	if r.Proto != nil {
		n, err := config.OffloadProto(string(*r.Proto))
		if err != nil {
			return nil, err
		}
		ipFields += " proto is " + strconv.Itoa(int(n))
		switch n {
		case 17:
			l4 = "udp"
		case 6:
			l4 = "tcp"
		}
	}
	ports := portField("src", r.SrcPort) + portField("dst", r.DstPort)
	if ports != "" {
		if l4 == "" {
			return nil, errors.New(`src_port and dst_port need proto "udp" or "tcp"`)
		}
		ports = " " + l4 + ports + " /"
	}
	var out []string
	for _, v := range versions {
		out = append(out, "eth / "+v+ipFields+" /"+ports)
	}
	return out, nil
}

func addrField(name string, p netip.Prefix) string {
	switch {
	case !p.IsValid():
		return ""
	case p.IsSingleIP():
		return " " + name + " is " + p.Addr().String()
	}
	return " " + name + " spec " + p.Addr().String() + " " + name + " prefix " + strconv.Itoa(p.Bits())
}

func portField(name string, port *int) string {
	if port == nil {
		return ""
	}
	return " " + name + " is " + strconv.Itoa(*port)
}
