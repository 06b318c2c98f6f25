package flowrule

import (
	"net/netip"
	"strconv"

	"roce-fwd/roce"
)

// String prints the command in the grammar Parse reads; Parse(c.String())
// gives c back (items without an effective field and a Last without one
// print as absent). Meters print inline; see Rule.Testpmd for testpmd.
func (c Command) String() string {
	b := []byte("flow " + c.Kind.String() + " " + c.Port)
	switch c.Kind {
	case CmdValidate, CmdCreate:
		b = c.Rule.appendBody(b, false)
	case CmdList:
		for _, g := range c.Groups {
			b = append(b, " group "...)
			b = strconv.AppendUint(b, uint64(g), 10)
		}
	case CmdQuery:
		if len(c.Rules) > 0 {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(c.Rules[0]), 10)
		}
		b = append(b, " count"...)
	case CmdDestroy:
		for _, id := range c.Rules {
			b = append(b, " rule "...)
			b = strconv.AppendUint(b, uint64(id), 10)
		}
	}
	return string(b)
}

// Testpmd returns the testpmd lines that create the rule on port: for each
// meter, its profile, policy and meter object, then "flow create". Meters
// use Meter.ID as meter, profile and policy ID. An ib_bth item is printed
// in DPDK 23.07's syntax; 22.11's testpmd does not have it.
func (r Rule) Testpmd(port string) []string {
	var out []string
	for i := range r.Actions {
		m := r.Actions[i].Meter
		if r.Actions[i].Type != ActMeter || m == nil {
			continue
		}
		id := itoa(uint64(m.ID))
		if m.Algorithm == TrTCM {
			out = append(out, "add port meter profile trtcm_rfc2698 "+port+" "+id+" "+itoa(m.CIR)+" "+
				itoa(m.PIR)+" "+itoa(m.CBS)+" "+itoa(m.PBS)+" 0")
		} else {
			out = append(out, "add port meter profile srtcm_rfc2697 "+port+" "+id+" "+itoa(m.CIR)+" "+
				itoa(m.CBS)+" "+itoa(m.EBS)+" 0")
		}
		out = append(out, "add port meter policy "+port+" "+id+
			" g_actions "+policyActions(m.Green)+
			" y_actions "+policyActions(m.Yellow)+
			" r_actions "+policyActions(m.Red))
		// meter_enable yes, all statistics, not shared, default input
		// colour green, no previous meter colour: colour-blind. (22.11's
		// testpmd wants the colour although its help leaves it out.)
		out = append(out, "create port meter "+port+" "+id+" "+id+" "+id+" yes 0xffff 0 g 0")
	}
	b := []byte("flow create " + port)
	out = append(out, string(r.appendBody(b, true)))
	return out
}

func policyActions(c ColorAction) string {
	switch c.Kind {
	case ColorDrop:
		return "drop / end"
	case ColorMark:
		return "mark id " + itoa(uint64(c.Mark)) + " / end"
	}
	return "end"
}

func (r *Rule) appendBody(b []byte, testpmd bool) []byte {
	if r.Group != 0 {
		b = append(b, " group "...)
		b = strconv.AppendUint(b, uint64(r.Group), 10)
	}
	if r.Priority != 0 {
		b = append(b, " priority "...)
		b = strconv.AppendUint(b, uint64(r.Priority), 10)
	}
	if r.Ingress {
		b = append(b, " ingress"...)
	}
	if r.Egress {
		b = append(b, " egress"...)
	}
	if r.Transfer {
		b = append(b, " transfer"...)
	}
	b = append(b, " pattern"...)
	for i := range r.Items {
		b = appendItem(b, &r.Items[i])
		b = append(b, " /"...)
	}
	b = append(b, " end actions"...)
	for i := range r.Actions {
		b = appendAction(b, &r.Actions[i], testpmd)
		b = append(b, " /"...)
	}
	return append(b, " end"...)
}

