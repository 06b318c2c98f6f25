package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"roce-fwd/flowrule"
)

// Offload is the [offload] section: where flow rules run and which rules
// each port gets. Rules are written in testpmd's flow grammar or picked
// from the presets; package offload turns them into flowrule rules.
type Offload struct {
	Backend string        `toml:"backend"` // one of OffloadBackends
	Rules   []OffloadRule `toml:"rule"`    // [[offload.rule]]
}

// OffloadBackends lists the values of offload.backend: "auto" probes each
// port's PMD, the others force the synchronous rte_flow API, the template
// (asynchronous) API, or the software table.
var OffloadBackends = []string{"auto", "rte_flow", "template", "software"}

// OffloadPresets lists the built-in rule sets of offload.rule.preset.
var OffloadPresets = []string{"cnp-queue", "mark-roce", "dscp-count", "drop", "meter"}

// MaxOffloadMark is the largest mark-roce value: mlx5 carries a 24-bit
// MARK and keeps the top 16 values for itself (0xFFFFF0-0xFFFFFF).
const MaxOffloadMark = 0xFFFFEF

// OffloadRule is one [[offload.rule]]: either Flow, the text that follows
// "flow create <port>" in testpmd, or a Preset with its keys. Keys that
// belong to one preset only are pointers (nil = absent), so that a key
// given to the wrong preset is an error and Encode prints only what the
// file set.
type OffloadRule struct {
	Port   string `toml:"port"`             // a [[port]] name
	Flow   string `toml:"flow,omitempty"`   // e.g. "ingress pattern eth / end actions count / end"
	Preset string `toml:"preset,omitempty"` // one of OffloadPresets

	Queue *int  `toml:"queue"` // cnp-queue: rx queue for CNPs
	Mark  *int  `toml:"mark"`  // mark-roce: 1..MaxOffloadMark
	DSCP  []int `toml:"dscp"`  // dscp-count: the DSCPs counted (no omitempty: [] must round-trip)

	// drop and meter: the five-tuple, at least one key. Src and Dst are
	// IPv4 or IPv6 addresses with an optional prefix length; Proto is
	// "udp", "tcp" or an IP protocol number (tcp and udp are written as
	// names); ports need proto udp or tcp.
	Src     *string  `toml:"src"`
	Dst     *string  `toml:"dst"`
	Proto   *IPProto `toml:"proto"`
	SrcPort *int     `toml:"src_port"`
	DstPort *int     `toml:"dst_port"`

	// meter: colour-blind RFC 2697 (srtcm: cir, cbs, ebs) or RFC 2698
	// (trtcm: cir, pir, cbs, pbs); rates in bytes per second, bursts in
	// bytes. Red is "drop" (default) or "pass", Yellow "pass" (default) or
	// "drop"; green packets pass.
	Algorithm *string `toml:"algorithm"`
	CIR       *uint64 `toml:"cir"`
	CBS       *uint64 `toml:"cbs"`
	EBS       *uint64 `toml:"ebs"`
	PIR       *uint64 `toml:"pir"`
	PBS       *uint64 `toml:"pbs"`
	Red       *string `toml:"red"`
	Yellow    *string `toml:"yellow"`
}

func (o *Offload) setDefaults() { o.Backend = "auto" }

// fiveTupleKeys are the match keys of drop and meter.
var fiveTupleKeys = []string{"src", "dst", "proto", "src_port", "dst_port"}

// presetKeys are the keys each preset takes besides port and preset.
var presetKeys = map[string][]string{
	"cnp-queue":  {"queue"},
	"mark-roce":  {"mark"},
	"dscp-count": {"dscp"},
	"drop":       fiveTupleKeys,
	"meter":      append(slices.Clone(fiveTupleKeys), "algorithm", "cir", "cbs", "ebs", "pir", "pbs", "red", "yellow"),
}

// setKeys lists the preset keys r sets, in file-documentation order.
func (r *OffloadRule) setKeys() []string {
	var out []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"queue", r.Queue != nil}, {"mark", r.Mark != nil}, {"dscp", r.DSCP != nil},
		{"src", r.Src != nil}, {"dst", r.Dst != nil}, {"proto", r.Proto != nil},
		{"src_port", r.SrcPort != nil}, {"dst_port", r.DstPort != nil},
		{"algorithm", r.Algorithm != nil}, {"cir", r.CIR != nil}, {"cbs", r.CBS != nil},
		{"ebs", r.EBS != nil}, {"pir", r.PIR != nil}, {"pbs", r.PBS != nil},
		{"red", r.Red != nil}, {"yellow", r.Yellow != nil},
	} {
		if k.set {
			out = append(out, k.name)
		}
	}
	return out
}

