package flowrule

import (
	"errors"
	"strings"
)

// structFields are the fields of the rte_flow structures, as opposed to
// the grammar's sub-fields: ranges (last) compare whole fields, as the PMD
// does.
var structFields = [numItemTypes][]field{
	ItemEth: {
		{name: "dst", off: 0, size: 6}, {name: "src", off: 6, size: 6},
		{name: "type", off: 12, size: 2}, {name: "has_vlan", off: 14, size: 1, bits: 1},
	},
	ItemVLAN: {
		{name: "tci", off: 0, size: 2}, {name: "inner_type", off: 2, size: 2},
		{name: "has_more_vlan", off: 4, size: 1, bits: 1},
	},
	ItemIPv4: {
		{name: "tos", off: 0, size: 1}, {name: "ttl", off: 1, size: 1}, {name: "proto", off: 2, size: 1},
		{name: "src", off: 3, size: 4}, {name: "dst", off: 7, size: 4},
	},
	ItemIPv6: {
		{name: "vtc_flow", off: 0, size: 4}, {name: "proto", off: 4, size: 1}, {name: "hop", off: 5, size: 1},
		{name: "src", off: 6, size: 16}, {name: "dst", off: 22, size: 16},
	},
	ItemUDP:   {{name: "src", off: 0, size: 2}, {name: "dst", off: 2, size: 2}},
	ItemTCP:   {{name: "src", off: 0, size: 2}, {name: "dst", off: 2, size: 2}},
	ItemIBBTH: {{name: "opcode", off: 0, size: 1}, {name: "dst_qp", off: 1, size: 3}},
}

// cmpMasked compares spec&mask with last&mask over a struct field, as
// big-endian numbers; lastZero reports whether last&mask is zero.
func cmpMasked(f *field, spec, last, mask *img) (c int, lastZero bool) {
	lastZero = true
	for i := f.off; i < f.off+f.size; i++ {
		m := mask[i]
		if f.bits != 0 {
			m &= byte(f.bits)
		}
		s, l := spec[i]&m, last[i]&m
		if l != 0 {
			lastZero = false
		}
		if c == 0 {
			switch {
			case s < l:
				c = -1
			case s > l:
				c = 1
			}
		}
	}
	return c, lastZero
}

// layer orders items: a pattern goes from the lowest layer up.
var layer = [numItemTypes]int{ItemEth: 0, ItemVLAN: 1, ItemIPv4: 2, ItemIPv6: 2, ItemUDP: 3, ItemTCP: 3, ItemIBBTH: 4}