func appendItem(b []byte, it *Item) []byte {
	d := itemDescs[it.Type]
	if d == nil {
		return append(b, ' ', '?')
	}
	b = append(b, ' ')
	b = append(b, d.name...)
	spec, mask, last, hasLast, ok := it.images()
	if !ok {
		return b
	}
	for _, name := range d.print {
		f := d.field(name)
		lastZero := !hasLast || f.isZero(&last)
		if f.isZero(&spec) && f.isZero(&mask) && lastZero {
			continue
		}
		if f.isFull(&mask) && lastZero {
			b = appendFieldValue(b, f, "is", &spec)
			continue
		}
		b = appendFieldValue(b, f, "spec", &spec)
		if f.kind == kIPv4 || f.kind == kIPv6 {
			if n := f.prefixLen(&mask); n >= 0 {
				b = append(b, ' ')
				b = append(b, f.name...)
				b = append(b, " prefix "...)
				b = strconv.AppendInt(b, int64(n), 10)
				goto last
			}
		}
		b = appendFieldValue(b, f, "mask", &mask)
	last:
		if !lastZero {
			b = appendFieldValue(b, f, "last", &last)
		}
	}
	return b
}

func appendFieldValue(b []byte, f *field, op string, src *img) []byte {
	b = append(b, ' ')
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, op...)
	b = append(b, ' ')
	switch f.kind {
	case kUint:
		v := f.get(src)
		if f.hex || op == "mask" {
			b = append(b, "0x"...)
			return strconv.AppendUint(b, v, 16)
		}
		return strconv.AppendUint(b, v, 10)
	case kMAC:
		return append(b, roce.MAC(f.bytes(src)).String()...)
	case kIPv4:
		return append(b, netip.AddrFrom4([4]byte(f.bytes(src))).String()...)
	default:
		return append(b, netip.AddrFrom16([16]byte(f.bytes(src))).String()...)
	}
}

func appendAction(b []byte, a *Action, testpmd bool) []byte {
	b = append(b, ' ')
	b = append(b, a.Type.String()...)
	num := func(b []byte, arg string, v uint64) []byte {
		b = append(b, ' ')
		b = append(b, arg...)
		b = append(b, ' ')
		return strconv.AppendUint(b, v, 10)
	}
	switch a.Type {
	case ActQueue:
		b = num(b, "index", uint64(a.Index))
	case ActRSS:
		if len(a.Queues) > 0 {
			b = append(b, " queues"...)
			for _, q := range a.Queues {
				b = append(b, ' ')
				b = strconv.AppendUint(b, uint64(q), 10)
			}
			b = append(b, " end"...)
		}
	case ActMark:
		b = num(b, "id", uint64(a.ID))
	case ActJump:
		b = num(b, "group", uint64(a.Group))
	case ActSetIPv4DSCP, ActSetIPv6DSCP:
		b = num(b, "dscp_value", uint64(a.DSCP))
	case ActMeter:
		m := a.Meter
		if m == nil {
			break
		}
		if testpmd {
			return num(b, "mtr_id", uint64(m.ID))
		}
		if m.Algorithm == TrTCM {
			b = append(b, " trtcm"...)
			b = num(b, "id", uint64(m.ID))
			b = num(b, "cir", m.CIR)
			b = num(b, "pir", m.PIR)
			b = num(b, "cbs", m.CBS)
			b = num(b, "pbs", m.PBS)
		} else {
			b = append(b, " srtcm"...)
			b = num(b, "id", uint64(m.ID))
			b = num(b, "cir", m.CIR)
			b = num(b, "cbs", m.CBS)
			b = num(b, "ebs", m.EBS)
		}
		for i, c := range [...]ColorAction{m.Green, m.Yellow, m.Red} {
			b = append(b, ' ')
			b = append(b, colorNames[i+1]...)
			switch c.Kind {
			case ColorDrop:
				b = append(b, " drop"...)
			case ColorMark:
				b = num(b, "mark", uint64(c.Mark))
			default:
				b = append(b, " pass"...)
			}
		}
	}
	return b
}