// OffloadAddr parses a drop or meter src/dst: an address, optionally with
// a prefix length ("10.0.0.0/24", "2001:db8::/32"), masked to the prefix.
func OffloadAddr(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("%q is not an address or prefix such as \"10.0.0.0/24\" or \"2001:db8::/32\"", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Bits() == 0 {
		return p, fmt.Errorf("%q matches every address; leave the key out instead", s)
	}
	return p.Masked(), nil
}

// OffloadProto parses a drop or meter proto: "udp", "tcp" or 0..255.
func OffloadProto(s string) (uint8, error) {
	switch s {
	case "udp":
		return 17, nil
	case "tcp":
		return 6, nil
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("%q is not \"udp\", \"tcp\" or an IP protocol number 0..255", s)
	}
	return uint8(n), nil
}

// portRules tracks, per port, what must not repeat across its rules.
type portRules struct {
	cnp, mark int            // rule index of its cnp-queue, mark-roce; -1 for none
	dscp      map[int]string // DSCP → where it is counted
	meters    map[uint32]string
}

// onePerPort records rule i as the port's one preset of its kind in *at, or
// reports the rule that already is.
func onePerPort(c *checker, rp path, port, preset string, at *int, i int) {
	if *at >= 0 {
		c.errorf(rp.key("preset"), "port %q already has %s in offload.rule[%d]", port, preset, *at)
		return
	}
	*at = i
}

func validateOffload(c *checker, cfg *Config) {
	o := &cfg.Offload
	p := root.key("offload")
	oneOf(c, p.key("backend"), o.Backend, OffloadBackends...)
	ports := map[string]*portRules{}
	for i := range o.Rules {
		rp := p.key("rule").index(i)
		if c.failed(rp) {
			continue
		}
		r := &o.Rules[i]
		pi, ok := cfg.PortByName(r.Port)
		switch {
		case r.Port == "":
			c.errorf(rp.key("port"), "missing; name the [[port]] the rule goes on (%s)", portList(cfg))
		case !ok:
			c.errorf(rp.key("port"), "unknown port %q; %s", r.Port, portList(cfg))
		}
		var pt *Port
		var pr *portRules
		if ok {
			pt = &cfg.Ports[pi]
			if pr = ports[r.Port]; pr == nil {
				pr = &portRules{cnp: -1, mark: -1, dscp: map[int]string{}, meters: map[uint32]string{}}
				ports[r.Port] = pr
			}
		}
		_, flowSet := c.loc.lookup(rp.key("flow"))
		flowSet = flowSet || r.Flow != ""
		switch {
		case flowSet && r.Preset != "":
			c.errorf(rp.key("preset"), "set either flow or preset, not both")
		case flowSet:
			for _, k := range r.setKeys() {
				c.errorf(rp.key(k), "not a key of a flow rule (it takes port and flow)")
			}
			validateFlow(c, rp, r, pt, pr, i)
		case r.Preset == "":
			c.errorf(rp.key("preset"), "missing; set preset (%s) or flow", strings.Join(OffloadPresets, ", "))
		default:
			keys, known := presetKeys[r.Preset]
			if !known {
				c.errorf(rp.key("preset"), "unknown preset %q; presets: %s", r.Preset, strings.Join(OffloadPresets, ", "))
				continue
			}
			for _, k := range r.setKeys() {
				if !slices.Contains(keys, k) {
					c.errorf(rp.key(k), "not a key of preset %q (it takes %s)", r.Preset, strings.Join(keys, ", "))
				}
			}
			validatePreset(c, rp, r, pt, pr, i)
		}
	}
}

// validateFlow parses a flow rule the way ConfigRules will. pt and pr are
// nil when the rule's port is unknown.
func validateFlow(c *checker, rp path, r *OffloadRule, pt *Port, pr *portRules, i int) {
	fp := rp.key("flow")
	switch f := strings.Fields(r.Flow); {
	case len(f) == 0:
		c.errorf(fp, `empty; write what follows "flow create <port>", e.g. "ingress pattern eth / end actions count / end"`)
		return
	case f[0] == "flow":
		c.errorf(fp, `write only what follows "flow create <port>", e.g. "ingress pattern eth / end actions count / end"`)
		return
	}
	port := "0" // a stand-in: the port token does not change the rule
	if pt != nil {
		port = pt.Name
	}
	// The prefix makes it a create command whatever the text says.
	cmd, err := flowrule.Parse("flow create " + port + " " + r.Flow)
	if err != nil {
		c.errorf(fp, "%v", err)
		return
	}
	if err := cmd.Rule.CheckDirection(); err != nil {
		c.errorf(fp, "%v", err)
		return
	}
	if pt == nil {
		return
	}
	for _, a := range cmd.Rule.Actions {
		switch a.Type {
		case flowrule.ActQueue:
			if int(a.Index) >= pt.RxQueues {
				c.errorf(fp, "action queue: index %d is out of range: port %q has rx_queues = %d", a.Index, pt.Name, pt.RxQueues)
			}
		case flowrule.ActRSS:
			for _, q := range a.Queues {
				if int(q) >= pt.RxQueues {
					c.errorf(fp, "action rss: queue %d is out of range: port %q has rx_queues = %d", q, pt.Name, pt.RxQueues)
					break
				}
			}
		case flowrule.ActMeter:
			// Meter IDs name rte_mtr objects of the port: one meter per rule.
			where := fmt.Sprintf("offload.rule[%d]", i)
			if prev, dup := pr.meters[a.Meter.ID]; dup {
				c.errorf(fp, "meter id %d is already used by %s on port %q; give each meter its own id", a.Meter.ID, prev, pt.Name)
			} else {
				pr.meters[a.Meter.ID] = where
			}
		}
	}
}

func validatePreset(c *checker, rp path, r *OffloadRule, pt *Port, pr *portRules, i int) {
	where := fmt.Sprintf("offload.rule[%d]", i)
	switch r.Preset {
	case "cnp-queue":
		switch {
		case r.Queue == nil:
			c.errorf(rp.key("queue"), "missing; the rx queue that gets the CNPs")
		case *r.Queue < 0:
			c.errorf(rp.key("queue"), "%d is not a queue index", *r.Queue)
		case pt != nil && *r.Queue >= pt.RxQueues:
			c.errorf(rp.key("queue"), "%d is out of range: port %q has rx_queues = %d (queues 0..%d)", *r.Queue, pt.Name, pt.RxQueues, pt.RxQueues-1)
		}
		if pr != nil {
			onePerPort(c, rp, r.Port, "cnp-queue", &pr.cnp, i)
		}
	case "mark-roce":
		switch {
		case r.Mark == nil:
			c.errorf(rp.key("mark"), "missing; the mark RoCEv2 packets get (1..%#x)", MaxOffloadMark)
		case *r.Mark < 1 || *r.Mark > MaxOffloadMark:
			c.errorf(rp.key("mark"), "%d (%#x) is out of range 1..%#x (mlx5 marks are 24 bits, of which the top 16 values are reserved)", *r.Mark, *r.Mark, MaxOffloadMark)
		}
		if pr != nil {
			onePerPort(c, rp, r.Port, "mark-roce", &pr.mark, i)
		}
	case "dscp-count":
		if len(r.DSCP) == 0 {
			c.errorf(rp.key("dscp"), "missing or empty; list the DSCPs to count, e.g. [0, 26, 48]")
		}
		for k, d := range r.DSCP {
			e := rp.key("dscp").index(k)
			switch prev, dup := pr.dscpAt(d); {
			case d < 0 || d > 63:
				c.errorf(e, "%d is out of range 0..63", d)
			case dup:
				c.errorf(e, "DSCP %d is already counted by %s on port %q", d, prev, r.Port)
			case pr != nil:
				pr.dscp[d] = where
			}
		}
	case "drop", "meter":
		validateFiveTuple(c, rp, r)
		if r.Preset == "meter" {
			validateMeter(c, rp, r)
		}
	}
}

func (pr *portRules) dscpAt(d int) (string, bool) {
	if pr == nil {
		return "", false
	}
	s, ok := pr.dscp[d]
	return s, ok
}

func validateFiveTuple(c *checker, rp path, r *OffloadRule) {
	if r.Src == nil && r.Dst == nil && r.Proto == nil && r.SrcPort == nil && r.DstPort == nil {
		// A key that failed to decode was given, and has its error.
		if !slices.ContainsFunc(fiveTupleKeys, func(k string) bool { return c.failed(rp.key(k)) }) {
			c.errorf(rp.key("preset"), "%s needs at least one of %s", r.Preset, strings.Join(fiveTupleKeys, ", "))
		}
		return
	}
	var src netip.Prefix
	if r.Src != nil {
		var err error
		if src, err = OffloadAddr(*r.Src); err != nil {
			c.errorf(rp.key("src"), "%v", err)
		}
	}
	if r.Dst != nil {
		dst, err := OffloadAddr(*r.Dst)
		switch {
		case err != nil:
			c.errorf(rp.key("dst"), "%v", err)
		case src.IsValid() && src.Addr().Is4() != dst.Addr().Is4():
			c.errorf(rp.key("dst"), "%q and src %q are not the same IP version", *r.Dst, *r.Src)
		}
	}
	l4 := false
	if r.Proto != nil {
		n, err := OffloadProto(string(*r.Proto))
		if err != nil {
			c.errorf(rp.key("proto"), "%v", err)
		} else {
			// One spelling for one protocol, so that Encode round-trips.
			switch n {
			case 17:
				*r.Proto, l4 = "udp", true
			case 6:
				*r.Proto, l4 = "tcp", true
			}
		}
	}
	for _, k := range []struct {
		name string
		v    *int
	}{{"src_port", r.SrcPort}, {"dst_port", r.DstPort}} {
		if k.v == nil {
			continue
		}
		if *k.v < 0 || *k.v > 65535 {
			c.errorf(rp.key(k.name), "%d is out of range 0..65535", *k.v)
		} else if !l4 && !c.failed(rp.key("proto")) {
			c.errorf(rp.key(k.name), `needs proto = "udp" or "tcp"`)
		}
	}
}

func validateMeter(c *checker, rp path, r *OffloadRule) {
	if r.Algorithm == nil {
		c.errorf(rp.key("algorithm"), `missing; "srtcm" (cir, cbs, ebs) or "trtcm" (cir, pir, cbs, pbs)`)
		return
	}
	var need, other []string
	switch *r.Algorithm {
	case "srtcm":
		need, other = []string{"cir", "cbs", "ebs"}, []string{"pir", "pbs"}
	case "trtcm":
		need, other = []string{"cir", "pir", "cbs", "pbs"}, []string{"ebs"}
	default:
		c.errorf(rp.key("algorithm"), `%q is not "srtcm" or "trtcm"`, *r.Algorithm)
		return
	}
	set := r.setKeys()
	for _, k := range other {
		if slices.Contains(set, k) {
			c.errorf(rp.key(k), "not a parameter of %s (it takes %s)", *r.Algorithm, strings.Join(need, ", "))
		}
	}
	missing := false
	for _, k := range need {
		if !slices.Contains(set, k) {
			c.errorf(rp.key(k), "missing; %s needs %s", *r.Algorithm, strings.Join(need, ", "))
			missing = true
		}
	}
	if r.Red != nil {
		oneOf(c, rp.key("red"), *r.Red, "drop", "pass")
	}
	if r.Yellow != nil {
		oneOf(c, rp.key("yellow"), *r.Yellow, "pass", "drop")
	}
	meterKeys := presetKeys["meter"][len(fiveTupleKeys):]
	if missing || c.hasErrors(func(k string) bool {
		return slices.ContainsFunc(meterKeys, func(m string) bool { return k == rp.key(m).String() })
	}) {
		return
	}
	if *r.Algorithm == "trtcm" && *r.PIR < *r.CIR {
		c.errorf(rp.key("pir"), "%d is below cir %d (RFC 2698)", *r.PIR, *r.CIR)
		return
	}
	// The rest (bucket sizes) is flowrule's to judge, as for a flow rule.
	if _, err := flowrule.Parse("flow create 0 pattern eth / end actions meter " + OffloadMeterArgs(r, 1) + " / end"); err != nil {
		c.errorf(rp.key("algorithm"), "%v", err)
	}
}

// OffloadMeterArgs is a meter preset's inline meter in flowrule's grammar,
// what follows "meter", with meter id id. r must have passed validation.
func OffloadMeterArgs(r *OffloadRule, id uint32) string {
	u := func(p *uint64) string {
		if p == nil {
			return "0"
		}
		return strconv.FormatUint(*p, 10)
	}
	or := func(p *string, def string) string {
		if p == nil {
			return def
		}
		return *p
	}
	alg := or(r.Algorithm, "srtcm")
	s := alg + " id " + strconv.FormatUint(uint64(id), 10) + " cir " + u(r.CIR)
	if alg == "trtcm" {
		s += " pir " + u(r.PIR) + " cbs " + u(r.CBS) + " pbs " + u(r.PBS)
	} else {
		s += " cbs " + u(r.CBS) + " ebs " + u(r.EBS)
	}
	return s + " green pass yellow " + or(r.Yellow, "pass") + " red " + or(r.Red, "drop")
}

// IPProto is a drop or meter rule's proto: "udp", "tcp" or a protocol
// number, which the file may give as a string or an integer.
type IPProto string

func (p *IPProto) setTOML(raw any) error {
	switch v := raw.(type) {
	case string:
		*p = IPProto(v)
	case int64:
		*p = IPProto(strconv.FormatInt(v, 10))
	default:
		return fmt.Errorf("expected a string or an integer, got %s", tomlType(raw))
	}
	return nil
}