// Validate checks what Compile and the printers rely on: item order and
// shape, values that fit their fields, and a consistent action list.
func (r *Rule) Validate() error {
	prev := ItemType(0)
	vlans := 0
	hasIP := [7]bool{}
	for i := range r.Items {
		it := &r.Items[i]
		if it.Type == 0 || it.Type >= numItemTypes {
			return errors.New("unknown item type " + it.Type.String())
		}
		n, own := it.matches()
		if n > 1 || n == 1 && !own {
			return errors.New("item " + it.Type.String() + ": a match of another item type is set")
		}
		if it.Type == ItemVLAN {
			vlans++
			if vlans > 2 {
				return errors.New("item vlan: at most two vlan items (the frame's two tags)")
			}
		}
		if prev != 0 {
			ok := layer[it.Type] > layer[prev] || it.Type == ItemVLAN && prev == ItemVLAN
			if it.Type == ItemIBBTH && prev == ItemTCP {
				ok = false
			}
			if !ok {
				return errors.New("item " + it.Type.String() + " cannot follow item " + prev.String() +
					" (items go from the lowest layer up: eth, vlan, ipv4|ipv6, udp|tcp, ib_bth)")
			}
		}
		prev = it.Type
		if it.Type == ItemIPv4 {
			hasIP[4] = true
		}
		if it.Type == ItemIPv6 {
			hasIP[6] = true
		}
		spec, mask, last, hasLast, ok := it.images()
		if !ok {
			continue
		}
		switch it.Type {
		case ItemIPv6:
			for _, b := range [...]*img{&spec, &mask, &last} {
				if b[0]&0xf0 != 0 {
					return errors.New("item ipv6: the version bits of vtc_flow cannot be matched (testpmd has no field for them)")
				}
			}
		case ItemIBBTH:
			for _, h := range []*BTHHeader{&it.BTH.Spec, &it.BTH.Mask, it.BTH.Last} {
				if h != nil && h.DestQP > 0xffffff {
					return errors.New("item ib_bth: dst_qp does not fit in 24 bits")
				}
			}
		}
		if hasLast {
			for j := range structFields[it.Type] {
				f := &structFields[it.Type][j]
				if c, zero := cmpMasked(f, &spec, &last, &mask); c > 0 && !zero {
					return errors.New("item " + it.Type.String() + ": field " + f.name + ": last is below spec (empty range)")
				}
			}
		}
	}

	var seen [numActionTypes]bool
	fate := ActionType(0)
	for i := range r.Actions {
		a := &r.Actions[i]
		if a.Type == 0 || a.Type >= numActionTypes {
			return errors.New("unknown action type " + a.Type.String())
		}
		if seen[a.Type] {
			return errors.New("action " + a.Type.String() + " given twice")
		}
		seen[a.Type] = true
		switch a.Type {
		case ActDrop, ActQueue, ActRSS, ActJump:
			if fate != 0 {
				return errors.New("actions " + fate.String() + " and " + a.Type.String() + " both decide the packet's fate; keep one")
			}
			fate = a.Type
		}
		switch a.Type {
		case ActRSS:
			if len(a.Queues) > maxRSSQueues {
				return errors.New("action rss: more than " + itoa(maxRSSQueues) + " queues")
			}
		case ActJump:
			if a.Group == r.Group {
				return errors.New("action jump: group " + itoa(uint64(a.Group)) + " is the rule's own group")
			}
		case ActSetIPv4DSCP, ActSetIPv6DSCP:
			if a.DSCP > 63 {
				return errors.New("action " + a.Type.String() + ": dscp_value " + itoa(uint64(a.DSCP)) + " does not fit in 6 bits")
			}
			if v := 4 + 2*int(a.Type-ActSetIPv4DSCP); !hasIP[v] {
				return errors.New("action " + a.Type.String() + " needs an ipv" + itoa(uint64(v)) + " item in the pattern")
			}
		case ActMeter:
			if err := a.Meter.validate(); err != nil {
				return errors.New("action meter: " + err.Error())
			}
		}
		if a.Meter != nil && a.Type != ActMeter {
			return errors.New("action " + a.Type.String() + ": Meter set on a non-meter action")
		}
	}
	return nil
}

func (m *Meter) validate() error {
	if m == nil {
		return errors.New("no meter parameters")
	}
	var missing []string
	switch m.Algorithm {
	case SrTCM:
		if m.PIR != 0 || m.PBS != 0 {
			return errors.New("srtcm has no pir or pbs")
		}
		if m.CBS == 0 && m.EBS == 0 {
			missing = append(missing, "cbs or ebs above 0 (RFC 2697)")
		}
	case TrTCM:
		if m.EBS != 0 {
			return errors.New("trtcm has no ebs")
		}
		if m.PIR < m.CIR {
			return errors.New("pir " + itoa(m.PIR) + " is below cir " + itoa(m.CIR) + " (RFC 2698)")
		}
		if m.CBS == 0 || m.PBS == 0 {
			missing = append(missing, "cbs and pbs above 0 (RFC 2698)")
		}
	default:
		return errors.New("algorithm must be srtcm or trtcm")
	}
	if len(missing) > 0 {
		return errors.New("needs " + strings.Join(missing, ", "))
	}
	if m.CBS > maxBurst || m.EBS > maxBurst || m.PBS > maxBurst {
		return errors.New("burst sizes are limited to " + itoa(maxBurst) + " bytes")
	}
	for _, c := range [...]ColorAction{m.Green, m.Yellow, m.Red} {
		if c.Kind > ColorMark {
			return errors.New("unknown colour action")
		}
		if c.Kind != ColorMark && c.Mark != 0 {
			return errors.New("a mark value on a colour action that is not mark")
		}
	}
	return nil
}

// CheckDirection refuses what roce-fwd cannot run on a port: a rule with
// neither ingress nor egress (every PMD refuses it), and transfer rules,
// which act in the NIC's e-switch that roce-fwd does not manage.
func (r *Rule) CheckDirection() error {
	if r.Transfer {
		return errors.New("transfer rules act in the NIC's e-switch, which roce-fwd does not manage")
	}
	if !r.Ingress && !r.Egress {
		return errors.New("the rule needs ingress or egress (as every PMD requires)")
	}
	return nil
}
