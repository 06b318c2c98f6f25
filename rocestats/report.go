package rocestats

import "roce-fwd/roce"

// Report is Counters in the shape of the stats JSON and the console.
type Report struct {
	Frames      uint64            `json:"frames"`
	Bytes       uint64            `json:"bytes"`
	RoCE        uint64            `json:"roce"`
	RoCEBytes   uint64            `json:"roce_bytes"`
	Other       uint64            `json:"other"`
	IPv4        uint64            `json:"ipv4"`
	IPv6        uint64            `json:"ipv6"`
	CNPs        uint64            `json:"cnp"`
	ECN         map[string]uint64 `json:"ecn"`
	ICRCOK      uint64            `json:"icrc_ok"`
	ICRCBad     uint64            `json:"icrc_bad"`
	Malformed   map[string]uint64 `json:"malformed"`
	PFC         uint64            `json:"pfc"`
	Pause       uint64            `json:"pause"`
	MACCtlOther uint64            `json:"mac_control_other"` // 0x8808 frames neither PFC nor PAUSE
	Opcodes     map[string]uint64 `json:"opcodes"`           // by name, e.g. "RC SEND Only"
	TC          [8]uint64         `json:"tc"`
}

// Report converts the counters, naming opcodes, ECN codepoints and
// malformed reasons; zero opcodes and reasons are left out.
func (c *Counters) Report() Report {
	r := Report{Frames: c.Frames(), Bytes: c.Bytes(), RoCE: c.RoCE(), RoCEBytes: c.RoCEBytes, Other: c.Other,
		IPv4: c.IPv4(), IPv6: c.IPv6, CNPs: c.CNPs(), ICRCOK: c.ICRCOK, ICRCBad: c.ICRCBad, PFC: c.PFC, Pause: c.Pause, MACCtlOther: c.MACCtlOther,
		TC: c.TC, ECN: map[string]uint64{}, Malformed: map[string]uint64{}, Opcodes: map[string]uint64{}}
	for i, n := range c.ECN {
		r.ECN[ECNNames[i]] = n
	}
	for i, n := range c.Malformed {
		if n != 0 {
			r.Malformed[roce.Reason(i).String()] = n
		}
	}
	for op, n := range c.Opcodes {
		if n != 0 {
			r.Opcodes[roce.Opcode(op).String()] = n
		}
	}
	return r
}
